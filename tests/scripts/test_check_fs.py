# SPDX-License-Identifier: GPL-2.0-only
"""btk-check: inodes, directories and subvolumes (phase_fs*.c, phase_roots.c).

Every recipe of the fsbuild matrix (hardlinks and extrefs, xattrs, special
files, snapshots, compression, a log tree, no-holes on and off, mixed block
groups) must show none of these problems. Copies of one recipe with one item
field edited (btk-corrupt, checksum fixed) must show exactly the expected
problems, and the reference `btrfs check` must fail on each of them too.
More cases, as small committed images, are in tests/images/corrupt/."""
import re
import subprocess

import pytest

from conftest import RECIPE_NAMES, btk_path, built, btk_tree_records, check_json, run_btk, skip_or_fail
import fsbuild

# the problem ids of phase_fs*.c and phase_roots.c
FS_IDS = {
    "inode-item-missing", "inode-mode-invalid", "inode-generation", "inode-flags-unknown", "inode-nlink",
    "inode-unreachable", "dir-isize", "inode-nbytes", "name-hash", "dir-item-missing", "dir-index-missing",
    "inode-ref-missing", "dir-entry-type", "dir-entry-dangling", "dir-item-index-mismatch",
    "file-extent-overlap", "file-extent-hole", "file-extent-inline", "file-extent-bad", "orphan-item-bad",
    "dir-parent-missing", "root-item-bad", "root-backref-missing", "root-ref-missing", "root-ref-mismatch",
    "root-dir-entry-missing", "root-dir-entry-dangling", "root-unreferenced", "uuid-tree-missing",
    "uuid-tree-extra", "name-invalid", "root-orphan-missing", "root-item-generation",
}
# single device, no-holes, extrefs (the links directory), xattrs, a subvolume,
# a read-only snapshot of it and a snapshot of the top level
BASE = "s16k-crc32c-zstd"


@pytest.mark.parametrize("name", RECIPE_NAMES)
def test_recipes_have_consistent_inodes_and_subvolumes(name):
    fs = built(name)
    # a small budget: the sorters must spill rather than fail
    _, out, ids = check_json(fs.devices, "--memory-limit", "16M")
    assert not ids & FS_IDS, [x for x in out["problems"] if x["id"] in FS_IDS][:10]
    assert out["inodes"] >= (300 if fs.recipe.populate else 1)


FS_VERBOSE = re.compile(r"filesystem trees: (\d+) subvolume tree\(s\), (\d+) walked here, (\d+) inodes; (\d+) "
                        r"blocks fed by the tree-block walk, (\d+) of them read again \(shared\); block cache "
                        r"(\d+) hits, (\d+) misses")
FS_DELTAS = re.compile(r"(\d+) snapshot\(s\) checked as deltas")


@pytest.mark.parametrize("name,min_inodes", [("mkfs-single", 1), ("s4k-xxhash-holes-lzo", 5000)])
def test_subvolume_leaves_read_once(name, min_inodes):
    """The tree-block walk hands every subvolume tree's blocks to the
    filesystem-tree checks. With a block cache far smaller than the trees
    (--memory-limit 16M: 2 MiB; the 5000-file recipe has ~5 MiB of them) the
    filesystem-tree phase reads no block itself (it used to walk every
    subvolume again: over a thousand cache misses here), and a block is read
    twice only when a snapshot shares it with a tree walked before: never
    with one subvolume. Snapshots are checked as deltas of their lineage
    (doc/design.md): not fed, their changed leaves read by the diff."""
    fs = built(name)
    p = run_btk("btk-check", "-v", "--memory-limit", "16M", *fs.devices)
    assert p.returncode == 0, p.stdout + p.stderr
    m = FS_VERBOSE.search(p.stderr)
    assert m, p.stderr
    trees, walked, inodes, fed, shared, hits, misses = map(int, m.groups())
    deltas = int(FS_DELTAS.search(p.stderr).group(1))
    assert walked == 0 and (deltas or (hits == 0 and misses == 0)), m.group(0)
    assert inodes >= min_inodes and fed >= trees - deltas, m.group(0)
    if fs.recipe.populate:
        assert trees >= 4 and deltas >= 2 and shared < fed, p.stderr   # subvolumes and their snapshots
    else:
        assert shared == 0, m.group(0)


# ---------------------------------------------------------------- damaged copies

def records(tree, type_, objectid=None):
    recs, _ = btk_tree_records(BASE)
    return [r for r in recs if r.get("tree") == tree and r.get("type") == type_
            and (objectid is None or r["key"][0] == objectid)]


def ino(name, tree=5, parent=256):
    for r in records(tree, "DIR_ITEM", parent):
        for e in r["fields"]["entries"]:
            if e.get("name") == name:
                return e["location"][0]
    raise LookupError(name)


def key_of(r):
    return ",".join(str(k) for k in r["key"])


def inode_item(name):
    return records(5, "INODE_ITEM", ino(name))[0]


def dir_item(name, type_="DIR_ITEM"):
    return next(r for r in records(5, type_, 256) if r["fields"]["entries"][0].get("name") == name)


def inline_extent():
    """An uncompressed inline extent of the top level."""
    return next(r for r in records(5, "EXTENT_DATA") if r["fields"]["type"] == 0
                and r["fields"]["compression"] == 0)


# name -> (tree, item record, btk-corrupt change, expected problem ids)
# (the reference `btrfs check` fails on all but the uuid tree, which it does not check)
REFERENCE_PASSES = {"uuid-item-deleted"}
CASES = {
    "nlink": lambda: (5, inode_item("random-3M"), ["--field", "nlink", "--value", "+1"], {"inode-nlink"}),
    "dir-isize": lambda: (5, inode_item("dir-a"), ["--field", "size", "--value", "+2"], {"dir-isize"}),
    "nbytes": lambda: (5, inode_item("text-2M"), ["--field", "nbytes", "--value", "+4096"], {"inode-nbytes"}),
    "dir-item-name": lambda: (5, dir_item("small1"), ["--field", "name", "--value", "^01"],
                              {"name-hash", "dir-item-index-mismatch"}),
    "dir-index-type": lambda: (5, dir_item("small1", "DIR_INDEX"), ["--field", "type", "--value", "7"],
                               {"dir-entry-type"}),
    "inode-ref-index": lambda: (5, records(5, "INODE_REF", ino("small3"))[0], ["--field", "index", "--value", "+100"],
                                {"dir-index-missing", "inode-ref-missing"}),
    "extref-index": lambda: (5, records(5, "INODE_EXTREF")[0], ["--field", "index", "--value", "+1000"],
                             {"dir-index-missing", "inode-ref-missing"}),
    "extref-name": lambda: (5, records(5, "INODE_EXTREF")[0], ["--field", "name", "--value", "^01"],
                            {"name-hash", "dir-item-index-mismatch", "dir-item-missing", "inode-ref-missing"}),
    "inline-ram-bytes": lambda: (5, inline_extent(), ["--field", "ram_bytes", "--value", "+1"],
                                 {"file-extent-inline", "inode-nbytes"}),
    "root-backref-name": lambda: (1, records(1, "ROOT_BACKREF")[0], ["--field", "name", "--value", "^01"],
                                  {"root-ref-mismatch"}),
    "root-ref-dirid": lambda: (1, records(1, "ROOT_REF")[0], ["--field", "dirid", "--value", "+1"],
                               {"root-ref-mismatch", "root-dir-entry-missing"}),
    "uuid-item-deleted": lambda: (9, records(9, "UUID_KEY_SUBVOL")[-1], ["--delete"], {"uuid-tree-missing"}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_damaged_fs_item_is_reported(case, tmp_path):
    fs = built(BASE)
    tool = btk_path("tests/tools/btk-corrupt")
    if not tool.exists():
        skip_or_fail(f"{tool} is not built (make test-tools)")
    tree, rec, change, expected = CASES[case]()
    devices = fs.copy_to(tmp_path)
    p = subprocess.run([str(tool), "--tree", str(tree), "--key", key_of(rec), *change, *map(str, devices)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    rc, out, ids = check_json(devices)
    assert rc == 4 and ids == expected, out["problems"][:10]
    if case in REFERENCE_PASSES:
        return
    ref = fsbuild.run(["btrfs", "check", "--readonly", str(devices[0])], check=False, timeout=300)
    assert ref.returncode != 0, f"btrfs check passed on a damaged image:\n{ref.stdout[-2000:]}"
