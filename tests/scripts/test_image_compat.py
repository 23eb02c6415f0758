# SPDX-License-Identifier: GPL-2.0-only
"""btk-image and btrfs-image read each other's dumps.

- btk-image restores what `btrfs-image` dumps, for every checksum type (btrfs-image
  dumps xxhash, sha256 and blake2 filesystems but its own restore recomputes crc32c
  only); the trees come back as the source's, the reference check is clean.
- `btrfs-image -r` restores `btk-image dump --format btrfs-image` (crc32c), stored and
  zlib: the result checks clean and holds the same trees as btrfs-image's own dump
  restored the same way.
btrfs-image zeroes data checksum items and inline data in every dump, so EXTENT_CSUM
items are compared by key and size only."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

import fsbuild
import oracle
from conftest import CACHE_PREFIX, SANITIZER_MARKERS, btk_path, built, require_btk, require_kernel, run_btk, skip_or_fail


def require_btrfs_image():
    require_btk("btk-image")
    if not shutil.which("btrfs-image"):
        skip_or_fail("btrfs-image (btrfs-progs) is not installed")


def btrfs_image(*args, timeout=300):
    # not while another test worker has a cached source mounted
    cached = [a for a in map(str, args) if a.startswith(CACHE_PREFIX)]
    with fsbuild.fsid_lock(cached):
        p = fsbuild.run(["btrfs-image", *map(str, args)], check=False, timeout=timeout)
    assert p.returncode == 0, f"btrfs-image {' '.join(map(str, args))} failed:\n{p.stdout}{p.stderr}"
    return p


def trees(devices) -> list[dict]:
    """btk-inspect tree records; data checksums reduced to their key and size."""
    p = run_btk("btk-inspect", "tree", "--format", "jsonl", *devices)
    # `btrfs-image -r` leaves out the superblock copies (a warning, exit 2)
    others = [l for l in p.stderr.splitlines() if "superblock copy" not in l]
    assert p.returncode == 0 or (p.returncode == 2 and not others), p.stderr
    out = []
    for line in p.stdout.splitlines():
        rec = json.loads(line)
        if rec.get("type") == "EXTENT_CSUM":
            rec.pop("fields", None)
        out.append(rec)
    return out


def restore(image, out, *opts):
    p = run_btk("btk-image", "restore", "-q", *opts, image, out)
    assert p.returncode == 0, p.stderr
    return out


# one single-device recipe per checksum type
BY_CSUM = {
    "crc32c": "s16k-crc32c-zstd",
    "xxhash64": "bgt-squota-xxhash",
    "sha256": "s64k-sha256-zlib",
    "blake2b": "mixed-4k-blake2",
}


@pytest.mark.parametrize("csum", list(BY_CSUM))
def test_btk_restores_btrfs_image_dumps(tmp_path, csum):
    require_btrfs_image()
    require_kernel()
    src = built(BY_CSUM[csum]).devices
    dump = tmp_path / "fs.btrfs-image"
    btrfs_image("-c9", "-t2", src[0], dump)
    info = json.loads(run_btk("btk-image", "info", "--format", "json", dump).stdout)
    assert info["format"] == "btrfs-image" and info["csum_type"] == csum, info
    out = restore(dump, tmp_path / "restored.img")
    assert trees([out]) == trees(src), "trees differ after btrfs-image dump + btk-image restore"
    oracle.reference_check([out])
    # and the kernel mounts it (no data: only the tree walk, not the contents)
    with fsbuild.attached([out], readonly=True) as loops, \
            fsbuild.mounted(loops, ("ro", "rescue=nologreplay")) as mnt:
        assert (mnt / "bigdir").is_dir() and len(list((mnt / "bigdir").iterdir())) > 100


def test_btk_restores_btrfs_image_dump_from_a_pipe(tmp_path):
    """btrfs-image writes to stdout; btk-image restore reads the dump from stdin."""
    require_btrfs_image()
    src = built("mkfs-single").devices
    out = tmp_path / "restored.img"
    d = subprocess.Popen(["btrfs-image", "-c1", str(src[0]), "-"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    r = subprocess.run([str(btk_path("btk-image")), "restore", "-q", "-", str(out)], stdin=d.stdout,
                       capture_output=True, text=True, timeout=120)
    d.stdout.close()
    assert d.wait(timeout=60) == 0, d.stderr.read().decode()
    assert r.returncode == 0, r.stderr
    for marker in SANITIZER_MARKERS:
        assert marker not in r.stderr
    assert trees([out]) == trees(src)


@pytest.mark.parametrize("level", ["0", "9"])
def test_btrfs_image_restores_btk_dumps(tmp_path, level):
    """`btrfs-image -r` of our dump == `btrfs-image -r` of btrfs-image's own dump."""
    require_btrfs_image()
    src = built("s16k-crc32c-zstd").devices
    ours = tmp_path / "btk.btrfs-image"
    p = run_btk("btk-image", "dump", "-q", "--format", "btrfs-image", "-c", level, *src, ours)
    assert p.returncode == 0, p.stderr
    assert ours.read_bytes()[:8] == bytes.fromhex("8b669572e2255cbd"), "not a btrfs-image v0 dump"
    theirs = tmp_path / "progs.btrfs-image"
    btrfs_image(f"-c{level}", src[0], theirs)
    from_ours, from_theirs = tmp_path / "from-btk.img", tmp_path / "from-progs.img"
    btrfs_image("-r", ours, from_ours)
    btrfs_image("-r", theirs, from_theirs)
    oracle.reference_check([from_ours])
    got = trees([from_ours])
    assert got == trees([from_theirs]), "btrfs-image -r restores our dump differently from its own"
    assert len(got) > 1000
