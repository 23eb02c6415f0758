# SPDX-License-Identifier: GPL-2.0-only
"""btk-check --repair of names (check/repair_names.c) and of inodes without names
(check/repair_lostfound.c), seen through the kernel: after the repair the damaged file is found by
its name again (lookup through the dir item, readdir through the dir index) or in /lost+found under
its inode number, and reads back what the same file holds on an image whose damage did not touch it.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

import fsbuild
from conftest import require_btk, require_kernel, require_reference_tools, run_btk
from test_check import corpus_images  # noqa: F401 (fixture)
from test_tune import mounted_retry

# (image, path of the damaged file after the repair, the file's name on an undamaged image)
CASES = [
    ("inode-unreachable", "lost+found/294", "file3"),
    ("inode-names-lost", "lost+found/294", "file3"),
    ("dir-item-hash", "file3", "file3"),
    ("dir-item-name", "file1", "file1"),
    ("inode-ref-index", "file3", "file3"),
]


def digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def repaired_files(img: Path, paths: list[str]) -> tuple[dict[str, str], list[str]]:
    """Repair img, mount it read-only: sha256 of each path and the names in the top directory."""
    p = run_btk("btk-check", "--repair", "--yes", "--no-undo", img)
    assert p.returncode == 1, p.stdout + p.stderr
    with fsbuild.attached([img]) as loops, mounted_retry(loops, ("ro",)) as mnt:
        return {x: digest(Path(mnt) / x) for x in paths}, sorted(os.listdir(mnt))


def test_repaired_names_read_back(corpus_images, tmp_path):  # noqa: F811
    require_btk("btk-check")
    require_kernel()
    # the reference contents: an image of the same base whose damage is elsewhere (a directory's size)
    ref = tmp_path / "ref.img"
    fsbuild.run(["cp", "--sparse=always", corpus_images["dir-isize"], ref])
    want, top = repaired_files(ref, ["file1", "file3"])
    assert "lost+found" not in top
    for name, path, orig in CASES:
        img = tmp_path / f"{name}.img"
        fsbuild.run(["cp", "--sparse=always", corpus_images[name], img])
        got, names = repaired_files(img, [path])
        assert got[path] == want[orig], f"{name}: {path} does not read back as {orig}"
        # readdir (dir indexes) shows the name once, and nothing else came or went
        lost = path.startswith("lost+found/")
        expect = sorted((set(top) - {orig} | {"lost+found"}) if lost else set(top))
        assert names == expect, f"{name}: top directory {names}, want {expect}"
        img.unlink()


def test_xattr_under_wrong_hash_rekeyed(corpus_images, tmp_path):  # noqa: F811
    """An xattr keyed one past its name's hash: name-hash, and the names class moves it back; the
    kernel then finds it by name (getxattr looks it up by the hash)."""
    require_btk("btk-check")
    xattr_tool = require_btk("tests/tools/btk-trans-xattr")
    corrupt = require_btk("tests/tools/btk-corrupt")
    img = tmp_path / "img"
    fsbuild.run(["cp", "--sparse=always", corpus_images["dir-isize"], img])
    assert run_btk("btk-check", "--repair", "--yes", "--no-undo", img).returncode == 1
    ino = 257   # "small" in the corpus base
    fsbuild.run([xattr_tool, "--inode", ino, "--count", 1, "--size", 10, "--prefix", "user.btk.", img])
    recs = [json.loads(x) for x in run_btk("btk-inspect", "tree", "--format", "jsonl", img).stdout.splitlines()
            if x.strip()]
    x = next(r for r in recs if r.get("tree") == 5 and r.get("type") == "XATTR_ITEM" and r["key"][0] == ino)
    fsbuild.run([corrupt, "--tree", 5, "--key", ",".join(map(str, x["key"])), "--field", "key.offset",
                 "--value", "+1", img])
    p = run_btk("btk-check", "--format", "json", img)
    assert p.returncode == 4 and {q["id"] for q in json.loads(p.stdout)["problems"]} == {"name-hash"}, p.stdout
    p = run_btk("btk-check", "--repair", "--yes", "--no-undo", img)
    assert p.returncode == 1 and "re-keyed" in p.stdout, p.stdout + p.stderr
    require_kernel()
    require_reference_tools()
    ref = fsbuild.run(["btrfs", "check", "--readonly", img], check=False)
    assert ref.returncode == 0, ref.stdout + ref.stderr
    with fsbuild.attached([img]) as loops, mounted_retry(loops, ("ro",)) as mnt:
        value = os.getxattr(Path(mnt) / "small", "user.btk.000000")
    assert value == bytes((j * 7 + 1) % 256 for j in range(10))


@pytest.mark.parametrize("target", ["named", "missing"])
def test_stray_orphan_item_removed(target, corpus_images, tmp_path):  # noqa: F811
    """An orphan item for an inode that still has its name, or for one that does not exist
    (orphan-item-bad, a warning): the inodes class removes it, the kernel mounts and the file is there."""
    require_btk("btk-check")
    corrupt = require_btk("tests/tools/btk-corrupt")
    require_kernel()
    require_reference_tools()
    img = tmp_path / "img"
    fsbuild.run(["cp", "--sparse=always", corpus_images["dir-isize"], img])
    assert run_btk("btk-check", "--repair", "--yes", "--no-undo", img).returncode == 1
    # the kernel makes the newest inode, an empty file whose last item (its xattr) ends the tree
    with fsbuild.attached([img]) as loops, mounted_retry(loops, ()) as mnt:
        f = Path(mnt) / "zz"
        f.touch()
        os.setxattr(f, "user.x", b"1")
        ino = f.stat().st_ino
    recs = [json.loads(x) for x in run_btk("btk-inspect", "tree", "--format", "jsonl", img).stdout.splitlines()
            if x.strip()]
    last = max((r for r in recs if r.get("tree") == 5 and "key" in r and "blockptr" not in r),
               key=lambda r: (r["key"][0], r["key"][1], r["key"][2]))
    assert last["key"][:2] == [ino, 24], last
    # ... which becomes the orphan item (-5, ORPHAN_ITEM, ino): still the last key
    orphan = "0xfffffffffffffffb"
    for key, field, value in [(f"{ino},24,{last['key'][2]}", "key.objectid", orphan),
                              (f"{orphan},24,{last['key'][2]}", "key.type", 48),
                              (f"{orphan},48,{last['key'][2]}", "key.offset", ino if target == "named" else 99999)]:
        fsbuild.run([corrupt, "--tree", 5, "--key", key, "--field", field, "--value", value, img])
    p = run_btk("btk-check", "--format", "json", img)
    # a warning: old kernels left such items on truncate, and the kernel deletes them itself
    assert p.returncode == 0 and {q["id"] for q in json.loads(p.stdout)["problems"]} == {"orphan-item-bad"}, p.stdout
    p = run_btk("btk-check", "--repair", "--yes", "--no-undo", img)
    assert p.returncode == 1 and "orphan item" in p.stdout, p.stdout + p.stderr
    ref = fsbuild.run(["btrfs", "check", "--readonly", img], check=False)
    assert ref.returncode == 0, ref.stdout + ref.stderr
    with fsbuild.attached([img]) as loops, mounted_retry(loops, ("ro",)) as mnt:
        assert (Path(mnt) / "zz").stat().st_ino == ino
