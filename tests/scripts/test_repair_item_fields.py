# SPDX-License-Identifier: GPL-2.0-only
"""The item-fields repair class: fields whose only valid value the format fixes, which the
kernel's tree checker refuses a leaf for and btrfs check 7.3 does not look at (found by a
random field-damage campaign against 7.3): an inode item keyed at an offset other than 0, the
location key of a dir item, dir index or xattr, a dev extent's chunk tree or chunk objectid, a
block group's chunk objectid, a root item keyed at offset -1. Each variant: btk-check reports item-malformed; --repair mends it
(and only it); btk-check and the reference check are then clean; the kernel reads every file as
before; the undo file gives the damaged bytes back."""
from __future__ import annotations

import json
import subprocess

import pytest

from conftest import require_btk, run_btk, image_digest
from test_repair import baseline, check, corrupt, key_arg, problem_ids
from test_tune import check_devices, kernel_fs, kernel_verify, needs, original_hashes, SIMPLE, MIXED


def records(devs) -> list[dict]:
    p = run_btk("btk-inspect", "tree", "--format", "jsonl", *devs)
    assert p.returncode == 0, p.stderr
    return [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]


def pick(recs, tree, type_, want=lambda r: True):
    """The first item of that type (None: any) in that tree (None: any) that `want` accepts."""
    for r in recs:
        if (type_ is None or r.get("type") == type_) and (tree is None or r["tree"] == tree) and want(r):
            return r
    raise AssertionError(f"no {type_} item in tree {tree}")


def left_after(objs, base_ids) -> list[str]:
    """What the repair left, less the quota warning: a repair that rewrites shared blocks or
    extent items leaves the quota numbers to a rescan (and says so)."""
    return [i for i in problem_ids(objs[-1]) if i != "qgroup-inconsistent" or i in base_ids]


def file_inode(recs):
    # a regular file's inode item in the top subvolume, past the first few (not the root dir)
    return pick(recs, 5, "INODE_ITEM", lambda r: r["key"][0] > 260 and r["fields"]["mode"] & 0o170000 == 0o100000)


def entry_naming_inode(recs, type_):
    return pick(recs, 5, type_, lambda r: r["fields"]["entries"][0]["location"][1] == 1)


# (id, the edits for btk-corrupt: (tree, record chooser, field, value))
VARIANTS = {
    "inode-key-offset-1": (lambda recs: file_inode(recs), "key.offset", "1"),
    "inode-key-offset-big": (lambda recs: file_inode(recs), "key.offset", "0x10000"),
    "dir-item-location-offset": (lambda recs: entry_naming_inode(recs, "DIR_ITEM"), "location.offset", "7"),
    "dir-index-location-offset": (lambda recs: entry_naming_inode(recs, "DIR_INDEX"), "location.offset", "-1"),
    "xattr-location": (lambda recs: pick(recs, 5, "XATTR_ITEM"), "location.objectid", "257"),
    "dev-extent-chunk-tree": (lambda recs: pick(recs, 4, "DEV_EXTENT"), "chunk_tree", "-1"),
    "dev-extent-chunk-objectid": (lambda recs: pick(recs, 4, "DEV_EXTENT"), "chunk_objectid", "+1"),
    "block-group-chunk-objectid": (lambda recs: pick(recs, None, "BLOCK_GROUP_ITEM"), "chunk_objectid", "0"),
    # the kernel's search for a tree's root item would find these exactly (btrfs check 7.3 aborts)
    "root-key-offset-data-reloc": (lambda recs: pick(recs, 1, "ROOT_ITEM", lambda r: r["key"][0] == 2**64 - 9),
                                   "key.offset", "0xffffffffffffffff"),
    "root-key-offset-subvolume": (lambda recs: pick(recs, 1, "ROOT_ITEM", lambda r: r["key"][0] >= 256),
                                  "key.offset", "0xffffffffffffffff"),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_item_fields_mended(variant, tmp_path):
    require_btk("btk-check")
    name = needs(SIMPLE)
    devs = kernel_fs(name).copy_to(tmp_path)
    want = original_hashes(name)
    base_rc, base_ids, _ = baseline(name)
    choose, field, value = VARIANTS[variant]
    rec = choose(records(devs))
    corrupt(devs, "-t", str(rec["tree"]), "-k", key_arg(rec["key"]), "-f", field, "-v", value)
    damaged = image_digest(devs[0])

    rc, objs, p = check(devs)
    assert rc == 4 and "item-malformed" in problem_ids(objs[0]), p.stdout

    undo = tmp_path / "u.undo"
    rc, objs, p = check(devs, "--repair", "--yes", "--undo-file", undo)
    assert rc == (1 if base_rc == 0 else 4), f"{p.stdout}\n{p.stderr}"
    assert "item-fields" in {a["class"] for a in objs[1]["repairs"]}, objs[1]
    assert problem_ids(objs[-1]) == list(base_ids), p.stdout
    check_devices(devs)
    rolled = tmp_path / "rolled-back.img"
    subprocess.run(["cp", "--sparse=always", devs[0], rolled], check=True)
    p = run_btk("btk-undo", undo, rolled)
    assert p.returncode == 0, p.stderr
    assert image_digest(rolled) == damaged, "undo did not give the damaged image back"
    kernel_verify(devs, want, write=False)


def test_item_fields_in_a_shared_leaf(tmp_path):
    """An inode item of a leaf the top subvolume shares with its snapshot, keyed wrong: both
    trees see it and each gets its own mended copy (mixed block groups, 4K nodes)."""
    require_btk("btk-check")
    name = needs(MIXED)
    devs = kernel_fs(name).copy_to(tmp_path)
    want = original_hashes(name)
    base_rc, base_ids, _ = baseline(name)
    recs = records(devs)
    snap = [r for r in recs if r.get("type") == "ROOT_REF" and r["key"][0] == 5]
    shared = None
    for r in recs:
        if r.get("type") == "INODE_ITEM" and r["tree"] == 5 and r["key"][0] > 256:
            twins = [s for s in recs if s.get("type") == "INODE_ITEM" and s["tree"] != 5 and
                     s["key"] == r["key"] and s.get("block") == r.get("block")]
            if twins:
                shared = r
                break
    if shared is None:
        pytest.skip(f"no inode item in a leaf shared with a snapshot ({len(snap)} snapshots)")
    corrupt(devs, "-t", "5", "-k", key_arg(shared["key"]), "-f", "key.offset", "-v", "+3")
    rc, objs, p = check(devs, "--repair", "--yes", "--no-undo")
    assert rc == (1 if base_rc == 0 else 4), f"{p.stdout}\n{p.stderr}"
    assert "item-fields" in {a["class"] for a in objs[1]["repairs"]}, objs[1]
    # the key change also broke the parent's key for the leaf: the salvage rewrites it
    assert left_after(objs, base_ids) == list(base_ids), p.stdout
    check_devices(devs)
    kernel_verify(devs, want, write=False)


@pytest.mark.parametrize("recipe", ["SIMPLE", "SKINNY_OFF", "MIXED"])
def test_tree_block_flagged_data(recipe, tmp_path):
    """A tree block's extent item flagged data (the tree checker refuses the leaf; 7.3 sees
    nothing): the item's key (a metadata item) or its chunk (metadata only) says tree block, so
    extent-refs makes the item again from its users. Before, extent-refs left it ("nothing to
    change") on mixed block groups and without skinny metadata."""
    require_btk("btk-check")
    import test_tune
    name = needs(getattr(test_tune, recipe))
    devs = kernel_fs(name).copy_to(tmp_path)
    want = original_hashes(name)
    base_rc, base_ids, _ = baseline(name)
    rec = pick(records(devs), 2, None, lambda r: r.get("type") in ("METADATA_ITEM", "EXTENT_ITEM") and
               r["fields"].get("flags") == 2)
    corrupt(devs, "-t", "extent", "-k", key_arg(rec["key"]), "-f", "flags", "-v", "1")
    rc, objs, p = check(devs, "--repair", "--yes", "--no-undo")
    assert rc == (1 if base_rc == 0 else 4), f"{p.stdout}\n{p.stderr}"
    assert "extent-refs" in {a["class"] for a in objs[1]["repairs"]}, objs[1]
    assert left_after(objs, base_ids) == list(base_ids), p.stdout
    check_devices(devs)
    kernel_verify(devs, want, write=False)


def super_generation(dev) -> int:
    p = subprocess.run(["btrfs", "inspect-internal", "dump-super", str(dev)], capture_output=True, text=True,
                       check=True)
    return next(int(l.split()[1]) for l in p.stdout.splitlines() if l.startswith("generation"))


# (what, record chooser, field): generations the kernel's tree checker and btrfs check allow up to
# the superblock's + 1 (the transaction that was running)
GENERATIONS = {
    "inode-transid": (lambda recs: file_inode(recs), "transid"),
    "file-extent": (lambda recs: pick(recs, 5, "EXTENT_DATA"), "generation"),
    "extent-item": (lambda recs: pick(recs, 2, None, lambda r: r.get("type") in ("EXTENT_ITEM", "METADATA_ITEM")),
                    "generation"),
}
# (a root item's generation is its root block's: one past the superblock's disagrees with the block)


@pytest.mark.parametrize("what", list(GENERATIONS))
def test_generation_of_the_running_transaction(what, tmp_path):
    """One past the superblock's generation is what the kernel and btrfs check accept (btk-check
    called it an error); two past is an error for all three."""
    require_btk("btk-check")
    name = needs(SIMPLE)
    devs = kernel_fs(name).copy_to(tmp_path)
    base_rc, base_ids, _ = baseline(name)
    choose, field = GENERATIONS[what]
    rec = choose(records(devs))
    gen = super_generation(devs[0])
    corrupt(devs, "-t", str(rec["tree"]), "-k", key_arg(rec["key"]), "-f", field, "-v", str(gen + 1))
    rc, objs, p = check(devs)
    assert rc == base_rc and problem_ids(objs[0]) == list(base_ids), p.stdout
    corrupt(devs, "-t", str(rec["tree"]), "-k", key_arg(rec["key"]), "-f", field, "-v", str(gen + 2))
    rc, objs, p = check(devs)
    assert rc == 4, p.stdout
