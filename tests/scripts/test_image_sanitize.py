# SPDX-License-Identifier: GPL-2.0-only
"""btk-image dump --sanitize: names hidden, the restored filesystem still sound.

For `random` and `collide` on a filesystem with subvolumes, snapshots (dir items copied
into leaves split differently), hard links needing inode extrefs, xattrs, symlinks and
inline extents (zstd-compressed ones too), and on one with a log tree:
- the reference `btrfs check` is clean after restore and the kernel mounts it;
- none of the original names is in the uncompressed image (bytes), nor in the restored
  namespace; every name keeps its length, and with collide its crc32c name hash;
- xattr names keep their namespace and length, values are zeroed; symlink targets keep
  their length; inline file data reads back as zeros."""
from __future__ import annotations

import errno
import os
import re
import shutil
import stat
from collections import Counter
from pathlib import Path

import pytest

import fsbuild
import oracle
from conftest import built, require_btk, require_kernel, run_btk


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC_TABLE = _crc32c_table()


def name_hash(name: bytes) -> int:
    """btrfs_name_hash: raw crc32c seeded with ~1."""
    crc = 0xFFFFFFFE
    for b in name:
        crc = CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


def walk(mnt: Path) -> dict:
    """Per entry, keyed by (parent inode, inode, kind) so that renamed trees compare:
    names, xattrs (name -> value), symlink targets, inline-sized file contents."""
    entries = Counter()
    names, xattrs, links, small = [], [], [], {}
    bmnt = os.fsencode(mnt)
    for root, dirs, files in os.walk(bmnt):
        parent = os.lstat(root).st_ino
        for name in dirs + files:
            p = os.path.join(root, name)
            st = os.lstat(p)
            kind = stat.S_IFMT(st.st_mode)
            entries[(parent, st.st_ino, kind, st.st_size, len(name))] += 1
            names.append(((parent, st.st_ino), name))
            if stat.S_ISLNK(st.st_mode):
                links.append(((parent, st.st_ino), os.readlink(p)))
                continue
            for x in os.listxattr(p, follow_symlinks=False):
                xattrs.append(((parent, st.st_ino), os.fsencode(x), os.getxattr(p, x, follow_symlinks=False)))
            if stat.S_ISREG(st.st_mode) and 0 < st.st_size <= 2048:
                try:
                    with open(p, "rb") as f:
                        small[(parent, st.st_ino)] = f.read()
                except OSError as e:   # lzo inline extents are zeroed, not re-encoded: unreadable
                    small[(parent, st.st_ino)] = e.errno
    return {"entries": entries, "names": names, "xattrs": xattrs, "links": links, "small": small}


def mounted_walk(devices, options=("ro", "rescue=nologreplay")) -> dict:
    with fsbuild.attached(devices, readonly="ro" in options) as loops, fsbuild.mounted(loops, options) as mnt:
        return walk(mnt)


_SOURCE_WALKS: dict[str, dict] = {}


def source_walk(name: str) -> dict:
    if name not in _SOURCE_WALKS:
        _SOURCE_WALKS[name] = mounted_walk(built(name).devices)
    return _SOURCE_WALKS[name]


def check_names(before: dict, after: dict, mode: str):
    assert after["entries"] == before["entries"], "the namespace changed shape (or a name its length)"
    old = {}
    for key, name in before["names"]:
        old.setdefault(key, set()).add(name)
    new = {}
    for key, name in after["names"]:
        new.setdefault(key, set()).add(name)
    assert old.keys() == new.keys()
    kept = [(k, old[k] & new[k]) for k in old if old[k] & new[k]]
    assert not kept, f"names survived: {kept[:5]}"
    all_old = {n for _, n in before["names"] if len(n) >= 4}
    leaked = all_old & {n for _, n in after["names"]}
    assert not leaked, f"original names reused elsewhere: {sorted(leaked)[:5]}"
    if mode == "collide":
        hashes = lambda names: Counter((k, name_hash(n)) for k, n in names if len(n) >= 5)
        assert hashes(after["names"]) == hashes(before["names"]), "collide did not keep the name hashes"


def check_payloads(before: dict, after: dict):
    shape = lambda xs: Counter((k, x.split(b".", 1)[0], len(x), len(v)) for k, x, v in xs)
    assert shape(after["xattrs"]) == shape(before["xattrs"]), "xattr names lost their namespace or length"
    for k, x, v in after["xattrs"]:
        if not x.startswith(b"btrfs."):   # properties (btrfs.compression) are not user data
            assert not any(v), f"xattr value not wiped: {x!r}={v!r}"
    old_x = {x for _, x, _ in before["xattrs"] if not x.startswith(b"btrfs.")}
    assert not old_x & {x for _, x, _ in after["xattrs"]}, "xattr names survived"
    lens = lambda links: Counter((k, len(t)) for k, t in links)
    assert lens(after["links"]) == lens(before["links"])
    assert not {t for _, t in before["links"]} & {t for _, t in after["links"]}, "symlink targets survived"
    readable = 0
    for k, data in after["small"].items():
        if isinstance(data, int):
            assert data in (errno.EIO, errno.EUCLEAN), f"reading a wiped inline file: errno {data}"
            continue
        assert len(data) == len(before["small"][k]) and not any(data), "inline data not wiped"
        readable += 1
    assert readable >= 5, "too few inline files read back"


def grep_image(image: Path, before: dict, label: bytes = b""):
    data = image.read_bytes()
    needles = {n for _, n in before["names"] if len(n) >= 6} | ({label} if label else set())
    needles |= {x.split(b".", 1)[1] for _, x, _ in before["xattrs"]
                if b"." in x and not x.startswith(b"btrfs.") and len(x.split(b".", 1)[1]) >= 5}
    needles |= {t for _, t in before["links"] if len(t) >= 6}
    assert len(needles) > 50
    found = re.findall(b"|".join(re.escape(n) for n in sorted(needles, key=len, reverse=True)), data)
    assert not found, f"original names in the image: {sorted(set(found))[:5]}"


CASES = [("s16k-crc32c-zstd", "random"), ("s16k-crc32c-zstd", "collide"),
         ("log-tree-16k", "random"), ("mixed-4k-blake2", "collide")]


@pytest.mark.parametrize("name,mode", CASES)
def test_sanitized_roundtrip(tmp_path, name, mode):
    require_btk("btk-image")
    require_kernel()
    src = built(name).devices
    image = tmp_path / "fs.btkimg"
    p = run_btk("btk-image", "dump", "-q", f"--sanitize={mode}", "--compress=none", *src, image)
    assert p.returncode == 0, p.stderr
    info = run_btk("btk-image", "info", image)
    assert f"sanitized:        {mode}" in info.stdout, info.stdout
    before = source_walk(name)
    mkfs = fsbuild.RECIPE_BY_NAME[name].mkfs
    label = mkfs[mkfs.index("-L") + 1].encode() if "-L" in mkfs else b""
    grep_image(image, before, label)   # the filesystem label goes too
    out = tmp_path / "restored.img"
    p = run_btk("btk-image", "restore", "-q", image, out)
    assert p.returncode == 0, p.stderr
    oracle.reference_check([out])
    after = mounted_walk([out])
    check_names(before, after, mode)
    check_payloads(before, after)
    if fsbuild.RECIPE_BY_NAME[name].log_tree:
        # the kernel replays the sanitized log tree: its names agree with the subvolume's
        with fsbuild.attached([out]) as loops, fsbuild.mounted(loops) as mnt:
            assert any(mnt.iterdir())
        oracle.reference_check([out])


def test_sanitized_btrfs_image_format(tmp_path):
    """The btrfs-image format carries sanitized blocks too (what `btrfs-image -r` reads)."""
    require_btk("btk-image")
    require_kernel()
    src = built("s16k-crc32c-zstd").devices
    image = tmp_path / "fs.btrfs-image"
    p = run_btk("btk-image", "dump", "-q", "--sanitize", "--format=btrfs-image", "-c", "0", *src, image)
    assert p.returncode == 0, p.stderr
    grep_image(image, source_walk("s16k-crc32c-zstd"))
    out = tmp_path / "restored.img"
    p = run_btk("btk-image", "restore", "-q", image, out)
    assert p.returncode == 0, p.stderr
    oracle.reference_check([out])
    if shutil.which("btrfs-image"):
        progs = tmp_path / "progs-restored.img"
        fsbuild.run(["btrfs-image", "-r", str(image), str(progs)])
        oracle.reference_check([progs])


def test_sanitize_map_budget_changes_nothing(tmp_path, monkeypatch):
    """The sanitizer's name map keeps only a bounded part resident (the rest waits in a
    temporary file): with no budget at all it is dropped from memory over and over, and
    the dump is still byte for byte the same."""
    require_btk("btk-image")
    src = built("s16k-crc32c-zstd").devices
    dumps = []
    for budget in (None, "0"):
        if budget is None:
            monkeypatch.delenv("BTK_SANITIZE_MAP_BUDGET", raising=False)
        else:
            monkeypatch.setenv("BTK_SANITIZE_MAP_BUDGET", budget)
        image = tmp_path / f"fs-{budget}.img"
        p = run_btk("btk-image", "dump", "-q", "--sanitize=random", "--format=btrfs-image", "-c", "0",
                    *src, image)
        assert p.returncode == 0, p.stderr
        dumps.append(image.read_bytes())
    assert dumps[0] == dumps[1]
