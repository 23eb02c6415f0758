# SPDX-License-Identifier: GPL-2.0-only
"""Regressions from a damage campaign (random field edits, deletions and byte flips made with
btk-corrupt on the cached recipes, then btk-check, --repair, the reference `btrfs check` and a
kernel mount). Each case is damage the kernel's tree checker refuses (the leaf, hence the tree
or the mount) while btk-check said clean, or a repair that made it worse: the check must now
report it, and --repair must leave it reported rather than guess.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import dumptree
import oracle
from conftest import images_digest, built
from test_repair import (baseline, check, corrupt, first_block_of_tree, first_item,
                         key_arg, problem_ids)
from test_tune import get_fs, needs, NO_HOLES_OFF, PARITY_META, SIMPLE, SKINNY_OFF


def damaged(tmp_path: Path, *edits) -> list[Path]:
    needs(SIMPLE)
    devs = built(SIMPLE).copy_to(tmp_path / "devs")
    for e in edits:
        corrupt(devs, *e)
    return devs


def expect_found(devs, want: str) -> set[str]:
    rc, objs, p = check(devs)
    ids = set(problem_ids(objs[0]))
    assert rc == 4 and want in ids, f"exit {rc}, {ids}\n{p.stderr}"
    return ids


def expect_repair_leaves(devs, want: str):
    """--repair changes nothing that would hide the damage: it is still reported after."""
    rc, objs, p = check(devs, "--repair", "--yes", "--no-undo")
    assert rc == 4, f"repair exit {rc}\n{p.stdout}{p.stderr}"
    rc, objs, p = check(devs)
    assert rc == 4 and want in problem_ids(objs[0]), f"after the repair: exit {rc}, {problem_ids(objs[0])}"


# (root-tree inode 6 is the default directory mkfs makes; the kernel checks every inode item)
ROOT_TREE_INODE = "1", "-k", "6,INODE_ITEM,0"


def test_root_tree_inode_unknown_flags(tmp_path):
    """Inode flags the kernel does not know, on the root tree's directory inode: the kernel
    refuses the root tree's leaf and the mount; btk-check said clean (it looked at inode
    items only in subvolume trees, and called unknown flags a warning)."""
    devs = damaged(tmp_path, ("-t", *ROOT_TREE_INODE, "-f", "flags", "-v", "0x6a53"))
    expect_found(devs, "inode-flags-unknown")
    expect_repair_leaves(devs, "inode-flags-unknown")


def test_subvolume_inode_unknown_flags_is_an_error(tmp_path):
    """The same in a subvolume tree was a warning, exit 0, while the kernel refuses the leaf."""
    devs = damaged(tmp_path, ("-t", "5", "-k", "257,INODE_ITEM,0", "-f", "flags", "-v", "0x6000"))
    expect_found(devs, "inode-flags-unknown")


def test_root_tree_dir_inode_nlink(tmp_path):
    """A directory inode with more than one link in the root tree: the kernel refuses the leaf."""
    devs = damaged(tmp_path, ("-t", *ROOT_TREE_INODE, "-f", "nlink", "-v", "0x91bdbc90"))
    expect_found(devs, "item-malformed")


@pytest.mark.parametrize("field,value", [("last_snapshot", "0xffffffffffffffff"), ("drop_level", "0x52"),
                                         ("flags", "^0x4"), ("generation_v2", "+100")])
def test_root_item_fields(tmp_path, field, value):
    """Root item fields the kernel's tree checker refuses (then the root tree's leaf and the
    mount): btk-check compared only generation and level with the root block."""
    devs = damaged(tmp_path, ("-t", "1", "-k", "5,ROOT_ITEM,0", "-f", field, "-v", value))
    expect_found(devs, "root-item-bad")


def test_csum_root_item_missing(tmp_path):
    """The csum tree's root item deleted: the check called its blocks leaked and the repair
    freed them, losing every checksum, and the kernel (and `btrfs check`) could not open the
    result. Now the missing tree is reported, and root-items makes the item again for the root
    block the extent tree names: every checksum is kept."""
    devs = damaged(tmp_path, ("-t", "1", "-k", "7,ROOT_ITEM,0", "-d"))
    expect_found(devs, "tree-root-unreadable")
    rc, objs, p = check(devs, "--repair", "--yes", "--no-undo")
    assert rc == 1, f"repair exit {rc}\n{p.stdout}{p.stderr}"
    assert "root-items" in {a["class"] for a in objs[1]["repairs"]}, objs[1]
    assert objs[-1]["csum_bytes"] == objs[0]["csum_bytes"] or objs[0]["csum_bytes"] == 0, objs[-1]
    rc, objs, p = check(devs)
    assert rc == 0 and objs[0]["csum_bytes"] > 0, p.stdout
    oracle.reference_check(devs)


def test_extent_item_generation(tmp_path):
    """An extent item from a generation after the filesystem's: the kernel refuses the extent
    tree's leaf; btk-check and `btrfs check` disagreed (btk said clean)."""
    needs(SIMPLE)
    key = first_item(built(SIMPLE).devices, "extent", "METADATA_ITEM")
    devs = damaged(tmp_path, ("-t", "extent", "-k", key_arg(key), "-f", "generation", "-v", "+1000"))
    expect_found(devs, "extent-item-generation")


def test_pristine_still_clean():
    """None of the checks above fires on the undamaged recipe."""
    needs(SIMPLE)
    rc, ids, _ = baseline(SIMPLE)
    assert rc == 0 and not ids, ids


def test_dev_item_devid_kept_out_of_the_superblock(tmp_path):
    """A dev item whose devid field is 0: the check did not see it, and the next commit of a
    repair copied it into the superblock, which then no longer opened (no valid superblock).
    Now the check reports it and the commit refuses: the class is rolled back, the filesystem
    still opens and still shows both damages."""
    needs(SIMPLE)
    bg = first_item(built(SIMPLE).devices, "extent", "BLOCK_GROUP_ITEM")
    devs = damaged(tmp_path, ("-t", "chunk", "-k", "1,DEV_ITEM,1", "-f", "devid", "-v", "0"),
                   ("-t", "extent", "-k", key_arg(bg), "-f", "used", "-v", "+4096"))
    expect_found(devs, "item-malformed")
    rc, objs, p = check(devs, "--repair", "--yes", "--no-undo")
    assert rc & 4, f"repair exit {rc}\n{p.stdout}{p.stderr}"
    rc, objs, p = check(devs)
    ids = set(problem_ids(objs[0]))
    assert rc == 4 and {"item-malformed", "block-group-used"} <= ids, f"exit {rc}, {ids}\n{p.stderr}"


# checker gaps (gaps)

def expect_summary(devs, want: str) -> tuple[set[str], list[dict]]:
    """Damage that used to stop the open (exit 8, no summary): now exit 4, a JSON summary
    naming the problem."""
    rc, objs, p = check(devs)
    assert rc == 4 and objs and "problems" in objs[0], f"exit {rc}\n{p.stdout}{p.stderr}"
    ids = set(problem_ids(objs[0]))
    assert want in ids, f"{ids}\n{p.stderr}"
    return ids, [pr for pr in objs[0]["problems"] if pr["id"] == want]


def test_open_chunk_item_invalid(tmp_path):
    """A chunk item the open refuses (stripe_len not a power of two): it is left out of the
    chunk map and reported, the rest is checked. Its block group then has no chunk, and the
    chunk-items class makes the item again from the block group and its dev extents (before,
    nothing was written: a chunk left out kept every transaction away)."""
    needs(SIMPLE)
    key = first_item(built(SIMPLE).devices, "chunk", "CHUNK_ITEM", last=True)
    devs = damaged(tmp_path, ("-t", "chunk", "-k", key_arg(key), "-f", "stripe_len", "-v", "^0x20"))
    ids, found = expect_summary(devs, "item-malformed")
    assert any("stripe_len" in pr["detail"] for pr in found), found
    assert "block-group-no-chunk" in ids, ids
    expect_repaired_clean(devs)


def test_open_root_item_level(tmp_path):
    """The extent tree's root item with level 255: the open stopped; now root-item-bad."""
    devs = damaged(tmp_path, ("-t", "1", "-k", "2,ROOT_ITEM,0", "-f", "level", "-v", "0xffffffffffffffff"))
    expect_summary(devs, "root-item-bad")


def test_open_root_tree_root_unreadable_uses_backup(tmp_path):
    """Every copy of the root tree's root block bad: the check falls back to the newest backup
    root that reads (as rescue=usebackuproot), says so, and the repair writes nothing."""
    needs(SIMPLE)
    root = first_block_of_tree(built(SIMPLE).devices, 1)
    devs = damaged(tmp_path, ("-b", str(root), "-o", "300", "-B", "ffff", "-n"))
    _, found = expect_summary(devs, "tree-root-unreadable")
    assert any("backup root" in pr["detail"] for pr in found), found
    before = images_digest(devs)
    rc, objs, p = check(devs, "--repair", "--yes", "--no-undo")
    assert rc == 4 and images_digest(devs) == before, f"repair exit {rc}\n{p.stdout}{p.stderr}"


def test_open_chunk_tree_root_unreadable(tmp_path):
    """Every copy of the chunk tree's root block bad: only the system chunks map; the chunk
    tree and the root tree are reported unreadable."""
    needs(SIMPLE)
    root = first_block_of_tree(built(SIMPLE).devices, 3)
    devs = damaged(tmp_path, ("-b", str(root), "-o", "300", "-B", "ffff", "-n"))
    _, found = expect_summary(devs, "tree-root-unreadable")
    assert any(pr["detail"].startswith("tree 3 ") for pr in found), found


def test_dev_item_missing(tmp_path):
    """The only dev item deleted: the kernel mounts nothing whose dev items do not number the
    superblock's devices, `btrfs check` finds dev extents without their device; btk said clean."""
    devs = damaged(tmp_path, ("-t", "chunk", "-k", "1,DEV_ITEM,1", "-d"))
    expect_found(devs, "dev-item-missing")


@pytest.mark.parametrize("tree,field,value", [("5", "name", "^01"), ("18446744073709551607", "index", "^0x40")])
def test_root_dir_self_ref(tmp_path, tree, field, value):
    """A subvolume's (here also the data-reloc tree's) root directory refers to itself as '..'
    with index 0; another name or index: `btrfs check` says odd dir item, btk said clean."""
    devs = damaged(tmp_path, ("-t", tree, "-k", "256,INODE_REF,256", "-f", field, "-v", value))
    expect_found(devs, "item-malformed")


@pytest.mark.parametrize("field,value", [("name_len", "0"), ("key.type", "+1")], ids=["name-len-0", "as-extref"])
def test_root_tree_inode_ref_layout(tmp_path, field, value):
    """The root tree's inode ref (the default subvolume's name) with name_len 0 leaves bytes
    that hold no whole ref; keyed as an extref (a field sweep), its bytes hold no whole extref:
    the kernel's tree checker refuses the root tree's leaf (btk looked at refs only)."""
    devs = damaged(tmp_path, ("-t", "1", "-k", "5,INODE_REF,6", "-f", field, "-v", value))
    expect_found(devs, "item-malformed")


@pytest.mark.parametrize("compression,offset", [(1, 21), (2, 29), (3, 21)], ids=["zlib", "lzo", "zstd"])
def test_inline_extent_corrupt(tmp_path, compression, offset):
    """A compressed inline extent whose stream no longer decompresses (its first bytes
    damaged): reading the file fails in the kernel (EIO), btk said clean. Now every zlib, lzo
    and zstd inline extent is decompressed and must give exactly its ram_bytes."""
    needs(SIMPLE)
    d = dumptree.dump_tree(built(SIMPLE).devices, "-t", "5")
    key = next(it["key"] for it in d.items if it["type"] == "EXTENT_DATA" and it["fields"].get("type") == 0
               and it["fields"].get("compression") == compression)
    # the inline data starts at byte 21 of the item: the zlib header / the zstd magic / lzo's
    # two lengths, then its stream (byte 29)
    devs = damaged(tmp_path, ("-t", "5", "-k", key_arg(key), "-o", str(offset), "-B", "ff"))
    _, found = expect_summary(devs, "inline-extent-corrupt")
    assert any(f"inode {key[0]}:" in pr["detail"] for pr in found), found


# repair gaps (rfix)

def expect_repaired_clean(devs):
    """--repair fixes it all: exit 1, a second check clean (quota groups may be left marked
    inconsistent for a rescan), and the reference `btrfs check` agrees."""
    rc, objs, p = check(devs, "--repair", "--yes", "--no-undo")
    assert rc == 1, f"repair exit {rc}\n{p.stdout}{p.stderr}"
    rc, objs, p = check(devs)
    left = set(problem_ids(objs[0])) - {"qgroup-inconsistent"}
    assert rc == 0 and not left, f"after the repair: exit {rc}, {left}\n{p.stderr}"
    oracle.reference_check(devs)


def tree5_items(type_name: str) -> list[dict]:
    needs(SIMPLE)
    return [it for it in dumptree.dump_tree(built(SIMPLE).devices, "-t", "5").items if it["type"] == type_name]


def test_top_dir_dotdot_ref_deleted(tmp_path):
    """A subvolume's top directory without its '..' inode ref: the inodes class set nlink to
    the names it counted and the check still said nlink 1, 0 names. Now the ref is made again."""
    devs = damaged(tmp_path, ("-t", "5", "-k", "256,INODE_REF,256", "-d"))
    expect_found(devs, "inode-nlink")
    expect_repaired_clean(devs)


def test_inode_ref_into_missing_parent(tmp_path):
    """An inode ref keyed under a parent that does not exist (its dir entries intact): the
    inode-items class could not make the parent, nothing else ran. Now the names class writes
    the ref the dir entries call for and drops the one into nowhere."""
    ref = next(it for it in tree5_items("INODE_REF") if it["key"][2] != 256 and it["key"][0] > 300)
    devs = damaged(tmp_path, ("-t", "5", "-k", key_arg(ref["key"]), "-f", "key.offset", "-v", "0x7fffff00"))
    expect_found(devs, "dir-parent-missing")
    expect_repaired_clean(devs)


def test_dir_index_names_inode_zero(tmp_path):
    """A dir index whose location says inode 0: the names class took notes about inode 0 for
    notes about xattrs and never removed the entry."""
    idx = next(it for it in tree5_items("DIR_INDEX") if it["key"][0] != 256)
    devs = damaged(tmp_path, ("-t", "5", "-k", key_arg(idx["key"]), "-f", "location.objectid", "-v", "0"))
    expect_found(devs, "dir-entry-dangling")
    expect_repaired_clean(devs)


def test_csum_item_under_a_wrong_key(tmp_path):
    """The last csum item's key objectid changed: btk-check did not look outside the csum
    key range, the repair re-made its checksums next to it, the kernel refused the leaf."""
    needs(SIMPLE)
    last = first_item(built(SIMPLE).devices, "csum", "EXTENT_CSUM", last=True)
    devs = damaged(tmp_path, ("-t", "csum", "-k", key_arg(last), "-f", "key.objectid", "-v", "0xffffffffffffffff"))
    expect_found(devs, "csum-outside-extent")
    expect_repaired_clean(devs)


def rebuild_passes_reference(tmp_path, recipe, option):
    """A forced rebuild on the undamaged recipe: the reference `btrfs check` passes after it."""
    needs(recipe)
    devs = built(recipe).copy_to(tmp_path / "devs")
    rc, objs, p = check(devs, "--repair", "--yes", "--no-undo", option)
    assert rc in (0, 1), f"exit {rc}\n{p.stderr}"
    oracle.reference_check(devs)


def test_csum_rebuild_leaves_prealloc_unchecksummed(tmp_path):
    """--rebuild-csum-tree checksummed whole data extents, also the unwritten part of a
    partly written preallocation, which `btrfs check` then takes for written data (an error
    where holes have extents)."""
    rebuild_passes_reference(tmp_path, NO_HOLES_OFF, "--rebuild-csum-tree")


def test_free_space_tree_damage_not_trusted_by_allocator(tmp_path):
    """A free-space extent deleted (the tree says that space is used): the rebuilt tree was
    overwritten at commit by the allocator's map, loaded from the damaged tree."""
    needs(SIMPLE)
    # in a metadata block group: the one the repair's transaction allocates from
    bgs = [it["key"] for it in dumptree.dump_tree(built(SIMPLE).devices, "-t", "extent").items
           if it["type"] == "BLOCK_GROUP_ITEM" and it["fields"]["flags"] & 4]
    d = dumptree.dump_tree(built(SIMPLE).devices, "-t", "free-space")
    ext = max((it["key"] for it in d.items if it["type"] == "FREE_SPACE_EXTENT"
               and any(b[0] <= it["key"][0] < b[0] + b[2] for b in bgs)), key=lambda k: k[2])
    devs = damaged(tmp_path, ("-t", "free-space", "-k", key_arg(ext), "-d"))
    expect_found(devs, "free-space-mismatch")
    expect_repaired_clean(devs)


RAID5_DATA = "raid5-3dev"


def test_free_space_tree_rebuild_raid5_super_rows(tmp_path):
    """A RAID5 data chunk holding a superblock copy: the kernel leaves the whole row of data
    stripes out of free space, btk only one stripe_len piece at a wrong address, so a
    rebuilt free-space tree was wrong to `btrfs check` (and btk's own check agreed with it)."""
    rebuild_passes_reference(tmp_path, RAID5_DATA, "--rebuild-free-space-tree")


def test_dev_item_missing_refuses_transactions_up_front(tmp_path):
    """With a dev item gone every transaction rolled back at commit (exit 12): now each class
    is refused before it starts, saying why, and the repair exits 4 with the damage reported."""
    needs(SIMPLE)
    bg = first_item(built(SIMPLE).devices, "extent", "BLOCK_GROUP_ITEM")
    devs = damaged(tmp_path, ("-t", "chunk", "-k", "1,DEV_ITEM,1", "-d"),
                   ("-t", "extent", "-k", key_arg(bg), "-f", "used", "-v", "+4096"))
    before = images_digest(devs)
    rc, objs, p = check(devs, "--repair", "--yes", "--no-undo")
    assert rc == 4, f"repair exit {rc}\n{p.stdout}{p.stderr}"
    assert "not repairing space-counters: a transaction is unsafe while problems like [dev-item-missing]" \
        in p.stderr, p.stderr
    assert images_digest(devs) == before


# checker gaps, round 2 (gaps2)

def entry_key(type_name: str, location_type: int) -> list[int]:
    return next(it["key"] for it in tree5_items(type_name)
                if it["fields"]["entries"][0]["location"][1] == location_type)


@pytest.mark.parametrize("type_name,location_type,field,value", [
    ("DIR_INDEX", 1, "location.offset", "+1"),                      # seeds 455, 476
    ("DIR_ITEM", 1, "location.offset", "0x9a"),                     # seeds 28, 10126
    ("DIR_INDEX", 132, "location.objectid", "0x2"),                 # a subvolume entry naming the extent tree
    ("XATTR_ITEM", 0, "location.objectid", "0x101"),                # an xattr's location is all zero
], ids=["index-offset", "item-offset", "subvol-objectid", "xattr"])
def test_dir_entry_location_key(tmp_path, type_name, location_type, field, value):
    """Dir entry location keys the kernel's tree checker refuses (EIO on the directory, or on
    the file for an xattr): an inode's has offset 0, a subvolume's names a subvolume tree,
    an xattr's is zero. btk-check said clean. (An inode number out of range names no inode:
    dir-entry-dangling, repaired by the names class, as before.)"""
    key = entry_key(type_name, location_type)
    devs = damaged(tmp_path, ("-t", "5", "-k", key_arg(key), "-f", field, "-v", value))
    expect_found(devs, "item-malformed")


def test_inode_item_key_offset(tmp_path):
    """An inode item keyed at offset 8 (seed 545): the kernel refuses the leaf."""
    devs = damaged(tmp_path, ("-t", "5", "-k", "257,INODE_ITEM,0", "-f", "key.offset", "-v", "^0x8"))
    expect_found(devs, "item-malformed")


def test_metadata_item_level(tmp_path):
    """A skinny metadata item whose key offset (the tree level) is 2^64-1 (seeds 390, 589):
    the kernel refuses the extent tree's leaf, `btrfs check` says bad backref level."""
    needs(SIMPLE)
    key = first_item(built(SIMPLE).devices, "extent", "METADATA_ITEM", last=True)
    devs = damaged(tmp_path, ("-t", "extent", "-k", key_arg(key), "-f", "key.offset", "-v", "0xffffffffffffffff"))
    expect_found(devs, "item-malformed")


def test_dev_extent_chunk_tree(tmp_path):
    """A dev extent whose chunk_tree is not 3 (seed 430): the kernel refuses the dev tree's leaf
    and the mount."""
    needs(SIMPLE)
    key = first_item(built(SIMPLE).devices, "dev", "DEV_EXTENT", last=True)
    devs = damaged(tmp_path, ("-t", "dev", "-k", key_arg(key), "-f", "chunk_tree", "-v", "^0x8000000000"))
    expect_found(devs, "item-malformed")


def test_global_root_item_key_offset(tmp_path):
    """The csum tree's root item keyed at offset 2^64-1 (seed 292): the kernel finds the trees
    other than subvolumes at offset 0 only, `btrfs check` cannot open the filesystem."""
    devs = damaged(tmp_path, ("-t", "1", "-k", "7,ROOT_ITEM,0", "-f", "key.offset", "-v", "0xffffffffffffffff"))
    expect_found(devs, "root-item-bad")


def test_root_tree_file_extent_encryption(tmp_path):
    """A free-space cache inode's file extent (root tree) with an encryption byte (seed 437):
    the kernel refuses the root tree's leaf and the mount; btk looked at no file extent
    outside the subvolume trees."""
    from test_tune import get_fs
    fs = get_fs("tune-nofst-16k")
    key = first_item(fs.devices, "1", "EXTENT_DATA")
    devs = fs.copy_to(tmp_path / "devs")
    corrupt(devs, "-t", "1", "-k", key_arg(key), "-f", "encryption", "-v", "^0x80")
    expect_found(devs, "item-malformed")


def test_block_group_chunk_objectid(tmp_path):
    """A block group item whose chunk_objectid is not 256 (seed 20011): the kernel refuses the
    leaf and the mount; btk compared only the flags with the chunk."""
    needs(SIMPLE)
    key = first_item(built(SIMPLE).devices, "extent", "BLOCK_GROUP_ITEM")
    devs = damaged(tmp_path, ("-t", "extent", "-k", key_arg(key), "-f", "chunk_objectid", "-v", "^0x100000"))
    expect_found(devs, "item-malformed")


def test_file_extent_generation(tmp_path):
    """A file extent from a generation after the filesystem's (seed 20001): `btrfs check` says
    invalid generation; btk said clean."""
    key = tree5_items("EXTENT_DATA")[0]["key"]
    devs = damaged(tmp_path, ("-t", "5", "-k", key_arg(key), "-f", "generation", "-v", "0x573b9b63"))
    expect_found(devs, "file-extent-bad")


@pytest.mark.parametrize("field,value", [("sector_size", "0xbb0f"), ("stripe_len", "0x20000")])
def test_open_chunk_item_sector_size(tmp_path, field, value):
    """A chunk item whose sector_size is not the filesystem's, or whose stripe_len is a power
    of two other than 64KiB (seed 20403): the kernel refuses the chunk tree and the mount;
    btk took the chunk. Now it is left out of the chunk map and reported."""
    needs(SIMPLE)
    key = first_item(built(SIMPLE).devices, "chunk", "CHUNK_ITEM", last=True)
    devs = damaged(tmp_path, ("-t", "chunk", "-k", key_arg(key), "-f", field, "-v", value))
    _, found = expect_summary(devs, "item-malformed")
    assert any(field in pr["detail"] for pr in found), found


def test_dev_item_uuid(tmp_path):
    """The dev item's uuid changed (seed 20270): the kernel finds no dev item for the device
    ("devid 1 uuid ... is missing") and mounts nothing; btk said clean."""
    devs = damaged(tmp_path, ("-t", "chunk", "-k", "1,DEV_ITEM,1", "-f", "uuid", "-v", "^10"))
    expect_found(devs, "dev-item-missing")


def test_chunk_stripe_dev_uuid(tmp_path):
    """A chunk stripe's dev_uuid changed (seed 20323): to the kernel its device is missing;
    btk said clean after the repair of the other damage."""
    needs(SIMPLE)
    key = first_item(built(SIMPLE).devices, "chunk", "CHUNK_ITEM", last=True)
    devs = damaged(tmp_path, ("-t", "chunk", "-k", key_arg(key), "-f", "stripe0.dev_uuid", "-v", "^10"))
    _, found = expect_summary(devs, "item-malformed")
    assert any("uuid" in pr["detail"] for pr in found), found


@pytest.mark.parametrize("key", ["257,INODE_REF,256", "256,DIR_INDEX,2"], ids=["inode-ref", "dir-index"])
def test_name_with_slash(tmp_path, key):
    """A name byte flipped to '/' (seeds 20584, 20629, there in an extref): the names class
    wrote dir entries with the ref's name, and the kernel's readdir of the directory then
    failed (EIO); then the repair refused it (item-malformed). Now name-invalid: the damaged
    copy is removed and written again from the two good ones, and the kernel reads it all."""
    # the first byte of "small0" (the name of inode 257 in the top directory) becomes '/'
    devs = damaged(tmp_path, ("-t", "5", "-k", key, "-f", "name", "-v", "^5c"))
    expect_found(devs, "name-invalid")
    expect_repaired_clean(devs)
    assert "small0" in oracle.snapshot_hashes(devs)


def test_name_with_slash_in_every_copy_is_renamed(tmp_path):
    """The dir item, the dir index and the inode ref all say "/mall0": no good copy is left,
    so the name is cleaned ('/' -> '_') and written again in its place (same inode, same
    index), rather than removed (the file would have gone to lost+found)."""
    needs(SIMPLE)
    devs = built(SIMPLE).copy_to(tmp_path / "devs")
    before = oracle.snapshot_hashes(devs)
    item = next(it["key"] for it in tree5_items("DIR_ITEM")
                if it["key"][0] == 256 and it["fields"]["entries"][0]["name"] == "small0")
    for key in ("257,INODE_REF,256", "256,DIR_INDEX,2", key_arg(item)):
        corrupt(devs, "-t", "5", "-k", key, "-f", "name", "-v", "^5c")
    expect_found(devs, "name-invalid")
    expect_repaired_clean(devs)
    after = oracle.snapshot_hashes(devs)
    assert after.pop("_mall0") == before.pop("small0")
    assert after == before


def test_snapshot_root_item_deleted(tmp_path):
    """A snapshot's root item deleted, its root refs and dir entries left (seed 20467): the
    repair freed the snapshot's blocks and said clean, `btrfs check` found the entry's
    subvolume unresolved. Refs naming a subvolume with no root item are now reported, and the
    root-items class makes the root item again from the extent tree's root block of the snapshot."""
    devs = damaged(tmp_path, ("-t", "1", "-k", "257,ROOT_ITEM,12", "-d"))
    expect_found(devs, "root-dir-entry-dangling")
    # the snapshot's blocks and data now look unused: they stay allocated (extent-refs and the
    # extent-tree rebuild refuse), since a new root item could give the snapshot back
    _, objs, _ = check(devs)
    orphaned = {int(re.search(r"(?:tree block|extent) (\d+)", pr["detail"]).group(1))
                for pr in objs[0]["problems"] if pr["id"] in ("tree-block-leaked", "extent-ref-unused")}
    assert orphaned, objs[0]["problems"]
    rc, objs, p = check(devs, "--repair", "--yes", "--no-undo")
    assert rc == 1 and {a["class"] for a in objs[1]["repairs"]} == {"root-items"}, p.stdout
    assert orphaned <= extent_item_starts(devs), sorted(orphaned - extent_item_starts(devs))
    assert [it for it in dumptree.dump_tree(devs, "-t", "root").items
            if it["type"] == "ROOT_ITEM" and it["key"][0] == 257], "no root item for the snapshot"


def extent_item_starts(devs) -> set[int]:
    return {it["key"][0] for it in dumptree.dump_tree(devs, "-t", "extent").items
            if it["type"] in ("EXTENT_ITEM", "METADATA_ITEM")}


def test_inode_mode_unknown_bits(tmp_path):
    """A mode with bits above the file type (seed 21317): the kernel refuses the leaf, `btrfs
    check` says invalid mode bits, btk saw a valid directory. Now the inodes class rewrites
    the mode from its type and permissions."""
    devs = damaged(tmp_path, ("-t", "5", "-k", "256,INODE_ITEM,0", "-f", "mode", "-v", "^0xcd210000"))
    expect_found(devs, "inode-mode-invalid")
    expect_repaired_clean(devs)


def test_dev_item_fsid(tmp_path):
    """The dev item's fsid changed (seed 21008): the kernel takes the device for a seed device
    it cannot find and mounts nothing; btk said clean."""
    devs = damaged(tmp_path, ("-t", "chunk", "-k", "1,DEV_ITEM,1", "-f", "fsid", "-v", "^20"))
    expect_found(devs, "dev-item-missing")


def test_dev_item_total_bytes_beyond_device(tmp_path):
    """The dev item says one byte more than the device holds (seed 21316): the kernel mounts
    nothing; the repair made the superblock agree with it and said clean, then refused it
    (item-malformed) while still copying the size into the superblock. Now dev-total-bytes:
    space-counters sets the dev item to the device's size, the superblock to their sum."""
    devs = damaged(tmp_path, ("-t", "chunk", "-k", "1,DEV_ITEM,1", "-f", "total_bytes", "-v", "+1"))
    expect_found(devs, "dev-total-bytes")
    expect_repaired_clean(devs)
    assert oracle.snapshot_hashes(devs)


def test_file_size_near_two_to_the_64_without_no_holes(tmp_path):
    """An empty file whose size became 2^64-1, no-holes off (seed 21316): `btrfs check` says
    file extent discount; btk rounded the size up to a sector, got 0 and said clean."""
    needs(NO_HOLES_OFF)
    devs = built(NO_HOLES_OFF).copy_to(tmp_path / "devs")
    ino = next(it["key"][0] for it in dumptree.dump_tree(devs, "-t", "5").items
               if it["type"] == "INODE_ITEM" and it["fields"]["mode"] & 0o170000 == 0o100000
               and it["fields"]["size"] == 0)
    corrupt(devs, "-t", "5", "-k", f"{ino},INODE_ITEM,0", "-f", "size", "-v", "0xffffffffffffffff")
    expect_found(devs, "file-extent-hole")


def test_subvolume_root_block_extent_generation(tmp_path):
    """The extent item of subvolume 256's root block one generation ahead of the block (seed
    473): `btrfs check` calls the root item outdated, btk-check said clean."""
    needs(SIMPLE)
    src = built(SIMPLE).devices
    root = next(it for it in dumptree.dump_tree(src, "-t", "root").items
                if it["type"] == "ROOT_ITEM" and it["key"][0] == 256)
    key = next(it["key"] for it in dumptree.dump_tree(src, "-t", "extent").items
               if it["type"] in ("METADATA_ITEM", "EXTENT_ITEM") and it["key"][0] == root["fields"]["bytenr"])
    devs = damaged(tmp_path, ("-t", "extent", "-k", key_arg(key), "-f", "generation", "-v", "+1"))
    expect_found(devs, "extent-generation")


# the first chunk of the superblock's system chunk array: after its 17-byte key, at 0x32b
SYS_CHUNK = 0x32b + 17


@pytest.mark.parametrize("offset,found", [(SYS_CHUNK + 8, False), (0x32b + 1, False), (SYS_CHUNK + 48 + 24, True)],
                         ids=["owner", "key-objectid", "stripe-dev-uuid"])
def test_sys_chunk_array_fields_nobody_reads(tmp_path, offset, found):
    """The owner of the array's system chunk changed (seed 40082), or its key's objectid (seed
    40175): the kernel maps the array's chunk by the key's offset and never reads its owner,
    `btrfs check` says clean; btk compared the array with the chunk tree byte for byte, under
    the array's key. A stripe's device uuid still counts."""
    devs = damaged(tmp_path, ("-S", "-o", str(offset), "-B", "5a"))
    if found:
        expect_found(devs, "sys-chunk-not-in-tree")
    else:
        rc, objs, p = check(devs)
        assert rc == 0, f"exit {rc}, {problem_ids(objs[0])}"


# repair gaps, round 3 (rgaps)

def test_top_dir_mode_without_type(tmp_path):
    """A tree's top directory whose mode lost its type bits (seed 19: the data-reloc tree's,
    which has no entries): the inodes class found nothing telling its type and left it."""
    devs = damaged(tmp_path, ("-t", "18446744073709551607", "-k", "256,INODE_ITEM,0", "-f", "mode", "-v", "^0x1000"))
    expect_found(devs, "inode-mode-invalid")
    expect_repaired_clean(devs)


@pytest.mark.parametrize("copy,want", [("0", "super-copy-invalid"), ("1", "super-copy-stale")])
def test_stale_primary_superblock_naming_newer_roots(tmp_path, copy, want):
    """The primary superblock's generation one behind, its roots unchanged (seed 40178): the
    kernel reads only that copy and refuses the root tree of the next generation; btk warned of
    a stale copy and said clean. A stale later copy is still a warning."""
    devs = damaged(tmp_path, ("-S", "-s", copy, "-f", "generation", "-v", "-1"))
    rc, objs, p = check(devs)
    ids = set(problem_ids(objs[0]))
    assert want in ids and rc == (4 if copy == "0" else 0), f"exit {rc}, {ids}"
    if copy == "0":
        expect_repaired_clean(devs)


def test_dir_parent_missing_with_inode_generation(tmp_path):
    """A ref into a parent that is not there picks the inode-items class (it makes a missing
    top directory), which changes nothing here; it had read the inodes' notes to their end,
    so the inodes class after it found none and left the generation from the future (seed 510)."""
    ref = next(it for it in tree5_items("INODE_REF") if it["key"][2] != 256 and it["key"][0] > 300)
    devs = damaged(tmp_path, ("-t", "5", "-k", key_arg(ref["key"]), "-f", "key.offset", "-v", "0x7fffff00"),
                   ("-t", "5", "-k", "257,INODE_ITEM,0", "-f", "generation", "-v", "+1000"))
    assert {"dir-parent-missing", "inode-generation"} <= expect_found(devs, "dir-parent-missing")
    expect_repaired_clean(devs)


def test_parity_metadata_refuses_transactions_up_front(tmp_path):
    """A csum item deleted on a filesystem whose metadata is RAID6 (seed 10136): the csums
    class failed at its first tree block (no parity is written), exit 12. Now every
    transaction class is refused before it starts, saying why, and nothing is written."""
    needs(PARITY_META)
    devs = built(PARITY_META).copy_to(tmp_path / "devs")
    corrupt(devs, "-t", "csum", "-k", key_arg(first_item(devs, "csum", "EXTENT_CSUM")), "-d")
    expect_found(devs, "csum-missing")
    before = images_digest(devs)
    rc, objs, p = check(devs, "--repair", "--yes", "--no-undo")
    assert rc == 4, f"repair exit {rc}\n{p.stdout}{p.stderr}"
    assert "not repairing csums: the metadata is RAID6" in p.stderr, p.stderr
    assert images_digest(devs) == before


@pytest.mark.parametrize("recipe,flags", [(SKINNY_OFF, 2), (SIMPLE, 1)], ids=["tree-block-not-skinny", "data"])
def test_extent_item_flags_of_no_kind(tmp_path, recipe, flags):
    """An extent item whose flags say neither data nor tree block (seed 50: 0xf8 on a
    non-skinny tree block's item, whose tree block info then read as a bad inline
    reference): extent-refs called it unfixable and left it, and item-malformed kept the
    names class from running. Now the item is made again from its users."""
    needs(recipe)
    devs = built(recipe).copy_to(tmp_path / "devs")
    key = next(it["key"] for it in dumptree.dump_tree(devs, "-t", "extent").items
               if it["type"] == "EXTENT_ITEM" and it["fields"]["flags"] == flags
               and any(r.get("root") == 5 for r in it["fields"].get("inline_refs", [])))
    corrupt(devs, "-t", "extent", "-k", key_arg(key), "-f", "flags", "-v", "0xf8")
    expect_found(devs, "extent-type")
    expect_repaired_clean(devs)


@pytest.mark.parametrize("owner", ["2", "0x398c"], ids=["extent-tree", "no-such-tree"])
def test_subvolume_block_owner(tmp_path, owner):
    """A subvolume-tree block owned by the extent tree: the kernel refuses it (a subvolume's
    blocks belong to subvolume trees). Owned by a subvolume id no tree has, without full
    backrefs (seed 40249): `btrfs check` says owner ref check failed. btk said clean to both."""
    needs(SIMPLE)
    block = first_block_of_tree(built(SIMPLE).devices, 5)
    devs = damaged(tmp_path, ("-b", str(block), "-f", "header.owner", "-v", owner))
    expect_found(devs, "tree-block-owner")


def tree5_block(leaf: bool) -> int:
    """A leaf (or a node) of the recipe's tree 5."""
    needs(SIMPLE)
    return next(b["bytenr"] for b in dumptree.dump_tree(built(SIMPLE).devices, "-t", "5").blocks
                if (b["level"] == 0) == leaf)


@pytest.mark.parametrize("flag,want", [("0x2", "extent-type"), ("0x1", "tree-block-unreadable")],
                         ids=["reloc-set", "written-cleared"])
def test_leaf_header_flags(tmp_path, flag, want):
    """A subvolume leaf given the relocation header flag (seed 40393): relocation allocates its
    copies with full backrefs, `btrfs check` says bad full backref. A leaf without the WRITTEN
    flag (seed 40695): the kernel's tree checker refuses it (reading its files fails). btk said
    clean to both."""
    devs = damaged(tmp_path, ("-b", str(tree5_block(leaf=True)), "-f", "header.flags", "-v", "^" + flag))
    expect_found(devs, want)


def test_free_space_cache_inode_mode(tmp_path):
    """A v1 free-space cache inode of mode 0620 (seed 41182): the kernel makes them 0600 and
    `btrfs check` holds them to it; btk said clean."""
    src = get_fs("tune-nofst-16k")
    ino = next(it["key"][0] for it in dumptree.dump_tree(src.devices, "-t", "root").items
               if it["type"] == "INODE_ITEM" and it["key"][0] >= 256)
    devs = src.copy_to(tmp_path / "devs")
    corrupt(devs, "-t", "1", "-k", f"{ino},INODE_ITEM,0", "-f", "mode", "-v", "^0x10")
    expect_found(devs, "root-tree-inode-mode")
    # btrfs check --repair sets it to 0100600; so does the inodes class (fsck-tests 039)
    rc, objs, p = check(devs, "--repair", "--yes", "--no-undo")
    assert rc == 1, f"repair exit {rc}\n{p.stdout}{p.stderr}"
    rc, objs, p = check(devs)
    assert rc == 0, problem_ids(objs[0])


def test_data_reloc_root_dirid(tmp_path):
    """The data relocation tree's root item names directory 255 (seed 40956): `btrfs check`
    finds no root directory; btk held only subvolumes to 256."""
    devs = damaged(tmp_path, ("-t", "1", "-k", "18446744073709551607,ROOT_ITEM,0",
                              "-f", "root_dirid", "-v", "-1"))
    expect_found(devs, "root-item-bad")


@pytest.mark.parametrize("field,value", [("name", "^08"), ("location.objectid", "+1"), ("type", "0")],
                         ids=["name-hash", "no-such-subvolume", "file-type"])
def test_root_tree_default_dir_item(tmp_path, field, value):
    """The root tree's "default" dir item renamed under its old key (seed 41125): the kernel's
    tree checker refuses the root tree's leaf. Naming no subvolume directory (a field sweep):
    the kernel finds no default subvolume to mount. It mounts nothing; btk said clean."""
    needs(SIMPLE)
    key = first_item(built(SIMPLE).devices, "root", "DIR_ITEM")
    devs = damaged(tmp_path, ("-t", "1", "-k", key_arg(key), "-f", field, "-v", value))
    expect_found(devs, "item-malformed")


def test_node_pointer_generation_zero(tmp_path):
    """A node pointer of generation 0 (seed 41566): the kernel then reads the child unchecked,
    `btrfs check` says wrong generation of child; btk skipped the check too and said clean.
    The tree-salvage class copies the child, which gives the pointer a generation."""
    devs = damaged(tmp_path, ("-b", str(tree5_block(leaf=False)), "-f", "ptr0.generation", "-v", "0"))
    expect_found(devs, "tree-block-transid")
    expect_repaired_clean(devs)


@pytest.mark.parametrize("field,value", [("flags", "-1"), ("flags", "^0x1"), ("key.objectid", "+1")],
                         ids=["unknown-flags", "bitmaps-flag", "key-off-by-one"])
def test_free_space_info_item(tmp_path, field, value):
    """A free-space info item's flags all set (seed 41796), or its bitmaps flag flipped over
    extent items: the kernel reads the group's items as the flag says (bitmaps as extents or
    the reverse). Keyed one byte into its group (seed 42455): the kernel finds no info for the
    group. `btrfs check` complains; btk said clean. The free-space tree is rebuilt."""
    needs(SIMPLE)
    src = built(SIMPLE).devices
    # (mkfs leaves info items of its temporary block groups, which no longer exist)
    groups = {it["key"][0] for it in dumptree.dump_tree(src, "-t", "extent").items if it["type"] == "BLOCK_GROUP_ITEM"}
    key = next(it["key"] for it in dumptree.dump_tree(src, "-t", "free-space").items
               if it["type"] == "FREE_SPACE_INFO" and it["key"][0] in groups)
    devs = damaged(tmp_path, ("-t", "free-space", "-k", key_arg(key), "-f", field, "-v", value))
    expect_found(devs, "free-space-mismatch")
    expect_repaired_clean(devs)


@pytest.mark.parametrize("field,value,want", [("flags", "^0x100", "super-field-bad"),
                                              ("stripesize", "0", "super-field-bad"),
                                              ("incompat_flags", "^0x100", "item-malformed")],
                         ids=["unknown-flag", "stripesize-0", "skinny-feature-off"])
def test_superblock_fields_the_kernel_refuses(tmp_path, field, value, want):
    """Superblock damage in every copy after which the kernel mounts nothing (a sweep of the
    superblock's fields): a flag it does not know, a stripesize other than the sectorsize, the
    skinny-metadata feature cleared under skinny extent items. btk said clean to each."""
    devs = damaged(tmp_path, ("-S", "-f", field, "-v", value))
    expect_found(devs, want)


def test_skinny_metadata_item_level(tmp_path):
    """A skinny metadata item keyed one level above its block (a field sweep): the kernel finds
    the item by block level and then no references, `btrfs check` complains; btk said clean."""
    needs(SIMPLE)
    key = first_item(built(SIMPLE).devices, "extent", "METADATA_ITEM")
    devs = damaged(tmp_path, ("-t", "extent", "-k", key_arg(key), "-f", "key.offset", "-v", "+1"))
    expect_found(devs, "extent-level")


def test_file_extent_ram_bytes_unaligned(tmp_path):
    """A regular file extent whose ram_bytes is not sector aligned (seed 43816): the kernel's
    tree checker refuses the leaf (reading the file fails); btk checked the other lengths."""
    needs(SIMPLE)
    key = next(it["key"] for it in dumptree.dump_tree(built(SIMPLE).devices, "-t", "5").items
               if it["type"] == "EXTENT_DATA" and it["fields"].get("type") == 1)
    devs = damaged(tmp_path, ("-t", "5", "-k", key_arg(key), "-f", "ram_bytes", "-v", "+183"))
    expect_found(devs, "file-extent-bad")
