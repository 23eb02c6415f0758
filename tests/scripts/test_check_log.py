# SPDX-License-Identifier: GPL-2.0-only
"""Log trees left by fsync (the cached log-tree recipe): a file extent the log holds for an inode
with checksums needs its checksums in the log itself (btrfs-progs fsck-tests 063); the kernel's
replay copies them from there. btk-check and the reference `btrfs check` 7.3 both report the
missing ones; the intact log is clean.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import fsbuild
from conftest import built, run_btk
from test_repair import check, corrupt, problem_ids

LOG_RECIPE = "log-tree-16k"
LOG_TREE = 2**64 - 6          # BTRFS_TREE_LOG_OBJECTID
LATEST = Path("/opt/btrfs-progs-latest/bin/btrfs")


def log_csum_items(devs) -> list[dict]:
    p = run_btk("btk-inspect", "tree", "--format", "jsonl", *devs)
    recs = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
    return [r for r in recs if r.get("tree") == LOG_TREE and r.get("type") == "EXTENT_CSUM"]


@pytest.fixture
def log_devs(tmp_path):
    if LOG_RECIPE not in fsbuild.RECIPE_BY_NAME:
        pytest.skip("no log-tree recipe")
    devs = built(LOG_RECIPE).copy_to(tmp_path / "devs")
    items = log_csum_items(devs)
    if not items:
        pytest.skip("the log tree holds no checksums")
    return devs, items


def test_log_intact_is_clean(log_devs):
    devs, _ = log_devs
    rc, objs, p = check(devs)
    assert "log-csum-missing" not in problem_ids(objs[0]), p.stdout


@pytest.mark.parametrize("which", ["last", "all"])
def test_log_csums_moved_away(log_devs, which):
    """The log's checksum items re-keyed far above every extent (in key order): the extents they
    covered have none."""
    devs, items = log_devs
    chosen = items[-1:] if which == "last" else items
    # from the last: each new key stays above the ones before it
    for i, r in enumerate(reversed(chosen)):
        corrupt(devs, "--block", str(r["block"]), "--field", f"item{r['slot']}.key.offset",
                "--value", str((1 << 50) - (i << 30)))
    rc, objs, p = check(devs)
    assert rc == 4 and "log-csum-missing" in problem_ids(objs[0]), p.stdout
    if LATEST.exists():
        r = fsbuild.run([LATEST, "check", "--readonly", *devs], check=False)
        assert r.returncode != 0 and "csum missing in log" in r.stdout + r.stderr
    # the repair drops the log, as btrfs check --repair does: what it held is lost, the rest is clean
    rc, objs, p = check(devs, "--repair", "--yes", "--no-undo")
    assert rc == 1 and {a["class"] for a in objs[1]["repairs"]} == {"clear-log"}, p.stdout + p.stderr
    rc, objs, p = check(devs)
    assert rc == 0 and not problem_ids(objs[0]), p.stdout
