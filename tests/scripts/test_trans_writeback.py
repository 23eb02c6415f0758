# SPDX-License-Identifier: GPL-2.0-only
"""Transactions with a small dirty-block budget (libfs/trans_writeback.c).

BTK_TRANS_DIRTY_BUDGET=64K lets a transaction keep 4 dirty 16 KiB blocks in memory: past
that it writes the blocks no path holds to their new places before the commit, and reads them
back when it changes them again. The result must be the very filesystem a run without the
budget makes (same trees, block for block), the kernel must read every file, and the number
of dirty blocks held at once (BTK_TRANS_STATS=1 prints it per commit) must stay near the
budget. A crash at any write of such a transaction leaves the old or the new filesystem.
"""
from __future__ import annotations

import os
import re

import pytest

import crash
import fsbuild
import oracle
import xattrs
from conftest import require_kernel, run_btk
from fsbuild import MiB, attached
from test_chunk_alloc import make_fs
from test_tune import CRASH_ARGS, check_devices, device_supers, kernel_fs, kernel_verify, original_hashes, visible_state

BUDGET_BLOCKS = 4  # 64 KiB of 16 KiB nodes
# what one tree operation may copy or split above the budget before the next writeback
OP_SLACK = 16
STATS = re.compile(r"transaction (\d+): at most (\d+) dirty tree blocks in memory \(budget (\d+) bytes\), "
                   r"(\d+) written before the commit, (\d+) of them changed again")


def trans_stats(stderr: str) -> list[dict]:
    return [dict(zip(("transid", "peak", "budget", "written", "again"), map(int, m.groups())))
            for m in STATS.finditer(stderr)]


def with_env(env: dict, fn):
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return fn()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_stats(budget: str | None, fn) -> tuple[object, list[dict]]:
    """fn() with BTK_TRANS_STATS=1 (and the budget): its process and the statistics it printed."""
    env = {"BTK_TRANS_STATS": "1", **({"BTK_TRANS_DIRTY_BUDGET": budget} if budget else {})}
    if not budget:
        env["BTK_TRANS_DIRTY_BUDGET"] = "1G"  # the default, whatever the caller's environment says
    p = with_env(env, fn)
    stats = trans_stats(p.stderr)
    assert stats, f"no transaction statistics on stderr:\n{p.stderr}"
    return p, stats


def fill(devs, count: int, size: int):
    p = fsbuild.run([xattrs.tool(), "--count", count, "--size", size, *devs], check=False, timeout=600)
    assert p.returncode == 0, p.stderr
    return p


def rebuild_extent_tree(devs):
    p = run_btk("btk-check", "--repair", "--yes", "--no-undo", "--rebuild-extent-tree", *devs, timeout=600)
    assert p.returncode == 1, f"exit {p.returncode}:\n{p.stdout}\n{p.stderr}"
    return p


def test_large_transaction_small_budget_same_result(tmp_path):
    """One transaction of 2500 xattrs of 3000 bytes (~500 leaves), then an extent-tree rebuild,
    each with and without the budget on copies of one filesystem: the same trees, block for
    block; the kernel reads every xattr back; the reference check is clean."""
    count, size = 2500, 3000
    base = make_fs(tmp_path / "base", 1, 256 * MiB, ("-n", "16k"))
    ref, small = ([tmp_path / d / b.name for b in base] for d in ("ref", "small"))
    for devs in (ref, small):
        devs[0].parent.mkdir()
        for s, d in zip(base, devs):
            fsbuild.run(["cp", "--sparse=always", s, d])
    _, big = run_stats(None, lambda: fill(ref, count, size))
    assert big[0]["peak"] > 10 * (BUDGET_BLOCKS + OP_SLACK), big
    assert sum(s["written"] for s in big) == 0, big
    _, few = run_stats("64K", lambda: fill(small, count, size))
    assert all(s["budget"] == 64 << 10 for s in few), few
    assert max(s["peak"] for s in few) <= BUDGET_BLOCKS + OP_SLACK, few
    assert sum(s["written"] for s in few) > big[0]["peak"] and sum(s["again"] for s in few) > 0, few
    # the same allocations, the same trees: only free space may differ
    assert visible_state(small) == visible_state(ref)
    run_stats(None, lambda: rebuild_extent_tree(ref))
    _, few = run_stats("64K", lambda: rebuild_extent_tree(small))
    assert max(s["peak"] for s in few) <= BUDGET_BLOCKS + OP_SLACK, few
    assert sum(s["written"] for s in few) > 0, few
    assert visible_state(small) == visible_state(ref)
    oracle.reference_check(small)
    require_kernel()
    with attached(small) as loops, fsbuild.mounted(loops, ("ro",)) as mnt:
        for i in [*range(0, count, 7), count - 1]:
            assert os.getxattr(mnt, f"user.btk.{i:06d}") == xattrs.value(i, size), i


@pytest.mark.slow
def test_crash_with_small_budget_leaves_old_or_new(tmp_path, monkeypatch):
    """btk-tune --enable free-space-tree with one block of budget (its transaction copies a few
    blocks only), crashed after sampled writes (every flush boundary) and with unflushed writes
    reordered: the old or the new filesystem, clean; the kernel reads every file."""
    name = "tune-nofst-16k"
    fs = kernel_fs(name)
    work = fs.copy_to(tmp_path / "work")
    old, old_supers = visible_state(fs.devices), device_supers(fs.devices)
    monkeypatch.setenv("BTK_TRANS_DIRTY_BUDGET", "16K")
    monkeypatch.setenv("BTK_TRANS_STATS", "1")
    log = tmp_path / "wlog"
    p = crash.record(log, "btk-tune", *CRASH_ARGS["free-space-tree"], *work)
    assert p.returncode == 0, p.stderr
    stats = trans_stats(p.stderr)
    assert stats and sum(s["written"] for s in stats) > 0, f"nothing written early:\n{p.stderr}"
    new, new_supers = visible_state(work), device_supers(work)
    assert new != old
    wl = crash.count(log)
    seen = set()
    for k, seed, devs in crash.replay(fs.devices, log, crash.states(crash.points(wl, limit=80), (1,), every=3),
                                      tmp_path / "crash"):
        at = f"after {k} writes (seed {seed})"
        state = visible_state(devs)
        assert state in (old, new), f"{at}: neither the old nor the new filesystem"
        for i, sb in enumerate(device_supers(devs)):
            assert sb in (old_supers[i], new_supers[i]), f"{at}: device {i} superblock {sb}"
        check_devices(devs)
        seen.add(state)
    assert seen == {old, new}
    kernel_verify(work, original_hashes(name))
