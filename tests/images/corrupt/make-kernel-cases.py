#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Corpus cases that need the kernel (or layouts it no longer writes): images
like those other tools' test suites carry, clean ones btk-check must accept
and damaged ones it must find (see README.md here for the expect format).

  sudo BTK_BUILD_DIR=$PWD/build tests/images/corrupt/make-kernel-cases.py [--list] [NAME...]

Needs root (loop mounts), mkfs.btrfs (btrfs-progs 7.3 from
/opt/btrfs-progs-latest when present: older mkfs leaves free-space entries of
its temporary chunks, which btrfs check 7.3 reports), xz, and btk-craft /
btk-corrupt (make test-tools). Each case writes <name>.img.xz and
<name>.expect; the expectations are declared here, not copied from btk-check.
"""
from __future__ import annotations

import dataclasses
import mmap
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
BUILD = Path(os.environ.get("BTK_BUILD_DIR") or REPO / "build")
CRAFT = BUILD / "tests" / "tools" / "btk-craft"
CORRUPT = BUILD / "tests" / "tools" / "btk-corrupt"
LATEST = Path("/opt/btrfs-progs-latest/bin")
MKFS = str(LATEST / "mkfs.btrfs") if (LATEST / "mkfs.btrfs").exists() else "mkfs.btrfs"
REF7 = str(LATEST / "btrfs") if (LATEST / "btrfs").exists() else None
SIZE = 128 << 20
FSID = "6b746b2d-636f-7270-7573-000000000001"


def run(cmd, check=True, **kw) -> subprocess.CompletedProcess:
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({p.returncode}):\n{p.stdout}{p.stderr}")
    return p


def mkfs(img: Path, *opts: str):
    img.unlink(missing_ok=True)
    with open(img, "wb") as f:
        f.truncate(SIZE)
    run([MKFS, "-f", "-q", "-U", FSID, *opts, img])


class Mounted:
    """img loop-mounted at a temporary directory (.path)."""

    def __init__(self, img: Path, opts: str = ""):
        self.img, self.opts = img, opts

    def __enter__(self):
        self.loop = run(["losetup", "-f", "--show", self.img]).stdout.strip()
        self.path = Path(tempfile.mkdtemp(prefix="btk-kc-"))
        run(["mount", *(["-o", self.opts] if self.opts else []), self.loop, self.path])
        return self

    def __exit__(self, *exc):
        for _ in range(50):  # a killed holder may still be closing its file
            if run(["umount", self.path], check=False).returncode == 0:
                break
            time.sleep(0.1)
        run(["losetup", "-d", self.loop], check=False)
        self.path.rmdir()


def craft(img: Path, edits: list[str]):
    run([CRAFT, img], input="\n".join(edits) + "\n")


def corrupt(img: Path, *args: str):
    run([CORRUPT, *args, img])


def items(img: Path, *args: str) -> list[dict]:
    import json
    out = run([BUILD / "btk-inspect", "tree", "-f", "jsonl", *args, img]).stdout
    return [json.loads(l) for l in out.splitlines() if l.strip()]


def pattern(n: int, seed: int) -> bytes:
    """Compressible, not constant: each 4 KiB block names itself."""
    return b"".join((b"%08d-%06d " % (seed, i)) * 256 for i in range((n + 4095) // 4096))[:n]


# ---------------------------------------------------------------- cases


def half_dropped(work: Path) -> Path:
    """A deleted file caught in the middle of its eviction: an orphan item, the
    inode item still saying the old size and nbytes, the file extents past some
    point already gone (no-holes off: its hole extents too)."""
    for attempt in range(8):
        img = work / "hd.img"
        mkfs(img, "-O", "^no-holes", "-m", "single")
        with Mounted(img) as m:
            fd = os.open(m.path / "victim", os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
            buf = mmap.mmap(-1, 4096)
            for i in range(9000):
                buf.seek(0)
                buf.write(b"%08d" % i * 512)
                os.pwritev(fd, [buf], i * 8192)  # every other block: an extent, then a hole
            os.close(fd)
            os.sync()
            holder = subprocess.Popen(["sleep", "1000"], stdin=open(m.path / "victim"))
            os.unlink(m.path / "victim")
            os.sync()
            # the exiting holder evicts the file; freeze (a commit) while it does
            holder.send_signal(signal.SIGKILL)
            time.sleep(0.003 * attempt)
            run(["fsfreeze", "-f", m.path])
            out = work / "hd-copy.img"
            run(["cp", "--sparse=always", img, out])
            run(["fsfreeze", "-u", m.path])
            holder.wait()
        n = sum(1 for r in items(out, "-t", "5") if r.get("type") == "EXTENT_DATA")
        orphan = any(r.get("type") == "ORPHAN_ITEM" for r in items(out, "-t", "5"))
        if orphan and 0 < n < 2 * 9000 - 10:
            return out
    raise RuntimeError("the eviction was never caught halfway")


def orphans(work: Path) -> Path:
    """A file and a directory deleted while open: both nlink 0 with orphan items,
    every item still there (the file keeps its extents)."""
    img = work / "or.img"
    mkfs(img)
    with Mounted(img) as m:
        (m.path / "victim").write_bytes(pattern(300000, 1))
        (m.path / "d").mkdir()
        for i in range(20):
            (m.path / "d" / f"c{i}").write_bytes(pattern(100 * i + 10, i))
        os.sync()
        holder = subprocess.Popen(["sleep", "1000"], stdin=open(m.path / "victim"), cwd=m.path / "d")
        os.unlink(m.path / "victim")
        for i in range(20):
            os.unlink(m.path / "d" / f"c{i}")
        os.rmdir(m.path / "d")
        os.sync()
        out = work / "or-copy.img"
        run(["cp", "--sparse=always", img, out])
        holder.kill()
        holder.wait()
    return out


def log_csums(work: Path) -> Path:
    """fsynced data in a log tree not yet replayed, whose checksums are already
    in the csum tree while no subvolume refers to the data (the kernel writes
    them there at fsync time; the image is the log copied before a commit, the
    csum items added beside it the way the kernel would)."""
    img = work / "lg.img"
    mkfs(img)
    with Mounted(img, "commit=300") as m:
        (m.path / "old").write_bytes(pattern(300000, 2))
        os.sync()
        for name, data, off in (("old", pattern(50000, 3), 100000), ("new", pattern(70000, 4), 0)):
            fd = os.open(m.path / name, os.O_WRONLY | os.O_CREAT, 0o644)
            os.pwrite(fd, data, off)
            os.fsync(fd)
            os.close(fd)
        out = work / "lg-copy.img"
        run(["cp", "--sparse=always", img, out])
    sup = {l.split()[0]: l.split()[1] for l in run(["btrfs", "inspect-internal", "dump-super", out]).stdout.splitlines()
           if len(l.split()) >= 2}
    log_root, gen = int(sup["log_root"]), int(sup["generation"])
    roots = [r for r in items(out, "-b", str(log_root)) if r.get("type") == "ROOT_ITEM"]
    assert all(r["fields"]["level"] == 0 for r in roots), "a log tree of more than one leaf"
    log_items = [x for r in roots for x in items(out, "-b", str(r["fields"]["bytenr"]))]
    edits = [f"ins 7 -10,EXTENT_CSUM,{r['key'][2]} {''.join(r['fields']['csums'])}"
             for r in log_items if r.get("type") == "EXTENT_CSUM"]
    assert edits, "the log has no checksums"
    # btk-craft writes no filesystem with a log: hide it, commit, then give the log the new transid
    corrupt(out, "-S", "-f", "log_root", "-v", "0")
    craft(out, edits)
    corrupt(out, "-S", "-f", "log_root", "-v", str(log_root))
    blocks = sorted({r["block"] for r in log_items if "block" in r} | {log_root})
    for b in blocks:
        corrupt(out, "-b", str(b), "-f", "header.generation", "-v", str(gen + 2))
    fix_log_root_items(out, log_root, gen + 2)
    return out


def fix_log_root_items(img: Path, log_root: int, gen: int):
    """The root items of the log root tree carry their tree's generation twice."""
    for r in items(img, "-b", str(log_root)):
        if r.get("type") != "ROOT_ITEM":
            continue
        base = 101 + int(corrupt_get(img, log_root, f"item{r['slot']}.offset"))
        for field_off in (160, 239):  # generation, generation_v2
            corrupt(img, "-b", str(log_root), "-o", str(base + field_off), "-B", gen.to_bytes(8, "little").hex())


def corrupt_get(img: Path, block: int, field: str) -> str:
    out = run([CORRUPT, "-b", block, "-f", field, "-g", img]).stdout
    return out.split(":")[-1].split()[0]


def inline_regular(work: Path) -> Path:
    """Files whose first extent is inline (one zlib-compressed) and later ones
    regular, as old kernels left them (no-holes off: an inline extent covers its
    whole first sector)."""
    img = work / "ir.img"
    mkfs(img, "-O", "^no-holes")
    with Mounted(img) as m:
        for name in ("a", "b", "c"):
            with open(m.path / name, "wb") as f:
                f.seek(8192 if name == "b" else 4096)
                f.write(pattern(4096, 5))
        os.sync()
    out = work / "ir-copy.img"
    shutil.copy(img, out)
    edits = []
    for r in items(out, "-t", "5"):
        if r.get("type") == "INODE_ITEM" and r["key"][0] >= 257:
            ino = r["key"][0]
            inline = {257: 100, 258: 3000}.get(ino, 2000)
            hole = [x for x in items(out, "-t", "5") if x["key"][0] == ino and x.get("type") == "EXTENT_DATA"
                    and x["key"][2] == 0]
            gen = hole[0]["fields"]["generation"]
            # the third file's inline extent is zlib-compressed
            comp, data = (1, zlib.compress(pattern(inline, 6))) if ino == 259 else (0, pattern(inline, 6))
            head = gen.to_bytes(8, "little") + inline.to_bytes(8, "little") + bytes([comp]) + bytes(4)
            edits += [f"del 5 {ino},EXTENT_DATA,0", f"ins 5 {ino},EXTENT_DATA,0 {(head + data).hex()}"]
            if ino == 258:  # its hole went up to 8192: the inline extent covers [0, 4096)
                edits += [f"ins 5 {ino},EXTENT_DATA,4096 "
                          f"{(gen.to_bytes(8, 'little') + (4096).to_bytes(8, 'little') + bytes([0, 0, 0, 0, 1]) + bytes(16) + bytes(8) + (4096).to_bytes(8, 'little')).hex()}"]
    craft(out, edits)
    for ino, inline in ((257, 100), (258, 3000), (259, 2000)):
        corrupt(out, "-t", "5", "-k", f"{ino},INODE_ITEM,0", "-f", "nbytes", "-v", str(4096 + inline))
    return out


def populated(work: Path, *mkfs_opts: str, mount: str = "compress=zstd") -> Path:
    """A small kernel-written filesystem: compressed, plain, sparse and inline files."""
    img = work / "base.img"
    mkfs(img, *mkfs_opts)
    with Mounted(img, mount) as m:
        (m.path / "small").write_bytes(b"hello world\n" * 5)
        (m.path / "comp").write_bytes(pattern(320000, 7))
        with open(m.path / "sparse", "wb") as f:
            f.write(pattern(8192, 8))
            f.seek(65536)
            f.write(pattern(8192, 9))
        (m.path / "plain").write_bytes(os.urandom(100000))
        os.sync()
    return img


def ino_of(img: Path, size: int) -> int:
    """The inode of the file of that size in the top-level subvolume."""
    return next(r["key"][0] for r in items(img, "-t", "5")
                if r.get("type") == "INODE_ITEM" and r["fields"]["size"] == size)


def fst_orphans(work: Path) -> Path:
    """Free-space tree items (an extent and a bitmap, each with its info item)
    for space past the last block group."""
    img = populated(work)
    bitmap = (16 * 4096 // 4096 // 8) * b"\xff"  # 16 sectors, all free
    craft(img, ["ins 10 100663296,FREE_SPACE_INFO,1048576 0100000000000000",
                "ins 10 100663296,FREE_SPACE_EXTENT,1048576 -",
                "ins 10 110100480,FREE_SPACE_INFO,65536 0100000001000000",
                f"ins 10 110100480,FREE_SPACE_BITMAP,65536 {bitmap.hex()}"])
    return img


def compressed_nodatasum(work: Path) -> Path:
    """A zstd-compressed file whose inode says nodatasum (its checksums stay)."""
    img = populated(work)
    corrupt(img, "-t", "5", "-k", f"{ino_of(img, 320000)},INODE_ITEM,0", "-f", "flags", "-v", "1")
    return img


def compressed_nodatasum_nocsum(work: Path) -> Path:
    """Files compressed with zstd, zlib and lzo whose inodes say nodatasum (one
    also nodatacow) and whose checksums are gone, as a buggy kernel wrote them;
    a plain nodatasum file beside them."""
    img = work / "cn.img"
    mkfs(img)
    sizes = {"zstd": 300000, "zlib": 200000, "lzo": 140000}
    with Mounted(img, "compress-force=zstd") as m:
        for i, (algo, n) in enumerate(sizes.items()):
            f = m.path / algo
            f.touch()
            run(["btrfs", "property", "set", f, "compression", algo])
            f.write_bytes(pattern(n, 20 + i))
        os.sync()
    with Mounted(img, "nodatasum") as m:
        (m.path / "plain").write_bytes(pattern(50000, 30))
        os.sync()
    for algo, flags in (("zstd", 1), ("zlib", 3), ("lzo", 1)):
        corrupt(img, "-t", "5", "-k", f"{ino_of(img, sizes[algo])},INODE_ITEM,0", "-f", "flags", "-v", str(flags))
    for r in items(img, "-t", "7"):
        if r.get("type") == "EXTENT_CSUM":
            corrupt(img, "-t", "7", "-k", f"{r['key'][0]},EXTENT_CSUM,{r['key'][2]}", "-d")
    return img


def physical_of(img: Path, logical: int) -> int:
    """The device offset of a logical address in a single-device image (first stripe)."""
    cur = None
    for line in run([BUILD / "btk-inspect", "map", img]).stdout.splitlines():
        f = line.split()
        if f and f[0] == "chunk":
            cur = (int(f[1]), int(f[3]))
        elif f and f[0] == "stripe" and cur and cur[0] <= logical < cur[0] + cur[1]:
            return int(f[f.index("physical") + 1]) + logical - cur[0]
    raise RuntimeError(f"no chunk holds {logical}")


def compressed_nodatasum_damaged(work: Path) -> Path:
    """As compressed-nodatasum-nocsum, and the lzo file's first extent does not
    decompress: that file keeps nodatasum, the others are repaired."""
    img = compressed_nodatasum_nocsum(work)
    ino = ino_of(img, 140000)
    ext = next(r for r in items(img, "-t", "5") if r.get("type") == "EXTENT_DATA" and r["key"][0] == ino)
    with open(img, "r+b") as f:
        f.seek(physical_of(img, ext["fields"]["disk_bytenr"]) + 200)
        f.write(b"\xde\xad\xbe\xef" * 4)
    return img


def missing_extents(work: Path) -> Path:
    """No-holes off: a file's explicit hole in the middle, another's whole first
    extent (item and data extent) and a third's last extent are gone."""
    img = populated(work, "-O", "^no-holes", mount="")
    with Mounted(img) as m:
        for name in ("mid", "first", "last"):
            with open(m.path / name, "wb") as f:
                f.write(pattern(8192, 10))
                f.seek(131072)
                f.write(pattern(8192, 11))
        os.sync()
    recs = items(img, "-t", "5")
    ino = {r["key"][0]: r["fields"]["size"] for r in recs if r.get("type") == "INODE_ITEM"}
    files = sorted(i for i, size in ino.items() if size == 131072 + 8192)
    mid, first, last = files
    corrupt(img, "-t", "5", "-k", f"{mid},EXTENT_DATA,8192", "-d")
    for ino_, off in ((first, 0), (last, 131072)):  # their data extents are left unused
        corrupt(img, "-t", "5", "-k", f"{ino_},EXTENT_DATA,{off}", "-d")
    return img


def quota_base(work: Path, simple: bool) -> Path:
    img = work / "q.img"
    mkfs(img, *(["-O", "squota"] if simple else []))
    with Mounted(img) as m:
        if not simple:
            run(["btrfs", "quota", "enable", m.path])
        run(["btrfs", "subvolume", "create", m.path / "sv"])
        (m.path / "sv" / "f").write_bytes(pattern(300000, 12))
        (m.path / "g").write_bytes(pattern(100000, 13))
        if not simple:
            run(["btrfs", "subvolume", "snapshot", m.path / "sv", m.path / "snap"])
            (m.path / "snap" / "only").write_bytes(pattern(50000, 14))
            run(["btrfs", "quota", "rescan", "-w", m.path])
        os.sync()
    return img


def qgroup_numbers(work: Path) -> Path:
    """Traditional qgroups: one group's referenced bytes and another's exclusive
    bytes are off."""
    img = quota_base(work, False)
    corrupt(img, "-t", "8", "-k", "0,QGROUP_INFO,256", "-f", "rfer", "-v", "+4096")
    corrupt(img, "-t", "8", "-k", "0,QGROUP_INFO,5", "-f", "excl", "-v", "-8192")
    return img


def squota_numbers(work: Path) -> Path:
    """Simple quotas: a subvolume's numbers are off."""
    img = quota_base(work, True)
    corrupt(img, "-t", "8", "-k", "0,QGROUP_INFO,256", "-f", "rfer", "-v", "+4096")
    corrupt(img, "-t", "8", "-k", "0,QGROUP_INFO,256", "-f", "excl", "-v", "+4096")
    return img


def subvol_orphan_missing(work: Path) -> Path:
    """Two deleted subvolumes awaiting the cleaner (refs 0) whose orphan items
    are gone: the kernel would never drop them."""
    img = work / "so.img"
    mkfs(img)
    with Mounted(img) as m:
        (m.path / "kept").write_bytes(pattern(5000, 15))
        for name in ("a", "b"):
            run(["btrfs", "subvolume", "create", m.path / name])
            for i in range(40):
                (m.path / name / f"f{i}").write_bytes(pattern(3000 + i, i))
        os.sync()
        run(["btrfs", "subvolume", "delete", m.path / "a", m.path / "b"])
        run(["fsfreeze", "-f", m.path])  # commits the deletion; the cleaner waits
        out = work / "so-copy.img"
        run(["cp", "--sparse=always", img, out])
        run(["fsfreeze", "-u", m.path])
    for sv in (256, 257):
        corrupt(out, "-t", "1", "-k", f"-5,ORPHAN_ITEM,{sv}", "-d")
    return out


def extent_generations(work: Path) -> Path:
    """Extent items from generations after the filesystem's: a data extent's
    and the csum tree root block's (a skinny metadata item)."""
    img = populated(work)
    data = next(r for r in items(img, "-t", "2") if r.get("type") == "EXTENT_ITEM")
    csum_root = next(r for r in items(img, "-t", "1") if r.get("type") == "ROOT_ITEM" and r["key"][0] == 7)
    corrupt(img, "-t", "2", "-k", f"{data['key'][0]},EXTENT_ITEM,{data['key'][2]}", "-f", "generation", "-v", "+50")
    corrupt(img, "-t", "2", "-k", f"{csum_root['fields']['bytenr']},METADATA_ITEM,0", "-f", "generation",
            "-v", "+7")
    return img


def le64(*vals: int) -> str:
    return "".join(v.to_bytes(8, "little").hex() for v in vals)


def dev_extent_stray(work: Path) -> Path:
    """Two dev extents no chunk accounts for (their chunks gone, the device's
    bytes_used still counting one of them)."""
    img = populated(work)
    craft(img, [f"ins 4 1,DEV_EXTENT,{110 << 20} {le64(3, 256, 200 << 20, 1 << 20)}{'00' * 16}",
                f"ins 4 1,DEV_EXTENT,{115 << 20} {le64(3, 256, 300 << 20, 2 << 20)}{'00' * 16}"])
    corrupt(img, "-t", "3", "-k", "1,DEV_ITEM,1", "-f", "bytes_used", "-v", f"+{1 << 20}")
    return img


def num_devices(work: Path) -> Path:
    """The superblock counts a device that has no dev item."""
    img = populated(work)
    corrupt(img, "-S", "-f", "num_devices", "-v", "2")
    return img


def bad_disk_bytenr(work: Path) -> Path:
    """File extents whose disk bytenr points at nothing: one into free space of
    the data block group, one past every chunk (1 TiB)."""
    img = populated(work, mount="")
    recs = items(img, "-t", "5")
    ino = {r["key"][0]: r["fields"]["size"] for r in recs if r.get("type") == "INODE_ITEM"}
    plain, comp = (next(i for i, size in ino.items() if size == want) for want in (100000, 320000))
    corrupt(img, "-t", "5", "-k", f"{plain},EXTENT_DATA,0", "-f", "disk_bytenr", "-v", str(20 << 20))
    corrupt(img, "-t", "5", "-k", f"{comp},EXTENT_DATA,0", "-f", "disk_bytenr", "-v", str(1 << 40))
    return img


def inline_ram_bytes(work: Path) -> Path:
    """Uncompressed inline extents whose ram_bytes is one too many, and far too
    many (beyond a sector)."""
    img = populated(work, mount="")
    with Mounted(img) as m:
        (m.path / "tiny").write_bytes(b"tiny inline file\n")
        os.sync()
    recs = items(img, "-t", "5")
    inl = [r["key"][0] for r in recs if r.get("type") == "EXTENT_DATA" and r["fields"]["type"] == 0]
    for ino_, delta in zip(sorted(inl), ("+1", "+5000")):
        corrupt(img, "-t", "5", "-k", f"{ino_},EXTENT_DATA,0", "-f", "ram_bytes", "-v", delta)
    return img


def root_generations(work: Path) -> Path:
    """Root items (a subvolume's and the top level's) from generations after
    the filesystem's: their trees fail the transid check."""
    img = work / "rg.img"
    mkfs(img)
    with Mounted(img) as m:
        (m.path / "top").write_bytes(pattern(20000, 16))
        run(["btrfs", "subvolume", "create", m.path / "sv"])
        (m.path / "sv" / "f").write_bytes(pattern(70000, 17))
        os.sync()
    corrupt(img, "-t", "1", "-k", "256,ROOT_ITEM,0", "-f", "generation", "-v", "+20")
    corrupt(img, "-t", "1", "-k", "5,ROOT_ITEM,0", "-f", "generation", "-v", "+3")
    return img


def root_blocks_future(work: Path) -> Path:
    """Root items and their root blocks from the same generation after the
    filesystem's (the blocks verify against their pointers): a one-leaf
    subvolume, and a two-level one whose root node and first leaf are both
    from the future (the node's pointer to the leaf too); and a leaf from the
    future in the top level, whose root is not."""
    img = work / "rf.img"
    mkfs(img)
    with Mounted(img) as m:
        for sv in ("one", "two"):
            run(["btrfs", "subvolume", "create", m.path / sv])
        (m.path / "one" / "f").write_bytes(pattern(20000, 18))
        for d in ("two", "."):
            for i in range(400):
                (m.path / d / f"file-with-a-long-name-{i:04d}").write_bytes(b"%d\n" % i)
        os.sync()
    roots = {r["key"][0]: r["fields"] for r in items(img, "-t", "1") if r.get("type") == "ROOT_ITEM"}
    one, two = roots[256], roots[257]
    assert one["level"] == 0 and two["level"] >= 1, (one, two)
    corrupt(img, "-b", str(one["bytenr"]), "-f", "header.generation", "-v", "+15")
    corrupt(img, "-t", "1", "-k", "256,ROOT_ITEM,0", "-f", "generation", "-v", "+15")
    leaf = int(corrupt_get(img, two["bytenr"], "ptr0.blockptr"))
    corrupt(img, "-b", str(leaf), "-f", "header.generation", "-v", "+4")
    corrupt(img, "-b", str(two["bytenr"]), "-f", "ptr0.generation", "-v", "+4")
    corrupt(img, "-b", str(two["bytenr"]), "-f", "header.generation", "-v", "+6")
    corrupt(img, "-t", "1", "-k", "257,ROOT_ITEM,0", "-f", "generation", "-v", "+6")
    top = roots[5]["bytenr"]
    leaf = int(corrupt_get(img, top, "ptr1.blockptr"))
    corrupt(img, "-b", str(leaf), "-f", "header.generation", "-v", "+3")
    corrupt(img, "-b", str(top), "-f", "ptr1.generation", "-v", "+3")
    return img


def bgt_no_fst(work: Path, drop_tree: bool) -> Path:
    """A block-group tree without the free-space-tree (and no-holes) feature
    bits: btrfs check 7.3 accepts it, the kernel mounts nothing. drop_tree:
    the free-space tree's root item is gone too (its block leaked)."""
    img = work / "bgt.img"
    mkfs(img, "-O", "block-group-tree")
    with Mounted(img) as m:
        (m.path / "f").write_bytes(pattern(200000, 19))
        (m.path / "d").mkdir()
        (m.path / "d" / "g").write_bytes(pattern(5000, 20))
        os.sync()
    corrupt(img, "-S", "-f", "compat_ro_flags", "-v", "^3")
    if drop_tree:
        corrupt(img, "-S", "-f", "incompat_flags", "-v", "^0x200")
        corrupt(img, "-t", "1", "-k", "10,ROOT_ITEM,0", "-d")
    return img


def dir_names(work: Path) -> Path:
    """A directory with three names in three directories: an empty file with
    three links given a directory's mode, its entries a directory's type."""
    img = work / "dn.img"
    mkfs(img)
    with Mounted(img) as m:
        for d in ("a", "b"):
            (m.path / d).mkdir()
        (m.path / "a" / "x").write_bytes(b"")
        os.link(m.path / "a" / "x", m.path / "b" / "y")
        os.link(m.path / "a" / "x", m.path / "z")
        (m.path / "a" / "keep").write_bytes(pattern(9000, 3))
        os.sync()
    recs = items(img, "-t", "5")
    ino = next(r["key"][0] for r in recs if r.get("type") == "INODE_ITEM" and r["fields"]["nlink"] == 3)
    corrupt(img, "-t", "5", "-k", f"{ino},INODE_ITEM,0", "-f", "mode", "-v", str(0o40755))
    for r in recs:
        if r.get("type") in ("DIR_ITEM", "DIR_INDEX") and any(e["location"][0] == ino for e in r["fields"]["entries"]):
            corrupt(img, "-t", "5", "-k", f"{r['key'][0]},{r['type']},{r['key'][2]}", "-f", "type", "-v", "2")
    return img


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def stripe_crossing(work: Path) -> Path:
    """The csum tree's root leaf moved to a place across a 64 KiB stripe
    boundary, as old kernels could allocate (single metadata: logical =
    physical here): its header, checksum, root item and extent item follow it;
    the free-space tree is cleared (btrfs rescue clear-space-cache v2)."""
    img = work / "sc.img"
    mkfs(img, "-m", "single", "-d", "single", "-O", "^block-group-tree")
    with Mounted(img) as m:
        (m.path / "a").write_bytes(pattern(200000, 18))
        os.sync()
    root = next(r for r in items(img, "-t", "1") if r.get("type") == "ROOT_ITEM" and r["key"][0] == 7)
    old, gen = root["fields"]["bytenr"], root["fields"]["generation"]
    meta = next(c for c in items(img, "-t", "3") if c.get("type") == "CHUNK_ITEM" and c["fields"]["type"] & 4)
    end = meta["key"][2] + meta["fields"]["length"]
    new = end - 65536 - 8192                    # 8 KiB before a stripe boundary
    with open(img, "r+b") as f:
        f.seek(old)
        b = bytearray(f.read(16384))
        b[48:56] = new.to_bytes(8, "little")
        b[0:32] = crc32c(bytes(b[32:])).to_bytes(4, "little") + bytes(28)
        f.seek(new)
        f.write(b)
    corrupt(img, "-t", "1", "-k", "7,ROOT_ITEM,0", "-f", "bytenr", "-v", str(new))
    item = le64(1, gen, 2) + "b0" + le64(7)     # refs, generation, TREE_BLOCK; TREE_BLOCK_REF root 7
    craft(img, [f"del 2 {old},METADATA_ITEM,0", f"ins 2 {new},METADATA_ITEM,0 {item}"])
    # the free-space tree would need the same move: it is dropped instead (the kernel makes it again)
    run([REF7 or "btrfs", "rescue", "clear-space-cache", "v2", img])
    return img


def inline_ram_compressed(work: Path) -> Path:
    """A zstd-compressed inline extent whose ram_bytes says 1000 bytes more than
    its stream gives."""
    img = populated(work)
    ino_ = next(r["key"][0] for r in items(img, "-t", "5") if r.get("type") == "EXTENT_DATA" and
                r["fields"]["type"] == 0 and r["fields"]["compression"] == 3)
    corrupt(img, "-t", "5", "-k", f"{ino_},EXTENT_DATA,0", "-f", "ram_bytes", "-v", "+1000")
    return img


def old_format(work: Path) -> Path:
    """The features of old filesystems off (no-holes, skinny metadata, extrefs,
    free-space tree), mixed block groups: holes, hard links, xattrs, compression."""
    img = work / "old.img"
    mkfs(img, "-M", "-O", "^no-holes,^skinny-metadata,^extref,^free-space-tree,^block-group-tree")
    with Mounted(img, "compress=zlib") as m:
        (m.path / "d").mkdir()
        for i in range(30):
            (m.path / "d" / f"f{i}").write_bytes(pattern(997 * i + 1, i))
        with open(m.path / "sparse", "wb") as f:
            f.write(pattern(8192, 30))
            f.seek(1 << 20)
            f.write(pattern(4096, 31))
        for i in range(5):
            os.link(m.path / "d" / "f3", m.path / f"link{i}")
        os.setxattr(m.path / "d" / "f4", "user.big", b"x" * 3000)
        os.sync()
    return img


@dataclasses.dataclass
class Case:
    name: str
    make: Callable[[Path], Path]
    why: str
    problems: tuple[str, ...] = ()
    exit: int = 0
    repair: str = "none"
    repair_exit: int | None = None


CASES = [
    Case("clean-half-dropped-inode", half_dropped, "a deleted file evicted halfway (orphan item, items partly gone)"),
    Case("clean-orphan-inodes", orphans, "a file and a directory deleted while open (orphan items)"),
    Case("clean-log-csums", log_csums, "an unreplayed log whose data's checksums are already in the csum tree"),
    Case("clean-inline-then-regular", inline_regular, "files with an inline extent followed by regular ones"),
    Case("clean-old-format", old_format, "old-format features off, mixed block groups"),
    Case("fst-orphan", fst_orphans, "free-space tree items (extent and bitmap) for space in no block group",
         ("free-space-orphan",), 4, "free-space-tree", 1),
    Case("file-extents-missing", missing_extents, "no-holes off: file extents missing at the start, in the "
         "middle and at the end of files", ("file-extent-hole", "inode-nbytes", "extent-ref-unused"),
         4, "extent-refs inodes", 1),
    Case("qgroup-numbers", qgroup_numbers, "qgroups: referenced and exclusive bytes that the extents do not give",
         ("qgroup-mismatch",), 4, "qgroups", 1),
    Case("squota-numbers", squota_numbers, "simple quotas: a subvolume's numbers are off",
         ("qgroup-mismatch",), 4, "qgroups", 1),
    Case("subvol-orphan-missing", subvol_orphan_missing, "deleted subvolumes whose orphan items are missing",
         ("root-orphan-missing",), 4, "root-orphans", 1),
    Case("extent-item-generation", extent_generations, "extent items (data, tree block) from the future",
         ("extent-item-generation",), 4, "extent-generations", 1),
    Case("dev-extent-stray", dev_extent_stray, "dev extents that belong to no chunk",
         ("dev-extent-no-chunk", "dev-bytes-used"), 4, "dev-extents space-counters", 1),
    Case("super-num-devices", num_devices, "the superblock's num_devices is one too many",
         ("super-num-devices",), 4, "num-devices", 1),
    Case("file-extent-bytenr", bad_disk_bytenr, "file extents whose disk bytenr points where no extent is",
         ("data-extent-not-allocated", "extent-ref-unused"), 4, "file-extent-bytenr", 1),
    Case("inline-ram-bytes", inline_ram_bytes, "uncompressed inline extents whose ram_bytes is off",
         ("file-extent-inline", "inode-nbytes"), 4, "inodes", 1),
    Case("root-item-generation-future", root_generations, "root items newer than the filesystem",
         ("root-item-generation", "tree-block-transid"), 4, "tree-salvage", 1),
    Case("root-blocks-future", root_blocks_future, "root items and their root blocks (one a node, with a "
         "leaf), and a leaf under an older root, from a generation after the filesystem's",
         ("extent-generation", "root-item-generation", "tree-block-generation"), 4,
         "root-generations", 1),
    Case("bgt-no-fst-flags", lambda w: bgt_no_fst(w, False), "block-group tree, the free-space-tree feature "
         "bits cleared", ("block-group-tree-no-fst",), 0, "free-space-tree", 1),
    Case("bgt-no-fst", lambda w: bgt_no_fst(w, True), "block-group tree without the free-space-tree and no-holes "
         "features, the free-space tree's root item gone", ("block-group-tree-no-fst", "tree-block-leaked"), 4,
         "extent-refs free-space-tree", 1),
    Case("dir-names", dir_names, "a directory with three names (in the top directory and two others)",
         ("dir-hardlink",), 4, "dir-links inodes", 1),
    Case("tree-block-crosses-stripe", stripe_crossing, "a tree block across a 64 KiB stripe boundary",
         ("tree-block-crosses-stripe",), 4, "stripe-crossing", 1),
    Case("inline-ram-bytes-compressed", inline_ram_compressed, "a compressed inline extent's ram_bytes is off",
         ("inline-extent-corrupt", "inode-nbytes"), 4, "inodes", 1),
    Case("compressed-nodatasum", compressed_nodatasum, "a compressed file whose inode has the nodatasum flag",
         ("file-extent-compressed-nodatasum",), 4, "compressed-nodatasum", 1),
    Case("compressed-nodatasum-damaged", compressed_nodatasum_damaged, "as compressed-nodatasum-nocsum, the lzo "
         "file's data damaged (it keeps nodatasum)", ("file-extent-compressed-nodatasum",), 4,
         "compressed-nodatasum csums", 4),
    Case("compressed-nodatasum-nocsum", compressed_nodatasum_nocsum, "zstd, zlib and lzo files with nodatasum "
         "(one nodatacow too) and no checksums", ("file-extent-compressed-nodatasum",), 4,
         "compressed-nodatasum csums", 1),
]


def reference(img: Path, prog: str) -> str:
    return "passes" if run([prog, "check", "--readonly", img], check=False).returncode == 0 else "fails"


def main(argv: list[str]) -> int:
    if "--list" in argv:
        for c in CASES:
            print(f"{c.name}: {c.why}")
        return 0
    want = set(argv)
    for c in CASES:
        if want and c.name not in want:
            continue
        with tempfile.TemporaryDirectory(prefix="btk-kc-") as d:
            img = c.make(Path(d))
            ref = reference(img, "btrfs")
            ref7 = reference(img, REF7) if REF7 else "unknown"
            run(["sh", "-c", f"xz -9 -T1 -c '{img}' > '{HERE / (c.name + '.img.xz')}'"])
            chk = run([BUILD / "btk-check", img], check=False)
        lines = [f"# {c.why}", "# how: tests/images/corrupt/make-kernel-cases.py " + c.name, "base: kernel",
                 f"exit: {c.exit}", f"problems: {' '.join(sorted(c.problems))}".rstrip(),
                 f"btrfs-check: {ref}", f"btrfs-check-7.3: {ref7}", f"repair: {c.repair}"]
        if c.repair_exit is not None:
            lines.append(f"repair-exit: {c.repair_exit}")
        (HERE / f"{c.name}.expect").write_text("\n".join(lines) + "\n")
        print(f"{c.name}: btk-check exit {chk.returncode}, btrfs check {ref}, 7.3 {ref7}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
