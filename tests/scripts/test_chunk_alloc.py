# SPDX-License-Identifier: GPL-2.0-only
"""New metadata chunks allocated by a libfs transaction when the existing metadata block groups
are full (libfs/chunk_alloc.c), judged by the reference `btrfs check`, btk-check and the kernel.

tests/tools/btk-trans-xattr fills a fresh filesystem's metadata with extended attributes on the
top-level directory, committing as it goes, until the mkfs metadata chunk cannot hold them. The
filesystem must then have more metadata chunks, all with the profile mkfs gave the first one
(DUP, RAID1, single), each with its dev extents, block group item (extent tree or block-group
tree) and free-space-tree entries; `btrfs check` and btk-check are clean; the kernel mounts it,
reads back every attribute, scrubs it clean, writes to it, and `btrfs check` is clean again.
"""
from __future__ import annotations

import json
import os

import pytest

import crash
import fsbuild
import oracle
import xattrs
from conftest import require_kernel, require_reference_tools, run_btk
from fsbuild import MiB

# (devices, device size, mkfs options, xattr size, count): count * size is well over the
# metadata chunk mkfs makes (32 MiB single/DUP, 32 MiB per copy for RAID1 on small devices)
CASES = [
    pytest.param(1, 512 * MiB, ("-n", "16k"), 3000, 12000, id="dup-16k"),
    pytest.param(2, 384 * MiB, ("-n", "4k", "-m", "raid1", "-d", "raid1"), 900, 30000, id="raid1-2dev-4k"),
    pytest.param(1, 768 * MiB, ("-n", "64k", "-m", "single", "-O", "block-group-tree"), 12000, 4000,
                 id="single-64k-bgt"),
    pytest.param(1, 512 * MiB, ("-n", "16k", "-R", "^free-space-tree"), 3000, 12000, id="dup-16k-nofst",
                 marks=pytest.mark.slow),
]



def make_fs(tmp_path, ndev: int, size: int, mkfs) -> list:
    require_reference_tools()
    devs = []
    tmp_path.mkdir(parents=True, exist_ok=True)
    for i in range(ndev):
        d = tmp_path / f"dev{i}.img"
        with open(d, "wb") as f:
            f.truncate(size)
        devs.append(d)
    fsbuild.mkfs(devs, "-q", "-f", *mkfs)
    return devs


def metadata_chunks(devs) -> list[dict]:
    p = run_btk("btk-inspect", "map", "--format", "json", *devs)
    assert p.returncode == 0, p.stderr
    return [c for c in json.loads(p.stdout)["chunks"] if "METADATA" in c["flags"]]


def fill(devs, count: int, size: int, per_commit: int, *extra) -> str:
    p = fsbuild.run([xattrs.tool(), "--count", count, "--size", size, "--per-commit", per_commit,
                     *extra, *devs], check=False, timeout=600)
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.mark.parametrize("ndev,size,mkfs,xsize,count", CASES)
def test_full_metadata_gets_new_chunks(ndev, size, mkfs, xsize, count, tmp_path):
    devs = make_fs(tmp_path, ndev, size, mkfs)
    before = metadata_chunks(devs)
    assert len(before) == 1
    fill(devs, count, xsize, 2000)
    after = metadata_chunks(devs)
    assert len(after) > 1, "the metadata did not outgrow the first chunk: make the test fill more"
    assert {c["profile"] for c in after} == {before[0]["profile"]}, after
    assert {c["flags"] for c in after} == {before[0]["flags"]}, after
    oracle.reference_check(devs)
    chk = run_btk("btk-check", *devs)
    assert chk.returncode == 0, chk.stdout + chk.stderr
    require_kernel()
    with fsbuild.attached(devs) as loops, fsbuild.mounted(loops, ("ro",)) as mnt:
        # (too many names for listxattr's 64 KiB: read every third one, and the last)
        for i in [*range(0, count, 3), count - 1]:
            assert os.getxattr(mnt, f"user.btk.{i:06d}") == xattrs.value(i, xsize), i
        with pytest.raises(OSError):
            os.getxattr(mnt, f"user.btk.{count:06d}")
    df = oracle.kernel_roundtrip(devs, {})  # mount, scrub, write more, btrfs check
    meta = [d for d in df if d["type"] == "Metadata"]
    assert meta and meta[0]["total"] == sum(c["length"] for c in after)


def test_no_room_for_a_chunk_is_a_clean_error(tmp_path):
    """Devices too full for another metadata chunk: the transaction fails with a message and
    the filesystem stays as the last commit left it."""
    devs = make_fs(tmp_path, 1, 160 * MiB, ("-n", "16k", "-d", "single", "-m", "single"))
    p = fsbuild.run([xattrs.tool(), "--count", 100000, "--size", 3000, "--per-commit", 2000, *devs],
                    check=False, timeout=600)
    assert p.returncode == 1 and "no room for a new" in p.stderr, p.stderr
    oracle.reference_check(devs)
    assert run_btk("btk-check", *devs).returncode == 0


@pytest.mark.slow
def test_crash_while_allocating_a_chunk(tmp_path):
    """The commit that allocates a new chunk, crashed at sampled writes (every flush boundary)
    and with unflushed writes reordered: the old or the new filesystem, clean either way."""
    base = make_fs(tmp_path / "base", 1, 512 * MiB, ("-n", "16k",))
    fill(base, 4500, 3000, 1500)  # most of the first chunk (32 MiB)
    assert len(metadata_chunks(base)) == 1
    work = [tmp_path / "work" / d.name for d in base]
    (tmp_path / "work").mkdir()
    for s, d in zip(base, work):
        fsbuild.run(["cp", "--sparse=always", s, d])
    log = tmp_path / "wlog"
    xattrs.tool()
    p = crash.record(log, "tests/tools/btk-trans-xattr", "--count", 4000, "--size", 3000, "--prefix", "user.crash.",
                     *work)
    assert p.returncode == 0, p.stderr
    assert len(metadata_chunks(work)) > 1
    wl = crash.count(log)
    seen = set()
    for k, seed, devs in crash.replay(base, log, crash.states(crash.points(wl, limit=60), (1,), every=3),
                                      tmp_path / "crash"):
        n = len(metadata_chunks(devs))
        seen.add(n > 1)
        chk = run_btk("btk-check", *devs)
        assert chk.returncode == 0, f"after {k} writes (seed {seed}):\n{chk.stdout}{chk.stderr}"
        oracle.reference_check(devs)
    assert seen == {False, True}
