# SPDX-License-Identifier: GPL-2.0-only
"""The writing tools (btk-convert, btk-tune, btk-check --repair) on real filesystems with unusual
features, found by a campaign over converted-from-ext4, half-dropped, nearly full, shrunk,
devid-gapped, log-tree, snapshot-heavy, mixed, squota and 64K/4K-node filesystems:

- a half-dropped deleted subvolume: a transaction may reuse the space of the subtrees the kernel
  dropped already; the node pointers to them are not references any more (btk-check reported
  extent-ref-missing after the second commit on such a filesystem);
- a log tree: every writing mode refuses at once (its blocks have no extent items, a transaction
  could reuse them), before verifying or copying anything and before printing what it would do;
- a full filesystem: adding copies is refused with the space the conversion needs and what each
  device has; dropping copies works.
"""
from __future__ import annotations

import lzma
import re
import shutil
from pathlib import Path

import fsbuild
import oracle
from conftest import images_digest, built, require_btk, require_kernel, require_reference_tools, run_btk

IMAGES = Path(__file__).resolve().parents[1] / "images"


def _supers(devices) -> list[bytes]:
    """The superblock copies inside the images: every commit rewrites them."""
    out = []
    for d in devices:
        with open(d, "rb") as f:
            for offset in (64 << 10, 64 << 20):
                f.seek(offset)
                out.append(f.read(4096))
    return out


def _clean(devices):
    p = run_btk("btk-check", *devices)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]


def test_half_dropped_subvolume_survives_two_commits(tmp_path):
    """Two transactions on a filesystem whose deleted subvolume the kernel had half dropped: the
    first may put new blocks where dropped subtrees were, the second commits on top. btk-check,
    the reference and the kernel (which goes on dropping) all accept the result."""
    require_btk("btk-tune")
    img = tmp_path / "hd.img"
    with lzma.open(IMAGES / "half-dropped.img.xz") as src, open(img, "wb") as dst:
        shutil.copyfileobj(src, dst)
    for value in ("on", "off"):
        p = run_btk("btk-tune", "--seeding", value, img)
        assert p.returncode == 0, p.stderr
        _clean([img])
    require_reference_tools()
    oracle.reference_check([img])
    require_kernel()
    with fsbuild.attached([img]) as loops, fsbuild.mounted(loops) as mnt:
        assert oracle.file_hashes(mnt), "no files"
        fsbuild.run(["btrfs", "subvolume", "sync", mnt], timeout=120)   # the drop finishes
    oracle.reference_check([img])
    _clean([img])


LOG_REFUSALS = [
    ("btk-convert", "profile", "--metadata", "single", "--yes"),
    ("btk-convert", "profile", "--data", "dup", "--dry-run"),
    ("btk-convert", "bg-tree"),
    ("btk-tune", "--fsid"),
    ("btk-tune", "--metadata-uuid"),
    ("btk-tune", "--label", "x"),
]


def test_log_tree_refused_before_any_work(tmp_path):
    require_kernel()
    devs = built("log-tree-16k").copy_to(tmp_path)
    before = _supers(devs)
    for tool, *args in LOG_REFUSALS:
        p = run_btk(tool, *args, *devs)
        assert p.returncode == 1, (args, p.stdout, p.stderr)
        errors = [line for line in p.stderr.splitlines() if ": error:" in line]
        assert len(errors) == 1 and "log tree" in errors[0] and "--clear-log" in errors[0], (args, p.stderr)
        # nothing verified, copied or announced (a conversion used to verify every block and
        # refuse only at the commit; --fsid printed the new fsid)
        assert "verified" not in p.stderr and p.stdout == "", (args, p.stdout, p.stderr)
    assert _supers(devs) == before


def _full_fs(tmp_path) -> Path:
    """A single-device filesystem with no unallocated space: mkfs --rootdir --shrink."""
    require_reference_tools()
    root = tmp_path / "root"
    root.mkdir()
    (root / "big").write_bytes(b"\x5a" * (24 << 20))
    (root / "small").write_bytes(b"small file\n")
    img = tmp_path / "full.img"
    with open(img, "wb") as f:
        f.truncate(256 << 20)
    fsbuild.mkfs([img], "-f", "-q", "-m", "dup", "-d", "single", "--rootdir", root, "--shrink")
    return img


def _bytes(size: str) -> float:
    m = re.fullmatch(r"([\d.]+)(B|KiB|MiB|GiB|TiB)", size)
    assert m, size
    return float(m.group(1)) * 1024 ** ["B", "KiB", "MiB", "GiB", "TiB"].index(m.group(2))


def test_full_filesystem_add_refused_with_numbers_drop_works(tmp_path):
    require_btk("btk-convert")
    img = _full_fs(tmp_path)
    before = images_digest([img])
    p = run_btk("btk-convert", "profile", "--data", "dup", "--yes", img)
    assert p.returncode == 1, p.stderr
    m = re.search(r"the new copies need (\S+) of unallocated device space in all, the devices have (\S+) "
                  r"\(devid 1\)", p.stderr)
    assert m and _bytes(m.group(1)) > _bytes(m.group(2)), p.stderr
    assert images_digest([img]) == before
    p = run_btk("btk-convert", "profile", "--metadata", "single", "--yes", img)
    assert p.returncode == 0, p.stderr
    _clean([img])
    oracle.reference_check([img])
    # the space the dropped copies freed now holds a DUP copy of the system chunk again
    p = run_btk("btk-convert", "profile", "--system", "dup", img)
    assert p.returncode == 0, p.stderr
    _clean([img])
    oracle.reference_check([img])


def test_mixed_block_groups_need_both_kinds(tmp_path):
    """A mixed chunk holds data and metadata: --metadata alone (or two different profiles) used to
    convert the system chunk only and report success; now it is refused, and both together work."""
    require_kernel()
    devs = built("mixed-4k-blake2").copy_to(tmp_path)
    before = _supers(devs)
    for args in (["--metadata", "dup"], ["--data", "dup"], ["--metadata", "dup", "--data", "single"]):
        p = run_btk("btk-convert", "profile", *args, "--yes", *devs)
        assert p.returncode == 1 and "mixed block groups" in p.stderr, (args, p.stderr)
    assert _supers(devs) == before
    p = run_btk("btk-convert", "profile", "--metadata", "dup", "--data", "dup", "--yes", *devs)
    assert p.returncode == 0, p.stderr
    assert "DATA|METADATA single -> DUP" in p.stdout, p.stdout
    _clean(devs)
    oracle.reference_check(devs)
