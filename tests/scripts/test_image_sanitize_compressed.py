# SPDX-License-Identifier: GPL-2.0-only
"""btk-image dump --sanitize on filesystems made by `mkfs.btrfs --rootdir --compress`
(no kernel needed): the restored copy must check clean with btk-check and the reference.

Two findings of the read-only exploration:
- the sanitizer zeroes the unused bytes of every tree block but re-checksummed only the
  blocks whose names it changed: a block with stale bytes and no names (mkfs leaves them
  in the chunk tree) was dumped with a wrong checksum and the restore refused it;
- a compressed inline extent is replaced by a valid stream of zeros, but zstd cannot
  compress into a buffer of exactly its output size (the kernel's inline frames are that
  size), and lzo ones were only zeroed: btk-check reported them as not decompressing."""
import json

import pytest

import fsbuild
import oracle
from conftest import check_json, require_btk, require_reference_tools, run_btk


def _rootdir(d):
    """Small compressible files (inline, compressed), a few bigger ones, a subdirectory."""
    d.mkdir()
    for i in range(40):
        (d / f"small-{i:02d}").write_bytes((b"compressible line %d\n" % i) * (10 + i * 5))
    (d / "sub").mkdir()
    for i in range(5):
        (d / "sub" / f"big-{i}").write_bytes(b"abcdefgh" * (20000 * (i + 1)))
    (d / "sub" / "empty").write_bytes(b"")


def _compressed_inline(img) -> int:
    p = run_btk("btk-inspect", "tree", "-t", "fs", "--format", "jsonl", img)
    assert p.returncode == 0, p.stderr
    items = [json.loads(x) for x in p.stdout.splitlines()]
    return sum(1 for x in items if x.get("type") == "EXTENT_DATA" and "inline_size" in x["fields"]
               and x["fields"]["compression"])


@pytest.mark.parametrize("alg", ["zstd", "zlib", "lzo"])
def test_sanitized_compressed_rootdir_checks_clean(tmp_path, alg):
    require_btk("btk-image")
    require_reference_tools()
    root = tmp_path / "root"
    _rootdir(root)
    img = tmp_path / "fs.img"
    fsbuild.run(["truncate", "-s", "128M", str(img)])
    p = fsbuild.mkfs([img], "-q", "-f", "--rootdir", str(root), "--compress", alg, check=False)
    if p.returncode:
        pytest.skip(f"mkfs.btrfs --rootdir --compress {alg} is not supported: {p.stderr.strip()[-200:]}")
    assert _compressed_inline(img) >= 30, "mkfs wrote no compressed inline extents"
    dump = tmp_path / "fs.btkimg"
    p = run_btk("btk-image", "dump", "-q", "--sanitize", img, dump)
    assert p.returncode == 0, p.stderr
    out = tmp_path / "restored.img"
    p = run_btk("btk-image", "restore", "-q", dump, out)
    assert p.returncode == 0, p.stderr
    assert _compressed_inline(out) >= 30
    _, res, _ = check_json([out])
    assert res["problems"] == [], res["problems"][:5]
    oracle.reference_check([out])
