# SPDX-License-Identifier: GPL-2.0-only
"""Sprouted filesystems: a seed filesystem (`btrfstune -S 1`) mounted, a
writable device added (`btrfs device add`), and files changed on top.

The seed device keeps its own superblock (another fsid, an older
generation); the tree blocks written before the sprout carry the seed's fsid.
btk-check must take the seed device as a member in any order (or find it by
its fsid), hold its superblock copies to its own generation, and agree with
the reference; writing modes must refuse such a filesystem."""
import hashlib
import subprocess

import pytest

from conftest import check_json, require_kernel, run_btk, images_digest
import fsbuild
import oracle


def _populate(mnt, prefix: str, count: int, step: int):
    for i in range(1, count + 1):
        (mnt / f"{prefix}{i}").write_bytes(hashlib.sha256(f"{prefix}{i}".encode()).digest() * (i * step // 32))


def _make_seed(path, files: int):
    fsbuild.run(["truncate", "-s", "512M", str(path)])
    fsbuild.mkfs([path], "-q", "-f", "-m", "dup")
    with fsbuild.attached([path]) as loops, fsbuild.mounted(loops) as mnt:
        _populate(mnt, "f", files, 7000)
        fsbuild.run(["btrfs", "subvolume", "create", str(mnt / "sv")])
        _populate(mnt / "sv", "s", 10, 3000)
    fsbuild.run(["btrfstune", "-S", "1", str(path)])


@pytest.fixture(scope="module")
def sprout(tmp_path_factory):
    """(sprout image, seed image): 40 files and a subvolume on the seed, 20 new files,
    a deletion, an append and a reflink on the sprout."""
    require_kernel()
    d = tmp_path_factory.mktemp("sprout")
    seed, spr = d / "seed.img", d / "spr.img"
    _make_seed(seed, 40)
    fsbuild.run(["truncate", "-s", "512M", str(spr)])
    with fsbuild.attached([seed, spr]) as loops:
        mnt = d / "mnt"
        mnt.mkdir()
        fsbuild.run(["mount", loops[0], str(mnt)])
        try:
            fsbuild.run(["btrfs", "device", "add", "-f", "-K", loops[1], str(mnt)])
            fsbuild.run(["mount", "-o", "remount,rw", str(mnt)])
            _populate(mnt, "g", 20, 9000)
            (mnt / "f5").unlink()
            with open(mnt / "f7", "ab") as f:
                f.write(b"appended on the sprout\n")
            fsbuild.run(["cp", "--reflink=always", str(mnt / "f9"), str(mnt / "r9")])
        finally:
            fsbuild.run(["umount", str(mnt)], check=False)
    return spr, seed


def test_sprout_checks_clean_in_either_order(sprout):
    spr, seed = sprout
    for devices in ([spr, seed], [seed, spr]):
        _, out, ids = check_json(devices, "--check-data-csum")
        assert out["problems"] == [], out["problems"][:5]
        assert out["inodes"] >= 70
    oracle.reference_check([spr, seed])


def test_seed_alone_is_a_filesystem_of_its_own(sprout):
    _, seed = sprout
    _, out, _ = check_json([seed])
    assert out["problems"] == [] and out["inodes"] >= 50


def test_sprout_without_its_seed_names_the_missing_device(sprout):
    spr, _ = sprout
    p = run_btk("btk-check", str(spr))
    assert p.returncode == 4 and "device-missing" in p.stdout, p.stdout + p.stderr


def test_a_foreign_seed_is_refused(sprout, tmp_path):
    spr, _ = sprout
    other = tmp_path / "other-seed.img"
    _make_seed(other, 3)
    p = run_btk("btk-check", str(spr), str(other))
    assert p.returncode == 8 and "is a seed device, but not one of this filesystem" in p.stderr, p.stderr


def test_writing_a_sprout_is_refused(sprout, tmp_path):
    spr, seed = sprout
    copies = []
    for img in (spr, seed):
        copies.append(tmp_path / img.name)
        subprocess.run(["cp", "--sparse=always", str(img), str(copies[-1])], check=True)
    with open(copies[0], "r+b") as f:     # the sprout's second superblock copy: repairable
        f.seek(64 << 20)
        f.write(bytes(4096))
    before = images_digest(copies)
    p = run_btk("btk-check", "--repair", "--yes", "--no-undo", *map(str, copies))
    assert "super-copy-missing" in p.stdout, p.stdout
    assert p.returncode == 8 and "sprouted" in p.stderr, p.stderr
    p = run_btk("btk-tune", "--label", "x", *map(str, copies))
    assert p.returncode != 0 and "sprouted" in p.stderr, p.stderr
    assert images_digest(copies) == before


def test_image_round_trip_of_a_sprout(sprout, tmp_path):
    """dump, restore onto two outputs: the seed keeps its own superblocks (every copy);
    the result checks clean with btk and the reference; one output is refused."""
    spr, seed = sprout
    img = tmp_path / "sprout.btkimg"
    p = run_btk("btk-image", "dump", str(spr), str(seed), str(img))
    assert p.returncode == 0, p.stderr
    outs = [tmp_path / "r-seed.img", tmp_path / "r-spr.img"]
    p = run_btk("btk-image", "restore", str(img), *map(str, outs))
    assert p.returncode == 0, p.stderr
    with open(seed, "rb") as a, open(outs[0], "rb") as b:
        for off in (64 << 10, 64 << 20):     # both copies of the seed's own superblock
            a.seek(off)
            b.seek(off)
            assert a.read(4096) == b.read(4096), f"seed superblock at {off} differs"
    _, out, _ = check_json(outs)
    assert out["problems"] == [], out["problems"][:5]
    oracle.reference_check([outs[1], outs[0]])
    p = run_btk("btk-image", "restore", str(img), str(tmp_path / "one.img"))
    assert p.returncode != 0 and "sprouted" in p.stderr, p.stderr
