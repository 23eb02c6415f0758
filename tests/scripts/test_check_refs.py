# SPDX-License-Identifier: GPL-2.0-only
"""btk-check: extent references, checksum items and --check-data-csum.

Every recipe (snapshots, reflinks, compression, quotas, every profile) must
show none of these problems; damaged copies of one small recipe must show
exactly the expected ones, and the reference `btrfs check` must fail on them
too."""
import json
import subprocess

import pytest

from conftest import RECIPE_NAMES, btk_path, built, btk_tree_records, check_json, run_btk, skip_or_fail
import fsbuild

# the problem ids of phase_refs.c, phase_csums.c and data_csum.c
REF_IDS = {
    "extent-ref-missing", "extent-ref-unused", "extent-ref-count", "extent-refs-total",
    "data-extent-not-allocated", "extent-type", "file-extent-bad-range", "extent-owner-ref",
    "csum-item-size", "csum-overlap", "csum-outside-extent", "csum-missing", "csum-nodatasum",
    "data-csum-mismatch", "data-unreadable",
}
BASE = "s16k-crc32c-zstd"   # single device, snapshots and reflinks: shared and keyed refs


@pytest.mark.parametrize("name", RECIPE_NAMES)
def test_recipes_have_consistent_refs_and_csums(name):
    fs = built(name)
    _, out, ids = check_json(fs.devices, "--check-data-csum", "--memory-limit", "16M")
    assert not ids & REF_IDS, [x for x in out["problems"] if x["id"] in REF_IDS][:10]
    if fs.recipe.populate:
        # every populated recipe has checksummed files, and each copy was read
        assert out["csum_bytes"] > 0
        assert out["data_csum_bytes"] >= out["csum_bytes"]


def corrupt(devices, *args):
    tool = btk_path("tests/tools/btk-corrupt")
    if not tool.exists():
        skip_or_fail(f"{tool} is not built (make test-tools)")
    p = subprocess.run([str(tool), *map(str, args), *map(str, devices)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def reference_fails(devices, *args):
    p = fsbuild.run(["btrfs", "check", "--readonly", *args, str(devices[0])], check=False, timeout=300)
    assert p.returncode != 0, f"btrfs check passed on a damaged image:\n{p.stdout[-2000:]}"


def records(name, tree, type_):
    recs, _ = btk_tree_records(name)
    return [r for r in recs if r.get("tree") == tree and r.get("type") == type_]


def data_extent(single_ref=True):
    """A data extent item with one inline EXTENT_DATA_REF of count 1."""
    for r in records(BASE, 2, "EXTENT_ITEM"):
        f = r["fields"]
        refs = f.get("inline_refs", [])
        if f["flags"] == 1 and f["refs"] == 1 and len(refs) == 1 and refs[0]["type"] == "EXTENT_DATA_REF":
            return r
    pytest.fail("no singly referenced data extent in the base image")


def tree_block_extent(name=BASE):
    """A metadata item of an fs-tree block with one TREE_BLOCK_REF to root 5."""
    for r in records(name, 2, "METADATA_ITEM"):
        f = r["fields"]
        refs = f.get("inline_refs", [])
        if f["refs"] == 1 and len(refs) == 1 and refs[0] == {"type": "TREE_BLOCK_REF", "root": 5}:
            return r
    pytest.fail("no fs-tree block in the base image")


def plain_file_inode():
    """The inode item of a root-5 file whose extents are all regular and uncompressed."""
    kinds = {}
    for r in records(BASE, 5, "EXTENT_DATA"):
        f = r["fields"]
        plain = f["type"] == 1 and not f["compression"] and f["disk_bytenr"]
        kinds[r["key"][0]] = kinds.get(r["key"][0], True) and plain
    for r in records(BASE, 5, "INODE_ITEM"):
        if kinds.get(r["key"][0]) and not r["fields"]["flags"] & 1:
            return r
    pytest.fail("no plain checksummed file in the base image")


def key_arg(r):
    return ",".join(map(str, r["key"]))


def damaged(tmp_path, edits, name=BASE):
    devices = built(name).copy_to(tmp_path)
    for edit in edits:
        corrupt(devices, *edit)
    return devices


CASES = {
    # the extent item counts one reference more than it has
    "refs-total": (lambda: [["--tree", "extent", "--key", key_arg(data_extent()), "--field", "refs",
                             "--value", "+1"]], {"extent-refs-total"}, ()),
    # item and data ref agree on 2, but one file extent uses it
    "ref-count": (lambda: [["--tree", "extent", "--key", key_arg(data_extent()), "--field", "refs",
                            "--value", "+1"],
                           ["--tree", "extent", "--key", key_arg(data_extent()), "--field", "ref0.count",
                            "--value", "+1"]], {"extent-ref-count"}, ()),
    # a tree block's ref names the wrong root: missing for root 5, unused for root 7
    "tree-ref-root": (lambda: [["--tree", "extent", "--key", key_arg(tree_block_extent()), "--field",
                                "ref0.root", "--value", "7"]], {"extent-ref-missing", "extent-ref-unused"}, ()),
    # a data ref names the wrong inode
    "data-ref-inode": (lambda: [["--tree", "extent", "--key", key_arg(data_extent()), "--field",
                                 "ref0.objectid", "--value", "+1000"]],
                       {"extent-ref-missing", "extent-ref-unused"}, ()),
    # the checksums of a regular file's data are gone
    "csum-deleted": (lambda: [["--tree", "csum", "--key", key_arg(records(BASE, 7, "EXTENT_CSUM")[0]),
                               "--delete"]], {"csum-missing"}, ()),
    # NODATASUM set on a file whose data has checksums (fsck-tests 037's "odd csum item")
    "nodatasum-with-csums": (lambda: [["--tree", "fs", "--key", key_arg(plain_file_inode()), "--field", "flags",
                                       "--value", hex(plain_file_inode()["fields"]["flags"] | 1)]],
                             {"csum-nodatasum"}, ()),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_damage_is_found(tmp_path, case):
    edits, want, ref_args = CASES[case]
    devices = damaged(tmp_path, edits())
    rc, out, ids = check_json(devices)
    assert rc == 4 and ids == want, out["problems"][:10]
    reference_fails(devices, *ref_args)


def test_bad_data_block_is_found(tmp_path):
    """One flipped byte in a data block: only --check-data-csum sees it, with
    its logical and physical address."""
    devices = built(BASE).copy_to(tmp_path)
    extent = data_extent()
    logical = extent["key"][0]
    p = run_btk("btk-inspect", "map", "--format", "json", "--logical", logical, *devices)
    physical = json.loads(p.stdout)["copies"][0]["physical"]
    corrupt(devices, "--raw", physical + 100, "--bytes", "5a")
    rc, out, ids = check_json(devices)
    assert rc == 0 and not ids, out["problems"]
    rc, out, ids = check_json(devices, "--check-data-csum", "-j", "2")
    assert rc == 4 and ids == {"data-csum-mismatch"}, out["problems"]
    bad = [x["detail"] for x in out["problems"]]
    assert len(bad) == 1 and f"data block {logical} " in bad[0] and f"physical {physical}" in bad[0], bad
    reference_fails(devices, "--check-data-csum")


def test_spilling_sorters_agree(tmp_path, monkeypatch):
    """Sorters of 64 KiB (BTK_CHECK_SORT_BUDGET) with runs of at most 200
    records (BTK_RECSORT_RUN_RECORDS: the image's ~2500 records fill a 64 KiB
    arena only just, and how many there are depends on the kernel's timing)
    spill runs to $TMPDIR and merge them; the verdict on a damaged image is the
    same as in memory."""
    name = "s4k-xxhash-holes-lzo"   # 5000 files: thousands of reference records
    key = key_arg(tree_block_extent(name))
    devices = damaged(tmp_path, [["--tree", "extent", "--key", key, "--field", "ref0.root", "--value", "7"]], name)
    _, big, big_ids = check_json(devices)
    monkeypatch.setenv("BTK_CHECK_SORT_BUDGET", "64K")
    monkeypatch.setenv("BTK_RECSORT_RUN_RECORDS", "200")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    _, small, small_ids = check_json(devices, "-j", "1")
    assert small["sort_spilled_bytes"] > 0 and big["sort_spilled_bytes"] == 0
    assert small["ref_records"] == big["ref_records"] > 1000
    assert small_ids == big_ids == {"extent-ref-missing", "extent-ref-unused"}
    assert sorted(x["detail"] for x in small["problems"]) == sorted(x["detail"] for x in big["problems"])


def test_extents_sorted_on_the_side_agree(tmp_path, monkeypatch):
    """An extent with more declared references than memory holds is sorted
    through a spilling sorter of its own (BTK_CHECK_EXTENT_RECORDS=1 sends
    every extent with a reference there); the verdict is the same."""
    name = "s4k-xxhash-holes-lzo"
    key = key_arg(tree_block_extent(name))
    devices = damaged(tmp_path, [["--tree", "extent", "--key", key, "--field", "ref0.root", "--value", "7"]], name)
    _, want, want_ids = check_json(devices)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("BTK_RECSORT_RUN_RECORDS", "1")   # every sorter spills
    _, base, _ = check_json(devices)
    monkeypatch.setenv("BTK_CHECK_EXTENT_RECORDS", "1")
    _, side, side_ids = check_json(devices)
    assert side["sort_spilled_bytes"] > base["sort_spilled_bytes"] > 0
    assert side["ref_records"] == want["ref_records"] > 1000
    assert side_ids == want_ids == {"extent-ref-missing", "extent-ref-unused"}
    assert sorted(x["detail"] for x in side["problems"]) == sorted(x["detail"] for x in want["problems"])


def test_many_bad_blocks_same_report_for_any_jobs(tmp_path):
    """More than 16 bad blocks in a row: the first 16 are named, the rest
    counted, in the same order whether one thread or four verify a run."""
    devices = built(BASE).copy_to(tmp_path)
    extents = [r for r in records(BASE, 2, "EXTENT_ITEM") if r["fields"]["flags"] == 1]
    extent = max(extents, key=lambda r: r["key"][2])
    logical, nblocks = extent["key"][0], min(20, extent["key"][2] // 4096)
    assert nblocks > 16, extent
    p = run_btk("btk-inspect", "map", "--format", "json", "--logical", logical, *devices)
    physical = json.loads(p.stdout)["copies"][0]["physical"]
    for i in range(nblocks):
        corrupt(devices, "--raw", physical + i * 4096 + 7, "--bytes", "a5")
    outs = []
    for jobs in ("1", "4"):
        rc, out, ids = check_json(devices, "--check-data-csum", "-j", jobs)
        assert rc == 4 and ids == {"data-csum-mismatch"}, out["problems"]
        outs.append([x["detail"] for x in out["problems"]])
    assert outs[0] == outs[1], outs
    named = [d for d in outs[0] if d.startswith("data block ")]
    assert [d.split()[2] for d in named] == [str(logical + i * 4096) for i in range(len(named))], named
    more = sum(int(d.split(": ")[1].split()[0]) for d in outs[0] if d.endswith("more bad blocks"))
    assert len(named) + more == nblocks, outs[0]
