# SPDX-License-Identifier: GPL-2.0-only
"""The kernel and reference-tool oracles every writing test applies after btk writes:
the filesystem mounts, every file reads back unchanged, scrub is clean, `btrfs check` passes."""
from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import fsbuild


def file_hashes(mnt: Path) -> dict[str, str]:
    """sha256 of every regular file, the target of every symlink, the type of anything else."""
    out = {}
    for root, dirs, files in os.walk(mnt):
        for name in files:
            p = Path(root) / name
            rel = str(p.relative_to(mnt))
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = "link:" + os.readlink(p)
                continue
            if not stat.S_ISREG(st.st_mode):  # fifos, sockets, devices: their type is their content
                out[rel] = f"mode:{stat.S_IFMT(st.st_mode):o}"
                continue
            h = hashlib.sha256()
            with open(p, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            out[rel] = h.hexdigest()
    return out


def snapshot_hashes(devices: list[Path]) -> dict[str, str]:
    with fsbuild.attached(devices) as loops, fsbuild.mounted(loops, ("ro",)) as mnt:
        return file_hashes(mnt)


def reference_check(devices: list[Path]) -> None:
    """`btrfs check` (the reference) must pass; a multi-device filesystem is checked
    through loop devices, since btrfs-progs finds the other members only by scanning."""
    if len(devices) == 1:
        with fsbuild.fsid_lock(devices):  # btrfs check refuses an image another worker has mounted
            p = fsbuild.run(["btrfs", "check", "--readonly", str(devices[0])], check=False, timeout=600)
    else:
        with fsbuild.attached(devices, readonly=True) as loops:
            fsbuild.run(["btrfs", "device", "scan", *loops], check=False)
            p = fsbuild.run(["btrfs", "check", "--readonly", loops[0]], check=False, timeout=600)
    assert p.returncode == 0, f"btrfs check failed:\n{p.stdout[-4000:]}{p.stderr[-4000:]}"


def kernel_roundtrip(devices: list[Path], hashes: dict[str, str], *, write_more: bool = True) -> list[dict]:
    """Mount, compare every file, scrub read-only, optionally write more; return `btrfs fi df`."""
    with fsbuild.attached(devices) as loops, fsbuild.mounted(loops) as mnt:
        assert file_hashes(mnt) == hashes, "file contents changed"
        scrub = fsbuild.run(["btrfs", "scrub", "start", "-B", "-r", str(mnt)], check=False, timeout=600)
        assert scrub.returncode == 0 and "no errors found" in scrub.stdout, \
            f"scrub:\n{scrub.stdout}{scrub.stderr}"
        df = fsbuild.parse_fs_df(fsbuild.run(["btrfs", "filesystem", "df", "-b", str(mnt)]).stdout)
        if write_more:
            (mnt / "after-btk").mkdir(exist_ok=True)
            for i in range(200):
                (mnt / "after-btk" / f"f{i}").write_bytes(os.urandom(3000))
            fsbuild.run(["sync", "-f", mnt])
    reference_check(devices)
    return df
