# SPDX-License-Identifier: GPL-2.0-only
"""btk-convert profile, judged by the kernel and the reference tools."""
from __future__ import annotations

import json
import re

import pytest

import fsbuild
import oracle
from conftest import built, require_kernel, run_btk, super_json, images_digest, image_digest

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
    before = images_digest(devices)
    p = run_btk("btk-convert", "profile", "--metadata", "raid1", "--yes", *devices)
    assert p.returncode != 0 and "balance" in p.stderr
    assert images_digest(devices) == before


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


# (recipe, what is damaged, the option that drops copies, what btk-convert says after the repair)
DAMAGE_CASES = [
    ("s16k-crc32c-zstd", "tree block", "--metadata", "repaired 1,"),
    ("raid1-2dev", "data block", "--data", "repaired 1 data sector"),
]
DAMAGE_IDS = ["tree-block", "data-sector"]


def _damaged_block(devices, what) -> int:
    return _first_fs_leaf(devices) if what == "tree block" else _first_csummed_sector(devices)


@pytest.mark.parametrize("name,what,option,said", DAMAGE_CASES, ids=DAMAGE_IDS)
def test_bad_staying_copy_is_repaired(tmp_path, name, what, option, said):
    """A block damaged on the copy that stays (mirror 1) is rewritten from the other before the drop."""
    require_kernel()
    devices = built(name).copy_to(tmp_path)
    hashes = oracle.snapshot_hashes(devices)
    (devid, phys), _ = _copy_physical(devices, _damaged_block(devices, what))
    _smash(devices[devid - 1], phys)
    if what == "tree block":
        assert run_btk("btk-check", *devices).returncode == 4
    p = run_btk("btk-convert", "profile", option, "single", "--yes", *devices)
    assert p.returncode == 0 and said in p.stderr, p.stderr
    assert run_btk("btk-check", *devices).returncode == 0
    oracle.kernel_roundtrip(devices, hashes, write_more=False)


@pytest.mark.parametrize("name,what,option,said", DAMAGE_CASES, ids=DAMAGE_IDS)
def test_no_good_copy_refuses_unchanged(tmp_path, name, what, option, said):
    """A block damaged on every copy: the conversion refuses, names it, and changes nothing."""
    devices = built(name).copy_to(tmp_path)
    block = _damaged_block(devices, what)
    for devid, phys in _copy_physical(devices, block):
        _smash(devices[devid - 1], phys)
    before = images_digest(devices)
    p = run_btk("btk-convert", "profile", option, "single", "--yes", *devices)
    assert p.returncode != 0 and f"{what} {block}" in p.stderr and "no good copy" in p.stderr, p.stderr
    assert images_digest(devices) == before


def test_dry_run_writes_nothing(tmp_path):
    devices = built("mkfs-single").copy_to(tmp_path)
    before = image_digest(devices[0])
    p = run_btk("btk-convert", "profile", "--metadata", "single", "--dry-run", *devices)
    assert p.returncode == 0 and "drop devid 1" in p.stdout
    assert image_digest(devices[0]) == before


def test_drop_needs_yes_without_terminal(tmp_path):
    devices = built("mkfs-single").copy_to(tmp_path)
    before = image_digest(devices[0])
    p = run_btk("btk-convert", "profile", "--metadata", "single", *devices)
    assert p.returncode != 0 and "--yes" in p.stderr
    assert image_digest(devices[0]) == before


# ---------------------------------------------------------------- undo and crashes


import crash  # noqa: E402


@pytest.mark.parametrize("name,args", [("s16k-crc32c-zstd", ["--metadata", "single"]),
                                       ("mkfs-single", ["--metadata", "single"]),
                                       ("raid1-2dev", ["--metadata", "dup"]),
                                       ("s16k-crc32c-zstd", ["--data", "dup"])])
def test_undo_restores_original(tmp_path, name, args):
    if name != "mkfs-single":
        require_kernel()
    devices = built(name).copy_to(tmp_path)
    before = images_digest(devices)
    undo = tmp_path / "convert.undo"
    p = run_btk("btk-convert", "profile", *args, "--yes", "--undo-file", undo, *devices)
    assert p.returncode == 0, p.stderr
    assert images_digest(devices) != before
    u = run_btk("btk-undo", undo, *devices)
    assert u.returncode == 0, u.stderr
    assert images_digest(devices) == before
    assert run_btk("btk-undo", undo, *devices).returncode != 0  # a second time: refused


def _profiles_on_disk(devices) -> dict:
    out = run_btk("btk-inspect", "map", "--format", "json", *devices).stdout
    import json
    return {c["flags"].split("|")[0]: c["profile"] for c in json.loads(out)["chunks"]}


@pytest.mark.parametrize("name,args,old,new", [
    ("mkfs-single", ["--metadata", "single"], "DUP", "single"),
    ("mkfs-single", ["--metadata", "dup", "--system", "dup"], None, None),  # set below: single -> DUP
    ("mkfs-2dev-xxhash", ["--metadata", "single"], "RAID1", "single"),
])
def test_crash_leaves_old_or_new(tmp_path, name, args, old, new):
    """Replay every prefix of the conversion's write log (and reordered unflushed writes):
    each state is entirely the old or entirely the new filesystem and passes btrfs check."""
    fs = built(name)
    base = fs.copy_to(tmp_path / "base")
    if old is None:  # start from single metadata to test adding copies
        assert run_btk("btk-convert", "profile", "--metadata", "single", "--yes", *base).returncode == 0
        old, new = "single", "DUP"
    work = [tmp_path / "work" / d.name for d in base]
    (tmp_path / "work").mkdir()
    for s, d in zip(base, work):
        fsbuild.run(["cp", "--sparse=always", s, d])
    log = tmp_path / "wlog"
    p = crash.record(log, "btk-convert", "profile", *args, "--yes", *work)
    assert p.returncode == 0, p.stderr
    wl = crash.count(log)
    writes = wl.writes
    seen = set()
    for k, seed, crashed in crash.replay(base, log, crash.states(crash.points(wl), (1, 2), every=3),
                                         tmp_path / "crash"):
        chk = run_btk("btk-check", *crashed)
        assert chk.returncode == 0, f"after {k} writes (seed {seed}):\n{chk.stdout}{chk.stderr}"
        prof = _profiles_on_disk(crashed)
        state = prof.get("METADATA")
        assert state in (old, new), (k, seed, prof)
        seen.add(state)
        if seed is None and k in (0, writes // 2, writes):
            oracle.reference_check(crashed)
    assert seen == {old, new}


def test_crash_among_the_last_superblock_writes(tmp_path):
    """RAID1 -> single on two devices, crashed with the final superblock writes
    reordered: one device may hold the new superblock and the other the old one.
    As the kernel does, btk-check takes the newest member's superblock (the
    others' copies are only stale), so every such state checks clean."""
    fs = built("mkfs-2dev-xxhash")
    base = fs.copy_to(tmp_path / "base")
    work = [tmp_path / "work" / d.name for d in base]
    (tmp_path / "work").mkdir()
    for s, d in zip(base, work):
        fsbuild.run(["cp", "--sparse=always", s, d])
    log = tmp_path / "wlog"
    assert crash.record(log, "btk-convert", "profile", "--metadata", "single", "--yes", *work).returncode == 0
    writes = crash.count(log).writes
    split = 0
    for k, seed, crashed in crash.replay(base, log, [(writes, s) for s in range(1, 9)], tmp_path / "crash"):
        gens = {super_json(run_btk("btk-inspect", "super", "--format", "json", d).stdout)["generation"]
                for d in crashed}
        split += len(gens) > 1
        chk = run_btk("btk-check", *crashed)
        assert chk.returncode == 0, f"seed {seed}:\n{chk.stdout}{chk.stderr}"
    assert split, "no reordering left the devices' primary superblocks at different generations"


# ---------------------------------------------------------------- block-group tree

def _compat_ro(devices) -> int:
    import json
    return super_json(run_btk("btk-inspect", "super", "--format", "json", devices[0]).stdout)["compat_ro_flags"]


BGT = 1 << 3


@pytest.mark.parametrize("name", ["s16k-crc32c-zstd", "raid1c3-3dev", "s64k-sha256-zlib"])
def test_bg_tree_enable_and_revert(tmp_path, name):
    require_kernel()
    devices = built(name).copy_to(tmp_path)
    hashes = oracle.snapshot_hashes(devices)
    p = run_btk("btk-convert", "bg-tree", *devices)
    assert p.returncode == 0, p.stderr
    assert _compat_ro(devices) & BGT
    oracle.reference_check(devices)
    tree = run_btk("btk-inspect", "tree", "-t", "block-group", "--format", "jsonl", *devices).stdout
    assert tree.count('"BLOCK_GROUP_ITEM"') >= 3
    assert '"BLOCK_GROUP_ITEM"' not in run_btk("btk-inspect", "tree", "-t", "extent", "--format", "jsonl",
                                               *devices).stdout
    oracle.kernel_roundtrip(devices, hashes)  # mount, compare, scrub, write more, check
    hashes = oracle.snapshot_hashes(devices)
    p = run_btk("btk-convert", "bg-tree", "--revert", *devices)
    assert p.returncode == 0, p.stderr
    assert not _compat_ro(devices) & BGT
    oracle.kernel_roundtrip(devices, hashes, write_more=False)
    assert run_btk("btk-check", *devices).returncode == 0


def test_bg_tree_builds_free_space_tree(tmp_path):
    """Without a free-space tree, bg-tree builds it first (and says so) in the same transaction."""
    require_kernel()
    img = tmp_path / "nofst.img"
    fsbuild.run(["truncate", "-s", "256M", img])
    fsbuild.run(["mkfs.btrfs", "-q", "-f", "-R", "^free-space-tree", img])
    p = run_btk("btk-convert", "bg-tree", img)
    assert p.returncode == 0 and "built the free-space tree first" in p.stderr, p.stderr
    assert _compat_ro([img]) == 0b1011  # FREE_SPACE_TREE | FREE_SPACE_TREE_VALID | BLOCK_GROUP_TREE
    oracle.kernel_roundtrip([img], {})  # mounts, scrub, writes, reference check


def test_bg_tree_needs_no_holes(tmp_path):
    """The kernel refuses a block-group tree without no-holes: so does btk, changing nothing."""
    require_kernel()
    devices = built("s4k-xxhash-holes-lzo").copy_to(tmp_path)
    before = images_digest(devices)
    p = run_btk("btk-convert", "bg-tree", *devices)
    assert p.returncode != 0 and "no-holes" in p.stderr
    assert images_digest(devices) == before


def _copies(devices, dest) -> list:
    """Sparse copies of devices in the new directory dest."""
    dest.mkdir()
    out = [dest / d.name for d in devices]
    for s, d in zip(devices, out):
        fsbuild.run(["cp", "--sparse=always", s, d])
    return out


@pytest.mark.parametrize("revert", [False, True], ids=["enable", "revert"])
def test_bg_tree_undo_and_crash(tmp_path, revert):
    """Every write-log prefix of `bg-tree` (or `bg-tree --revert`) is the old or the new filesystem
    and passes btk-check (the reference check at both ends); btk-undo restores the original."""
    base = built("mkfs-single").copy_to(tmp_path / "base")
    if revert:
        assert run_btk("btk-convert", "bg-tree", *base).returncode == 0
    work = _copies(base, tmp_path / "work")
    before = images_digest(work)
    log, undo = tmp_path / "wlog", tmp_path / "bgt.undo"
    p = crash.record(log, "btk-convert", "bg-tree", *(["--revert"] if revert else []), "--undo-file", undo, *work)
    assert p.returncode == 0, p.stderr
    wl = crash.count(log)
    seen = set()
    for k, seed, crashed in crash.replay(base, log, crash.states(crash.points(wl), (7,), every=2),
                                         tmp_path / "crash"):
        chk = run_btk("btk-check", *crashed)
        assert chk.returncode == 0, f"after {k} writes (seed {seed}):\n{chk.stdout}{chk.stderr}"
        seen.add(bool(_compat_ro(crashed) & BGT))
        if seed is None and k in (0, wl.writes):
            oracle.reference_check(crashed)
    assert seen == {False, True}
    assert run_btk("btk-undo", undo, *work).returncode == 0
    assert images_digest(work) == before


# ---------------------------------------------------------------- data profiles

# (recipe, successive --data targets, profile the kernel shows at the end)
DATA_CASES = [
    ("raid1-2dev", ["single", "raid1"], "RAID1"),       # drop, then add back on the other device
    ("raid1c3-3dev", ["raid1"], "RAID1"),
    ("s16k-crc32c-zstd", ["dup"], "DUP"),                # single -> DUP on one device
    ("s4k-xxhash-holes-lzo", ["single"], "single"),      # DUP -> single
]


@pytest.mark.parametrize("name,targets,shown", DATA_CASES, ids=[f"{c[0]}:{'-'.join(c[1])}" for c in DATA_CASES])
def test_data_profile_conversion(tmp_path, name, targets, shown):
    """Data chunks change profile in place: files read back, scrub (every copy) and check are clean,
    and the kernel writes on."""
    require_kernel()
    devices = built(name).copy_to(tmp_path)
    hashes = oracle.snapshot_hashes(devices)
    meta_before = _profiles_on_disk(devices)["METADATA"]
    for target in targets:
        p = run_btk("btk-convert", "profile", "--data", target, "--yes", *devices)
        assert p.returncode == 0, p.stderr
        assert re.search(r"verified [1-9][\d.]* MiB of data", p.stderr), p.stderr
    df = oracle.kernel_roundtrip(devices, hashes)
    got = profiles(df)
    assert got["Data"] == shown, got
    assert _profiles_on_disk(devices)["METADATA"] == meta_before  # only data chunks changed


def _first_csummed_sector(devices) -> int:
    out = run_btk("btk-inspect", "tree", "-t", "csum", "--format", "jsonl", *devices).stdout
    return int(re.search(r'"key":\[\d+,128,(\d+)\]', out).group(1))


# ---------------------------------------------------------------- bg-tree in batches

CHANGING_BG_TREE = 1 << 38


def _super_flags(devices) -> int:
    import json
    return super_json(run_btk("btk-inspect", "super", "--format", "json", devices[0]).stdout)["flags"]


@pytest.mark.parametrize("revert", [False, True], ids=["enable", "revert"])
def test_bg_tree_batches_resume(tmp_path, revert):
    """A conversion in batches (one block group per transaction) interrupted at any flush -- at
    every batch commit in particular -- is finished by running the same command again, or undone
    by the opposite one; either way btk-check and the reference check pass."""
    base = built("mkfs-single").copy_to(tmp_path / "base")
    if revert:
        assert run_btk("btk-convert", "bg-tree", *base).returncode == 0
    args = ["bg-tree", "--batch", "1"] + (["--revert"] if revert else [])
    work = _copies(base, tmp_path / "work")
    log = tmp_path / "wlog"
    p = crash.record(log, "btk-convert", *args, *work)
    assert p.returncode == 0, p.stderr
    assert "in 5 transaction(s)" in p.stderr, p.stderr  # setup, 3 block groups, finish
    wl = crash.count(log)
    half_done = 0
    pts = sorted(set(crash.points(wl, around_flushes=True, step=max(1, wl.writes // 8))))
    for k, seed, crashed in crash.replay(base, log, crash.states(pts), tmp_path / "crash"):
        if not _super_flags(crashed) & CHANGING_BG_TREE:
            continue
        half_done += 1
        undo = half_done % 2 == 0  # every other state is undone instead of finished
        again = ["bg-tree"] + ([] if revert == undo else ["--revert"])
        r = run_btk("btk-convert", *again, *crashed)
        assert r.returncode == 0 and "left half done" in r.stderr, f"after {k} writes: {r.stderr}"
        assert not _super_flags(crashed) & CHANGING_BG_TREE
        assert bool(_compat_ro(crashed) & BGT) == (revert == undo), k
        chk = run_btk("btk-check", *crashed)
        assert chk.returncode == 0, f"after {k} writes, resumed:\n{chk.stdout}{chk.stderr}"
        if half_done <= 4:
            oracle.reference_check(crashed)
    assert half_done >= 3, half_done
