# SPDX-License-Identifier: GPL-2.0-only
"""Global trees whose root block no copy gives back, or whose root item is gone: the dev tree is
made again from the chunk map (dev-extents: a dev extent for every chunk stripe), the data
relocation tree again empty as mkfs makes it (data-reloc-tree), the quota tree as enabling quotas
makes it, marked for a rescan (qgroups). A root item keyed at objectid 0
gets back the objectid the owner of its root block names (tree-salvage): before, the salvage
dropped it or keyed it after a neighbour, and the tree was lost. btrfs-progs 7.3 --repair cannot
open the first and leaves the others unmountable or worse. Judged as every repair: btk-check and the reference btrfs check (7.3 where
installed) call the result clean, the kernel mounts it and every file reads back unchanged, and
btk-undo puts the damaged image back byte for byte.

Each case damages one block (or root item) of a cached filesystem, every copy: a stale checksum,
a header naming another bytenr, a header naming another fsid; single device with DUP metadata,
4K nodes, two devices with RAID1 metadata."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import dumptree
import fsbuild
from conftest import built, dump_of, images_digest, run_btk, sanitized_build, undone_digests
from test_repair import corrupt, corrupt_tool
from test_tune import kernel_verify, original_hashes, tree_hashes

PROGS_LATEST = Path("/opt/btrfs-progs-latest/bin/btrfs")
DEV_TREE, CSUM_TREE, QUOTA_TREE, DATA_RELOC = 4, 7, 8, (1 << 64) - 9
HEADER = {
    "csum": ("-f", "header.csum", "-v", "^ff", "--no-csum"),
    "bytenr": ("-f", "header.bytenr", "-v", "+65536"),
    "fsid": ("-f", "header.fsid", "-v", "^01"),
}


def root_item(name: str, tree: int) -> dict:
    return [it for it in dump_of(name).items_by_type("ROOT_ITEM") if it["tree"] == 1 and it["key"][0] == tree][0]


def damage_root_block(name: str, tree: int, how: str):
    return lambda devs: corrupt(devs, "--block", str(root_item(name, tree)["fields"]["bytenr"]), *HEADER[how])


def root_item_objectid_zero(name: str, tree: int):
    """The root item's key objectid set to 0 (fresh checksum): out of order, the salvage drops it."""
    key = root_item(name, tree)["key"]
    return lambda devs: corrupt(devs, "-t", "root", "-k", f"{key[0]},ROOT_ITEM,{key[2]}", "-f", "key.objectid",
                                "-v", "0")


# (case, filesystem, damage, the class that must repair it)
CASES = [
    ("dev-root-csum-dup", "s16k-crc32c-zstd", lambda: damage_root_block("s16k-crc32c-zstd", DEV_TREE, "csum"),
     "dev-extents"),
    ("dev-root-fsid-raid1", "raid1-2dev", lambda: damage_root_block("raid1-2dev", DEV_TREE, "fsid"), "dev-extents"),
    ("dev-root-bytenr-4k", "s4k-xxhash-holes-lzo",
     lambda: damage_root_block("s4k-xxhash-holes-lzo", DEV_TREE, "bytenr"), "dev-extents"),
    ("reloc-root-csum-raid1", "raid1-2dev", lambda: damage_root_block("raid1-2dev", DATA_RELOC, "csum"),
     "data-reloc-tree"),
    ("reloc-root-bytenr-dup", "s16k-crc32c-zstd",
     lambda: damage_root_block("s16k-crc32c-zstd", DATA_RELOC, "bytenr"), "data-reloc-tree"),
    # made again as quota enable makes it, marked for a rescan
    ("quota-root-csum-dup", "s16k-crc32c-zstd", lambda: damage_root_block("s16k-crc32c-zstd", QUOTA_TREE, "csum"),
     "qgroups"),
    ("quota-root-fsid-raid1", "raid1-2dev", lambda: damage_root_block("raid1-2dev", QUOTA_TREE, "fsid"), "qgroups"),
    # the salvage takes the objectid from the owner of the block the item points at
    ("reloc-item-objectid0-4k", "s4k-xxhash-holes-lzo",
     lambda: root_item_objectid_zero("s4k-xxhash-holes-lzo", DATA_RELOC), "tree-salvage"),
    ("csum-item-objectid0-dup", "s16k-crc32c-zstd", lambda: root_item_objectid_zero("s16k-crc32c-zstd", CSUM_TREE),
     "tree-salvage"),
    # the dev tree's root item follows the extent tree's, the first: not taken for a swap of the two
    ("dev-item-objectid0-dup", "s16k-crc32c-zstd", lambda: root_item_objectid_zero("s16k-crc32c-zstd", DEV_TREE),
     "tree-salvage"),
]
FAST = {"dev-root-csum-dup", "dev-root-fsid-raid1", "reloc-root-csum-raid1", "dev-item-objectid0-dup"}


def check_ids(devs) -> tuple[int, list[str]]:
    p = run_btk("btk-check", "--format", "json", *map(str, devs), timeout=600)
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    return p.returncode, sorted({x["id"] for x in doc["problems"]})


def progs_latest_check(devs) -> subprocess.CompletedProcess | None:
    """btrfs-progs 7.3's check of the (multi-device) filesystem, or None without it."""
    if not PROGS_LATEST.exists():
        return None
    with fsbuild.attached(devs) as loops:
        fsbuild.run(["btrfs", "device", "scan", *loops], check=False)
        return fsbuild.run([str(PROGS_LATEST), "check", "--readonly", loops[0]], check=False, timeout=600)


@pytest.mark.parametrize("case,name,make,cls", [
    pytest.param(*c, id=c[0], marks=() if c[0] in FAST else pytest.mark.extended) for c in CASES])
def test_global_root_remade(case, name, make, cls, tmp_path):
    corrupt_tool()
    want = original_hashes(name)
    devs = built(name).copy_to(tmp_path / "img")
    make()(devs)
    damaged = images_digest(devs)

    rc, ids = check_ids(devs)
    assert rc == 4 and ("tree-root-unreadable" in ids or "key-order" in ids), f"{case}: exit {rc}, ids {ids}"

    undo = tmp_path / "repair.undo"
    p = run_btk("btk-check", "--repair", "--yes", "--undo-file", str(undo), *map(str, devs), timeout=600)
    assert p.returncode == 1, f"{case}: repair exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-2000:]}"
    assert f"repair {cls}: " in p.stdout, p.stdout[-3000:]
    rc, ids = check_ids(devs)
    assert rc == 0 and set(ids) <= {"qgroup-inconsistent"}, f"{case}: not clean after the repair: {ids}"
    if not sanitized_build():
        q = progs_latest_check(devs)
        assert q is None or q.returncode == 0, f"btrfs-progs 7.3 check:\n{q.stdout[-3000:]}{q.stderr[-2000:]}"

    assert undone_digests(undo, devs, tmp_path) == damaged, "btk-undo did not restore the damaged image byte for byte"

    if not sanitized_build():   # btrfs check, mount, every file, scrub
        kernel_verify(devs, want, write=False)


def make_placeholder_fs(tmp_path: Path, nodesize: str, subdir: str) -> tuple[list[Path], dict]:
    """A small filesystem: subvolume sv holding files and the nested subvolume sv/SUBDIR/nested, a
    snapshot snap of sv written to after (so its leaves are its own, not sv's), and what every
    file of it reads as (the snapshot's placeholder for nested is an empty directory)."""
    img = tmp_path / "ph.img"
    with open(img, "wb") as f:
        f.truncate(256 << 20)
    fsbuild.mkfs([img], "-n", nodesize)
    with fsbuild.attached([img]) as loops, fsbuild.mounted(loops) as mnt:
        fsbuild.run(["btrfs", "subvolume", "create", mnt / "sv"])
        (mnt / "sv" / subdir).mkdir(parents=True, exist_ok=True)
        for i in range(8):
            (mnt / "sv" / f"f{i}").write_bytes(bytes([i]) * (1000 * i + 1))
        fsbuild.run(["btrfs", "subvolume", "create", mnt / "sv" / subdir / "nested"])
        (mnt / "sv" / subdir / "nested" / "inside").write_bytes(b"nested\n")
        fsbuild.run(["btrfs", "subvolume", "snapshot", mnt / "sv", mnt / "snap"])
        (mnt / "snap" / subdir / "written-after").write_bytes(b"cow the snapshot's leaf\n")
    with fsbuild.attached([img]) as loops, fsbuild.mounted(loops, ["ro"]) as mnt:
        want = tree_hashes(mnt)
    return [img], want


def placeholder_keys(devs, subdir: str) -> tuple[int, list[int]]:
    """The snapshot (the newest subvolume) and its placeholder's DIR_ITEM key [o, t, off]."""
    d = dumptree.dump_tree(devs)
    snap = max(it["key"][0] for it in d.items_by_type("ROOT_ITEM") if it["tree"] == 1 and 256 <= it["key"][0] < 1 << 48)
    items = [it for it in d.items_by_type("DIR_ITEM")
             if it["tree"] == snap and any(e.get("name") == "nested" for e in it["fields"]["entries"])]
    return snap, items[0]["key"]


@pytest.mark.parametrize("nodesize,subdir", [pytest.param("16k", ".", id="16k-top"),
                                             pytest.param("4k", "a/b", id="4k-subdir", marks=pytest.mark.slow)])
def test_placeholder_dir_item_remade(nodesize, subdir, tmp_path):
    """A snapshot keeps the entries of a subvolume nested in its source as an empty directory (no
    root ref). With the dir item of such a placeholder lost, the kernel lists the name (dir index)
    and fails to look it up; btrfs check 7.3 calls it clean and btk only saw the directory's size.
    btk-check --repair makes the dir item again from the index."""
    corrupt_tool()
    devs, want = make_placeholder_fs(tmp_path, nodesize, subdir)
    snap, key = placeholder_keys(devs, subdir)
    corrupt(devs, "-t", str(snap), "-k", f"{key[0]},DIR_ITEM,{key[2]}", "--delete")
    damaged = images_digest(devs)

    rc, ids = check_ids(devs)
    assert rc == 4 and "root-dir-entry-missing" in ids, ids
    undo = tmp_path / "repair.undo"
    p = run_btk("btk-check", "--repair", "--yes", "--undo-file", str(undo), *map(str, devs), timeout=600)
    assert p.returncode == 1, f"repair exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-2000:]}"
    assert "repair subvol-links: " in p.stdout and "placeholder" in p.stdout, p.stdout[-3000:]
    rc, ids = check_ids(devs)
    assert rc == 0 and set(ids) <= {"qgroup-inconsistent"}, ids
    assert undone_digests(undo, devs, tmp_path) == damaged, "btk-undo did not restore the damaged image byte for byte"
    if not sanitized_build():
        kernel_verify(devs, want, write=False)   # the lookup by name of snap/.../nested works again
