# SPDX-License-Identifier: GPL-2.0-only
"""btk-image dump / restore / info, judged by btk-inspect, the reference `btrfs check` and the kernel.

Compatibility with btrfs-image (its dumps in, our --format btrfs-image out) and sanitizing
are in test_image_compat.py."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

import fsbuild
import oracle
from conftest import (assert_clean_error, btk_path, built, require_btk, require_kernel, run_btk, skip_or_fail, super_json,
                      SANITIZER_MARKERS)


def dump(devices, out, *opts):
    p = run_btk("btk-image", "dump", "-q", *opts, *devices, out)
    assert p.returncode == 0, p.stderr
    return out


def restore(image, outs, *opts):
    p = run_btk("btk-image", "restore", "-q", *opts, image, *outs)
    assert p.returncode == 0, p.stderr
    return outs


def tree_jsonl(devices) -> str:
    p = run_btk("btk-inspect", "tree", "--format", "jsonl", *devices)
    assert p.returncode == 0, p.stderr
    return p.stdout


def metadata_view(devices) -> dict[str, tuple]:
    """What find + stat show for every path (no file contents: a metadata image has none).
    Log trees are not replayed, on the source (a read-only cached image) as on the copy."""
    out = {}
    with fsbuild.attached(devices, readonly=True) as loops, \
            fsbuild.mounted(loops, ("ro", "rescue=nologreplay")) as mnt:
        for root, dirs, files in os.walk(mnt):
            for name in dirs + files:
                p = Path(root) / name
                st = os.lstat(p)
                link = os.readlink(p) if stat.S_ISLNK(st.st_mode) else None
                # inode 2: the kernel's stand-in for a subvolume a snapshot does not hold (times are "now")
                times = (st.st_mtime_ns, st.st_ctime_ns) if st.st_ino != 2 else None
                out[str(p.relative_to(mnt))] = (st.st_mode, st.st_size, st.st_nlink, st.st_uid, st.st_gid,
                                                times, st.st_ino, link)
    return out


def out_paths(tmp_path: Path, n: int) -> list[Path]:
    return [tmp_path / f"restored{i}.img" for i in range(n)]


def devid_of(dev) -> int:
    p = run_btk("btk-inspect", "super", "--format", "json", dev)
    assert p.returncode == 0, p.stderr
    return super_json(p.stdout)["dev_item"]["devid"]


def chunk_copies(chunk: dict, logical: int) -> list[tuple[int, int]]:
    """(devid, physical) of every data copy of logical in chunk, the way btrfs stripes it."""
    off, sl, st, prof = logical - chunk["logical"], chunk["stripe_len"], chunk["stripes"], chunk["profile"]
    nr, inside = divmod(off, sl)
    if prof == "RAID0":
        row, idx, n = nr // len(st), nr % len(st), 1
    elif prof == "RAID10":
        groups = len(st) // 2
        row, idx, n = nr // groups, (nr % groups) * 2, 2
    elif prof in ("RAID5", "RAID6"):
        data = len(st) - (1 if prof == "RAID5" else 2)
        row = nr // data
        idx, n = (row + nr % data) % len(st), 1
    else:
        return [(s["devid"], s["physical"] + off) for s in st]
    return [(st[idx + i]["devid"], st[idx + i]["physical"] + row * sl + inside) for i in range(n)]


def tree_block_addrs(devices) -> set[int]:
    """Logical address of every tree block btk-inspect sees: item and pointer lines, tree roots."""
    p = run_btk("btk-inspect", "super", "--format", "json", devices[0])
    sb = super_json(p.stdout)
    addrs = {a for a in (sb["root"], sb["chunk_root"], sb["log_root"]) if a}
    for line in tree_jsonl(devices).splitlines():
        d = json.loads(line)
        addrs.add(d["block"])
        if "blockptr" in d:
            addrs.add(d["blockptr"])
        elif d.get("type") == "ROOT_ITEM" and d["fields"].get("bytenr"):
            addrs.add(d["fields"]["bytenr"])
    return addrs


def assert_metadata_identical(src, outs):
    """Every copy of every tree block, at its physical place on every device, and every superblock
    copy are byte-identical between the source and the restored devices."""
    chunks = json.loads(run_btk("btk-inspect", "map", "--format", "json", *src).stdout)["chunks"]
    nodesize = super_json(run_btk("btk-inspect", "super", "--format", "json", src[0]).stdout)["nodesize"]
    by_devid = {devid_of(d): (d, o) for d, o in zip(src, outs)}
    files = {devid: (open(d, "rb"), open(o, "rb")) for devid, (d, o) in by_devid.items()}
    try:
        for devid, (a, b) in files.items():
            size = os.fstat(a.fileno()).st_size
            for off in (64 << 10, 64 << 20, 256 << 30):
                if off + 4096 <= size:
                    a.seek(off), b.seek(off)
                    assert a.read(4096) == b.read(4096), f"device {devid}: superblock at {off} differs"
        checked = 0
        for logical in sorted(tree_block_addrs(src)):
            chunk = next(c for c in chunks if c["logical"] <= logical < c["logical"] + c["length"])
            for devid, phys in chunk_copies(chunk, logical):
                a, b = files[devid]
                a.seek(phys), b.seek(phys)
                want = a.read(nodesize)
                assert int.from_bytes(want[48:56], "little") == logical, f"no tree block {logical} at {devid}:{phys}"
                assert b.read(nodesize) == want, f"tree block {logical} differs at device {devid} offset {phys}"
                checked += 1
        assert checked
    finally:
        for a, b in files.values():
            a.close(), b.close()


# --------------------------------------------------------------------------- round trips

ORIGINAL = ["s16k-crc32c-zstd", "s4k-xxhash-holes-lzo", "bgt-squota-xxhash", "raid10-4dev", "raid1c4-4dev-sha256"]
ORIGINAL_SLOW = ["s64k-sha256-zlib", "mixed-4k-blake2", "log-tree-16k", "raid1c3-3dev", "raid0-2dev-blake2",
                 "raid5-3dev", "raid6-4dev-64k", "raid1-2dev"]


def roundtrip_original(tmp_path, name, *dump_opts):
    require_kernel()
    src = built(name).devices
    img = dump(src, tmp_path / "fs.btkimg", *dump_opts)
    outs = restore(img, out_paths(tmp_path, len(src)))
    assert tree_jsonl(outs) == tree_jsonl(src), "btk-inspect tree differs after dump + restore"
    assert_metadata_identical(src, outs)
    oracle.reference_check(outs)
    assert metadata_view(outs) == metadata_view(src)


@pytest.mark.parametrize("name", ORIGINAL)
def test_roundtrip_original(tmp_path, name):
    roundtrip_original(tmp_path, name)


@pytest.mark.slow
@pytest.mark.parametrize("name", ORIGINAL_SLOW)
def test_roundtrip_original_more(tmp_path, name):
    roundtrip_original(tmp_path, name)


def unused_space(block: bytes) -> bytes:
    """A tree block's bytes that hold nothing: between a leaf's item headers and its lowest item
    data, after a node's last pointer."""
    n = int.from_bytes(block[0x60:0x64], "little")
    if block[0x64] == 0:
        start = 101 + 25 * n
        end = min([len(block)] + [101 + int.from_bytes(block[101 + 25 * i + 17:101 + 25 * i + 21], "little")
                                  for i in range(n)])
    else:
        start, end = 101 + 33 * n, len(block)
    return block[start:end]


def test_exact_and_zero_unused(tmp_path):
    """mkfs leaves stale bytes in free leaf space: a default dump keeps them (the restored metadata is
    byte-identical), --zero-unused wipes them and the trees and the reference check stay the same."""
    src = built("mkfs-single").devices
    outs = restore(dump(src, tmp_path / "exact.btkimg"), out_paths(tmp_path, 1))
    assert_metadata_identical(src, outs)
    zouts = restore(dump(src, tmp_path / "zero.btkimg", "--zero-unused"), [tmp_path / "zeroed.img"])
    assert tree_jsonl(zouts) == tree_jsonl(src)
    nodesize = super_json(run_btk("btk-inspect", "super", "--format", "json", src[0]).stdout)["nodesize"]
    chunks = json.loads(run_btk("btk-inspect", "map", "--format", "json", *src).stdout)["chunks"]
    stale = 0
    with open(src[0], "rb") as a, open(zouts[0], "rb") as b:
        for logical in tree_block_addrs(src):
            chunk = next(c for c in chunks if c["logical"] <= logical < c["logical"] + c["length"])
            for _, phys in chunk_copies(chunk, logical):
                a.seek(phys), b.seek(phys)
                stale += any(unused_space(a.read(nodesize)))
                assert not any(unused_space(b.read(nodesize))), f"block {logical}: unused space kept"
    assert stale, "the source has no stale bytes: this test proves nothing"
    oracle.reference_check(zouts)


@pytest.mark.parametrize("opts", [("--compress", "lz4", "-j", "1"), ("--compress", "none"),
                                  ("--walk-extent-tree", "-c", "9"), ("--frame-size", "64K", "-j", "3")],
                         ids=["lz4", "none", "extent-tree", "chained-frames"])
def test_roundtrip_variants(tmp_path, opts):
    """Other compressors, the extent-tree walk and small (chained) zstd frames give the same
    filesystem back."""
    src = built("s16k-crc32c-zstd").devices
    img = dump(src, tmp_path / "fs.btkimg", *opts)
    if "--frame-size" in opts:
        info = json.loads(run_btk("btk-image", "info", "--format", "json", img).stdout)
        assert info["frames"] > 3
    outs = restore(img, out_paths(tmp_path, 1))
    assert tree_jsonl(outs) == tree_jsonl(src)


@pytest.mark.parametrize("name", ["s16k-crc32c-zstd", "raid0-2dev-blake2"])
def test_data_roundtrip(tmp_path, name):
    """With --data every file reads back identical (compressed extents and RAID0 included)."""
    require_kernel()
    src = built(name).devices
    img = dump(src, tmp_path / "fs.btkimg", "--data")
    info = json.loads(run_btk("btk-image", "info", "--format", "json", img).stdout)
    assert info["data_included"] and info["data_bytes"] > 0
    outs = restore(img, out_paths(tmp_path, len(src)))
    oracle.reference_check(outs)
    with fsbuild.attached(outs, readonly=True) as loops, fsbuild.mounted(loops, ("ro",)) as mnt:
        got = oracle.file_hashes(mnt)
    assert got == oracle.snapshot_hashes(src)


@pytest.mark.parametrize("name,drop", [("raid5-3dev", 1), ("raid6-4dev-64k", 2)])
def test_raid56_parity(tmp_path, name, drop):
    """RAID5 data and RAID6 data + metadata restored with --data: the parity of every full stripe
    written is recomputed (P, and Q for RAID6), so the filesystem still reads back identical with
    as many devices missing as the profile tolerates (the kernel rebuilds their stripes from the
    parity; a scrub would not tell: it rewrites bad parity silently)."""
    require_kernel()
    src = built(name).devices
    outs = restore(dump(src, tmp_path / "fs.btkimg", "--data"), out_paths(tmp_path, len(src)))
    want = oracle.snapshot_hashes(src)
    for gone in range(len(outs) - drop + 1):
        left = outs[:gone] + outs[gone + drop:]
        with fsbuild.attached(left, readonly=True) as loops, \
                fsbuild.mounted(loops, ("ro", "degraded", "rescue=nologreplay")) as mnt:
            assert oracle.file_hashes(mnt) == want, f"devices {gone}..{gone + drop - 1} missing: files differ"
    oracle.reference_check(outs)

SINGLE = ["raid1-2dev", "raid10-4dev", "raid5-3dev"]
SINGLE_SLOW = ["raid1c3-3dev", "raid0-2dev-blake2", "raid6-4dev-64k", "s4k-xxhash-holes-lzo", "bgt-squota-xxhash"]


def roundtrip_single(tmp_path, name):
    require_kernel()
    src = built(name).devices
    img = dump(src, tmp_path / "fs.btkimg")
    outs = restore(img, [tmp_path / "single.img"], "--layout", "single")
    oracle.reference_check(outs)
    p = run_btk("btk-inspect", "super", "--format", "json", outs[0])
    assert p.returncode == 0, p.stderr
    assert super_json(p.stdout)["num_devices"] == 1
    assert metadata_view(outs) == metadata_view(src)


@pytest.mark.parametrize("name", SINGLE)
def test_restore_single(tmp_path, name):
    roundtrip_single(tmp_path, name)


@pytest.mark.slow
@pytest.mark.parametrize("name", SINGLE_SLOW)
def test_restore_single_more(tmp_path, name):
    roundtrip_single(tmp_path, name)


def test_pipe_both_ways(tmp_path):
    """dump to stdout | restore from stdin gives the same trees as the source."""
    require_btk("btk-image")
    src = built("raid1-2dev").devices
    outs = out_paths(tmp_path, 2)
    exe = str(btk_path("btk-image"))
    d = subprocess.Popen([exe, "dump", "-q", *map(str, src), "-"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    r = subprocess.run([exe, "restore", "-q", "-", *map(str, outs)], stdin=d.stdout, capture_output=True, text=True,
                       timeout=120)
    d.stdout.close()
    derr = d.stderr.read().decode()
    assert d.wait(timeout=60) == 0, derr
    assert r.returncode == 0, r.stderr
    for marker in SANITIZER_MARKERS:
        assert marker not in derr + r.stderr
    assert tree_jsonl(outs) == tree_jsonl(src)


def test_info(tmp_path):
    src = built("raid1c4-4dev-sha256").devices
    img = dump(src, tmp_path / "fs.btkimg", "--compress", "lz4")
    p = run_btk("btk-image", "info", "--format", "json", img)
    assert p.returncode == 0, p.stderr
    info = json.loads(p.stdout)
    assert info["format"] == "btk" and info["compression"] == "lz4" and info["csum_type"] == "sha256"
    assert info["num_devices"] == 4 and len(info["devices"]) == 4 and info["superblocks"] == 4
    assert info["sanitize"] == "none" and not info["data_included"]
    assert info["image_bytes"] == img.stat().st_size
    assert info["tree_blocks"] * info["nodesize"] == info["tree_bytes"] > 0
    text = run_btk("btk-image", "info", img)
    assert text.returncode == 0 and "tree blocks:" in text.stdout and "sha256" in text.stdout


# --------------------------------------------------------------------------- damaged images

@pytest.fixture(scope="module")
def small_image(tmp_path_factory) -> bytes:
    tmp = tmp_path_factory.mktemp("img")
    src = built("s16k-crc32c-zstd").devices
    return dump(src, tmp / "fs.btkimg").read_bytes()


def test_truncated_images(tmp_path, small_image):
    """Every cut gives a clean error naming an offset, for info and restore."""
    n = len(small_image)
    for cut in sorted({0, 7, 100, 150, 400, n // 3, n // 2, n - 20, n - 9, n - 1}):
        bad = tmp_path / f"cut{cut}.img"
        bad.write_bytes(small_image[:cut])
        p = run_btk("btk-image", "info", bad)
        assert p.returncode == 1, f"cut at {cut}: {p.stdout}{p.stderr}"
        assert_clean_error(p, r"offset \d+|neither")
        p = run_btk("btk-image", "restore", bad, tmp_path / "out.img")
        assert p.returncode == 1
        assert_clean_error(p, r"offset \d+|neither")


def test_bit_flipped_images(tmp_path, small_image):
    """A flipped bit anywhere is caught (header, frame or stream checksum), never a crash."""
    n = len(small_image)
    for pos in sorted({8, 12, 48, 60, 84, 130, 300, n // 2, n - 60, n - 30, n - 12, n - 3}):
        data = bytearray(small_image)
        data[pos] ^= 0x10
        bad = tmp_path / f"flip{pos}.img"
        bad.write_bytes(bytes(data))
        p = run_btk("btk-image", "info", bad)
        assert p.returncode == 1, f"flip at {pos} not detected: {p.stdout}"
        assert_clean_error(p, r"offset \d+")
    # restore too, on a flip inside the first frame
    data = bytearray(small_image)
    data[n // 2] ^= 1
    (tmp_path / "flip.img").write_bytes(bytes(data))
    p = run_btk("btk-image", "restore", tmp_path / "flip.img", tmp_path / "out.img")
    assert_clean_error(p, r"offset \d+")


def test_usage_errors(tmp_path):
    require_btk("btk-image")
    p = run_btk("btk-image", "dump", "--sanitize", "--data", "x", "y")
    assert_clean_error(p, "sanitize")
    p = run_btk("btk-image", "restore", "--layout", "sideways", "x", "y")
    assert p.returncode != 0
    src = built("raid1-2dev").devices
    img = dump(src, tmp_path / "fs.btkimg")
    p = run_btk("btk-image", "restore", img, tmp_path / "one.img", tmp_path / "two.img", tmp_path / "three.img")
    assert_clean_error(p, "2 device")


def tmpfs_dir() -> Path | None:
    p = subprocess.run(["stat", "-f", "-c", "%T", "/dev/shm"], capture_output=True, text=True)
    return Path("/dev/shm") if p.returncode == 0 and p.stdout.strip() == "tmpfs" else None


def same_bytes(a, b) -> bool:
    return subprocess.run(["cmp", "-s", str(a), str(b)]).returncode == 0


@pytest.mark.parametrize("name", ["s16k-crc32c-zstd", "raid5-3dev"])
def test_restore_direct_and_buffered(tmp_path, monkeypatch, name):
    """Restore writes with O_DIRECT where the output takes it (files on tmp_path's file system)
    and through the page cache where it does not (tmpfs) or with BTK_RESTORE_DIO=0: the outputs
    are the same bytes every way, with data, and on RAID5 with the parity read back from what
    was written."""
    src = built(name).devices
    img = dump(src, tmp_path / "fs.btkimg", "--data")
    direct = restore(img, out_paths(tmp_path, len(src)))
    assert_metadata_identical(src, direct)
    monkeypatch.setenv("BTK_RESTORE_DIO", "0")
    buffered = restore(img, [tmp_path / f"buffered{i}.img" for i in range(len(src))])
    monkeypatch.delenv("BTK_RESTORE_DIO")
    for a, b in zip(direct, buffered):
        assert same_bytes(a, b), f"{a.name}: direct and buffered restores differ"
        b.unlink()
    shm = tmpfs_dir()
    if shm is None:
        skip_or_fail("no tmpfs at /dev/shm for the buffered fallback")
    with tempfile.TemporaryDirectory(dir=shm) as t:
        onto_tmpfs = restore(img, [Path(t) / f"r{i}.img" for i in range(len(src))])
        for a, b in zip(direct, onto_tmpfs):
            assert same_bytes(a, b), f"{a.name}: the restore onto tmpfs differs"
