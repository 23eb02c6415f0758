# SPDX-License-Identifier: GPL-2.0-only
"""btk-check on filesystems made by other producers than the kernel: btrfs-convert from ext4
(with its saved image, and with the image deleted), mkfs.btrfs --rootdir with compression,
subvolumes and inode flags, btrfstune's feature conversions. Each must be clean to btk-check
where btrfs check 7.3 (or the system's) calls it clean, and damage in these shapes must be
repaired to a state the reference, btk-check and the kernel accept, undoably."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import fsbuild
import oracle
from conftest import require_btk, require_kernel, require_reference_tools, run_btk
from test_repair import corrupt, corrupt_tool

LATEST = Path("/opt/btrfs-progs-latest/bin")
MiB = 1 << 20

# files of many kinds: inline, empty, sparse, hard links, xattrs and an ACL, symlinks (one
# long), a deep directory, a 255-byte name, a fifo and devices, files of several extents (one
# whose first extent's end was overwritten)
POPULATE = r'''
cd "$D"
echo inline > small; : > empty; head -c 3000 /dev/urandom > inl3k
truncate -s 8M sparse; dd if=/dev/urandom of=sparse bs=4k count=3 seek=100 conv=notrunc status=none
ln small hl; mkdir hd; ln small hd/hl2
setfattr -n user.a -v hello small; setfacl -m u:1000:rw inl3k 2>/dev/null || true
ln -s small sl; ln -s "$(printf 'p%.0s' $(seq 1000))" longsl
p=.; for i in $(seq 20); do p=$p/d$i; done; mkdir -p $p; echo deep > $p/f
echo long > "$(printf 'n%.0s' $(seq 255))"; mkfifo fifo; mknod cdev c 1 3
mkdir many; for i in $(seq 100); do echo $i > many/f$i; done
for i in 0 1 2 3; do dd if=/dev/urandom of=multi bs=64k count=1 seek=$i conv=notrunc,fsync status=none; sync -f .; done
dd if=/dev/urandom of=part bs=64k count=2 conv=fsync status=none; sync -f .
dd if=/dev/urandom of=part bs=64k count=1 seek=1 conv=notrunc,fsync status=none; sync -f .
'''


def progs(tool: str) -> str:
    """btrfs-progs 7.3 when installed beside the system's, else the system's."""
    return str(LATEST / tool) if (LATEST / tool).exists() else tool


def sh(script: str, **env):
    subprocess.run(["bash", "-ec", script], check=True, env={**os.environ, **env}, timeout=120,
                   capture_output=True)


def blank(img: Path, size: int = 256 * MiB) -> Path:
    with open(img, "wb") as f:
        f.truncate(size)
    return img


def need(tool: str):
    if not shutil.which(tool):
        pytest.skip(f"{tool} is not installed")


def convert_ext4(img: Path, *opts: str, delete_saved: str | None = None) -> Path:
    """ext4 filled by the kernel, converted by btrfs-convert; delete_saved: "now" deletes the
    saved image and unmounts at once (its cleanup interrupted), "sync" waits for the cleaner."""
    need("btrfs-convert")
    need("mkfs.ext4")
    blank(img)
    fsbuild.run(["mkfs.ext4", "-q", "-F", "-b", "4096", img])
    with fsbuild.attached([img]) as loops:
        mnt = Path(img).parent / "ext4mnt"
        mnt.mkdir(exist_ok=True)
        fsbuild.run(["mount", loops[0], mnt])
        try:
            sh(POPULATE, D=str(mnt))
        finally:
            fsbuild.run(["umount", mnt])
    fsbuild.run(["btrfs-convert", "--no-progress", *opts, img])
    if delete_saved:
        with fsbuild.attached([img]) as loops, fsbuild.mounted(loops) as mnt:
            fsbuild.run(["btrfs", "subvolume", "delete", mnt / "ext2_saved"])
            if delete_saved == "sync":
                fsbuild.run(["btrfs", "subvolume", "sync", mnt])
    return img


def rootdir(img: Path, tmp: Path, *opts: str) -> Path:
    src = tmp / "src"
    src.mkdir()
    sh(POPULATE, D=str(src))
    blank(img)
    fsbuild.run([progs("mkfs.btrfs"), "-q", "-f", "--rootdir", src, *opts, img])
    return img


def kernel_made(img: Path, *mkfs_opts: str, after=()) -> Path:
    require_kernel()
    blank(img)
    fsbuild.mkfs([img], "-q", "-f", *mkfs_opts, tool=progs("mkfs.btrfs"))
    with fsbuild.attached([img]) as loops, fsbuild.mounted(loops) as mnt:
        sh(POPULATE, D=str(mnt))
    for cmd in after:
        fsbuild.run([*cmd, img])
    return img


def reference_verdict(img: Path) -> int:
    with fsbuild.fsid_lock([img]):
        return fsbuild.run([progs("btrfs"), "check", "--readonly", img], check=False, timeout=300).returncode


def btk_problems(img: Path) -> tuple[int, list[str]]:
    p = run_btk("btk-check", "--format", "json", img)
    return p.returncode, sorted({x["id"] for x in json.loads(p.stdout)["problems"]})


SHAPES = {
    "convert-ext4": lambda img, tmp: convert_ext4(img),
    "convert-ext4-nodatasum-4k": lambda img, tmp: convert_ext4(img, "-d", "-N", "4k"),
    "convert-ext4-saved-deleted": lambda img, tmp: convert_ext4(img, delete_saved="now"),
    "rootdir-compress-subvol-flags": lambda img, tmp: rootdir(
        img, tmp, "--compress", "zstd", "--subvol", "rw:hd", "--subvol", "ro:many",
        "--inode-flags", "nodatacow:sparse", "-O", "^no-holes"),
    # mkfs.btrfs 7.3 gives the subvolumes it makes no qgroup (only 0/5): not damage
    "rootdir-quota-subvol": lambda img, tmp: rootdir(img, tmp, "-O", "quota", "--subvol", "rw:hd"),
    "rootdir-squota-subvol": lambda img, tmp: rootdir(img, tmp, "-O", "squota", "--subvol", "rw:many"),
    "btrfstune-extref-skinny-noholes-bgt": lambda img, tmp: kernel_made(
        img, "-O", "^extref,^skinny-metadata,^no-holes", "-n", "4k",
        after=((progs("btrfstune"), "-r", "-x", "-n"), (progs("btrfstune"), "--convert-to-block-group-tree"))),
}


@pytest.fixture
def producer_shape(request, tmp_path):
    require_btk("btk-check")
    require_reference_tools()
    if request.param.startswith("convert"):
        require_kernel()
    return request.param, SHAPES[request.param](tmp_path / "img", tmp_path)


@pytest.mark.parametrize("producer_shape", list(SHAPES), indirect=True)
def test_clean_producer_shape(producer_shape):
    """What the reference calls clean, btk-check calls clean (exit 0, no problem at all)."""
    name, img = producer_shape
    ref = reference_verdict(img)
    rc, ids = btk_problems(img)
    if ref != 0:
        pytest.skip(f"the reference flags {name} itself (exit {ref})")
    assert rc == 0 and not ids, f"{name}: btk-check exit {rc}, {ids}"


def extent_items(img: Path, tree: int = 5) -> list[dict]:
    p = run_btk("btk-inspect", "tree", "--format", "jsonl", "--tree", str(tree), img)
    return [r for r in map(json.loads, filter(str.strip, p.stdout.splitlines()))
            if r.get("type") == "EXTENT_DATA"]


def adjacent_regular_pair(img: Path) -> tuple[dict, dict]:
    """Two file extents of one inode, the first regular with data, the second right after it."""
    items = extent_items(img)
    for a, b in zip(items, items[1:]):
        fa = a["fields"]
        if (a["key"][0] == b["key"][0] and fa.get("type") == 1 and fa.get("disk_bytenr") and
                a["key"][2] + fa["num_bytes"] == b["key"][2] and fa["compression"] == 0 and
                fa["offset"] + fa["num_bytes"] + 4096 <= fa["disk_num_bytes"]):
            return a, b
    pytest.skip("no regular file extent with room in its extent and a next one")


def repaired_and_undone(img: Path, tmp: Path, hashes: dict[str, str], inspect=None) -> str:
    """btk-check --repair on a copy: the reference, btk-check and the kernel accept the result,
    every file reads back as before the damage, and btk-undo restores the damaged image."""
    fixed, undo = tmp / "fixed.img", tmp / "repair.undo"
    shutil.copy(img, fixed)
    p = run_btk("btk-check", "--repair", "--yes", "--undo-file", undo, fixed)
    assert p.returncode in (0, 1), f"repair exit {p.returncode}:\n{p.stdout}{p.stderr}"
    rc, ids = btk_problems(fixed)
    assert rc == 0 and not ids, f"after the repair btk-check finds {ids}"
    assert reference_verdict(fixed) == 0, "the reference fails the repaired filesystem"
    assert oracle.snapshot_hashes([fixed]) == hashes
    if inspect:
        inspect(fixed)
    p = run_btk("btk-undo", undo, fixed)
    assert p.returncode == 0, p.stderr
    assert fixed.read_bytes() == img.read_bytes(), "btk-undo did not restore the image"
    return p.stdout


@pytest.mark.parametrize("kind", ["convert", "kernel"])
def test_extent_length_into_next_is_trimmed(kind, tmp_path):
    """A file extent whose length was damaged to run into the next extent (both still where
    their references say): btrfs check 7.3 reports the overlap and cannot repair it; btk ends
    the extent where the next begins, and the file reads back as it was."""
    require_btk("btk-check")
    require_kernel()
    require_reference_tools()
    img = tmp_path / "img"
    if kind == "convert":
        convert_ext4(img)
        # the kernel writes into the middle of a converted extent (12 KiB, one ext4 write): the
        # part before the write keeps the rest of the extent
        with fsbuild.attached([img]) as loops, fsbuild.mounted(loops) as mnt:
            sh("dd if=/dev/urandom of=$F bs=4k count=1 seek=101 conv=notrunc,fsync status=none",
               F=str(mnt / "sparse"))
    else:
        kernel_made(img)
    hashes = oracle.snapshot_hashes([img])
    a, _ = adjacent_regular_pair(img)
    corrupt([img], "-t", "5", "-k", ",".join(map(str, a["key"])), "-f", "num_bytes", "-v", "+4096")
    rc, ids = btk_problems(img)
    assert rc == 4 and "file-extent-overlap" in ids, ids
    repaired_and_undone(img, tmp_path, hashes)


def test_overlap_from_a_moved_next_extent_is_not_trimmed(tmp_path):
    """The overlap's other cause: the next extent's key moved back. Its reference then names
    another place, so the first extent's length is right and stays as it is."""
    require_btk("btk-check")
    require_kernel()
    img = kernel_made(tmp_path / "img")
    a, b = adjacent_regular_pair(img)
    if b["fields"].get("type") != 1 or not b["fields"].get("disk_bytenr"):
        pytest.skip("the next extent has no data reference")
    corrupt([img], "-t", "5", "-k", ",".join(map(str, b["key"])), "-f", "key.offset", "-v", "-4096")
    fixed = tmp_path / "fixed.img"
    shutil.copy(img, fixed)
    p = run_btk("btk-check", "--repair", "--yes", "--no-undo", fixed)
    assert "where the next extent starts" not in p.stdout, p.stdout
    after = {tuple(r["key"]): r for r in extent_items(fixed)}
    assert after[tuple(a["key"])]["fields"]["num_bytes"] == a["fields"]["num_bytes"]


def test_zoned_emulated_has_no_fixed_super_copies(tmp_path):
    """mkfs.btrfs -O zoned on a regular file (emulated zones) keeps superblock copies in log
    zones: nothing at 64 MiB is no lost copy, and btk-check warns of none (the reference is
    silent too)."""
    require_btk("btk-check")
    require_reference_tools()
    img = blank(tmp_path / "zoned.img", 4 << 30)
    if fsbuild.run([progs("mkfs.btrfs"), "-q", "-f", "-O", "zoned", img], check=False).returncode:
        pytest.skip("this mkfs.btrfs makes no emulated zoned filesystem on a file")
    p = run_btk("btk-check", img)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "superblock copy" not in p.stderr, p.stderr
    assert reference_verdict(img) == 0


def test_repair_in_blocks_a_balance_relocated(tmp_path):
    """A balance leaves the RELOC header flag on the subvolume blocks it relocated (the
    kernel only reads it as "may be shared"). A repair must copy such blocks on write like any
    other: btk refused them as relocation-tree blocks and rolled the repair back."""
    require_btk("btk-check")
    require_kernel()
    require_reference_tools()
    img = blank(tmp_path / "img")
    fsbuild.mkfs([img], "-q", "-f", tool=progs("mkfs.btrfs"))
    with fsbuild.attached([img]) as loops, fsbuild.mounted(loops) as mnt:
        sh(POPULATE, D=str(mnt))
        fsbuild.run(["sync", "-f", mnt])
        fsbuild.run(["btrfs", "balance", "start", "-f", "-m", mnt], timeout=300)
    hashes = oracle.snapshot_hashes([img])
    p = run_btk("btk-inspect", "tree", "--format", "jsonl", "--tree", "5", img)
    inodes = [r for r in map(json.loads, filter(str.strip, p.stdout.splitlines()))
              if r.get("type") == "INODE_ITEM" and r["fields"]["mode"] & 0o170000 == 0o100000]
    relocated = [r for r in inodes if header_flags(img, r["block"]) & RELOC_FLAG]
    if not relocated:
        pytest.skip("the balance left no RELOC flag on a leaf with a file's inode")
    corrupt([img], "-t", "5", "-k", ",".join(map(str, relocated[0]["key"])), "-f", "nlink", "-v", "+1")
    rc, ids = btk_problems(img)
    assert rc == 4 and ids == ["inode-nlink"], ids
    repaired_and_undone(img, tmp_path, hashes)


RELOC_FLAG = 1 << 1


def header_flags(img: Path, block: int) -> int:
    p = fsbuild.run([corrupt_tool(), "-b", str(block), "-f", "header.flags", "-g", img])
    return int(p.stdout.split()[-1].strip("()"), 16)


def test_repair_in_a_snapshot_under_simple_quotas(tmp_path):
    """Simple quotas count a tree block toward the subvolume that allocated it. A repair in a
    snapshot copies a block it shares with its source: the copy is the snapshot's, the old
    block leaves the source's count. btk's repair left both numbers as they were (the check
    after it found qgroup-mismatch); it now sets them from a check after its classes."""
    img = simple_quota_fs(tmp_path, "sv")
    with fsbuild.attached([img]) as loops, fsbuild.mounted(loops) as mnt:
        fsbuild.run(["btrfs", "subvolume", "snapshot", mnt / "sv", mnt / "sn"])
    hashes = oracle.snapshot_hashes([img])
    corrupt([img], "-t", "257", "-k", "256,1,0", "-f", "size", "-v", "+2")   # the snapshot's top dir
    rc, ids = btk_problems(img)
    assert rc == 4 and ids == ["dir-isize"], ids
    repaired_and_undone(img, tmp_path, hashes)


def test_extent_refs_repaired_under_simple_quotas(tmp_path):
    """Extent references were never repaired with simple quotas on (exit 12, nothing done),
    where btrfs check 7.3 repairs them. A rewritten item keeps its owner reference first, and
    the quota numbers are set from a check after the repair."""
    img = simple_quota_fs(tmp_path)
    hashes = oracle.snapshot_hashes([img])
    owned = [r for r in tree_records(img, 2) if r.get("type") == "EXTENT_ITEM" and r["fields"]["flags"] & 1 and
             any(x["type"] == "EXTENT_OWNER_REF" for x in r["fields"].get("inline_refs", []))]
    if not owned:
        pytest.skip("no data extent with an owner reference")
    key = ",".join(map(str, owned[0]["key"]))
    corrupt([img], "-t", "2", "-k", key, "-f", "refs", "-v", "+1")
    rc, ids = btk_problems(img)
    assert rc == 4 and ids == ["extent-refs-total"], ids

    def owner_ref_kept(fixed: Path):
        item = next(r for r in tree_records(fixed, 2) if r["key"] == owned[0]["key"])
        assert item["fields"]["refs"] == owned[0]["fields"]["refs"]
        assert item["fields"]["inline_refs"][0]["type"] == "EXTENT_OWNER_REF", item
    repaired_and_undone(img, tmp_path, hashes, owner_ref_kept)


def tree_records(img: Path, tree: int) -> list[dict]:
    p = run_btk("btk-inspect", "tree", "--format", "jsonl", "--tree", str(tree), img)
    return [r for r in map(json.loads, filter(str.strip, p.stdout.splitlines())) if "key" in r]


def simple_quota_fs(tmp: Path, subvol: str | None = None) -> Path:
    """A kernel-filled filesystem with simple quotas from mkfs: the files in subvol (a new
    subvolume) or at the top."""
    require_btk("btk-check")
    require_kernel()
    require_reference_tools()
    img = blank(tmp / "img")
    if fsbuild.mkfs([img], "-q", "-f", "-O", "squota", tool=progs("mkfs.btrfs"), check=False).returncode:
        pytest.skip("mkfs.btrfs makes no simple-quota filesystem")
    with fsbuild.attached([img]) as loops, fsbuild.mounted(loops) as mnt:
        where = mnt
        if subvol:
            fsbuild.run(["btrfs", "subvolume", "create", mnt / subvol])
            where = mnt / subvol
        sh(POPULATE, D=str(where))
    return img
