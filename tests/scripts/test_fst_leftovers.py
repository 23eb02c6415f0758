# SPDX-License-Identifier: GPL-2.0-only
"""Free-space-tree items below the lowest chunk: mkfs.btrfs 6.14 leaves them
of its temporary chunks when metadata is DUP. No block group owns them and the
kernel never reads them, but btrfs check 7.x fails the filesystem for them, and
so does btk-check (free-space-leftover). Every btk commit drops them
(libfs/commit.c), so whatever btk writes, a repair of anything included, passes
7.x too; the items of the real block groups stay as they were."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import fsbuild
from conftest import require_btk, require_kernel, require_reference_tools, run_btk
from test_repair import corrupt

LATEST = Path("/opt/btrfs-progs-latest/bin/btrfs")
MiB = 1 << 20


def fst_items(img: Path) -> list[tuple[int, int, int]]:
    p = run_btk("btk-inspect", "tree", "--format", "jsonl", "--tree", "10", img)
    return [tuple(r["key"]) for r in map(json.loads, filter(str.strip, p.stdout.splitlines())) if "key" in r]


def lowest_chunk(img: Path) -> int:
    p = run_btk("btk-inspect", "map", "--format", "json", img)
    return min(c["logical"] for c in json.loads(p.stdout)["chunks"])


def make_with_leftovers(tmp: Path) -> tuple[Path, list, list]:
    """A DUP-metadata filesystem from the system mkfs (6.14) with files in it, and its
    free-space items split into those below the lowest chunk and the others."""
    img = tmp / "img"
    with open(img, "wb") as f:
        f.truncate(512 * MiB)
    fsbuild.run(["mkfs.btrfs", "-q", "-f", "-m", "dup", img])
    with fsbuild.attached([img]) as loops, fsbuild.mounted(loops) as mnt:
        for i in range(20):
            (mnt / f"f{i}").write_bytes(bytes([i]) * (5000 * i + 1))
        fsbuild.run(["sync", "-f", mnt])
    low = lowest_chunk(img)
    items = fst_items(img)
    below = [k for k in items if k[1] in (198, 199, 200) and k[0] + k[2] <= low]
    if not below:
        pytest.skip("this mkfs.btrfs leaves no free-space items below the lowest chunk")
    return img, below, [k for k in items if k not in below]


@pytest.mark.parametrize("how", ["label", "repair", "preen"])
def test_a_commit_drops_items_below_the_lowest_chunk(tmp_path, how):
    require_btk()
    require_reference_tools()
    require_kernel()
    img, below, kept = make_with_leftovers(tmp_path)
    p = run_btk("btk-check", "--format", "json", img)
    assert p.returncode == 4 and {x["id"] for x in json.loads(p.stdout)["problems"]} == {"free-space-leftover"}, \
        p.stdout
    if how == "label":
        p = run_btk("btk-tune", "--label", "leftovers", img)
    elif how == "preen":
        # the leftovers alone: fsck -p repairs them unattended
        p = run_btk("btk-check", "--preen", img)
        assert p.returncode == 1, p.stdout + p.stderr
    else:
        # a real repair: an inode's link count made wrong, fixed by --repair
        ino = next(r["key"][0] for r in map(json.loads, filter(str.strip, run_btk(
            "btk-inspect", "tree", "--format", "jsonl", "--tree", "5", img).stdout.splitlines()))
            if r.get("type") == "INODE_ITEM" and r["key"][0] > 256)
        corrupt([img], "--tree", "5", "--key", f"{ino},1,0", "--field", "nlink", "--value", "7")
        p = run_btk("btk-check", "--repair", "--yes", img)
    assert p.returncode in (0, 1), p.stdout + p.stderr
    after = fst_items(img)
    assert not [k for k in after if k in below], "items below the lowest chunk survived the commit"
    assert [k for k in after if k[0] < lowest_chunk(img)] == [], after
    # the block groups' own items: the commit rewrote only what the write changed
    assert {k[0] for k in kept if k[1] == 198} <= {k[0] for k in after if k[1] == 198}
    assert run_btk("btk-check", img).returncode == 0
    fsbuild.run(["btrfs", "check", "--readonly", img])
    if LATEST.exists():
        r = fsbuild.run([LATEST, "check", "--readonly", img], check=False)
        assert r.returncode == 0, r.stdout + r.stderr
    with fsbuild.attached([img]) as loops, fsbuild.mounted(loops, ("ro",)) as mnt:
        for i in range(20):
            assert (mnt / f"f{i}").read_bytes() == bytes([i]) * (5000 * i + 1)
