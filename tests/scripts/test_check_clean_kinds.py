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
import tempfile
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
    fsbuild.mkfs([img], "-q", "-f", *mkfs, tool=progs("mkfs.btrfs"))
    with fsbuild.attached([img]) as loops, fsbuild.mounted(loops) as mnt:
        sh(mnt, script)
        fsbuild.run(["sync", "-f", mnt])
    for cmd in after:
        fsbuild.run([*cmd, img])
    return img


def make_crash(tmp: Path, mkfs=(), script: str = "", size: int = 384 * MiB, work: Path | None = None) -> Path:
    """What a power cut leaves: the image copied while still mounted (commit=300 keeps the
    kernel from committing meanwhile), so the last commit plus what fsync logged since. The
    mounted image lives in work (tmp by default): tmpfs makes the copy quick."""
    img, copy = (work or tmp) / "img", tmp / "crash.img"
    with open(img, "wb") as f:
        f.truncate(size)
    fsbuild.mkfs([img], "-q", "-f", *mkfs, tool=progs("mkfs.btrfs"))
    with fsbuild.attached([img]) as loops, fsbuild.mounted(loops, ("commit=300",)) as mnt:
        sh(mnt, script)
        fsbuild.run(["cp", "--sparse=always", img, copy])
    return copy


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
                              ' $M/sv/f$i; done; sync -f $M; btrfs subvolume delete $M/sv >/dev/null', ()),
    # a balance paused: the balance item stays in the root tree
    "balance-paused": ((), 'for i in $(seq 12); do head -c 3000000 /dev/urandom > $M/f$i; done; ' + BIG_DIR +
                           '; sync -f $M; (btrfs balance start -f --full-balance $M >/dev/null 2>&1 &); sleep 0.5;'
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


FSYNC = 'python3 -c "import os, sys; os.fsync(os.open(sys.argv[1], os.O_RDWR))" '
LOG_TREE = 2**64 - 6          # BTRFS_TREE_LOG_OBJECTID


def log_extents_without_log_csums(img: Path) -> list[tuple[int, int]]:
    """The disk ranges of the regular file extents a log tree holds whose checksums the log lacks."""
    p = run_btk("btk-inspect", "tree", "--format", "jsonl", img)
    recs = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
    sector = 4096
    covered = set()
    for r in recs:
        if r.get("tree") == LOG_TREE and r.get("type") == "EXTENT_CSUM":
            start = r["key"][2]
            covered.update(range(start, start + r["fields"]["num_csums"] * sector, sector))
    out = []
    for r in recs:
        f = r.get("fields", {})
        if r.get("tree") == LOG_TREE and r.get("type") == "EXTENT_DATA" and f.get("type") == 1 \
                and f.get("disk_bytenr") and not f.get("compression"):
            lo = f["disk_bytenr"] + f["offset"]
            if any(a not in covered for a in range(lo, lo + f["num_bytes"], sector)):
                out.append((lo, f["num_bytes"]))
    return out


def test_log_holding_committed_extents(tmp_path):
    """A file committed, then truncated and fsynced: the log copies its remaining (old) extent
    but not its checksums, which the csum tree has had since the commit. Replay finds them
    there; btrfs check 7.3 looks in both trees (fsck-tests 065), and so must btk-check."""
    require_btk("btk-check")
    require_kernel()
    require_reference_tools()
    for attempt in range(3):
        (tmp_path / str(attempt)).mkdir()
        img = make_crash(tmp_path / str(attempt), (), 'head -c 600000 /dev/urandom > $M/f; sync -f $M; '
                         'truncate -s 100000 $M/f; ' + FSYNC + '$M/f')
        if log_extents_without_log_csums(img):
            break
    else:
        pytest.skip("the kernel logged no committed extent in three tries")
    expect_clean(img)


def super_generations(img: Path) -> set[int]:
    p = run_btk("btk-inspect", "super", "--all-copies", "--format", "json", img)
    return {c["generation"] for c in json.loads(p.stdout)["devices"][0]["copies"]}


@pytest.mark.slow
def test_balance_interrupted_nodatasum_source(tmp_path):
    """A power cut during a balance: the data relocation tree holds the copies of a NODATASUM
    file's extent, which have no checksums to clone. Not damage (btrfs check 7.3 agrees). A
    race with the balance: a few tries, each a commit then a copy that no commit overlapped."""
    require_btk("btk-check")
    require_kernel()
    require_reference_tools()
    shm = Path("/dev/shm")
    for attempt, delay in enumerate((0.2, 0.3, 0.15, 0.4, 0.25, 0.5)):
        (tmp_path / str(attempt)).mkdir()
        with tempfile.TemporaryDirectory(dir=shm if shm.is_dir() else tmp_path) as work:
            img = make_crash(tmp_path / str(attempt), (),
                             f'touch $M/n; chattr +C $M/n; head -c 60000000 /dev/urandom > $M/n; sync -f $M;'
                             f'(btrfs balance start -f -d $M >/dev/null 2>&1 &); sleep {delay}; btrfs filesystem sync $M',
                             size=256 * MiB, work=Path(work))
        p = run_btk("btk-inspect", "tree", "--format", "jsonl", "--tree", "data-reloc", img)
        recs = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
        if len(super_generations(img)) == 1 and any(r.get("type") == "EXTENT_DATA" and r["fields"].get("type") == 1
                                                    for r in recs):
            break
    else:
        pytest.skip("no copy caught the balance halfway")
    expect_clean(img)


def test_backup_roots_sharing_the_generation(tmp_path):
    """Mounting a v1-space-cache filesystem with space_cache=v2 builds the free-space tree: the
    kernel then leaves two backup-root slots of the current generation, only the last naming the
    superblock's roots. Valid (the kernel wrote it; btrfs check 7.3 passes it)."""
    require_btk("btk-check")
    require_kernel()
    require_reference_tools()
    img = tmp_path / "img"
    with open(img, "wb") as f:
        f.truncate(4 << 30)     # v1 caches only block groups of 100 MiB and more
    fsbuild.run([progs("mkfs.btrfs"), "-q", "-f", "-R", "^free-space-tree", img])
    with fsbuild.attached([img]) as loops:
        for opts, script in ((("space_cache=v1",), BIG_DIR + "; head -c 5000000 /dev/urandom > $M/x"),
                             (("space_cache=v2",), "echo x > $M/new; sync -f $M")):
            with fsbuild.mounted(loops, opts) as mnt:
                sh(mnt, script)
    p = run_btk("btk-inspect", "super", "--format", "json", img)
    sb = json.loads(p.stdout)["devices"][0]["superblock"]
    gen, slots = sb["generation"], sb["backup_roots"]
    current = [i for i, b in enumerate(slots) if b["tree_root_gen"] == gen]
    assert current, f"no backup slot of the current generation: {slots}"
    if len(current) < 2:
        # the kernel commits twice in one generation only when its timing allows; lay out what
        # it leaves then: the slot before the last one names older roots under the same generation
        earlier = (current[-1] - 1) % len(slots)
        assert slots[earlier]["tree_root"] != slots[current[-1]]["tree_root"]
        corrupt([img], "-S", "-f", f"backup{earlier}.tree_root_gen", "-v", str(gen))
    expect_clean(img)
