#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Snapshot-scaling filesystem for the btk-check bench (and its tests).
usage: snapgen.py IMG --files F --dirs D --snaps K [--identical] [--size 4G] [--seed S]
Makes IMG (mkfs.btrfs), a subvolume `vol` with F small files in D directories,
then K read-only snapshots snaps/sNNNNN of it. Between two snapshots (unless
--identical): a few creates, deletes, renames and rewrites, and an append to
vol/log. Needs root (loop mount)."""
import argparse, os, random, subprocess, sys, tempfile


def sh(*a, **kw):
    return subprocess.run(a, check=True, stdout=subprocess.PIPE, **kw).stdout.decode().strip()


def populate(vol, files, dirs, rng):
    for d in range(dirs):
        os.mkdir(f"{vol}/d{d:04d}")
    for i in range(files):
        with open(f"{vol}/d{i % dirs:04d}/f{i:07d}", "wb") as f:
            f.write(rng.randbytes(rng.choice((0, 100, 3000, 5000))))


def change(vol, dirs, k, rng, live):
    """A few file changes of a timeline step; live: the file names that exist."""
    for _ in range(4):   # creates
        name = f"{vol}/d{rng.randrange(dirs):04d}/n{k:05d}_{rng.randrange(1 << 30)}"
        with open(name, "wb") as f:
            f.write(rng.randbytes(200))
        live.append(name)
    for _ in range(4):   # deletes
        os.unlink(live.pop(rng.randrange(len(live))))
    for _ in range(4):   # renames (across directories)
        i = rng.randrange(len(live))
        new = f"{vol}/d{rng.randrange(dirs):04d}/r{k:05d}_{rng.randrange(1 << 30)}"
        os.rename(live[i], new)
        live[i] = new
    for _ in range(8):   # rewrites
        with open(live[rng.randrange(len(live))], "r+b") as f:
            f.write(rng.randbytes(300))
    with open(f"{vol}/log", "ab") as f:
        f.write(f"step {k}\n".encode() * 20)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("img")
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--dirs", type=int, default=10)
    ap.add_argument("--snaps", type=int, default=10)
    ap.add_argument("--identical", action="store_true")
    ap.add_argument("--size", default="4G")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    if os.path.exists(a.img):
        os.unlink(a.img)
    sh("truncate", "-s", a.size, a.img)
    sh("mkfs.btrfs", "-f", "-q", a.img)
    mnt = tempfile.mkdtemp(prefix="snapgen.")
    loop = sh("losetup", "-f", "--show", a.img)
    try:
        sh("mount", loop, mnt)
        try:
            vol = f"{mnt}/vol"
            sh("btrfs", "subvolume", "create", vol)
            os.mkdir(f"{mnt}/snaps")
            populate(vol, a.files, a.dirs, rng)
            live = [f"{vol}/d{i % a.dirs:04d}/f{i:07d}" for i in range(a.files)]
            for k in range(a.snaps):
                if not a.identical:
                    change(vol, a.dirs, k, rng, live)
                sh("btrfs", "subvolume", "snapshot", "-r", vol, f"{mnt}/snaps/s{k:05d}")
            sh("sync")
        finally:
            sh("umount", mnt)
    finally:
        sh("losetup", "-d", loop)
        os.rmdir(mnt)


if __name__ == "__main__":
    sys.exit(main())
