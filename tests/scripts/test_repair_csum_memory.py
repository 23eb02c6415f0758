# SPDX-License-Identifier: GPL-2.0-only
"""The csums repair class within --memory-limit: it streams the csum tree and the data ranges
instead of holding every checksum, so the smallest limit gives the same csum tree as the default
one, the process stays under the limit, and the used ranges of a rebuild go through a sorter that
spills to $TMPDIR."""
from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import fsbuild
from conftest import btk_path, require_btk, run_btk, skip_or_fail
from test_repair import check, corrupt, key_arg, problem_ids
from test_repair_more import (csum_items, csum_size_of, damage_csum_item_size, damage_csum_overlap,
                               split_csum_items)
from test_tune import SIMPLE, btk_super, kernel_fs, needs

LIMIT = 16 << 20  # the smallest --memory-limit btk-check takes


def run_rss(*args, env: dict | None = None) -> tuple[subprocess.CompletedProcess, int]:
    """btk-check with its peak RSS in bytes, from /usr/bin/time (a small parent: the RSS a
    child of the test process had before its exec would count too)."""
    if not os.access("/usr/bin/time", os.X_OK):
        skip_or_fail("/usr/bin/time is missing (Debian package time, scripts/install-deps)")
    with tempfile.NamedTemporaryFile("r") as rss:
        p = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss.name, str(btk_path("btk-check")),
                            *map(str, args)], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=120, env={**os.environ, **(env or {})})
        return p, int(rss.read().split()[-1]) * 1024


def csum_dump(devs) -> str:
    p = run_btk("btk-inspect", "tree", "-t", "csum", *devs)
    assert p.returncode == 0, p.stderr
    return p.stdout


def sanitized() -> bool:
    return b"__asan_init" in btk_path("btk-check").read_bytes()


def twin(devs, dest: Path) -> list[Path]:
    dest.mkdir()
    for dev in devs:
        fsbuild.run(["cp", "--sparse=always", dev, dest / dev.name])
    return [dest / dev.name for dev in devs]


def repair_both(free_run, tight, *args, env=None) -> subprocess.CompletedProcess:
    """The same repair without a limit and with the smallest one: same exit, same csum tree, and
    the limited run stays under its limit (plus what the program takes before it does anything)."""
    repair = ("--repair", "--yes", "--no-undo", *args)
    p = run_btk("btk-check", *repair, *free_run)
    q, rss = run_rss(*repair, "-v", "--memory-limit", LIMIT, *tight, env=env)
    assert p.returncode == q.returncode == 1, (p.stdout, q.stdout, q.stderr)
    assert "repair csums: committed" in q.stdout and "no problems found" in q.stdout.split("checking again")[-1], q.stdout
    assert csum_dump(tight) == csum_dump(free_run)
    if not sanitized():
        baseline = run_rss("--version")[1]
        assert rss < LIMIT + baseline, f"peak RSS {rss} over the limit {LIMIT} + {baseline}"
    return q


def test_csums_within_the_smallest_memory_limit(tmp_path):
    require_btk("btk-check")
    base = kernel_fs(needs(SIMPLE))

    # the fix alone: an overlap trimmed, every item checked against the data extents
    free_run = base.copy_to(tmp_path / "fix")
    damage_csum_overlap_only(free_run)
    rc, objs, p = check(free_run)
    assert rc == 4 and problem_ids(objs[0]) == ["csum-overlap"], p.stdout
    q = repair_both(free_run, twin(free_run, tmp_path / "fix-tight"))
    assert "checksums recomputed" not in q.stdout, q.stdout

    # damage that loses checksums (a moved item, a wrong size), then --rebuild-csum-tree with
    # sorted runs of 2 records, so that the used data ranges spill to $TMPDIR
    free_run = base.copy_to(tmp_path / "rebuild")
    split_csum_items(free_run)
    damage_csum_overlap(free_run)
    damage_csum_item_size(free_run)
    q = repair_both(free_run, twin(free_run, tmp_path / "rebuild-tight"), "--rebuild-csum-tree",
                    env={"BTK_RECSORT_RUN_RECORDS": "2"})
    assert "checksums recomputed from the data" in q.stdout, q.stdout
    assert "csums: the used data ranges were sorted with" in q.stderr, q.stderr

def damage_csum_overlap_only(devs) -> None:
    """The last csum item split after 2 checksums; the second part then starts one block earlier
    with one checksum (from the leaf's free space) more at its front: it overlaps the first part's
    last block, every block keeps its checksum, so only the fix of the overlap is needed (no
    rebuild of missing checksums)."""
    csize = csum_size_of(devs)
    last = csum_items(devs)[-1]
    assert last["size"] >= 3 * csize, f"the last csum item holds fewer than 3 checksums: {last}"
    corrupt(devs, "-t", "csum", "-k", key_arg(last["key"]), "-P", "2")
    items = csum_items(devs)
    second = items[-1]
    mine = [it for it in items if it["block"] == second["block"]]
    assert second["slot"] == len(mine) - 1, f"not the last item of its leaf: {second}"
    offset = btk_super(devs[0])["nodesize"] - 101 - sum(it["size"] for it in mine)
    head = (offset - csize).to_bytes(4, "little") + (second["size"] + csize).to_bytes(4, "little")
    corrupt(devs, "-b", str(second["block"]), "-o", str(101 + second["slot"] * 25 + 17), "-B", head.hex())
    key = (second["key"][2] - 4096).to_bytes(8, "little")
    corrupt(devs, "-b", str(second["block"]), "-o", str(101 + second["slot"] * 25 + 9), "-B", key.hex())
