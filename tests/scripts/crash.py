# SPDX-License-Identifier: GPL-2.0-only
"""Crash replays of a write log, shared by every test that crashes a btk program.

A btk program run with BTK_WRITE_LOG=FILE records every write and flush it makes
(include/btk/wlog.h). tests/tools/btk-wlog-replay then rebuilds, on copies of the
original images, what a crash after the K-th write would leave: `apply K`, or
with `--reorder SEED` a disk that persisted any subset of the writes since the
last flush. This module runs the program under a log, chooses the crash points
(every write, or for long logs every flush boundary and a random sample) and
yields each crashed state on scratch copies; the tests judge the states.
"""
from __future__ import annotations

import dataclasses
import os
import random
import subprocess
from pathlib import Path
from typing import Iterable, Iterator

from conftest import BUILD_DIR, require_btk, skip_or_fail
from fsbuild import run

# Above this many crash points a log is sampled (see points()).
MAX_POINTS = 400


@dataclasses.dataclass(frozen=True)
class WriteLog:
    path: Path
    writes: int
    devices: int
    # (writes before the flush, flushed device): "12:0" is device 0 flushed after 12 writes
    flush_points: tuple[tuple[int, int], ...]

    @property
    def flushes(self) -> list[int]:
        """Write counts at which some device was flushed, without repeats."""
        return sorted({w for w, _ in self.flush_points})


def tool() -> Path:
    t = BUILD_DIR / "tests" / "tools" / "btk-wlog-replay"
    if not os.access(t, os.X_OK):
        skip_or_fail(f"{t} is not built (make test-tools)")
    return t


def record(log: Path, program: str, *args, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run a btk program with its writes recorded in log (the devices are written as usual)."""
    path = require_btk(program)
    env = dict(os.environ, BTK_WRITE_LOG=str(log))
    return subprocess.run([str(path), *map(str, args)], capture_output=True, text=True, env=env,
                          timeout=timeout)


def count(log: Path) -> WriteLog:
    fields = {}
    for line in run([tool(), log, "count"]).stdout.splitlines():
        key, _, value = line.partition(" ")
        fields[key] = value
    flush_points = tuple(tuple(map(int, x.split(":"))) for x in fields["flush"].split()[1:])
    assert fields["complete"] == "yes", f"{log}: the program did not close its write log"
    return WriteLog(log, int(fields["writes"]), int(fields["devices"]), flush_points)


def apply(log: Path, k: int, devices, seed: int | None = None) -> None:
    """Leave devices as a crash after the k-th write would (seed: unflushed writes reordered)."""
    run([tool(), log, "apply", k, *(["--reorder", seed] if seed else []), *devices])


def points(wl: WriteLog, *, step: int = 1, around_flushes: bool = False, limit: int = MAX_POINTS,
           rng_seed: int = 0) -> list[int]:
    """Crash points 0..writes: every step-th one (plus each flush and the writes either side of it
    with around_flushes). A log with more than `limit` of them keeps every flush boundary, its
    neighbours, both ends, and a fixed-seed random sample of the rest, `limit` in all."""
    n = wl.writes
    edges = {0, n}
    if around_flushes:
        edges |= {min(max(w + d, 0), n) for w in wl.flushes for d in (-1, 0, 1)}
    every = set(range(0, n + 1, step)) | edges
    if len(every) <= limit:
        return sorted(every)
    must = edges | {min(max(w + d, 0), n) for w in wl.flushes for d in (-1, 0, 1)}
    rest = sorted(every - must)
    extra = random.Random(rng_seed).sample(rest, max(0, min(len(rest), limit - len(must))))
    return sorted(must | set(extra))


def states(pts: list[int], seeds: Iterable[int] = (), every: int = 1) -> list[tuple[int, int | None]]:
    """(k, seed) pairs: every point in write order, then every `every`-th point per reorder seed."""
    return [(k, None) for k in pts] + [(k, s) for s in seeds for k in pts[::every]]


def replay(base, log: Path, crash_states, scratch: Path) -> Iterator[tuple[int, int | None, list[Path]]]:
    """For each (k, seed): fresh sparse copies of the base images in scratch with the crash applied;
    yields (k, seed, devices) and removes the copies afterwards."""
    scratch.mkdir(parents=True, exist_ok=True)
    for k, seed in crash_states:
        devs = [scratch / Path(d).name for d in base]
        try:
            for src, dst in zip(base, devs):
                run(["cp", "--sparse=always", src, dst])
            apply(log, k, devs, seed)
            yield k, seed, devs
        finally:
            for d in devs:
                d.unlink(missing_ok=True)
