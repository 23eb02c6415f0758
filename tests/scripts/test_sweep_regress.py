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
from conftest import built
from test_repair import (baseline, check, content_digest, corrupt, first_item, key_arg,
                         problem_ids)
from test_tune import needs, SIMPLE


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
