# SPDX-License-Identifier: GPL-2.0-only
"""Unusual but valid filesystems, of the kinds other tools' test suites keep as "must be clean"
(btrfs-progs fsck-tests 019, 020, 022, 029, 030, 036, misc-tests 034, 069): made here by
mkfs.btrfs and the kernel, each must pass btk-check with no problem, and the reference
`btrfs check` (7.3 when installed beside the Debian one) must pass it too, so a finding would
be btk's false positive, not damage.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import fsbuild
from conftest import built, require_btk, require_kernel, require_reference_tools, run_btk
from test_repair import corrupt, corrupt_tool

LATEST = Path("/opt/btrfs-progs-latest/bin")
MiB = 1 << 20


def progs(tool: str) -> str:
    """btrfs-progs 7.3 when installed (its mkfs leaves no stray free-space entries), else the system's."""
    return str(LATEST / tool) if (LATEST / tool).exists() else tool


def sh(mnt: Path, script: str):
    subprocess.run(["bash", "-ec", script], check=True, env={**os.environ, "M": str(mnt)}, timeout=120)


def make(tmp: Path, mkfs=(), script: str = "", after=()) -> Path:
    img = tmp / "img"
    with open(img, "wb") as f:
        f.truncate(384 * MiB)
    fsbuild.run([progs("mkfs.btrfs"), "-q", "-f", *mkfs, img])
    with fsbuild.attached([img]) as loops, fsbuild.mounted(loops) as mnt:
        sh(mnt, script)
        fsbuild.run(["sync", "-f", mnt])
    for cmd in after:
        fsbuild.run([*cmd, img])
    return img


def expect_clean(img: Path, reference: str | None = None):
    p = run_btk("btk-check", "--format", "json", img)
    ids = sorted({x["id"] for x in json.loads(p.stdout)["problems"]})
    assert p.returncode == 0 and not ids, f"btk-check exit {p.returncode}: {ids}\n{p.stderr}"
    r = fsbuild.run([reference or progs("btrfs"), "check", "--readonly", img], check=False)
    assert r.returncode == 0, f"the reference calls it damaged:\n{r.stdout}{r.stderr}"


BIG_DIR = 'mkdir $M/d; for i in $(seq 300); do echo $i > $M/d/f$i; done'

KINDS = {
    # non-skinny extent items, shared tree blocks and data reached through two snapshots (keyed
    # and shared backrefs once the snapshots diverge)
    "noskinny-snapshots": (("-O", "^skinny-metadata", "-n", "4k"),
                           BIG_DIR + '; head -c 300000 /dev/urandom > $M/a; cp --reflink=always $M/a $M/b;'
                           'btrfs subvolume snapshot $M $M/s1 >/dev/null; btrfs subvolume snapshot $M $M/s2'
                           ' >/dev/null; echo y >> $M/s1/b; rm $M/d/f1*; rm $M/s2/d/f2*', ()),
    # a preallocated extent shared by a reflink, then partly written in the copy (fsck-tests 030)
    "prealloc-reflinked": ((), 'fallocate -l 1M $M/p; cp --reflink=always $M/p $M/q;'
                               'dd if=/dev/urandom of=$M/q bs=4k count=4 seek=8 conv=notrunc status=none', ()),
    # quotas, a subvolume, a snapshot, a rescan done (fsck-tests 022/036 keep the halfway states)
    "qgroups-rescanned": ((), 'btrfs quota enable $M; btrfs subvolume create $M/sv >/dev/null;'
                              'head -c 2000000 /dev/urandom > $M/sv/a; btrfs subvolume snapshot $M/sv $M/snap'
                              ' >/dev/null; btrfs quota rescan -w $M >/dev/null', ()),
    "squota-reflink": ((), 'btrfs quota enable --simple $M; btrfs subvolume create $M/sv >/dev/null;'
                           'head -c 2000000 /dev/urandom > $M/sv/a; cp --reflink=always $M/sv/a $M/b', ()),
    # a deleted subvolume whose cleanup the unmount interrupted: refs 0 and an orphan item (029)
    "deleted-subvolume": ((), 'btrfs subvolume create $M/sv >/dev/null; for i in $(seq 1500); do echo $i >'
                              ' $M/sv/f$i; done; sync; btrfs subvolume delete $M/sv >/dev/null', ()),
    # a balance paused: the balance item stays in the root tree
    "balance-paused": ((), 'for i in $(seq 12); do head -c 3000000 /dev/urandom > $M/f$i; done; ' + BIG_DIR +
                           '; sync; (btrfs balance start -f --full-balance $M >/dev/null 2>&1 &); sleep 0.5;'
                           'btrfs balance pause $M >/dev/null 2>&1 || true; sleep 0.2', ()),
    # a metadata uuid apart from the fsid (misc-tests 034)
    "metadata-uuid": ((), BIG_DIR, ((progs("btrfstune"), "-m"),)),
    "block-group-tree": (("-O", "block-group-tree"), BIG_DIR + '; head -c 2000000 /dev/urandom > $M/a', ()),
}


# states the kernel may leave or not (a race with its cleaner, the balance): the root-tree item
# that shows it was reached
REACHED = {"deleted-subvolume": "ORPHAN_ITEM", "balance-paused": "TEMPORARY_ITEM"}


def root_tree_has(img: Path, type_name: str) -> bool:
    p = run_btk("btk-inspect", "tree", "--format", "jsonl", "--tree", "1", img)
    return any(json.loads(line).get("type") == type_name for line in p.stdout.splitlines() if line.strip())


@pytest.mark.parametrize("kind", list(KINDS))
def test_clean_kind(kind, tmp_path):
    require_btk("btk-check")
    require_kernel()
    require_reference_tools()
    mkfs, script, after = KINDS[kind]
    img = make(tmp_path, mkfs, script, after)
    if kind in REACHED and not root_tree_has(img, REACHED[kind]):
        pytest.skip(f"the kernel left no {REACHED[kind]} this time")
    expect_clean(img)


def test_seed_with_dirty_log(tmp_path):
    """A seed filesystem whose log tree was never replayed (misc-tests 052): clean. Made from the
    cached log-tree recipe with the superblock's seeding flag set (btrfstune refuses a dirty log)."""
    require_btk("btk-check")
    if "log-tree-16k" not in fsbuild.RECIPE_BY_NAME:
        pytest.skip("no log-tree recipe")
    devs = built("log-tree-16k").copy_to(tmp_path / "devs")
    flags = fsbuild.run([corrupt_tool(), "-S", "-s", "0", "-f", "flags", "-g", *devs]).stdout.split()[-2]
    corrupt(devs, "-S", "-f", "flags", "-v", hex(int(flags) | 1 << 32))
    # (the Debian reference: the recipe's mkfs left free-space entries that 7.3 flags, fsck-tests 071)
    expect_clean(devs[0], "btrfs")
