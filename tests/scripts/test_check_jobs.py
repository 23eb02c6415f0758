# SPDX-License-Identifier: GPL-2.0-only
"""btk-check -j: the number of threads changes how fast, never what is found. The JSON
report of -j1 and -j4 is the same document (problems in the same order, the same
counts), on filesystems of the test matrix and on damaged corpus images, also when the
sorters spill sorted runs to disk and merge them."""
from __future__ import annotations

import json

import pytest

from conftest import built, run_btk
from test_check import CORPUS, corpus_images  # noqa: F401  (a fixture)

# a multi-device RAID10 (striped read-ahead), 4K nodes with 5000 files (taller trees) and a
# log tree; every populated recipe has snapshots (shared subtrees)
RECIPES = ["raid10-4dev", "s4k-xxhash-holes-lzo", "log-tree-16k"]
# damaged images whose problems come from different phases (tree blocks, refs, fs trees)
CORPUS_CASES = ["mirror-bytenr", "extent-refs-total", "inode-nlink", "dir-index-missing"]
# what may differ between runs: wall-clock figures
TIMINGS = ("data_csum_seconds",)


def report(jobs: int, *args) -> dict:
    p = run_btk("btk-check", "--format", "json", "-j", str(jobs), *args)
    assert p.returncode in (0, 4), f"btk-check -j{jobs} {args}: exit {p.returncode}\n{p.stderr[-2000:]}"
    doc = json.loads(p.stdout)
    for k in TIMINGS:
        doc.pop(k, None)
    doc["exit"] = p.returncode
    return doc


def assert_same(args, what: str):
    one, four = report(1, *args), report(4, *args)
    assert one == four, f"{what}: -j1 and -j4 disagree\n-j1: {json.dumps(one)[:3000]}\n-j4: {json.dumps(four)[:3000]}"
    return one


@pytest.mark.parametrize("name", RECIPES)
def test_jobs_same_report_recipe(name, monkeypatch):
    fs = built(name)
    doc = assert_same(list(fs.devices), name)
    assert doc["tree_blocks"] > 0 and doc["problems"] == []
    # sorted runs of 64 records: every sorter spills, and -j4 sorts the runs on threads
    monkeypatch.setenv("BTK_RECSORT_RUN_RECORDS", "64")
    small = assert_same(list(fs.devices), f"{name}, spilling")
    assert small["sort_spilled_bytes"] > 0, "the sorters did not spill"
    small.pop("sort_spilled_bytes")
    small.pop("sort_peak_memory")
    assert small["problems"] == [] and small["tree_blocks"] == doc["tree_blocks"]


@pytest.mark.parametrize("case", CORPUS_CASES)
def test_jobs_same_report_corpus(case, corpus_images):  # noqa: F811
    assert (CORPUS / f"{case}.expect").exists(), f"corpus case {case} is gone: pick another"
    doc = assert_same(["--memory-limit", "64M", corpus_images[case]], case)
    assert doc["problems"], f"{case}: the damaged image reports no problem"
