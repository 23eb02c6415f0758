# SPDX-License-Identifier: GPL-2.0-only
"""Transactions that modify subvolume trees shared with snapshots (libfs/extent_refs.c,
libfs/backref.c), judged by the reference `btrfs check`, btk-check and the kernel.

The filesystem: 4 KiB nodes, a subvolume `vol` whose tree has two levels of nodes (3000 small
files, files with regular extents, reflinked copies), `snap` (a snapshot of vol) and `snap2` (a
snapshot of snap). tests/tools/btk-trans-xattr then adds extended attributes to files in the
snapshots and in vol, in that order, so that every case of copying a shared block is taken:
a block owned by another tree (children gain references by the copying tree), a block owned by
the copying tree and shared (children gain references by the block itself: FULL_BACKREF), and a
FULL_BACKREF block the copying tree is the last user of (references move back). After each
change `btrfs check` must be clean; at the end btk-check too, and the kernel mounts the
filesystem, every file reads back as before in every subvolume, each attribute is where it was
added and nowhere else, scrub is clean, the kernel writes more and `btrfs check` is clean again.
"""
from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import pytest

import crash
import oracle
import xattrs
from conftest import require_kernel, run_btk
from fsbuild import MiB, attached, mkfs, mounted, run

VOL, SNAP, SNAP2 = 256, 257, 258



@functools.lru_cache(maxsize=None)
def snapshots_fs(root: str, quota: bool) -> tuple[Path, dict[str, str]]:
    """The image and the sha256 of every file of vol (as relative paths)."""
    img = Path(root) / ("snapshots-quota.img" if quota else "snapshots.img")
    with open(img, "wb") as f:
        f.truncate(512 * MiB)
    mkfs([img], "-q", "-f", "-n", "4k")
    with attached([img]) as loops, mounted(loops) as mnt:
        if quota:
            run(["btrfs", "quota", "enable", mnt])
        run(["btrfs", "subvolume", "create", mnt / "vol"])
        vol = mnt / "vol"
        for d in range(3):
            (vol / f"d{d}").mkdir()
            for i in range(1000):
                (vol / f"d{d}" / f"small-{i:04d}").write_bytes(f"small file {d}/{i}\n".encode())
        for i in range(40):
            (vol / f"data-{i:02d}").write_bytes(os.urandom(20000 + 4096 * i))
        for i in range(0, 40, 4):
            run(["cp", "--reflink=always", vol / f"data-{i:02d}", vol / f"reflink-{i:02d}"])
        run(["sync", "-f", mnt])
        run(["btrfs", "subvolume", "snapshot", vol, mnt / "snap"])
        run(["btrfs", "subvolume", "snapshot", mnt / "snap", mnt / "snap2"])
        run(["sync", "-f", mnt])
        ids = run(["btrfs", "subvolume", "list", mnt]).stdout
        assert re.search(r"ID 256 .* path vol$", ids, re.M) and re.search(r"ID 258 .* path snap2$", ids, re.M), ids
        hashes = oracle.file_hashes(vol)
    return img, hashes


def inode_of(img: Path, tree: int, name: str) -> int:
    """The inode number of a top-level entry of a subvolume, from its dir index."""
    out = run(["btrfs", "inspect-internal", "dump-tree", "-t", str(tree), img], timeout=300).stdout
    m = re.search(r"location key \((\d+) INODE_ITEM 0\) type \w+\n\s+transid \d+ data_len \d+ name_len \d+\n"
                  rf"\s+name: {re.escape(name)}\n", out)
    assert m, f"no {name} in tree {tree}"
    return int(m.group(1))


def add_xattrs(img: Path, tree: int, inode: int, prefix: str, count: int, per_commit: int = 0):
    p = run([xattrs.tool(), "--tree", tree, "--inode", inode, "--prefix", prefix, "--count", count,
             "--size", 200, "--per-commit", per_commit or count, img], check=False, timeout=300)
    assert p.returncode == 0, p.stderr
    oracle.reference_check([img])


def extent_tree_text(img: Path) -> str:
    return run(["btrfs", "inspect-internal", "dump-tree", "-t", "extent", img], timeout=300).stdout


@pytest.mark.parametrize("quota", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["plain", "qgroups"])
def test_xattrs_in_snapshots_and_their_source(quota, tmp_path_factory, tmp_path):
    require_kernel()
    base, hashes = snapshots_fs(str(tmp_path_factory.getbasetemp()), quota)
    img = tmp_path / "fs.img"
    run(["cp", "--sparse=always", base, img])
    ino = inode_of(img, VOL, "data-07")
    assert inode_of(img, SNAP2, "data-07") == ino
    # 1. a snapshot's copy of blocks another tree owns (splits too: 300 attributes)
    add_xattrs(img, SNAP, ino, "user.snap.", 300, per_commit=100)
    # 2. the source copies blocks it owns that the snapshots still share: FULL_BACKREF
    add_xattrs(img, VOL, ino, "user.vol.", 60)
    assert "FULL_BACKREF" in extent_tree_text(img)
    # 3. the second snapshot copies those blocks: references move back from the old block
    add_xattrs(img, SNAP2, ino, "user.snap2.", 60)
    chk = run_btk("btk-check", img)
    assert chk.returncode == 0, chk.stdout + chk.stderr
    if quota:
        # the kernel's own answer when it cannot account: inconsistent, a rescan fixes the numbers
        status = run(["btrfs", "inspect-internal", "dump-tree", "-t", "quota", img]).stdout
        assert re.search(r"flags ON\|INCONSISTENT", status), status[:2000]
    with attached([img]) as loops, mounted(loops, ("ro",)) as mnt:
        for sub in ("vol", "snap", "snap2"):
            assert oracle.file_hashes(mnt / sub) == hashes, f"files of {sub} changed"
        for sub, prefix, n in (("snap", "user.snap.", 300), ("vol", "user.vol.", 60), ("snap2", "user.snap2.", 60)):
            path = mnt / sub / "data-07"
            names = {x for x in os.listxattr(path) if x.startswith("user.")}
            assert names == {f"{prefix}{i:06d}" for i in range(n)}, f"{sub}: {sorted(names)[:5]}..."
            for i in range(0, n, 7):
                assert os.getxattr(path, f"{prefix}{i:06d}") == xattrs.value(i, 200)
    oracle.kernel_roundtrip([img], oracle.snapshot_hashes([img]))



@pytest.mark.slow
def test_crash_while_copying_shared_blocks(tmp_path_factory, tmp_path):
    """The commit that turns shared blocks FULL_BACKREF, crashed at every write (and with the
    unflushed writes reordered): the old or the new filesystem, each passing both checks."""
    require_kernel()
    base, _ = snapshots_fs(str(tmp_path_factory.getbasetemp()), False)
    img = tmp_path / "work" / "fs.img"
    img.parent.mkdir()
    run(["cp", "--sparse=always", base, img])
    ino = inode_of(img, VOL, "data-07")
    gen0 = int(re.search(r"^generation\s+(\d+)", run(["btrfs", "inspect-internal", "dump-super", img]).stdout,
                         re.M).group(1))
    log = tmp_path / "wlog"
    xattrs.tool()
    p = crash.record(log, "tests/tools/btk-trans-xattr", "--tree", VOL, "--inode", ino, "--count", 60,
                     "--size", 200, img)
    assert p.returncode == 0, p.stderr
    wl = crash.count(log)
    seen = set()
    for k, seed, devs in crash.replay([base], log, crash.states(crash.points(wl, limit=80), (1, 2), every=4),
                                      tmp_path / "crash"):
        sb = run(["btrfs", "inspect-internal", "dump-super", devs[0]]).stdout
        seen.add(int(re.search(r"^generation\s+(\d+)", sb, re.M).group(1)) - gen0)
        chk = run_btk("btk-check", *devs)
        assert chk.returncode == 0, f"after {k} writes (seed {seed}):\n{chk.stdout}{chk.stderr}"
        oracle.reference_check(devs)
    assert seen == {0, 1}
