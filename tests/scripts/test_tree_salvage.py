# SPDX-License-Identifier: GPL-2.0-only
"""Tree blocks that verify (checksum, bytenr, fsid) but are laid out wrong or disagree with
their parent's pointer: btk-check reads them as their salvaged view, reports each under its
own id and checks on; `--repair` (tree-salvage, then what the dropped items call for)
leaves a filesystem that btk-check, the reference `btrfs check` (and btrfs-progs 7.3 where
installed) call clean, that mounts, whose files all read back unchanged; btk-undo puts the
damaged image back byte for byte.

Each case is one btk-corrupt edit (fresh checksum, every copy) of a block of a cached
4K-node filesystem (three-level fs tree shared with a snapshot, two-level extent, csum and
root trees): leaf vs node, first, middle and last slots, fs, extent, csum and root trees."""
from __future__ import annotations

import collections
import functools
import json
import os
import re
import struct
from pathlib import Path

import pytest

import fsbuild
from conftest import images_digest, undone_digests, btk_tree_records, built, run_btk, sanitized_build
from test_repair import corrupt, corrupt_tool
from test_tune import kernel_verify, original_hashes

BASE = "s4k-xxhash-holes-lzo"
PROGS_LATEST = Path("/opt/btrfs-progs-latest/bin/btrfs")
HDR, ITEM, KPTR = 101, 25, 33
FS, EXTENT, ROOT, CSUM, SNAP = 5, 2, 1, 7, 258


@functools.lru_cache(maxsize=None)
def blocks() -> dict:
    """{tree: {"nodes": [(bytenr, level, nptrs)], "leaves": [(bytenr, nitems)], "root": bytenr}}
    in walk order, from btk-inspect's records of the undamaged image."""
    recs, _ = btk_tree_records(BASE)
    out = collections.defaultdict(lambda: {"nodes": [], "leaves": [], "root": None})
    count = collections.OrderedDict()
    for r in recs:
        k = (r["tree"], r["block"], r.get("level", 0))
        count[k] = count.get(k, 0) + 1
    for (tree, b, level), n in count.items():
        t = out[tree]
        if t["root"] is None:
            t["root"] = b
        (t["nodes"] if level else t["leaves"]).append((b, level, n) if level else (b, n))
    return out


def leaf(tree: int, which: str) -> tuple[int, int]:
    """A leaf of tree with at least 4 items: the first, a middle or the last one. How the
    kernel packs a small tree varies (its csum tree may be 3 leaves of 3, 1 and 1 items):
    without such a leaf, the fullest one."""
    leaves = blocks()[tree]["leaves"]
    ls = [x for x in leaves if x[1] >= 4] or sorted(leaves, key=lambda x: -x[1])[:1]
    return {"first": ls[0], "middle": ls[len(ls) // 2], "last": ls[-1]}[which]


def node(tree: int, level: int = 1, which: str = "first") -> tuple[int, int, int]:
    ns = [x for x in blocks()[tree]["nodes"] if x[1] == level and x[2] >= 3]
    return {"first": ns[0], "middle": ns[len(ns) // 2], "last": ns[-1]}[which]


def shared_leaf() -> tuple[int, int]:
    """A leaf of the fs tree that the snapshot shares."""
    snap = {b for b, _ in blocks()[SNAP]["leaves"]}
    return [x for x in blocks()[FS]["leaves"] if x[0] in snap and x[1] >= 4][0]


def raw_bytes(devs, bytenr: int, off: int, n: int) -> bytes:
    p = run_btk("btk-inspect", "map", "--logical", str(bytenr), *map(str, devs))
    phys = int(re.search(r"physical (\d+)", p.stdout).group(1))
    with open(devs[0], "rb") as f:
        f.seek(phys + off)
        return f.read(n)


def edit(bytenr: int, *args):
    return lambda devs: corrupt(devs, "--block", str(bytenr), *args)


def swap_entries(bytenr: int, i: int, size: int):
    """Swap entries i and i+1 (leaf items or node pointers) whole."""
    def run(devs):
        a = raw_bytes(devs, bytenr, HDR + i * size, 2 * size)
        corrupt(devs, "--block", str(bytenr), "--offset", str(HDR + i * size),
                "--bytes", (a[size:] + a[:size]).hex())
    return run


def ptr_generation(bytenr: int, slot: int, delta: int):
    return edit(bytenr, "--field", f"ptr{slot}.generation", "--value", f"{delta:+d}")


# (case, the id it must be reported under, how to make it)
CASES = [
    # item offsets and sizes
    ("offset-fs-middle", "leaf-item-offsets", lambda: edit(leaf(FS, "middle")[0], "-f", "item5.offset", "-v", "+8")),
    ("offset-extent-first", "leaf-item-offsets", lambda: edit(leaf(EXTENT, "first")[0], "-f", "item0.offset",
                                                              "-v", "-16")),
    ("size-root-last", "leaf-item-offsets", lambda: edit(leaf(ROOT, "last")[0], "-f",
                                                         f"item{leaf(ROOT, 'last')[1] - 1}.size", "-v", "+12")),
    ("past-leaf-csum", "leaf-item-offsets", lambda: edit(leaf(CSUM, "first")[0], "-f", "item0.offset", "-v", "60000")),
    ("offset-fs-shared", "leaf-item-offsets", lambda: edit(shared_leaf()[0], "-f", "item2.size", "-v", "+3")),
    # key order
    ("keyorder-fs-swapped", "key-order", lambda: swap_entries(leaf(FS, "first")[0], 1, ITEM)),
    ("keyorder-extent-swapped", "key-order", lambda: swap_entries(leaf(EXTENT, "last")[0], 2, ITEM)),
    ("keyorder-fs-node", "key-order", lambda: edit(node(FS, 1, "middle")[0], "-f", "ptr2.key.objectid",
                                                   "-v", str(1 << 40))),
    ("keyorder-extent-node", "key-order", lambda: swap_entries(node(EXTENT)[0], 3, KPTR)),
    # the second key damaged: dropping either key restores the order, but the first is the parent's
    ("keyorder-fs-second-key", "key-order", lambda: edit(leaf(FS, "first")[0], "-f", "item1.key.objectid",
                                                         "-v", "-1")),
    # level
    ("level-fs-leaf", "tree-block-level", lambda: edit(leaf(FS, "middle")[0], "-f", "header.level", "-v", "1")),
    ("level-extent-root", "tree-block-level", lambda: edit(blocks()[EXTENT]["root"], "-f", "header.level", "-v", "2")),
    ("level-csum-leaf", "tree-block-level", lambda: edit(leaf(CSUM, "last")[0], "-f", "header.level", "-v", "1")),
    # pointer generation
    ("transid-fs-leaf", "tree-block-transid", lambda: ptr_generation(node(FS, 1, "last")[0], 1, -1)),
    ("transid-fs-node", "tree-block-transid", lambda: ptr_generation(blocks()[FS]["root"], 0, -1)),
    ("transid-extent-leaf", "tree-block-transid", lambda: edit(leaf(EXTENT, "middle")[0], "-f", "header.generation",
                                                               "-v", "-1")),
    ("transid-root-tree", "tree-block-transid", lambda: ptr_generation(blocks()[ROOT]["root"], 1, -1)),
    # parent key
    ("firstkey-fs", "tree-block-first-key", lambda: edit(node(FS, 1, "middle")[0], "-f", "ptr3.key.offset", "-v", "+1")),
    ("firstkey-extent", "tree-block-first-key", lambda: edit(node(EXTENT)[0], "-f", "ptr2.key.offset", "-v", "+1")),
    ("firstkey-csum", "tree-block-first-key", lambda: edit(node(CSUM)[0], "-f", "ptr1.key.offset", "-v", "+4096")),
    # item count
    ("nritems-fs-leaf", "tree-block-nritems", lambda: edit(leaf(FS, "last")[0], "-f", "header.nritems", "-v", "+3")),
    ("nritems-root-leaf", "tree-block-nritems", lambda: edit(leaf(ROOT, "first")[0], "-f", "header.nritems",
                                                             "-v", "1000")),
    ("nritems-extent-node", "tree-block-nritems", lambda: edit(node(EXTENT)[0], "-f", "header.nritems", "-v", "+2")),
    # an item count of 0 below a parent (the kernel refuses such a block): the items are given back
    ("nritems-zero-fs-leaf", "tree-block-nritems", lambda: edit(leaf(FS, "middle")[0], "-f", "header.nritems",
                                                                "-v", "0")),
    ("nritems-zero-extent-leaf", "tree-block-nritems", lambda: edit(leaf(EXTENT, "last")[0], "-f",
                                                                    "header.nritems", "-v", "0")),
    ("nritems-zero-fs-node", "tree-block-nritems", lambda: edit(node(FS, 1, "middle")[0], "-f", "header.nritems",
                                                                "-v", "0")),
]
# a few run in CI (about 15 s each: the kernel reads every file back); the rest with the slow marker
FAST = {"offset-fs-shared", "keyorder-fs-node", "transid-fs-leaf", "nritems-root-leaf", "keyorder-fs-second-key",
        "nritems-zero-fs-leaf"}


@functools.lru_cache(maxsize=None)
def progs_latest_judges() -> bool:
    """btrfs-progs 7.3 is installed and passes the undamaged image (it flags free-space
    entries that older mkfs versions leave for their temporary block groups)."""
    if not PROGS_LATEST.exists():
        return False
    p = fsbuild.run([str(PROGS_LATEST), "check", "--readonly", str(built(BASE).devices[0])], check=False,
                    timeout=600)
    return p.returncode == 0


def check_json(devs) -> tuple[int, list[str]]:
    p = run_btk("btk-check", "--format", "json", *map(str, devs), timeout=600)
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    return p.returncode, sorted({x["id"] for x in doc["problems"]})


@pytest.mark.parametrize("name,want,make", [
    pytest.param(n, w, m, id=n, marks=() if n in FAST else pytest.mark.slow) for n, w, m in CASES])
def test_salvage_detect_repair(name, want, make, tmp_path):
    corrupt_tool()
    devs = built(BASE).copy_to(tmp_path / "img")
    make()(devs)
    damaged = images_digest(devs)

    rc, ids = check_json(devs)
    assert rc == 4 and want in ids, f"{name}: exit {rc}, ids {ids}"
    assert "tree-block-unreadable" not in ids and "tree-root-unreadable" not in ids, ids

    undo = tmp_path / "repair.undo"
    p = run_btk("btk-check", "--repair", "--yes", "--undo-file", str(undo), *map(str, devs), timeout=600)
    assert p.returncode == 1, f"{name}: repair exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-2000:]}"
    assert "repair tree-salvage:" in p.stdout, p.stdout[-2000:]
    rc, ids = check_json(devs)
    # copying blocks of subvolume trees marks the quota numbers for a rescan (a warning)
    assert rc == 0 and set(ids) <= {"qgroup-inconsistent"}, f"{name}: not clean after the repair: {ids}"
    if not sanitized_build() and progs_latest_judges():   # an oracle: the plain pass applies it
        q = fsbuild.run([str(PROGS_LATEST), "check", "--readonly", str(devs[0])], check=False, timeout=600)
        assert q.returncode == 0, f"btrfs-progs 7.3 check:\n{q.stdout[-3000:]}{q.stderr[-2000:]}"
    # the undo on a copy: the kernel's mount below writes a new generation
    assert undone_digests(undo, devs, tmp_path) == damaged, "btk-undo did not restore the damaged image byte for byte"

    if not sanitized_build():   # the plain pass judges the same repair; ASan judges btk's memory use
        kernel_verify(devs, original_hashes(BASE), write=False)   # btrfs check, mount, every file, scrub


def test_stale_pointer_is_not_salvaged(tmp_path):
    """A pointer whose generation and first key both disagree with the block (a misdirected or
    stale pointer) is no block to salvage: it stays unreadable."""
    corrupt_tool()
    devs = built(BASE).copy_to(tmp_path / "img")
    n = node(FS, 1, "middle")[0]
    corrupt(devs, "--block", str(n), "-f", "ptr3.key.offset", "-v", "+1")
    # the one edit fixes a checksum; the second goes through raw bytes of the pointer's generation
    gen_off = HDR + 3 * KPTR + 17 + 8
    g = struct.unpack("<Q", raw_bytes(devs, n, gen_off, 8))[0]
    corrupt(devs, "--block", str(n), "--offset", str(gen_off), "--bytes", struct.pack("<Q", g - 1).hex())
    rc, ids = check_json(devs)
    assert rc == 4 and "tree-block-unreadable" in ids, ids
    assert "tree-block-transid" not in ids and "tree-block-first-key" not in ids, ids
