"""btk-convert profile, judged by the kernel and the reference tools."""
from __future__ import annotations

import re

import pytest

import fsbuild
import oracle
from conftest import built, require_kernel, run_btk

# (recipe, convert arguments, expected metadata profile, expected system profile)
CASES = [
    ("s16k-crc32c-zstd", ["--metadata", "single"], "single", "single"),
    ("s4k-xxhash-holes-lzo", ["--metadata", "single", "--system", "dup"], "single", "DUP"),
    ("raid1-2dev", ["--metadata", "single"], "single", "single"),
    ("raid1-2dev", ["--metadata", "dup"], "DUP", "DUP"),
    ("raid1c3-3dev", ["--metadata", "raid1"], "RAID1", "RAID1"),
    ("raid1c4-4dev-sha256", ["--metadata", "raid1c3", "--system", "raid1"], "RAID1C3", "RAID1"),
    ("s64k-sha256-zlib", ["--metadata", "dup"], "DUP", "DUP"),
    ("mkfs-2dev-xxhash", ["--metadata", "raid1c3"], None, None),  # refused: 2 devices
]


def profiles(df: list[dict]) -> dict[str, str]:
    return {d["type"]: d["profile"] for d in df}


@pytest.mark.parametrize("name,args,meta,system", CASES, ids=[f"{c[0]}:{'_'.join(c[1])}" for c in CASES])
def test_profile_conversion(tmp_path, name, args, meta, system):
    require_kernel()
    devices = built(name).copy_to(tmp_path)
    if meta is None:
        p = run_btk("btk-convert", "profile", *args, "--yes", *devices)
        assert p.returncode != 0 and "btk-convert profile: error:" in p.stderr.replace("btk-convert: error", "btk-convert profile: error")
        return
    hashes = oracle.snapshot_hashes(devices)
    p = run_btk("btk-convert", "profile", *args, "--yes", *devices)
    assert p.returncode == 0, p.stderr
    oracle.reference_check(devices)
    df = oracle.kernel_roundtrip(devices, hashes)
    got = profiles(df)
    assert got["Metadata"] == meta and got["System"] == system, got
    # after the kernel wrote more, btk-check agrees too
    chk = run_btk("btk-check", *devices)
    assert chk.returncode == 0, chk.stdout + chk.stderr


def test_drop_then_add_back(tmp_path):
    """DUP -> single -> DUP: both directions on one filesystem; the freed space is usable."""
    require_kernel()
    devices = built("s16k-crc32c-zstd").copy_to(tmp_path)
    hashes = oracle.snapshot_hashes(devices)
    assert run_btk("btk-convert", "profile", "--metadata", "single", "--yes", *devices).returncode == 0
    assert run_btk("btk-convert", "profile", "--metadata", "dup", *devices).returncode == 0
    oracle.reference_check(devices)
    df = oracle.kernel_roundtrip(devices, hashes, write_more=False)
    assert profiles(df)["Metadata"] == "DUP"


def test_freed_space_is_allocatable(tmp_path):
    """After DUP -> single the dropped stripes are free device space the kernel can use."""
    require_kernel()
    devices = built("s16k-crc32c-zstd").copy_to(tmp_path)
    before = fsbuild.run(["btrfs", "inspect-internal", "dump-tree", "-t", "dev", str(devices[0])]).stdout
    assert run_btk("btk-convert", "profile", "--metadata", "single", "--yes", *devices).returncode == 0
    after = fsbuild.run(["btrfs", "inspect-internal", "dump-tree", "-t", "dev", str(devices[0])]).stdout
    assert after.count("DEV_EXTENT") < before.count("DEV_EXTENT")
    with fsbuild.attached(devices) as loops, fsbuild.mounted(loops) as mnt:
        n = 0
        try:
            while n < 2000:  # fill until ENOSPC: the kernel must allocate chunks in the freed space
                (mnt / f"fill{n}").write_bytes(b"\0" * (1 << 20))
                n += 1
        except OSError:
            pass
        usage = fsbuild.run(["btrfs", "device", "usage", "-b", str(mnt)]).stdout
    unalloc = int(re.search(r"Unallocated:\s+(\d+)", usage).group(1))
    assert unalloc < 64 << 20, usage
    oracle.reference_check(devices)


@pytest.mark.parametrize("profile", ["raid0", "raid10", "raid5", "raid6"])
def test_striped_profiles_refused(tmp_path, profile):
    devices = built("mkfs-2dev-xxhash").copy_to(tmp_path)
    p = run_btk("btk-convert", "profile", "--metadata", profile, "--yes", *devices)
    assert p.returncode != 0 and "balance" in p.stderr


def test_striped_source_refused(tmp_path):
    require_kernel()
    devices = built("raid10-4dev").copy_to(tmp_path)
    before = [d.read_bytes() for d in devices]
    p = run_btk("btk-convert", "profile", "--metadata", "raid1", "--yes", *devices)
    assert p.returncode != 0 and "balance" in p.stderr
    assert [d.read_bytes() for d in devices] == before


def _copy_physical(devices, logical: int) -> list[tuple[int, int]]:
    out = run_btk("btk-inspect", "map", "--logical", str(logical), *devices).stdout
    return [(int(m.group(1)), int(m.group(2))) for m in re.finditer(r"mirror \d+ devid (\d+) physical (\d+)", out)]


def _first_fs_leaf(devices) -> int:
    out = run_btk("btk-inspect", "tree", "-t", "fs", "--format", "jsonl", *devices).stdout
    return int(re.search(r'"block":(\d+)', out).group(1))


def _smash(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset + 300)
        f.write(b"\xde\xad\xbe\xef")


def test_bad_staying_copy_is_repaired(tmp_path):
    require_kernel()
    devices = built("s16k-crc32c-zstd").copy_to(tmp_path)
    hashes = oracle.snapshot_hashes(devices)
    leaf = _first_fs_leaf(devices)
    (devid, phys), _ = _copy_physical(devices, leaf)
    _smash(devices[devid - 1], phys)
    assert run_btk("btk-check", *devices).returncode == 4
    p = run_btk("btk-convert", "profile", "--metadata", "single", "--yes", *devices)
    assert p.returncode == 0, p.stderr
    assert "repaired 1" in p.stderr
    assert run_btk("btk-check", *devices).returncode == 0
    oracle.kernel_roundtrip(devices, hashes, write_more=False)


def test_no_good_copy_refuses_unchanged(tmp_path):
    devices = built("s16k-crc32c-zstd").copy_to(tmp_path)
    leaf = _first_fs_leaf(devices)
    for devid, phys in _copy_physical(devices, leaf):
        _smash(devices[devid - 1], phys)
    before = devices[0].read_bytes()
    p = run_btk("btk-convert", "profile", "--metadata", "single", "--yes", *devices)
    assert p.returncode != 0 and f"tree block {leaf}" in p.stderr and "no good copy" in p.stderr
    assert devices[0].read_bytes() == before


def test_dry_run_writes_nothing(tmp_path):
    devices = built("mkfs-single").copy_to(tmp_path)
    before = devices[0].read_bytes()
    p = run_btk("btk-convert", "profile", "--metadata", "single", "--dry-run", *devices)
    assert p.returncode == 0 and "drop devid 1" in p.stdout
    assert devices[0].read_bytes() == before


def test_drop_needs_yes_without_terminal(tmp_path):
    devices = built("mkfs-single").copy_to(tmp_path)
    before = devices[0].read_bytes()
    p = run_btk("btk-convert", "profile", "--metadata", "single", *devices)
    assert p.returncode != 0 and "--yes" in p.stderr
    assert devices[0].read_bytes() == before
