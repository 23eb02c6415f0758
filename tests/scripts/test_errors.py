# SPDX-License-Identifier: GPL-2.0-only
"""Bad input: btk-inspect must fail clearly or carry on with a warning, and never crash.

Every case runs on a copy of a cached image (tmp_path); run_btk() already fails the
test on a signal, exit 134/139 or a sanitizer report.
"""
import json
import os
import re

import pytest

import dumptree
from compare import item_id, split_records
from conftest import assert_clean_error, built, dump_of, parse_jsonl, require_kernel, run_btk, super_json
from fsbuild import attached, mounted

SUPER0 = 64 << 10


def flip(path, offset, length=1, mask=0xFF):
    with open(path, "r+b") as f:
        f.seek(offset)
        data = bytearray(f.read(length))
        f.seek(offset)
        f.write(bytes(b ^ mask for b in data))


def assert_worked_around(p):
    """Damage btk-inspect read around: complete output, exit 2, the damage named as a warning."""
    assert p.returncode == 2, f"expected exit 2 (damage worked around), got {p.returncode}:\n{p.stderr}"
    assert "btk-inspect: warning:" in p.stderr, p.stderr


def names_offset(text: str, *offsets: int) -> bool:
    return any(re.search(rf"\b({o}|{o:#x})\b", text, re.I) for o in offsets)


# ---------------------------------------------------------------- superblocks

def test_corrupt_primary_super(tmp_path):
    fs = built("mkfs-single")
    (dev,) = fs.copy_to(tmp_path)
    flip(dev, SUPER0 + 0x100, 8)
    p = run_btk("btk-inspect", "super", "--format", "json", dev)
    # carried on with a backup copy: say which copy was bad, show the good one
    assert_worked_around(p)
    assert re.search(r"65536|0x10000|copy 0|mirror 0|primary|#0|super(block)? 0", p.stderr, re.I), p.stderr
    (ref,) = dumptree.dump_super(dev, "-s", 1)
    got = super_json(p.stdout)
    assert got["bytenr"] == 64 << 20 and got["generation"] == ref["generation"]


def test_corrupt_primary_super_all_copies(tmp_path):
    fs = built("mkfs-single")
    (dev,) = fs.copy_to(tmp_path)
    flip(dev, SUPER0 + 0x100, 8)
    p = run_btk("btk-inspect", "super", "--all-copies", "--format", "json", dev)
    assert p.returncode == 0, p.stderr
    copies = {c["mirror"]: c for c in super_json(p.stdout)}
    assert copies[0]["valid"] is False and copies[1]["valid"] is True


def test_tree_reads_through_backup_super(tmp_path):
    fs = built("mkfs-single")
    (dev,) = fs.copy_to(tmp_path)
    flip(dev, SUPER0 + 0x100, 8)
    p = run_btk("btk-inspect", "tree", "--format", "jsonl", dev)
    assert_worked_around(p)
    items, _, _ = split_records(parse_jsonl(p.stdout))
    assert {item_id(i) for i in items} == {item_id(i) for i in dump_of(fs.name).items}


# ---------------------------------------------------------------- tree blocks

def fs_leaf_copies(name):
    """A leaf of the fs tree and the (devid, physical) of each of its copies."""
    dump = dump_of(name)
    leaf = [b for b in dump.blocks if b["tree"] == 5 and b["level"] == 0][-1]
    return dump, leaf["bytenr"], dump.mirrors(leaf["bytenr"])


# mkfs-only filesystems need no kernel; the populated one has a deeper fs tree
DUP_RECIPES = ["mkfs-single", "s16k-crc32c-zstd"]
RAID1_RECIPES = ["mkfs-2dev-xxhash", "raid1-2dev"]


@pytest.mark.parametrize("name", DUP_RECIPES)
def test_bad_mirror_is_reported_and_the_good_one_used(name, tmp_path):
    fs = built(name)
    dump, bytenr, copies = fs_leaf_copies(fs.name)
    assert len(copies) == 2
    (dev,) = fs.copy_to(tmp_path)
    nodesize = dumptree.dump_super(dev)[0]["nodesize"]
    flip(dev, copies[0][1] + nodesize // 2)
    p = run_btk("btk-inspect", "tree", "--format", "jsonl", dev)
    assert_worked_around(p)  # one good copy is enough for complete output
    items, ptrs, _ = split_records(parse_jsonl(p.stdout))
    assert {item_id(i): (i["key"], i["type"], i["size"]) for i in items} == \
           {item_id(i): (i["key"], i["type"], i["size"]) for i in dump.items}
    assert len(ptrs) == len(dump.ptrs)
    assert names_offset(p.stderr, bytenr, copies[0][1]), f"stderr should name the bad copy of {bytenr}:\n{p.stderr}"


@pytest.mark.parametrize("name", DUP_RECIPES)
def test_both_mirrors_bad(name, tmp_path):
    fs = built(name)
    dump, bytenr, copies = fs_leaf_copies(fs.name)
    (dev,) = fs.copy_to(tmp_path)
    nodesize = dumptree.dump_super(dev)[0]["nodesize"]
    for _, phys in copies:
        flip(dev, phys + nodesize // 2)
    p = run_btk("btk-inspect", "tree", "--format", "jsonl", dev)
    assert_clean_error(p)
    assert names_offset(p.stderr, bytenr), p.stderr


@pytest.mark.parametrize("name", RAID1_RECIPES)
def test_missing_device_named(name, tmp_path):
    fs = built(name)
    dump = dump_of(fs.name)
    dev2 = next(it["fields"] for it in dump.items if it["type"] == "DEV_ITEM" and it["fields"]["devid"] == 2)
    p = run_btk("btk-inspect", "tree", "--format", "jsonl", fs.devices[0])
    assert dev2["uuid"] in p.stderr.lower(), f"stderr should name the missing device's uuid:\n{p.stderr}"
    assert re.search(r"(devid|device)\W{0,3}2\b", p.stderr, re.I), p.stderr
    if p.returncode != 1:        # RAID1 reads fine from one device
        assert_worked_around(p)
        items, _, _ = split_records(parse_jsonl(p.stdout))
        assert len(items) == len(dump.items)
    else:
        assert_clean_error(p)


def test_truncated_image_metadata_intact(tmp_path):
    """Cut to 50 MiB: the first copy of every tree block is still there (mkfs puts metadata
    at 38 MiB). Reading on is fine if the user is told; failing is fine too."""
    fs = built("mkfs-single")
    (dev,) = fs.copy_to(tmp_path)
    os.truncate(dev, 50 << 20)
    p = run_btk("btk-inspect", "tree", "--format", "jsonl", dev)
    if p.returncode == 1:
        assert_clean_error(p)
        return
    assert_worked_around(p)
    assert re.search(r"smaller|truncat|short|size", p.stderr, re.I), \
        f"a device shorter than its dev_item says must be reported:\n{p.stderr}"
    items, _, _ = split_records(parse_jsonl(p.stdout))
    assert {item_id(i) for i in items} == {item_id(i) for i in dump_of(fs.name).items}


@pytest.mark.parametrize("cmd", [["tree"], ["usage"]])
def test_truncated_image_metadata_gone(cmd, tmp_path):
    """Cut to 36 MiB: the system chunk survives, every copy of the other tree blocks is gone."""
    fs = built("mkfs-single")
    (dev,) = fs.copy_to(tmp_path)
    os.truncate(dev, 36 << 20)
    p = run_btk("btk-inspect", *cmd, dev)
    assert_clean_error(p)


# ---------------------------------------------------------------- not btrfs at all

@pytest.fixture(params=["zeros", "random", "tiny"])
def not_btrfs(request, tmp_path):
    path = tmp_path / f"{request.param}.img"
    with open(path, "wb") as f:
        if request.param == "zeros":
            f.truncate(256 << 20)
        elif request.param == "random":
            f.write(os.urandom(2 << 20))
        else:
            f.write(b"btrfs?")
    return path


@pytest.mark.parametrize("cmd", [["super"], ["super", "--format", "json"], ["tree"], ["map"], ["usage"]])
def test_not_btrfs(cmd, not_btrfs):
    p = run_btk("btk-inspect", *cmd, not_btrfs)
    too_small = r"|beyond the end|too small|smaller" if not_btrfs.name == "tiny.img" else ""
    assert_clean_error(p, r"not a btrfs filesystem" + too_small)


def test_not_btrfs_all_copies(not_btrfs):
    """Listing every copy may succeed, but only by showing each copy that fits as invalid."""
    p = run_btk("btk-inspect", "super", "--all-copies", "--format", "json", not_btrfs)
    if p.returncode != 0:
        assert_clean_error(p)
        return
    copies = super_json(p.stdout)
    assert copies, "exit 0 with no superblock copy shown: nothing says this is not btrfs"
    assert all(c["valid"] is False for c in copies), copies


def test_missing_file(tmp_path):
    p = run_btk("btk-inspect", "tree", tmp_path / "nonexistent.img")
    assert_clean_error(p, r"nonexistent\.img")


def test_usage_errors():
    for args in (["no-such-command"], ["tree", "--no-such-option"], ["tree"], ["map", "--logical", "xyz", "x"]):
        p = run_btk("btk-inspect", *args)
        assert p.returncode != 0, args
        assert p.stderr.strip(), args


def test_logical_outside_every_chunk():
    fs = built("mkfs-single")
    p = run_btk("btk-inspect", "map", "--logical", 1 << 50, *fs.devices)
    assert_clean_error(p)


# ---------------------------------------------------------------- mounted

def test_mounted_device_refused(tmp_path):
    require_kernel()
    fs = built("mkfs-single")
    (dev,) = fs.copy_to(tmp_path)
    with attached([dev]) as loops, mounted(loops) as mnt:
        for cmd in (["tree"], ["usage"]):
            p = run_btk("btk-inspect", *cmd, loops[0])
            assert_clean_error(p, r"mounted")
            assert not p.stdout.strip()
        assert os.path.ismount(mnt)
