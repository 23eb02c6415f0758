# SPDX-License-Identifier: GPL-2.0-only
"""Three kinds of damage btk-check found and left, now repaired (issue 15), each in several places:

- a tree block whose header names a wrong owner: in a subvolume tree (a leaf or node of one tree,
  a block snapshots share, a snapshot's own block), the root tree, the chunk tree and the other
  global trees. The kernel refuses a block of a global tree owned by another, and a subvolume
  block owned by no subvolume; `btrfs check` wants a subvolume block's owner to hold it. btrfs
  check 7.3 --repair leaves all of them (it rebuilds the extent references, not the block);
- a system chunk's stripe placed differently by the superblock's array and by the chunk tree
  (either side moved: the dev extents and the chunk tree's blocks tell which is right);
- two dev extents overlapping on a device (one moved onto another, grown into the next, or an
  extra one): the chunk stripes say which is right.

Each: btk-check finds it, --repair fixes it (exit 1, a second check clean), `btrfs check` (and
btrfs-progs 7.3 where installed) passes, the kernel mounts it and every file reads back as before.
"""
from __future__ import annotations

import functools
import re
import struct
from pathlib import Path

import pytest

import dumptree
import fsbuild
import oracle
from conftest import built
from test_repair import check, corrupt, problem_ids
from test_tune import (attached, mounted_retry, needs, original_hashes, tree_hashes, NO_HOLES_OFF, RAID1_2DEV,
                       SIMPLE)

LATEST = Path("/opt/btrfs-progs-latest/bin/btrfs")
MiB = 1 << 20
SYS_ARRAY = 0x32b                     # the superblock's sys_chunk_array
DISK_KEY, CHUNK, STRIPE = 17, 48, 32  # sizes of a disk key, a chunk item without stripes, a stripe


def damaged(tmp_path: Path, recipe: str, *edits) -> list[Path]:
    devs = built(needs(recipe)).copy_to(tmp_path / "devs")
    for e in edits:
        corrupt(devs, *e)
    return devs


def expect_found(devs, want: str):
    rc, objs, p = check(devs)
    ids = set(problem_ids(objs[0]))
    assert rc == 4 and want in ids, f"exit {rc}, {ids}\n{p.stderr}"


def latest_check(devs):
    """btrfs-progs 7.3 agrees too, where installed (a multi-device filesystem through loop devices)."""
    if not LATEST.exists():
        return
    with attached(devs, readonly=True) as loops:
        fsbuild.run([LATEST, "device", "scan", *loops], check=False)
        p = fsbuild.run([LATEST, "check", "--readonly", loops[0]], check=False, timeout=300)
    assert p.returncode == 0, f"btrfs check 7.3 after the repair:\n{p.stdout[-3000:]}{p.stderr[-3000:]}"


def expect_repaired(devs, recipe: str, *, classes: set[str]):
    """--repair fixes it all with these classes; the references pass; the kernel reads every file."""
    want = original_hashes(recipe)   # (before a copy of the same filesystem is attached)
    rc, objs, p = check(devs, "--repair", "--yes", "--no-undo")
    assert rc == 1, f"repair exit {rc}\n{p.stdout}{p.stderr}"
    ran = {a["class"] for o in objs for a in o.get("repairs", [])}
    assert classes <= ran, f"classes {ran}\n{p.stdout}"
    rc, objs, p = check(devs)
    left = set(problem_ids(objs[0])) - {"qgroup-inconsistent"}
    assert rc == 0 and not left, f"after the repair: exit {rc}, {left}\n{p.stderr}"
    oracle.reference_check(devs)
    latest_check(devs)
    with attached(devs) as loops, mounted_retry(loops, ["ro"]) as mnt:
        assert tree_hashes(mnt) == want, "files differ after the repair"


@functools.lru_cache(maxsize=None)
def dump(recipe: str, tree: str) -> dumptree.DumpTree:
    return dumptree.dump_tree(built(needs(recipe)).devices, "-t", tree)


def found_and_repaired(tmp_path: Path, recipe: str, edit: tuple, problem: str, repair_class: str):
    devs = damaged(tmp_path, recipe, edit)
    expect_found(devs, problem)
    expect_repaired(devs, recipe, classes={repair_class})


@functools.lru_cache(maxsize=None)
def tree_blocks(recipe: str, tree: int) -> list[dict]:
    """The block headers of a tree (dump-tree's header lines only: parsing every item of a big
    tree takes long)."""
    p = fsbuild.run(["btrfs", "inspect-internal", "dump-tree", "-t", str(tree), built(needs(recipe)).devices[0]])
    return [{"bytenr": int(m[2]), "level": int(m[3] or 0)}
            for m in re.finditer(r"^(leaf|node) (\d+) (?:level (\d+) )?items", p.stdout, re.M)]


def first_child(recipe: str, node: int) -> int:
    p = fsbuild.run(["btrfs", "inspect-internal", "dump-tree", "-b", str(node), built(needs(recipe)).devices[0]])
    return int(re.search(r"block (\d+) gen", p.stdout)[1])


def shared(recipe: str, a: int, b: int) -> set[int]:
    """Blocks trees a and b both reach."""
    return {x["bytenr"] for x in tree_blocks(recipe, a)} & {x["bytenr"] for x in tree_blocks(recipe, b)}


# ---------------------------------------------------------------- (A) tree block owners

def subvol_block(recipe: str, *, level: int, shared_with: int | None = None, tree: int = 5) -> int:
    """A block of tree at level: one tree shared_with also reaches, or (None) one only tree reaches."""
    both = shared(recipe, tree, shared_with or (258 if tree == 5 else 5))
    for b in tree_blocks(recipe, tree):
        if b["level"] == level and (b["bytenr"] in both) == (shared_with is not None):
            return b["bytenr"]
    pytest.skip(f"{recipe}: no such block")


OWNER_CASES = {
    # tree 5's own leaf, owned by a global tree (the kernel refuses it) or a subvolume that holds
    # no reference to it (btrfs check: owner ref check failed; the kernel aborts when it copies it)
    "leaf-extent-tree": (SIMPLE, lambda r: subvol_block(r, level=0), 2),
    "leaf-other-subvolume": (SIMPLE, lambda r: subvol_block(r, level=0), 256),
    # tree 5's root node: its children's references go by its owner
    "root-node-extent-tree": (SIMPLE, lambda r: subvol_block(r, level=1), 2),
    "root-node-snapshot": (SIMPLE, lambda r: subvol_block(r, level=1), 258),
    # a leaf tree 5 and its snapshot 258 share: copied in both, tree 5 (which made it) first
    "shared-leaf": (SIMPLE, lambda r: subvol_block(r, level=0, shared_with=258), 2),
    # the snapshot's own root node named after its source
    "snapshot-root-node": (SIMPLE, lambda r: subvol_block(r, level=1, tree=258, shared_with=None), 5),
    # 4 KiB nodes: a node the snapshot shares, and a leaf below it (reached by the snapshot
    # through the shared node only)
    "shared-node": (NO_HOLES_OFF, lambda r: subvol_block(r, level=1, shared_with=258), 2),
    "leaf-under-shared-node": (NO_HOLES_OFF, lambda r: first_child(r, subvol_block(r, level=1, shared_with=258)),
                               257),
    # the global trees: the root tree's and the chunk tree's roots (the superblock points at the copy)
    "root-tree": (SIMPLE, lambda r: tree_blocks(r, 1)[0]["bytenr"], 5),
    "chunk-tree": (SIMPLE, lambda r: tree_blocks(r, 3)[0]["bytenr"], 1),
    "extent-tree": (SIMPLE, lambda r: tree_blocks(r, 2)[0]["bytenr"], 7),
    "csum-tree": (SIMPLE, lambda r: tree_blocks(r, 7)[0]["bytenr"], 2),
    "dev-tree": (SIMPLE, lambda r: tree_blocks(r, 4)[0]["bytenr"], 3),
    "free-space-tree": (SIMPLE, lambda r: tree_blocks(r, 10)[0]["bytenr"], 2),
}


# the 4 KiB-node filesystem holds 5000 files: reading them all back takes a while
@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if OWNER_CASES[c][0] == NO_HOLES_OFF else c
                                  for c in sorted(OWNER_CASES)])
def test_tree_block_owner(case, tmp_path):
    recipe, block, owner = OWNER_CASES[case]
    found_and_repaired(tmp_path, recipe, ("-b", str(block(recipe)), "-f", "header.owner", "-v", str(owner)),
                       "tree-block-owner", "tree-block-owner")


@pytest.mark.parametrize("tree", [1, 7, 10])
def test_tree_block_backref_revision(tree, tmp_path):
    """A block of a global tree whose header names backref revision 0 (btrfs check 7.3 then
    expects the old-style references and reports them missing; the kernel takes the block for
    shared when it copies it): the block is copied, the copy of today's revision."""
    found_and_repaired(tmp_path, SIMPLE, ("-b", str(tree_blocks(SIMPLE, tree)[0]["bytenr"]), "-f", "header.flags",
                                          "-v", "^0x100000000000000"), "tree-block-owner", "tree-block-owner")


def test_shared_leaf_owned_by_the_other_sharer_is_not_damage(tmp_path):
    """A leaf tree 5 and snapshot 258 share, named after 258 (which holds it too): btrfs check
    (6.14 and 7.3) calls that clean, and so does btk."""
    block = subvol_block(SIMPLE, level=0, shared_with=258)
    devs = damaged(tmp_path, SIMPLE, ("-b", str(block), "-f", "header.owner", "-v", "258"))
    rc, objs, p = check(devs)
    assert rc == 0, f"exit {rc}, {problem_ids(objs[0])}\n{p.stderr}"


# ---------------------------------------------------------------- (B) system chunk placement

def sys_stripe_offsets(dev: Path) -> tuple[int, int]:
    """Superblock offsets of the first system chunk's stripe 0 devid and the stripe count."""
    with open(dev, "rb") as f:
        f.seek(64 * 1024)
        sb = f.read(4096)
    n = struct.unpack_from("<H", sb, SYS_ARRAY + DISK_KEY + 44)[0]
    return SYS_ARRAY + DISK_KEY + CHUNK, n


def free_offset(recipe: str, devid: int) -> int:
    """Device space past every dev extent of devid (nothing there: what is read there fails to verify)."""
    exts = [it for it in dump(recipe, "dev").items
            if it["type"] == "DEV_EXTENT" and it["key"][0] == devid]
    end = max(it["key"][2] + it["fields"]["length"] for it in exts)
    return (end + 32 * MiB) // MiB * MiB


def sys_chunk_key(recipe: str) -> str:
    it = next(it for it in dump(recipe, "chunk").items
              if it["type"] == "CHUNK_ITEM" and it["fields"]["type"] & 2)
    return ",".join(map(str, it["key"]))


def sys_chunk_stripe(recipe: str, i: int) -> dict:
    it = next(it for it in dump(recipe, "chunk").items
              if it["type"] == "CHUNK_ITEM" and it["fields"]["type"] & 2)
    return it["fields"]["stripes"][i]


def array_edit(recipe: str, stripe: int, field: str, value: int) -> tuple:
    base, n = sys_stripe_offsets(built(needs(recipe)).devices[0])
    assert stripe < n
    off = base + STRIPE * stripe + (8 if field == "offset" else 0)
    return ("-S", "-o", str(off), "-B", value.to_bytes(8, "little").hex())


SYS_CASES = {
    # the array's copy moved (the chunk tree and the dev extents agree elsewhere)
    "array-stripe1-offset": (SIMPLE, lambda r: array_edit(r, 1, "offset", free_offset(r, 1))),
    "array-stripe0-offset": (SIMPLE, lambda r: array_edit(r, 0, "offset", free_offset(r, 1))),
    "array-stripe1-devid": (SIMPLE, lambda r: array_edit(r, 1, "devid", 2)),
    "raid1-array-stripe1-offset": (RAID1_2DEV, lambda r: array_edit(
        r, 1, "offset", free_offset(r, sys_chunk_stripe(r, 1)["devid"]))),
    # the chunk tree's item moved (the array and the dev extents agree)
    "tree-stripe1-offset": (SIMPLE, lambda r: ("-t", "chunk", "-k", sys_chunk_key(r), "-f", "stripe1.offset",
                                               "-v", str(free_offset(r, 1)))),
    "tree-stripe0-offset": (SIMPLE, lambda r: ("-t", "chunk", "-k", sys_chunk_key(r), "-f", "stripe0.offset",
                                               "-v", str(free_offset(r, 1)))),
    "raid1-tree-stripe0-offset": (RAID1_2DEV, lambda r: (
        "-t", "chunk", "-k", sys_chunk_key(r), "-f", "stripe0.offset",
        "-v", str(free_offset(r, sys_chunk_stripe(r, 0)["devid"])))),
}


@pytest.mark.parametrize("case", sorted(SYS_CASES))
def test_sys_chunk_placed_apart(case, tmp_path):
    recipe, edit = SYS_CASES[case]
    found_and_repaired(tmp_path, recipe, edit(recipe), "sys-chunk-not-in-tree", "sys-chunk-array")


# ---------------------------------------------------------------- (C) overlapping dev extents

def dev_extents(recipe: str, devid: int = 1) -> list[dict]:
    return sorted((it for it in dump(recipe, "dev").items
                   if it["type"] == "DEV_EXTENT" and it["key"][0] == devid), key=lambda it: it["key"][2])


def moved_onto_previous(recipe: str, i: int) -> tuple:
    """Dev extent i moved 1 MiB past the start of dev extent i-1 (keys stay in order)."""
    exts = dev_extents(recipe)
    return ("-t", "dev", "-k", ",".join(map(str, exts[i]["key"])), "-f", "key.offset",
            "-v", str(exts[i - 1]["key"][2] + MiB))


def grown(recipe: str, i: int) -> tuple:
    exts = dev_extents(recipe)
    return ("-t", "dev", "-k", ",".join(map(str, exts[i]["key"])), "-f", "length", "-v", f"+{16 * MiB}")


def extra_copy(recipe: str, i: int) -> tuple:
    """A second dev extent naming dev extent i's chunk, 1 MiB into it."""
    e = dev_extents(recipe)[i]
    f = e["fields"]
    uuid = bytes.fromhex(f["chunk_tree_uuid"].replace("-", "")) if "chunk_tree_uuid" in f else bytes(16)
    data = struct.pack("<QQQQ", 3, 256, f["chunk_offset"], f["length"]) + uuid
    return ("-t", "dev", "-k", f"1,DEV_EXTENT,{e['key'][2] + MiB}", "-I", "-B", data.hex())


OVERLAP_CASES = {
    "moved-onto-metadata": (SIMPLE, lambda r: moved_onto_previous(r, len(dev_extents(r)) - 1)),
    "metadata-moved-onto-system": (SIMPLE, lambda r: moved_onto_previous(r, 3)),
    "system-moved-onto-system": (SIMPLE, lambda r: moved_onto_previous(r, 2)),
    "grown-into-next": (SIMPLE, lambda r: grown(r, 3)),
    "extra-dev-extent": (SIMPLE, lambda r: extra_copy(r, 3)),
    "raid1-grown-into-next": (RAID1_2DEV, lambda r: grown(r, 1)),
}


@pytest.mark.parametrize("case", sorted(OVERLAP_CASES))
def test_dev_extent_overlap(case, tmp_path):
    recipe, edit = OVERLAP_CASES[case]
    found_and_repaired(tmp_path, recipe, edit(recipe), "dev-extent-overlap", "dev-extents")


def moved_to_free_space(recipe: str, i: int) -> tuple:
    e = dev_extents(recipe)[i]
    return ("-t", "dev", "-k", ",".join(map(str, e["key"])), "-f", "key.offset", "-v", str(free_offset(recipe, 1)))


def chunk_stripe_moved(recipe: str, kind: int) -> tuple:
    it = next(it for it in dump(recipe, "chunk").items if it["type"] == "CHUNK_ITEM" and it["fields"]["type"] & kind)
    return ("-t", "chunk", "-k", ",".join(map(str, it["key"])), "-f", "stripe0.offset", "-v", f"+{MiB}")


# A dev extent and its chunk stripe apart, nothing overlapping: which one moved is told by where
# the chunk's contents are (its data's checksums, its tree blocks). Moving the stripe to the dev
# extent when the dev extent is what moved left the files unreadable.
MOVED_CASES = {
    "data-dev-extent-moved": (SIMPLE, lambda r: moved_to_free_space(r, len(dev_extents(r)) - 1)),
    "metadata-dev-extent-moved": (SIMPLE, lambda r: moved_to_free_space(r, 4)),
    "data-stripe-moved": (SIMPLE, lambda r: chunk_stripe_moved(r, 1)),
}


@pytest.mark.parametrize("case", sorted(MOVED_CASES))
def test_dev_extent_or_stripe_moved(case, tmp_path):
    recipe, edit = MOVED_CASES[case]
    found_and_repaired(tmp_path, recipe, edit(recipe), "chunk-no-dev-extent", "dev-extents")
