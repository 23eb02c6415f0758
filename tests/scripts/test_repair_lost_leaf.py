# SPDX-License-Identifier: GPL-2.0-only
"""Subvolume-tree leaves that no copy gives back (btrfs-progs fsck-tests 012-leaf-corruption and
its kind): btk-check --repair drops them (lost-blocks), then re-creates every inode whose other
items, or whose name in its parent, survived: the inode item again, of the type what survives
says, the inode's surviving name back, or /lost+found/INO when none survived. Judged through the
kernel against the undamaged filesystem: every such inode is there with its type; a regular
file's bytes that surviving extents hold read back unchanged, everything else of it reads as
zeros (nothing the lost leaf held is made up); an inode none of whose items was lost reads back
whole; surviving xattrs are there. The reference btrfs check (and 7.3 where installed) and
btk-check call the result clean, and btk-undo puts the damaged image back byte for byte.

Each case damages (stale checksum, every copy) leaves chosen by what they hold on a small 4K-node
filesystem made here (a few seconds): a middle leaf of files, the top directory's leaf, a leaf of
file extents only, two leaves that take a file's name and its inode item, a leaf shared with a
snapshot."""
from __future__ import annotations

import collections
import json
import mmap
import os
import random
import stat
from pathlib import Path

import pytest

import fsbuild
from conftest import images_digest, require_btk, require_kernel, require_reference_tools, run_btk
from test_tune import mounted_retry

LATEST = Path("/opt/btrfs-progs-latest/bin/btrfs")
TOP, SNAP_ID = 5, 256
FT_DIR = 2
INODE_ITEM, INODE_REF, INODE_EXTREF, XATTR, DIR_ITEM, DIR_INDEX, EXTENT_DATA = 1, 12, 13, 24, 84, 96, 108


def populate(mnt: Path):
    """Three directories of files of mixed sizes (inline, a few blocks, a few hundred KiB), some
    with xattrs, a subdirectory; two files of many small extents, a compressed one."""
    rng = random.Random(15)
    for d in range(3):
        top = mnt / f"d{d}"
        top.mkdir()
        for i in range(200):
            k = i % 10
            size = rng.randint(1, 2000) if k < 5 else rng.randint(4097, 40000) if k < 9 else \
                rng.randint(100000, 300000)
            (top / f"f{i:04d}").write_bytes(rng.randbytes(size))
            if i % 13 == 0:
                os.setxattr(top / f"f{i:04d}", "user.x", b"v%d" % i)
        (top / "sub").mkdir()
        for i in range(20):
            (top / "sub" / f"s{i}").write_bytes(b"sub %d\n" % i)
    for j in range(2):   # direct writes: an extent per 4 KiB, leaves holding nothing else
        buf = mmap.mmap(-1, 4096)
        fd = os.open(mnt / f"big{j}", os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
        try:
            for b in range(150):
                buf[:] = rng.randbytes(4096)
                os.pwrite(fd, buf, b * 4096)
        finally:
            os.close(fd)
    comp = mnt / "compressed"   # compressed extents, a few
    comp.touch()
    fsbuild.run(["btrfs", "property", "set", comp, "compression", "zstd"])
    comp.write_bytes(b"".join(b"%d " % b * (128 * 1024 // 4) + rng.randbytes(1000) for b in range(12)))
    for i in range(20):
        (mnt / f"top{i}").write_bytes(rng.randbytes(rng.randint(1, 9000)))


def inodes_of(mnt: Path) -> dict[int, dict]:
    """Every inode of the subvolume mounted at mnt (not of subvolumes inside it): path, mode,
    size, bytes, xattrs."""
    top = os.lstat(mnt)
    dev = top.st_dev
    out = {top.st_ino: {"path": ".", "mode": top.st_mode, "size": top.st_size, "data": None,
                        "xattrs": {x: os.getxattr(mnt, x) for x in os.listxattr(mnt)}}}
    for dirpath, dirnames, filenames in os.walk(mnt):
        for n in list(dirnames):
            if os.lstat(os.path.join(dirpath, n)).st_dev != dev:
                dirnames.remove(n)   # another subvolume
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            xattrs = {x: os.getxattr(p, x, follow_symlinks=False) for x in os.listxattr(p, follow_symlinks=False)}
            data = Path(p).read_bytes() if stat.S_ISREG(st.st_mode) else None
            out[st.st_ino] = {"path": os.path.relpath(p, mnt), "mode": st.st_mode, "size": st.st_size,
                              "data": data, "xattrs": xattrs}
    return out


def subvolumes(mnt: Path, snapshot: bool) -> dict[int, dict[int, dict]]:
    return {TOP: inodes_of(mnt), **({SNAP_ID: inodes_of(mnt / "snap")} if snapshot else {})}


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    """The undamaged images (made on first use, once per module) and what the kernel reads."""
    made: dict[bool, tuple[Path, dict]] = {}

    def get(snapshot: bool) -> tuple[Path, dict]:
        if snapshot not in made:
            made[snapshot] = make_base(tmp_path_factory.mktemp("lost-leaf-base") / "img",
                                       get(False)[0] if snapshot else None)
        return made[snapshot]
    return get


def make_base(img: Path, plain: Path | None) -> tuple[Path, dict]:
    """A new filesystem (plain None), or a copy of plain with a snapshot of its top subvolume."""
    require_kernel()
    snapshot = plain is not None
    if snapshot:
        fsbuild.run(["cp", "--sparse=always", plain, img])
    else:
        with open(img, "wb") as f:
            f.truncate(384 * fsbuild.MiB)
        fsbuild.mkfs([img], "-q", "-f", "-n", "4k")
    with fsbuild.attached([img]) as loops, fsbuild.mounted(loops) as mnt:
        if snapshot:
            fsbuild.run(["btrfs", "subvolume", "snapshot", mnt, Path(mnt) / "snap"])
            (Path(mnt) / "after-snapshot").write_bytes(b"only in the top subvolume\n")
        else:
            populate(Path(mnt))
    with fsbuild.attached([img]) as loops, mounted_retry(loops, ("ro",)) as mnt:
        files = subvolumes(Path(mnt), snapshot)
    return img, files


def leaves(img: Path, tree: int) -> dict[int, list[dict]]:
    """{leaf bytenr: its item records} of tree, in key order; NODES[tree]: {level-1 node: its leaves}."""
    p = run_btk("btk-inspect", "tree", "-t", str(tree), "--format", "jsonl", img)
    assert p.returncode == 0, p.stderr
    out: dict[int, list[dict]] = collections.OrderedDict()
    nodes: dict[int, list[int]] = collections.OrderedDict()
    for line in p.stdout.splitlines():
        r = json.loads(line)
        if "blockptr" not in r:
            out.setdefault(r["block"], []).append(r)
        elif r["level"] == 1:
            nodes.setdefault(r["block"], []).append(r["blockptr"])
    NODES[tree] = nodes
    return out


NODES: dict[int, dict[int, list[int]]] = {}


def types(items: list[dict]) -> collections.Counter:
    return collections.Counter(r["key"][1] for r in items)


# ---------------------------------------------------------------- which leaves each case loses


def middle_leaf(tree: dict[int, list[dict]], files: dict) -> list[int]:
    """A leaf of at least three inode items that starts inside an inode (its inode item and
    the next leaf's first items survive), the middle one of such leaves."""
    cand = [b for b, items in tree.items() if types(items)[INODE_ITEM] >= 3 and items[0]["key"][1] != INODE_ITEM
            and items[-1]["key"][1] != EXTENT_DATA]
    return [cand[len(cand) // 2]]


def root_dir_leaf(tree: dict[int, list[dict]], files: dict) -> list[int]:
    """The leaf holding the top directory's inode item."""
    return [next(b for b, items in tree.items() if any(r["key"][:2] == [256, INODE_ITEM] for r in items))]


def extents_leaf(tree: dict[int, list[dict]], files: dict) -> list[int]:
    """A leaf of file extents only, in the middle of a big file."""
    return [next(b for b, items in tree.items() if set(types(items)) == {EXTENT_DATA}
                 and len({r["key"][0] for r in items}) == 1)]


def nameless(tree: dict[int, list[dict]], files: dict) -> list[int]:
    """Every leaf of the top directory's items (its names), and the leaf of big1's inode item
    and inode ref whose extents go on in later leaves: big1 keeps only extents, no name."""
    ino = next(i for i, f in files[TOP].items() if f["path"] == "big1")
    out = [b for b, items in tree.items() if any(r["key"][0] == 256 for r in items)]
    own = next(b for b, items in tree.items() if any(r["key"][:2] == [ino, INODE_ITEM] for r in items))
    after = [b for b, items in tree.items() if b != own and any(r["key"][:2] == [ino, EXTENT_DATA] for r in items)]
    assert after, "big1's extents all in the leaf of its inode item"
    return sorted(set(out + [own]))


def middle_node(tree: dict[int, list[dict]], files: dict) -> list[int]:
    """A level-1 node in the middle of the tree (its leaves are lost with it)."""
    nodes = list(NODES[TOP])
    return [nodes[len(nodes) // 2]]


def shared_leaf(tree: dict[int, list[dict]], files: dict, snap: dict[int, list[dict]]) -> list[int]:
    """A leaf of files that the snapshot shares (found in both trees)."""
    cand = [b for b in tree if b in snap and types(tree[b])[INODE_ITEM] >= 3]
    return [cand[len(cand) // 2]]


# ---------------------------------------------------------------- what must come back


def expected(trees: dict[int, dict[int, list[dict]]], lost: set[int]) -> dict[int, dict[int, dict]]:
    """Per subvolume and inode, what survives of it outside the lost leaves: its items (by key
    type), the extents' byte ranges, and the types the directory entries naming it give."""
    out: dict[int, dict[int, dict]] = {}
    for tree, blocks in trees.items():
        inodes = out.setdefault(tree, collections.defaultdict(lambda: {"lost": False, "items": set(),
                                                                       "ranges": [], "named": set()}))
        for b, items in blocks.items():
            for r in items:
                ino, kt = r["key"][0], r["key"][1]
                if b in lost:
                    inodes[ino]["lost"] = True
                    continue
                inodes[ino]["items"].add(kt)
                f = r.get("fields", {})
                if kt == EXTENT_DATA:
                    n = f["ram_bytes"] if f["type"] == 0 else f["num_bytes"]
                    if f["type"] == 0 or f.get("disk_bytenr"):
                        inodes[ino]["ranges"].append((r["key"][2], n))
                elif kt in (DIR_ITEM, DIR_INDEX):
                    for e in f["entries"]:
                        if e["location"][1] == INODE_ITEM:
                            inodes[e["location"][0]]["named"].add(e["type"])
    return out


def assert_recovered(orig: dict[int, dict[int, dict]], got: dict[int, dict[int, dict]],
                     exp: dict) -> collections.Counter:
    """Every inode that kept an item or a name is back with its type; regular files read back
    what their surviving extents hold and zeros elsewhere; untouched inodes read back whole."""
    tally = collections.Counter()
    for tree, inodes in orig.items():
        for ino, o in inodes.items():
            e = exp[tree].get(ino)
            if e is None or (not e["items"] and not e["named"]):
                tally["gone"] += 1    # every item and name of it was in the lost leaves
                continue
            g = got[tree].get(ino)
            assert g is not None, f"tree {tree} inode {ino} ({o['path']}): items {e['items']} survive, not recovered"
            assert stat.S_IFMT(g["mode"]) == stat.S_IFMT(o["mode"]), f"{o['path']} -> {g['path']}: type"
            if not e["lost"]:   # a directory's size may differ: lost+found, names of lost children
                assert (g["data"], g["xattrs"]) == (o["data"], o["xattrs"]), \
                    f"{o['path']}: untouched, reads back otherwise as {g['path']}"
                assert g["size"] == o["size"] or stat.S_ISDIR(o["mode"]), f"{o['path']}: size"
                tally["whole"] += 1
                continue
            tally["rebuilt"] += 1
            if ino == 256:   # the top directory: made again in its place, never named
                assert g["path"] == ".", f"the top directory found as {g['path']}"
            elif INODE_REF not in e["items"] and INODE_EXTREF not in e["items"] and not e["named"]:
                assert g["path"] == f"lost+found/{ino}", f"{o['path']}: no name survives, found as {g['path']}"
            if XATTR in e["items"]:
                assert g["xattrs"].get("user.x") == o["xattrs"].get("user.x"), f"{o['path']}: xattr"
            if INODE_ITEM in e["items"]:
                assert g["size"] == o["size"], f"{o['path']}: size"
            if g["data"] is None:
                continue
            want = bytearray(len(g["data"]))
            for off, n in e["ranges"]:
                end = min(off + n, len(want), len(o["data"]))
                if end > off:
                    want[off:end] = o["data"][off:end]
            if bytes(want) != g["data"]:
                diff = next(i for i in range(len(want)) if want[i] != g["data"][i])
                pytest.fail(f"{o['path']} (as {g['path']}): at byte {diff} not what the surviving extents hold "
                            f"(size {len(want)}, extents {sorted(e['ranges'])})")
    return tally


def reference_checks(img: Path):
    require_reference_tools()
    for tool in ["btrfs"] + ([str(LATEST)] if LATEST.exists() else []):
        p = fsbuild.run([tool, "check", "--readonly", img], check=False)
        assert p.returncode == 0, f"{tool} check after the repair:\n{p.stdout[-3000:]}{p.stderr[-3000:]}"


CASES = {
    "middle": (False, middle_leaf),
    "root-dir": (False, root_dir_leaf),
    "extents-only": (False, extents_leaf),
    "nameless": (False, nameless),
    "snapshot-shared": (True, shared_leaf),
    "node": (False, middle_node),
}


@pytest.mark.parametrize("case", list(CASES))
def test_lost_leaf_recovered(case, bases, tmp_path):
    require_btk("btk-check")
    require_btk("btk-undo")
    corrupt = require_btk("tests/tools/btk-corrupt")
    snapshot, pick = CASES[case]
    src, files = bases(snapshot)
    img = tmp_path / "img"
    fsbuild.run(["cp", "--sparse=always", src, img])
    trees = {TOP: leaves(img, TOP), **({SNAP_ID: leaves(img, SNAP_ID)} if snapshot else {})}
    lost = pick(trees[TOP], files, trees[SNAP_ID]) if snapshot else pick(trees[TOP], files)
    for b in lost:
        fsbuild.run([corrupt, "--block", b, "--offset", 200, "--bytes", "deadbeefdeadbeef", "--no-csum", img])
    damaged = images_digest([img])

    p = run_btk("btk-check", "--format", "json", img)
    ids = {q["id"] for q in json.loads(p.stdout)["problems"]}
    assert p.returncode == 4 and ids == {"tree-block-unreadable", "tree-root-unreadable"}, p.stdout
    undo = tmp_path / "undo"
    p = run_btk("btk-check", "--repair", "--yes", "--undo-file", undo, img)
    assert p.returncode == 1, p.stdout + p.stderr
    assert run_btk("btk-check", img).returncode == 0
    reference_checks(img)
    with fsbuild.attached([img]) as loops, mounted_retry(loops, ("ro",)) as mnt:
        got = subvolumes(Path(mnt), snapshot)
    lost_leaves = {c for b in lost for c in NODES[TOP].get(b, [b])}
    tally = assert_recovered(files, got, expected(trees, lost_leaves))
    assert tally["rebuilt"], tally
    if case == "nameless":   # big1 had only extents left: it is in /lost+found under its number
        assert any(g["path"].startswith("lost+found/") for g in got[TOP].values())

    u = run_btk("btk-undo", undo, img)
    assert u.returncode == 0, u.stderr
    assert images_digest([img]) == damaged, "btk-undo did not give back the damaged image"
