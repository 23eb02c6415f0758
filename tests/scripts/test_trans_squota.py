# SPDX-License-Identifier: GPL-2.0-only
"""Simple quotas kept by libfs transactions (libfs/trans_squota.c): every tree block of a
subvolume counts toward the subvolume its header names (and the qgroups above it) from the
quota's enable generation on. Copying blocks a snapshot shares with its source gives the copies
to the writing tree and frees old blocks; any btk writer (btk-tune, btk-convert, a repair
class) that changed a subvolume tree left the qgroup numbers as they were, and `btrfs check`
found "Counts for qgroup id ... are different". tests/tools/btk-trans-xattr writes into each
tree in turn; both checks must be clean after, and the numbers must have moved."""
from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import pytest

import oracle
import xattrs
from conftest import require_kernel, run_btk
from fsbuild import MiB, attached, mkfs, mounted, run

LATEST = Path("/opt/btrfs-progs-latest/bin")


def progs(tool: str) -> str:
    return str(LATEST / tool) if (LATEST / tool).exists() else tool


@functools.lru_cache(maxsize=None)
def squota_fs(root: str, late: bool) -> Path:
    """4 KiB nodes; the top level (5) with 500 files and sv (256) with 300, snapshotted as
    snap (257, of 5) and svsnap (258, of sv). late: quotas enabled after the first files
    (their blocks predate the enable generation) and a level-1 group above sv and svsnap."""
    img = Path(root) / ("squota-late.img" if late else "squota.img")
    with open(img, "wb") as f:
        f.truncate(256 * MiB)
    opts = ["-q", "-f", "-n", "4k"] + ([] if late else ["-O", "squota"])
    if mkfs([img], *opts, tool=progs("mkfs.btrfs"), check=False).returncode:
        pytest.skip("mkfs.btrfs makes no simple-quota filesystem")
    with attached([img]) as loops, mounted(loops) as mnt:
        for i in range(500):
            (mnt / f"f{i:03d}").write_bytes(b"top %d\n" % i)
        run(["btrfs", "subvolume", "create", mnt / "sv"])
        for i in range(300):
            (mnt / "sv" / f"g{i:03d}").write_bytes(b"sv %d\n" % i)
        if late:
            run(["sync", "-f", mnt])
            if run(["btrfs", "quota", "enable", "-s", mnt], check=False).returncode:
                pytest.skip("the kernel has no simple quotas")
        run(["btrfs", "subvolume", "snapshot", mnt, mnt / "snap"])
        run(["btrfs", "subvolume", "snapshot", mnt / "sv", mnt / "svsnap"])
        if late:
            run(["btrfs", "qgroup", "create", "1/100", mnt])
            for q in ("0/256", "0/258"):
                run(["btrfs", "qgroup", "assign", q, "1/100", mnt], check=False)
            (mnt / "after").write_bytes(b"written after the snapshots\n")
        run(["sync", "-f", mnt])
    return img


def qgroup_numbers(img: Path) -> dict[str, tuple[int, int]]:
    out = run(["btrfs", "inspect-internal", "dump-tree", "-t", "quota", img]).stdout
    return {m.group(1): (int(m.group(2)), int(m.group(3))) for m in re.finditer(
        r"key \(0 QGROUP_INFO (\S+)\).*\n\s+generation \d+\n\s+referenced (\d+) referenced_compressed \d+\n"
        r"\s+exclusive (\d+)", out)}


def checks_clean(img: Path):
    oracle.reference_check([img])
    if (LATEST / "btrfs").exists():
        p = run([LATEST / "btrfs", "check", "--readonly", img], check=False, timeout=300)
        assert p.returncode == 0, f"btrfs check 7.3:\n{p.stdout[-3000:]}{p.stderr[-3000:]}"
    chk = run_btk("btk-check", img)
    assert chk.returncode == 0, chk.stdout + chk.stderr


# (tree written, xattrs, per commit): the source of a snapshot, a snapshot, a subvolume, its snapshot
WRITES = [(5, 150, 50), (257, 150, 150), (256, 40, 40), (258, 3, 3)]


@pytest.mark.parametrize("late", [False, True], ids=["squota-mkfs", "squota-late-parent"])
def test_simple_quotas_follow_copied_blocks(late, tmp_path_factory, tmp_path):
    require_kernel()
    base = squota_fs(str(tmp_path_factory.getbasetemp()), late)
    img = tmp_path / "fs.img"
    run(["cp", "--sparse=always", base, img])
    hashes = oracle.snapshot_hashes([img])
    before = qgroup_numbers(img)
    assert before, "no qgroup info items"
    for tree, count, per in WRITES:
        p = run([xattrs.tool(), "--tree", tree, "--count", count, "--size", 120, "--per-commit", per, img],
                check=False, timeout=120)
        assert p.returncode == 0, p.stderr
        checks_clean(img)
    after = qgroup_numbers(img)
    # the writes did move the numbers (what the checks above verified)
    for q in ("0/5", "0/257"):
        assert after[q] != before[q], (q, before[q], after[q])
    if late:
        assert after["1/100"] != before["1/100"]
        assert after["1/100"][0] == after["0/256"][0] + after["0/258"][0]
    with attached([img]) as loops, mounted(loops, ("ro",)) as mnt:
        assert oracle.file_hashes(mnt) == hashes
        assert {x for x in os.listxattr(mnt / "snap") if x.startswith("user.")}
