# SPDX-License-Identifier: GPL-2.0-only
"""btk-image reads `btrfs-image` dumps of several clusters.

btrfs-image does not clear its cluster header between clusters: when a cluster holds
fewer items than the one before it, that one's last item entries stay after the item
table. btk-image refused such dumps ("garbage after the item table"), i.e. every dump of
a filesystem with more than a few hundred tree blocks whose last cluster was the
shorter one. The dump takes more than one cluster only when the tree blocks are
scattered (btrfs-image merges runs of adjacent blocks into one item): the kernel's COW
scatters them, mkfs --rootdir does not."""
import os
import shutil
import struct

import fsbuild
import oracle
from conftest import check_json, require_btk, require_kernel, run_btk, skip_or_fail

MAGIC = 0xbd5c25e27295668b


def _clusters(dump) -> list[tuple[int, bool]]:
    """(items, stale bytes after the item table) of every cluster of a stored (-c0) dump."""
    data = dump.read_bytes()
    out, pos = [], 0
    while pos + 1024 <= len(data):
        magic, _, n = struct.unpack_from("<QQI", data, pos)
        if magic != MAGIC:
            break
        size = sum(struct.unpack_from("<I", data, pos + 21 + 12 * i + 8)[0] for i in range(n))
        out.append((n, any(data[pos + 21 + 12 * n:pos + 1024])))
        pos += 1024 + (size + 1023) // 1024 * 1024
    return out


def test_btk_restores_a_btrfs_image_dump_with_stale_cluster_entries(tmp_path):
    require_btk("btk-image")
    require_kernel()
    if not shutil.which("btrfs-image"):
        skip_or_fail("btrfs-image (btrfs-progs) is not installed")
    img = tmp_path / "fs.img"
    fsbuild.run(["truncate", "-s", "128M", str(img)])
    fsbuild.mkfs([img], "-q", "-f", "-n", "4k")
    with fsbuild.attached([img]) as loops, fsbuild.mounted(loops) as mnt:
        for r in range(4):      # 4 commits, each rewriting half the directories: scattered blocks
            for d in range(16):
                (mnt / f"d{d}").mkdir(exist_ok=True)
                for i in range(r * 60, r * 60 + 60):
                    (mnt / f"d{d}" / f"f{i}").write_bytes(b"y" * (i % 50 * 40 + 1))
            fsbuild.run(["sync", "-f", str(mnt)])
            for d in range(0, 16, 2):
                for i in range(0, r * 60 + 60, 7):
                    os.utime(mnt / f"d{d}" / f"f{i}", (r, r))
            fsbuild.run(["sync", "-f", str(mnt)])
    dump = tmp_path / "fs.btrfs-image"
    fsbuild.run(["btrfs-image", "-c0", str(img), str(dump)])
    clusters = _clusters(dump)
    assert len(clusters) >= 2 and any(stale for _, stale in clusters), clusters
    out = tmp_path / "restored.img"
    p = run_btk("btk-image", "restore", "-q", dump, out)
    assert p.returncode == 0, p.stderr
    _, res, _ = check_json([out])
    assert res["problems"] == [], res["problems"][:5]
    assert res["inodes"] >= 3800
    oracle.reference_check([out])
