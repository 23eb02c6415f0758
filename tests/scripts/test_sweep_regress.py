"""Regressions from a damage campaign (random field edits, deletions and byte flips made with
btk-corrupt on the cached recipes, then btk-check, --repair, the reference `btrfs check` and a
kernel mount). Each case is damage the kernel's tree checker refuses (the leaf, hence the tree
or the mount) while btk-check said clean, or a repair that made it worse: the check must now
report it, and --repair must leave it reported rather than guess.
"""
from __future__ import annotations

from pathlib import Path

import pytest

import dumptree
import oracle
from conftest import built
from test_repair import (baseline, check, content_digest, corrupt, first_block_of_tree, first_item,
                         key_arg, problem_ids)
from test_tune import needs, NO_HOLES_OFF, SIMPLE


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
    result. Now the missing tree is reported and every repair refused: nothing is written."""
    devs = damaged(tmp_path, ("-t", "1", "-k", "7,ROOT_ITEM,0", "-d"))
    expect_found(devs, "tree-root-unreadable")
    before = content_digest(devs)
    rc, objs, p = check(devs, "--repair", "--yes", "--no-undo")
    assert rc == 4, f"repair exit {rc}\n{p.stdout}{p.stderr}"
    assert content_digest(devs) == before, "a repair wrote while a required tree has no root item"


def test_extent_item_generation(tmp_path):
    """An extent item from a generation after the filesystem's: the kernel refuses the extent
    tree's leaf; btk-check and `btrfs check` disagreed (btk said clean)."""
    needs(SIMPLE)
    key = first_item(built(SIMPLE).devices, "extent", "METADATA_ITEM")
    devs = damaged(tmp_path, ("-t", "extent", "-k", key_arg(key), "-f", "generation", "-v", "+1000"))
    expect_found(devs, "item-malformed")


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
    chunk map and reported, the rest is checked."""
    needs(SIMPLE)
    key = first_item(built(SIMPLE).devices, "chunk", "CHUNK_ITEM", last=True)
    devs = damaged(tmp_path, ("-t", "chunk", "-k", key_arg(key), "-f", "stripe_len", "-v", "^0x20"))
    _, found = expect_summary(devs, "item-malformed")
    assert any("stripe_len" in pr["detail"] for pr in found), found
    # with a chunk left out of the map, nothing may be written (trans_start refuses)
    before = content_digest(devs)
    rc, objs, p = check(devs, "--repair", "--yes", "--no-undo")
    assert rc in (4, 12) and content_digest(devs) == before, f"repair exit {rc}\n{p.stdout}{p.stderr}"


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
    before = content_digest(devs)
    rc, objs, p = check(devs, "--repair", "--yes", "--no-undo")
    assert rc == 4 and content_digest(devs) == before, f"repair exit {rc}\n{p.stdout}{p.stderr}"


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


def test_root_tree_inode_ref_layout(tmp_path):
    """The root tree's inode ref (the default subvolume's name) with name_len 0 leaves bytes
    that hold no whole ref: the kernel's tree checker refuses the root tree's leaf."""
    devs = damaged(tmp_path, ("-t", "1", "-k", "5,INODE_REF,6", "-f", "name_len", "-v", "0"))
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
    before = content_digest(devs)
    rc, objs, p = check(devs, "--repair", "--yes", "--no-undo")
    assert rc == 4, f"repair exit {rc}\n{p.stdout}{p.stderr}"
    assert "not repairing space-counters: a transaction is unsafe while problems like [dev-item-missing]" \
        in p.stderr, p.stderr
    assert content_digest(devs) == before
