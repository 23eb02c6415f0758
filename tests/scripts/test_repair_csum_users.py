# SPDX-License-Identifier: GPL-2.0-only
"""--rebuild-csum-tree over data that no copy can read: the report names the files that use
the unreadable extent (libfs/data_users.c, libfs/inode_path.c), checked against the reference
dump-tree's back references and names."""
from __future__ import annotations

import hashlib
import os
import subprocess
import re

import fsbuild
from conftest import btk_path, require_btk
from test_repair import check
from test_tune import kernel_fs, needs, SIMPLE

KEY = re.compile(r"item \d+ key \((\S+) (\w+) (\d+)\)")


def dump(dev, tree: str) -> str:
    return fsbuild.run(["btrfs", "inspect-internal", "dump-tree", "-t", tree, dev]).stdout


def chunks(dev) -> list[tuple[int, int, str, list[int]]]:
    """(logical, length, type, stripe offsets) of every chunk."""
    out, cur = [], None
    for line in dump(dev, "chunk").splitlines():
        if m := KEY.search(line):
            cur = [int(m.group(3)), 0, "", []] if m.group(2) == "CHUNK_ITEM" else None
            if cur:
                out.append(cur)
        elif cur is not None and (m := re.search(r"length (\d+) .* type (\S+)", line)):
            cur[1], cur[2] = int(m.group(1)), m.group(2)
        elif cur is not None and (m := re.search(r"stripe \d+ devid \d+ offset (\d+)", line)):
            cur[3].append(int(m.group(1)))
    return [tuple(c) for c in out]


def last_data_extent(dev) -> tuple[int, int, list[tuple[int, int]]]:
    """The data extent of highest address: (logical, length, [(root, inode)] of its data refs)."""
    best, refs = None, {}
    cur = None
    for line in dump(dev, "extent").splitlines():
        if m := KEY.search(line):
            cur = (int(m.group(1)), int(m.group(3))) if m.group(2) == "EXTENT_ITEM" else None
        elif cur and "flags DATA" in line:
            best = cur if best is None or cur[0] > best[0] else best
            refs.setdefault(cur, [])
        elif cur and (m := re.search(r"extent data backref root (\S+) objectid (\d+)", line)):
            root = 5 if m.group(1) == "FS_TREE" else int(m.group(1))
            refs.setdefault(cur, []).append((root, int(m.group(2))))
    assert best, "no data extent"
    return best[0], best[1], refs[best]


def path_of(dev, root: int, ino: int) -> str:
    """The path of ino from its INODE_REF items in the reference dump."""
    names, cur = {}, None
    for line in dump(dev, str(root)).splitlines():
        if m := KEY.search(line):
            cur = (int(m.group(1)), int(m.group(3))) if m.group(2) == "INODE_REF" else None
        elif cur and (m := re.search(r"name: (.*)$", line)) and cur[0] not in names:
            names[cur[0]] = (cur[1], m.group(1))
    parts = []
    while ino != 256:
        ino, name = names[ino]
        parts.append(name)
    return "/" + "/".join(reversed(parts))


def test_repair_refuses_a_device_cut_off_before_its_data(tmp_path):
    """The image is cut off where its last data extent starts (all metadata lies before it).
    Such a device is shorter than its dev item says: the kernel would not mount it, and
    --repair refuses it before the check and before any byte is written (issue 12); the
    read-only check still reads it."""
    require_btk("btk-check")
    devs = kernel_fs(needs(SIMPLE)).copy_to(tmp_path)
    logical, length, users = last_data_extent(devs[0])
    assert users, "the last data extent has no keyed or inline data refs to compare"
    maps = chunks(devs[0])
    (start, _, _, stripes), = [c for c in maps if c[0] <= logical < c[0] + c[1]]
    assert len(stripes) == 1, "a single data profile is expected"
    physical = stripes[0] + logical - start
    for c in maps:
        if "DATA" not in c[2]:
            assert all(s + c[1] <= physical for s in c[3]), f"metadata after the data extent: {c}"
    os.truncate(devs[0], physical)
    before = hashlib.sha1(open(devs[0], "rb").read()).hexdigest()

    p = subprocess.run([str(btk_path("btk-check")), "--repair", "--yes", "--no-undo", "--rebuild-csum-tree",
                        *map(str, devs)], capture_output=True, text=True)
    assert p.returncode == 8, (p.returncode, p.stdout, p.stderr)
    assert "truncated" in p.stderr and "nothing was written" in p.stderr, p.stderr
    assert os.path.getsize(devs[0]) == physical
    assert hashlib.sha1(open(devs[0], "rb").read()).hexdigest() == before
    p = subprocess.run([str(btk_path("btk-check")), *map(str, devs)], capture_output=True, text=True)
    assert p.returncode in (0, 4), (p.returncode, p.stderr)


def test_rebuild_csum_tree_names_the_files_of_unreadable_data(tmp_path):
    """A data block that no copy gives back, for real: the filesystem image lies on another btrfs
    whose copy of that block was damaged on its disk, so reading it fails with EIO. The rebuild
    checksums the rest, gives that block none and names both files (a reflink shares the extent)."""
    from conftest import require_kernel
    from test_tune import mounted_retry

    require_btk("btk-check")
    require_kernel()
    block = b"".join(b"%08d-%06d " % (41, i) for i in range(256))  # 4 KiB, nowhere else
    data = os.urandom(8192) + block + os.urandom(8192)
    inner, outer = tmp_path / "inner.img", tmp_path / "outer.img"
    for img, size in ((inner, 128 << 20), (outer, 256 << 20)):
        with open(img, "wb") as f:
            f.truncate(size)
        fsbuild.mkfs([img], "-q", "-f")
    with fsbuild.attached([inner]) as loops, mounted_retry(loops) as mnt:
        os.mkdir(os.path.join(mnt, "dir"))
        with open(os.path.join(mnt, "dir", "data"), "wb") as f:
            f.write(data)
        fsbuild.run(["cp", "--reflink=always", os.path.join(mnt, "dir", "data"), os.path.join(mnt, "copy")])
    with fsbuild.attached([outer]) as loops, mounted_retry(loops) as mnt:
        fsbuild.run(["cp", "--sparse=always", inner, os.path.join(mnt, "inner.img")])
    raw = open(outer, "rb").read()
    at = raw.find(block)
    assert at > 0 and raw.find(block, at + 1) < 0, "the block is not once on the outer disk"
    with open(outer, "r+b") as f:  # under the outer filesystem's checksum: its reads now fail
        f.seek(at + 100)
        f.write(b"damaged!")
    with fsbuild.attached([outer]) as loops, mounted_retry(loops) as mnt:
        p = subprocess.run([str(btk_path("btk-check")), "--repair", "--yes", "--no-undo", "--rebuild-csum-tree",
                            os.path.join(mnt, "inner.img")], capture_output=True, text=True)
    out = p.stdout
    assert "1 block(s) cannot be read from any copy and get no checksum" in out, out + p.stderr
    assert re.search(r"is used by subvolume 5 inode \d+ /dir/data at offset 0", out), out
    assert re.search(r"is used by subvolume 5 inode \d+ /copy at offset 0", out), out
    # the other 16 KiB of the extent got their checksums back: only the lost block lacks one
    assert "4096 bytes used by checksummed files have no checksum" in out and p.returncode == 4, out
