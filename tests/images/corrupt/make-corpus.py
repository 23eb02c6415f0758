#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Regenerate the btk-check corruption corpus (see README.md here).

  make-corpus.py [--list] [--keep DIR] [NAME...]

Builds the base images, then for each case: copies its base, applies the
btk-corrupt edits, compresses the image to <name>.img.xz and writes
<name>.expect from the case table (the expected problem ids are declared
here, never copied from btk-check's output), recording whether the reference
`btrfs check` fails on it. Prints what btk-check says next to what is expected.
Binaries come from $BTK_BUILD_DIR (default <repo>/build).
"""
from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(REPO / "tests" / "scripts"))
import fsbuild  # noqa: E402  (the suite's filesystem builder)
BUILD = Path(os.environ.get("BTK_BUILD_DIR") or REPO / "build")
CORRUPT = BUILD / "tests" / "tools" / "btk-corrupt"
MiB = 1 << 20
SIZE = 128 * MiB
LATEST_BTRFS = Path("/opt/btrfs-progs-latest/bin/btrfs")
FSID = "6b746b2d-636f-7270-7573-000000000001"   # fixed, so regenerated images look alike


def run(cmd, check=True, **kw) -> subprocess.CompletedProcess:
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({p.returncode}):\n{p.stdout}{p.stderr}")
    return p


# ---------------------------------------------------------------- base images

def fill_tree(root: Path, nfiles: int):
    """Compressible, deterministic content: files, a text file of several extents,
    hard links, a symlink, nested directories, a subvolume directory."""
    rng = random.Random(nfiles)
    words = [b"alpha", b"bravo", b"charlie", b"delta", b"echo", b"foxtrot", b"golf"]
    (root / "dir" / "sub").mkdir(parents=True)
    (root / "sv").mkdir()
    for i in range(1, 4):
        (root / f"file{i}").write_bytes(b" ".join(rng.choice(words) for _ in range(3000 * i)))
    (root / "small").write_bytes(b"hi\n")
    (root / "text").write_bytes(b"".join(b"line %06d\n" % i for i in range(40000)))
    os.link(root / "file1", root / "dir" / "hard1")
    os.symlink("file2", root / "link")
    for i in range(nfiles):
        (root / "dir" / "sub" / f"f{i:04d}").write_bytes(b"%d\n" % i)
    (root / "sv" / "inside").write_bytes(b"x" * 20000)


def mkfs_base(img: Path, opts: list[str], nfiles: int):
    with tempfile.TemporaryDirectory(prefix="corpus-root-") as d:
        fill_tree(Path(d), nfiles)
        with open(img, "wb") as f:
            f.truncate(SIZE)
        run(["mkfs.btrfs", "-q", "-f", "-U", FSID, *opts, "--rootdir", d, "--subvol", "rw:sv", img])
    # what a current mkfs makes: without the free-space items of mkfs' temporary chunks
    fsbuild.drop_mkfs_leftovers([img])


def snap_base(img: Path, opts: list[str], nfiles: int):
    """Through the kernel: a snapshot and reflinks, for shared tree blocks and data refs, and a
    file of several extents."""
    mkfs_base(img, opts, nfiles)
    loop = run(["losetup", "--find", "--show", img]).stdout.strip()
    mnt = Path(tempfile.mkdtemp(prefix="corpus-mnt-"))
    try:
        run(["mount", "-t", "btrfs", loop, mnt])
        try:
            run(["btrfs", "subvolume", "snapshot", mnt, mnt / "snap"])
            run(["cp", "--reflink=always", mnt / "file3", mnt / "reflink3"])
            (mnt / "snap" / "after").write_bytes(b"written in the snapshot\n")
            (mnt / "file1").write_bytes(b"rewritten\n")
            overwrite_middle(mnt / "overwritten")
            run(["sync", "-f", mnt])
        finally:
            run(["umount", mnt], check=False)
    finally:
        run(["btrfs", "device", "scan", "--forget", loop], check=False)
        run(["losetup", "-d", loop], check=False)
        mnt.rmdir()


def overwrite_middle(path: Path):
    """A file of three extents: 16 KiB on disk, then its second 4 KiB rewritten
    (its first and last extents share one disk extent)."""
    with open(path, "wb") as f:
        f.write(bytes(range(256)) * 64)
        f.flush()
        os.fsync(f.fileno())
    with open(path, "r+b") as f:
        f.seek(4096)
        f.write(b"\xee" * 4096)
        f.flush()
        os.fsync(f.fileno())


BASES: dict[str, Callable[[Path], None]] = {
    # DUP metadata: two copies of every tree block (mirror damage)
    "dup16k": lambda p: mkfs_base(p, ["-n", "16k", "-m", "dup", "-d", "single"], 30),
    # single metadata, 4K nodes, non-skinny extent items: multi-level trees
    "single4k": lambda p: mkfs_base(p, ["-n", "4k", "-m", "single", "-d", "single",
                                        "-O", "^skinny-metadata"], 400),
    # a snapshot and a reflink made by the kernel: shared blocks, shared refs
    "snap": lambda p: snap_base(p, ["-n", "4k", "-m", "single", "-d", "single"], 400),
}


class Base:
    """A base image and its items (btk-inspect tree --format jsonl)."""

    def __init__(self, name: str, img: Path):
        self.name, self.img = name, img
        p = run([BUILD / "btk-inspect", "tree", "--format", "jsonl", img])
        self.recs = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
        sb = json.loads(run([BUILD / "btk-inspect", "super", "--format", "json", img]).stdout)
        sb = sb["devices"][0]["superblock"] if "devices" in sb else sb.get("superblock", sb)
        self.nodesize = int(sb["nodesize"])
        self.generation = int(sb["generation"])

    def items(self, tree: int, type: str | None = None, objectid: int | None = None):
        return [r for r in self.recs if r.get("tree") == tree and "key" in r and
                (type is None or r.get("type") == type) and (objectid is None or r["key"][0] == objectid)]

    def item(self, tree: int, type: str, objectid: int | None = None, pred=lambda r: True) -> dict:
        for r in self.items(tree, type, objectid):
            if pred(r):
                return r
        raise LookupError(f"{self.name}: no {type} in tree {tree} matching")

    def ino(self, name: str, tree: int = 5) -> int:
        r = self.item(tree, "DIR_INDEX", pred=lambda r: r["fields"]["entries"][0]["name"] == name)
        return r["fields"]["entries"][0]["location"][0]

    def leaf(self, tree: int, index: int = 0) -> int:
        """The index-th leaf of a tree (in address order)."""
        blocks = sorted({r["block"] for r in self.items(tree) if "blockptr" not in r})
        return blocks[index]

    def is_root(self, tree: int, bytenr: int) -> bool:
        return bytenr not in {r["blockptr"] for r in self.recs if r.get("tree") == tree and "blockptr" in r}

    def nodes(self, tree: int) -> list[int]:
        return sorted({r["block"] for r in self.recs if r.get("tree") == tree and "blockptr" in r})


def key_arg(r: dict) -> str:
    return ",".join(str(k) for k in r["key"])


def item(r: dict, **kw) -> list[str]:
    """btk-corrupt arguments for an item record: field=..., value=..., delete=True."""
    args = ["--tree", str(r["tree"]), "--key", key_arg(r)]
    return args + opts(**kw)


def opts(**kw) -> list[str]:
    out = []
    for k, v in kw.items():
        flag = "--" + k.replace("_", "-")
        out += [flag] if v is True else [flag, str(v)]
    return out


def block(bytenr: int, **kw) -> list[str]:
    return ["--block", str(bytenr)] + opts(**kw)


def sup(**kw) -> list[str]:
    return ["--super"] + opts(**kw)


# ---------------------------------------------------------------- the cases

@dataclasses.dataclass
class Case:
    name: str
    base: str
    problems: list[str]
    what: str
    edits: Callable[[Base], list[list[str]]]
    exit: int = 4
    args: tuple[str, ...] = ()
    pending: str = ""
    # the classes `btk-check --repair` runs when every problem is fixable (then it exits 1 and a
    # second check is clean); empty: not fixable, the repair must exit like the check and write nothing
    repair: tuple[str, ...] = ()


REFS = "checkrefs: extent reference / csum detectors"
FS = "checkfs: inode / dir / root ref / uuid detectors"
DATA_BG = lambda b: b.item(2, "BLOCK_GROUP_ITEM", pred=lambda r: r["fields"]["flags"] & 1)  # noqa: E731
META_BG = lambda b: b.item(2, "BLOCK_GROUP_ITEM", pred=lambda r: r["fields"]["flags"] & 4)  # noqa: E731
DATA_CHUNK = lambda b: b.item(3, "CHUNK_ITEM", pred=lambda r: r["fields"]["type"] & 1)  # noqa: E731
SYS_CHUNK = lambda b: b.item(3, "CHUNK_ITEM", pred=lambda r: r["fields"]["type"] & 2)  # noqa: E731


def data_extent(b: Base, pred=lambda r: True) -> dict:
    return b.item(2, "EXTENT_ITEM", pred=lambda r: r["fields"]["flags"] & 1 and pred(r))


def shrink_last_item(b: Base, tree: int) -> dict:
    """btk-corrupt block options that make the last item of a tree's first leaf one byte
    shorter at its start (offset + 1, size - 1): the leaf layout stays valid."""
    recs = [r for r in b.items(tree) if r["block"] == b.leaf(tree)]
    last = max(recs, key=lambda r: r["slot"])
    hdr = 101 + 25 * last["slot"] + 17
    off = next(x for x in recs if x is last)  # the record has size; the offset follows from the layout
    data_end = b.nodesize - 101 - sum(r["size"] for r in recs)
    new = (data_end + 1).to_bytes(4, "little") + (off["size"] - 1).to_bytes(4, "little")
    return dict(offset=hdr, bytes=new.hex())


def inode(b: Base, name: str, tree: int = 5) -> dict:
    return b.item(tree, "INODE_ITEM", b.ino(name, tree))


def dir_entry(b: Base, type: str, name: str, tree: int = 5) -> dict:
    return b.item(tree, type, pred=lambda r: r["fields"]["entries"][0]["name"] == name)


def swap_inline_data_refs(b: Base) -> list[list[str]]:
    """Edits that swap the first two inline data refs of a data extent: out of the kernel's order."""
    r = data_extent(b, lambda r: sum(x["type"] == "EXTENT_DATA_REF" for x in r["fields"]["inline_refs"]) >= 2)
    x, y = r["fields"]["inline_refs"][:2]
    return [item(r, field=f"ref{i}.{f}", value=v[f]) for i, v in ((0, y), (1, x)) for f in ("root", "objectid", "offset")]


def file_extent_inline(data: bytes, generation: int = 7) -> str:
    """The bytes of an uncompressed inline file extent item holding data."""
    return (struct.pack("<QQBBHB", generation, len(data), 0, 0, 0, 0) + data).hex()


def dir_entry_bytes(child: int, name: str, ftype: int = 1, transid: int = 7) -> str:
    """One dir item entry naming inode child (location key, transid, lengths, type, name)."""
    return (struct.pack("<QBQQHHB", child, 1, 0, transid, 0, len(name), ftype) + name.encode()).hex()


def inode_item_bytes(mode: int, nlink: int = 1, generation: int = 1) -> str:
    """A 160-byte inode item with a mode, a link count and a generation, the rest zero."""
    b = bytearray(160)
    struct.pack_into("<QQ", b, 0, generation, generation)
    struct.pack_into("<II", b, 40, nlink, 0)
    struct.pack_into("<I", b, 52, mode)
    return b.hex()


CASES: list[Case] = [
    # ---- superblocks
    Case("super-copy1-csum", "dup16k", ["super-copy-missing"], "superblock copy 1 has a bad checksum",
         lambda b: [sup(super_copy=1, field="label", value="str:X", no_csum=True)], exit=0),
    Case("super-copy0-magic", "dup16k", ["super-copy-invalid"],
         "superblock copy 0 has no magic (copy 1 is used)",
         lambda b: [sup(super_copy=0, field="magic", value="^1")]),
    Case("super-copy1-stale", "dup16k", ["super-copy-stale"], "superblock copy 1 has an older generation",
         lambda b: [sup(super_copy=1, field=f, value="-1") for f in ("generation", "chunk_root_generation")],
         exit=0),
    Case("super-copy1-differs", "dup16k", ["super-copy-differs"],
         "superblock copy 1 has another label, same generation",
         lambda b: [sup(super_copy=1, field="label", value="str:other")]),
    Case("super-bytes-used", "dup16k", ["super-bytes-used"], "superblock bytes_used is 4 KiB too high",
         lambda b: [sup(field="bytes_used", value="+4096")]),
    Case("super-total-bytes", "dup16k", ["super-total-bytes-large"], "superblock total_bytes is 1 MiB too high",
         lambda b: [sup(field="total_bytes", value="+1048576")], exit=0),
    Case("super-backup-root", "dup16k", ["super-backup-root-bad"],
         "the backup roots point at a non-tree block",
         lambda b: [sup(field=f"backup{i}.tree_root", value=4096) for i in range(4)],
         exit=0),
    # ---- every copy of a tree block bad
    Case("tb-csum-all", "single4k", ["tree-root-unreadable"],
         "the root leaf of the uuid tree has a bad checksum (single metadata: no good copy)",
         lambda b: [block(b.leaf(9), field="header.flags", value="^0x100", no_csum=True)]),
    Case("tb-bytenr-all", "single4k", ["tree-block-unreadable", "tree-root-unreadable", "chunk-no-dev-extent",
                                       "dev-bytes-used"],
         "the root leaf of the dev tree names another bytenr (its dev extents are lost)",
         lambda b: [block(b.leaf(4), field="header.bytenr", value="+4096")]),
    Case("tb-fsid-all", "single4k", ["tree-block-unreadable", "tree-root-unreadable"], "the root leaf of the csum tree has another fsid",
         lambda b: [block(b.leaf(7), field="header.fsid", value="^01")]),
    Case("tb-generation-all", "single4k", ["tree-block-transid"],
         "a leaf of the fs tree is newer than its parent pointer says",
         lambda b: [block(b.leaf(5, 1), field="header.generation", value="+1")]),
    Case("tb-level-all", "single4k", ["tree-block-level"], "a leaf of the fs tree claims level 1",
         lambda b: [block(b.leaf(5, 2), field="header.level", value=1)]),
    Case("tb-owner", "single4k", ["tree-block-owner"], "a leaf of the extent tree names the csum tree as owner",
         lambda b: [block(b.leaf(2, 1), field="header.owner", value=7)]),
    Case("tb-key-order", "single4k", ["key-order"], "two items of a leaf are out of key order",
         lambda b: [block(b.leaf(5, 1), field="item1.key.objectid", value="+100000")]),
    Case("tb-item-offset", "single4k", ["leaf-item-offsets"], "an item's data offset lies outside its leaf",
         lambda b: [block(b.leaf(5, 1), field="item0.offset", value=60000)]),
    Case("tb-nritems", "single4k", ["tree-block-nritems"], "a leaf claims more items than fit",
         lambda b: [block(b.leaf(5, 1), field="header.nritems", value=1000)]),
    Case("tb-ptr-generation", "single4k", ["tree-block-transid"],
         "a node's pointer expects another generation of its child",
         lambda b: [block(b.nodes(5)[0], field="ptr1.generation", value="+1")]),
    # the leaf verifies otherwise: read as it is (its pointer's generation is what the repair fixes)
    Case("tb-subvol-entries", "snap", ["tree-block-transid"],
         "the fs-tree leaf with the top directory's entry for the snapshot is newer than its parent pointer says",
         lambda b: [block(dir_entry(b, "DIR_ITEM", "snap")["block"], field="header.generation", value="+1")]),
    # ---- one copy of a tree block bad (DUP): the other copy is good
    Case("mirror-csum", "dup16k", ["tree-block-bad-copy"], "copy 2 of an fs-tree leaf has a bad checksum",
         lambda b: [block(b.leaf(5), copy=2, offset=4000, bytes="ff", no_csum=True)]),
    Case("mirror-bytenr", "dup16k", ["tree-block-bad-copy"], "copy 2 of the extent tree root names another bytenr",
         lambda b: [block(b.leaf(2), copy=2, field="header.bytenr", value="+16384")]),
    Case("mirror-fsid", "dup16k", ["tree-block-bad-copy"], "copy 1 of the root tree has another fsid",
         lambda b: [block(b.leaf(1), copy=1, field="header.fsid", value="^ff")]),
    Case("mirror-generation", "dup16k", ["tree-block-bad-copy"], "copy 2 of the csum tree leaf has another generation",
         lambda b: [block(b.leaf(7), copy=2, field="header.generation", value="+1")]),
    Case("mirror-level", "dup16k", ["tree-block-bad-copy"], "copy 2 of the free-space tree leaf claims level 2",
         lambda b: [block(b.leaf(10), copy=2, field="header.level", value=2)]),
    Case("mirror-chunk-tree", "dup16k", ["tree-block-bad-copy"], "copy 1 of the chunk tree leaf is garbage",
         lambda b: [block(b.leaf(3), copy=1, offset=200, bytes="deadbeef" * 8)]),
    # ---- chunks, dev extents, devices, system chunk array
    Case("chunk-stripe-offset", "dup16k", ["chunk-no-dev-extent", "dev-extent-no-chunk"],
         "the data chunk's stripe points 1 MiB further on the device",
         lambda b: [item(DATA_CHUNK(b), field="stripe0.offset", value="+1048576")]),
    Case("dev-extent-length", "dup16k", ["dev-extent-mismatch", "dev-bytes-used"],
         "the data chunk's dev extent is 1 MiB too short",
         lambda b: [item(b.item(4, "DEV_EXTENT", pred=lambda r: r["fields"]["chunk_offset"] ==
                                DATA_CHUNK(b)["key"][2]), field="length", value="-1048576")]),
    Case("dev-extent-chunk-offset", "dup16k", ["dev-extent-mismatch"],
         "a dev extent names the wrong chunk",
         lambda b: [item(b.item(4, "DEV_EXTENT", pred=lambda r: r["fields"]["chunk_offset"] ==
                                DATA_CHUNK(b)["key"][2]), field="chunk_offset", value="+4096")]),
    Case("dev-extent-missing", "dup16k", ["chunk-no-dev-extent", "dev-bytes-used"],
         "the data chunk's dev extent is deleted",
         lambda b: [item(b.item(4, "DEV_EXTENT", pred=lambda r: r["fields"]["chunk_offset"] ==
                                DATA_CHUNK(b)["key"][2]), delete=True)]),
    Case("dev-extent-overlap", "dup16k", ["dev-extent-overlap", "dev-extent-mismatch", "dev-bytes-used"],
         "a dev extent grows into the next one",
         lambda b: [item(b.items(4, "DEV_EXTENT")[0], field="length", value="+1048576")]),
    Case("dev-item-bytes-used", "dup16k", ["dev-bytes-used"], "the device item's bytes_used is 1 MiB too high",
         lambda b: [item(b.item(3, "DEV_ITEM"), field="bytes_used", value="+1048576")]),
    Case("dev-item-total-bytes", "dup16k", ["super-total-bytes-large"],
         "the device item's total_bytes differs from the superblock's total",
         lambda b: [item(b.item(3, "DEV_ITEM"), field="total_bytes", value="-1048576")], exit=0),
    Case("sys-chunk-array", "dup16k", ["sys-chunk-not-in-tree"],
         "the system chunk in the chunk tree differs from the superblock's copy",
         lambda b: [item(SYS_CHUNK(b), field="io_width", value="+1")]),
    # ---- block groups
    Case("bg-flags", "dup16k", ["block-group-flags"], "the data block group says DUP",
         lambda b: [item(DATA_BG(b), field="flags", value="^0x20")]),
    Case("bg-used", "dup16k", ["block-group-used", "super-bytes-used"],
         "the data block group's used is 4 KiB too high",
         lambda b: [item(DATA_BG(b), field="used", value="+4096")]),
    Case("bg-missing", "single4k", ["chunk-no-block-group", "super-bytes-used"],
         "the data block group item is deleted",
         lambda b: [item(DATA_BG(b), delete=True)]),
    # ---- extents and free space
    Case("extent-overlap", "dup16k", ["extent-overlap", "block-group-used", "file-extent-bad-range"],
         "a data extent item claims 4 KiB more, over the next extent",
         lambda b: [item(data_extent(b), field="key.offset", value="+4096")]),
    # the refs phase leaves tree blocks without an extent item to tree-block-not-allocated
    Case("metadata-item-missing", "dup16k", ["tree-block-not-allocated", "block-group-used",
                                             "free-space-mismatch"],
         "the extent item of the csum tree's leaf is deleted",
         lambda b: [item(b.item(2, "METADATA_ITEM", b.leaf(7)), delete=True)]),
    # (the refs of a block without an extent item, and of a leaked one, are not reported twice)
    Case("tree-block-leaked", "dup16k", ["tree-block-leaked", "tree-block-not-allocated", "free-space-mismatch"],
         "the last metadata extent item moves to free space (so its block has none)",
         lambda b: [item(b.items(2)[-1], field="key.objectid", value=f"+{16384 * 8}")]),
    Case("fst-info-count", "dup16k", ["free-space-info-count"], "a free-space info item counts one extent more",
         lambda b: [item(b.item(10, "FREE_SPACE_INFO", DATA_BG(b)["key"][0]), field="extent_count", value="+1")]),
    Case("fst-extent-missing", "dup16k", ["free-space-mismatch"], "a free-space extent is deleted",
         lambda b: [item([r for r in b.items(10, "FREE_SPACE_EXTENT") if DATA_BG(b)["key"][0] <= r["key"][0] <
                          DATA_BG(b)["key"][0] + DATA_BG(b)["key"][2]][-1], delete=True)]),
    # ---- extent references (checkrefs)
    Case("extent-refs-total", "dup16k", ["extent-refs-total"], "a data extent item counts one ref too many",
         lambda b: [item(data_extent(b), field="refs", value="+1")]),
    Case("data-ref-count", "dup16k", ["extent-ref-count", "extent-refs-total"],
         "a data extent's inline ref count is one too high",
         lambda b: [item(data_extent(b), field="ref0.count", value="+1")]),
    Case("data-ref-root", "dup16k", ["extent-ref-missing", "extent-ref-unused"],
         "a data extent's inline ref names another root",
         lambda b: [item(data_extent(b), field="ref0.root", value=256)]),
    Case("tree-ref-root", "dup16k", ["extent-ref-missing", "extent-ref-unused"],
         "a tree block's inline ref names another tree",
         lambda b: [item(b.item(2, "METADATA_ITEM", b.leaf(7)), field="ref0.root", value=4)]),
    Case("tree-ref-noskinny", "single4k", ["extent-ref-missing", "extent-ref-unused"],
         "a non-skinny tree-block extent item's ref names another tree",
         lambda b: [item(b.item(2, "EXTENT_ITEM", b.leaf(7)), field="ref0.root", value=4)]),
    Case("extent-flags", "dup16k", ["extent-type"], "a data extent item is flagged as a tree block",
         lambda b: [item(data_extent(b), field="flags", value=2)]),
    Case("snapshot-ref-root", "snap", ["extent-inline-ref-bad", "extent-ref-missing", "extent-ref-unused"],
         "a tree block shared by a subvolume and its snapshot names another snapshot in its second ref",
         lambda b: [item(b.item(2, "METADATA_ITEM", pred=lambda r: len(r["fields"].get("inline_refs", [])) == 2),
                         field="ref1.root", value=300)]),
    Case("file-extent-overlap", "snap", ["file-extent-overlap", "inode-nbytes"],
         "a file extent grows over the next one (still inside its own disk extent)",
         lambda b: [item(b.items(5, "EXTENT_DATA", b.ino("overwritten"))[0], field="num_bytes", value="+4096")]),
    Case("data-extent-missing", "dup16k", ["data-extent-not-allocated", "block-group-used",
                                           "free-space-mismatch", "csum-outside-extent"],
         "the extent item of a file's data is deleted",
         lambda b: [item(data_extent(b), delete=True)]),
    # ---- csums (checkrefs)
    Case("csum-missing", "dup16k", ["csum-missing"], "the first csum item is deleted",
         lambda b: [item(b.items(7, "EXTENT_CSUM")[0], delete=True)]),
    Case("csum-outside", "dup16k", ["csum-missing", "csum-outside-extent"],
         "a csum item moves past the data (which loses those checksums)",
         lambda b: [item(b.items(7, "EXTENT_CSUM")[-1], field="key.offset", value="+67108864")]),
    # the item's last checksum is cut short: its data block has none left
    Case("csum-item-size", "dup16k", ["csum-item-size", "csum-missing"], "a csum item's size is not a multiple of 4",
         lambda b: [block(b.leaf(7), **shrink_last_item(b, 7))]),
    Case("data-csum-mismatch", "dup16k", ["data-csum-mismatch"], "a data block's stored checksum is wrong",
         lambda b: [item(b.items(7, "EXTENT_CSUM")[0], field="csum0", value="^0xff")],
         args=("--check-data-csum",)),
    # ---- inodes and directories (checkfs)
    Case("inode-nlink", "dup16k", ["inode-nlink"], "a regular file's nlink is one too high",
         lambda b: [item(inode(b, "file2"), field="nlink", value="+1")]),
    Case("dir-isize", "dup16k", ["dir-isize"], "a directory's size is 2 too high",
         lambda b: [item(inode(b, "dir"), field="size", value="+2")]),
    Case("inode-nbytes", "dup16k", ["inode-nbytes"], "a file's nbytes is 4 KiB too high",
         lambda b: [item(inode(b, "file3"), field="nbytes", value="+4096")]),
    Case("inode-mode", "dup16k", ["inode-mode-invalid"], "a file's mode has no file type",
         lambda b: [item(inode(b, "small"), field="mode", value="0644")]),
    Case("dir-item-name", "dup16k", ["name-hash", "dir-item-index-mismatch"],
         "a dir item's name changed (its hash no longer matches)",
         lambda b: [item(dir_entry(b, "DIR_ITEM", "file1"), field="name", value="^01")]),
    Case("dir-index-location", "dup16k", ["dir-entry-dangling", "dir-item-index-mismatch"],
         "a dir index points at an inode that does not exist",
         lambda b: [item(dir_entry(b, "DIR_INDEX", "small"), field="location.objectid", value=99999)]),
    Case("dir-entry-type", "dup16k", ["dir-entry-type"], "a file's dir item and dir index say directory",
         lambda b: [item(dir_entry(b, t, "file3"), field="type", value=2) for t in ("DIR_ITEM", "DIR_INDEX")]),
    Case("dir-index-missing", "dup16k", ["dir-index-missing", "dir-isize"], "a file's dir index is deleted",
         lambda b: [item(dir_entry(b, "DIR_INDEX", "file3"), delete=True)]),
    Case("dir-item-missing", "dup16k", ["dir-item-missing", "dir-isize"], "a file's dir item is deleted",
         lambda b: [item(dir_entry(b, "DIR_ITEM", "file3"), delete=True)]),
    Case("inode-ref-index", "dup16k", ["dir-index-missing", "inode-ref-missing"],
         "an inode ref's index differs from its dir index",
         lambda b: [item(b.item(5, "INODE_REF", b.ino("file3")), field="index", value="+100")]),
    Case("inode-ref-missing", "dup16k", ["inode-nlink", "inode-ref-missing"], "a file's inode ref is deleted",
         lambda b: [item(b.item(5, "INODE_REF", b.ino("file3")), delete=True)]),
    Case("dir-item-hash", "dup16k", ["name-hash", "dir-item-missing", "inode-ref-missing"],
         "a file's dir item is keyed one past its name's hash",
         lambda b: [item(dir_entry(b, "DIR_ITEM", "file3"), field="key.offset", value="+1")]),
    Case("inode-names-lost", "dup16k", ["inode-nlink", "dir-isize"],
         "a file's dir item, dir index and inode ref are deleted (nlink still 1)",
         lambda b: [item(dir_entry(b, "DIR_ITEM", "file3"), delete=True),
                    item(dir_entry(b, "DIR_INDEX", "file3"), delete=True),
                    item(b.item(5, "INODE_REF", b.ino("file3")), delete=True)]),
    Case("inode-unreachable", "dup16k", ["inode-unreachable", "dir-isize"],
         "a file's names are deleted and its nlink is 0, with no orphan item",
         lambda b: [item(dir_entry(b, "DIR_ITEM", "file3"), delete=True),
                    item(dir_entry(b, "DIR_INDEX", "file3"), delete=True),
                    item(b.item(5, "INODE_REF", b.ino("file3")), delete=True),
                    item(inode(b, "file3"), field="nlink", value=0)]),
    Case("inode-generation", "dup16k", ["inode-generation"], "a file's generation is newer than the filesystem",
         lambda b: [item(inode(b, "file2"), field="generation", value="+1000")]),
    Case("inode-item-missing", "dup16k", ["inode-item-missing", "dir-entry-dangling"],
         "a file's inode item is deleted",
         lambda b: [item(inode(b, "file3"), delete=True)]),
    # file-extent-bad (the fs-tree check) says it; the refs phase does not repeat it as file-extent-bad-range
    Case("file-extent-num-bytes", "dup16k", ["file-extent-bad", "inode-nbytes"],
         "a file extent (the file's only one) grows past its disk extent",
         lambda b: [item(b.items(5, "EXTENT_DATA", b.ino("text"))[0], field="num_bytes", value="+4096")]),
    # ---- subvolumes: root items, root refs, uuid tree (checkfs)
    Case("root-ref-missing", "dup16k", ["root-ref-missing"], "the subvolume's root ref is deleted",
         lambda b: [item(b.item(1, "ROOT_REF"), delete=True)]),
    Case("root-backref-missing", "dup16k", ["root-backref-missing"], "the subvolume's root backref is deleted",
         lambda b: [item(b.item(1, "ROOT_BACKREF"), delete=True)]),
    Case("root-ref-name", "dup16k", ["root-ref-mismatch", "root-dir-entry-missing"],
         "the subvolume's root ref has another name",
         lambda b: [item(b.item(1, "ROOT_REF"), field="name", value="^01")]),
    Case("root-item-generation", "dup16k", ["root-item-bad", "tree-block-transid"],
         "the subvolume's root item expects another generation of its root block",
         lambda b: [item(b.item(1, "ROOT_ITEM", 256), field="generation", value="+1")]),
    # (with the uuid tree's generation the filesystem's: a stale one has the kernel mend the tree at mount)
    Case("uuid-missing", "dup16k", ["uuid-tree-missing"], "a uuid tree entry is deleted",
         lambda b: [item(b.items(9, "UUID_KEY_SUBVOL")[0], delete=True),
                    sup(field="uuid_tree_generation", value=b.generation)]),
    Case("uuid-extra", "dup16k", ["uuid-tree-extra", "uuid-tree-missing"],
         "a uuid tree entry names another subvolume",
         lambda b: [item(b.items(9, "UUID_KEY_SUBVOL")[0], field="subvol0", value=300),
                    sup(field="uuid_tree_generation", value=b.generation)]),
    Case("uuid-missing-stale", "dup16k", [], "a uuid tree entry is deleted, the uuid tree's generation is "
         "older than the filesystem's (mkfs leaves 0): the kernel mends the tree at mount",
         lambda b: [item(b.items(9, "UUID_KEY_SUBVOL")[0], delete=True)], exit=0),
    # ---- damage btrfs check 7.3 reports that other tools' images hold (fsck-tests 034, 075, 049, 069, 061, 027, 064)
    Case("symlink-immutable", "dup16k", ["inode-flags-type"], "a symlink has the immutable flag",
         lambda b: [item(inode(b, "link"), field="flags", value="0x40")]),
    Case("symlink-append", "dup16k", ["inode-flags-type"], "a symlink has the append and nodatasum flags",
         lambda b: [item(inode(b, "link"), field="flags", value="0x81")]),
    Case("dir-file-extent", "dup16k", ["file-extent-not-file"], "a directory has an inline file extent",
         lambda b: [["--tree", "5", "--key", f"{b.ino('dir')},EXTENT_DATA,0", "--insert",
                     "--bytes", file_extent_inline(b"hello")]]),
    Case("dir-hardlink", "dup16k", ["dir-entry-type", "dir-hardlink", "dir-isize", "file-extent-not-file"],
         "a file of two names (file1, dir/hard1) has a directory's mode",
         lambda b: [item(inode(b, "file1"), field="mode", value="0x41ed")]),
    Case("unknown-key-type", "dup16k", ["item-unknown-type"], "an fs-tree item of key type 200",
         lambda b: [["--tree", "5", "--key", f"{b.ino('small')},200,0", "--insert", "--bytes", "0102030405"]]),
    Case("inline-ref-order", "snap", ["extent-inline-ref-bad"],
         "a data extent's first two inline references swapped (out of the kernel's order)", swap_inline_data_refs),
    Case("inline-ref-type", "dup16k", ["extent-inline-ref-bad", "extent-ref-missing", "extent-refs-total"],
         "a tree block's inline reference has type 177 (none)",
         lambda b: [item(b.item(2, "METADATA_ITEM", b.leaf(7)), field="ref0.type", value=177)]),
    Case("extent-tree-dev-extent", "dup16k", ["item-foreign-type"],
         "a well-formed dev extent item in the extent tree (fsck-tests 076; btrfs check 7.3 only says it ignores it)",
         lambda b: [["--tree", "2", "--key", f"{data_extent(b)['key'][0] + 1},DEV_EXTENT,0", "--insert",
                     "--bytes", (struct.pack("<QQQQ", 3, 256, 22020096, 8 << 20) + bytes(16)).hex()]], exit=0),
    Case("foreign-type-root", "single4k", ["item-foreign-type"], "a csum item in the root tree",
         lambda b: [["--tree", "1", "--key", "300,EXTENT_CSUM,0", "--insert", "--bytes", "00" * 4]], exit=0),
    Case("foreign-type-dev", "single4k", ["item-foreign-type"], "a block group item in the dev tree",
         lambda b: [["--tree", "4", "--key", "1,BLOCK_GROUP_ITEM,4096", "--insert", "--bytes", "00" * 24]], exit=0),
    # blocks newer than the filesystem under pointers that name an older generation (fsck-tests 002)
    Case("tb-future-root-leaf", "single4k", ["tree-block-transid"], "a root-tree leaf newer than the filesystem",
         lambda b: [block(b.leaf(1, 0), field="header.generation", value="+1")]),
    Case("tb-future-root-node", "single4k", ["tree-block-generation", "tree-block-transid"], "the root tree's node newer than the filesystem",
         lambda b: [block(b.nodes(1)[0], field="header.generation", value="+3")]),
    Case("tb-future-extent-leaf", "single4k", ["tree-block-generation", "tree-block-transid"],
         "an extent-tree leaf newer than the filesystem",
         lambda b: [block(b.leaf(2, 1), field="header.generation", value="+2")]),
    Case("fst-extent-unaligned", "single4k", ["free-space-mismatch", "key-order"],
         "a free-space extent's start overwritten: off the sector grid and out of key order",
         lambda b: [block(b.leaf(10, 0), field="item1.key.objectid", value="+100000")]),
    # an extent item's key overwritten off the sector grid (in key order still): the kernel refuses the leaf
    Case("extent-key-unaligned", "single4k",
         ["block-group-used", "free-space-mismatch", "item-malformed", "tree-block-not-allocated"],
         "a tree block's extent item key moved 100000 bytes on, off the sector grid",
         lambda b: [block(b.leaf(2, 0), field="item1.key.objectid", value="+100000")]),
    Case("extent-key-unaligned-meta", "snap",
         ["block-group-used", "free-space-mismatch", "item-malformed", "tree-block-not-allocated"],
         "a skinny metadata item's key moved half a sector on",
         lambda b: [block(r["block"], field=f"item{r['slot']}.key.objectid", value="+2048")
                    for r in [b.item(2, "METADATA_ITEM")]]),
    Case("fsc-inode-mode", "dup16k", ["root-tree-inode-mode"],
         "a free-space cache inode (v1) in the root tree has mode 0 (fsck-tests 039)",
         lambda b: [["--tree", "1", "--key", "257,INODE_ITEM,0", "--insert", "--bytes", inode_item_bytes(0)]]),
    Case("fsc-inode-mode-dir", "dup16k", ["root-tree-inode-mode"],
         "a free-space cache inode (v1) in the root tree has a directory's mode",
         lambda b: [["--tree", "1", "--key", "258,INODE_ITEM,0", "--insert", "--bytes", inode_item_bytes(0o40755)]]),
    Case("super-total-bytes-small", "dup16k", ["super-total-bytes"],
         "superblock total_bytes is 1000 bytes short of the device's (the kernel refuses it)",
         lambda b: [sup(field="total_bytes", value="-1000")]),
    Case("dev-size-unaligned", "dup16k", ["dev-size-unaligned"],
         "the dev item and the superblock say 1000 bytes less than the device, not whole sectors (fsck-tests 028)",
         lambda b: [sup(field="total_bytes", value="-1000"), sup(field="dev_item.total_bytes", value="-1000"),
                    item(b.item(3, "DEV_ITEM"), field="total_bytes", value="-1000")], exit=0),
    Case("dev-size-unaligned-mismatch", "dup16k", ["dev-size-unaligned", "super-total-bytes-large"],
         "the dev item says 2000 bytes less than the device, the superblock 1000 (fsck-tests 028)",
         lambda b: [sup(field="total_bytes", value="-1000"), sup(field="dev_item.total_bytes", value="-2000"),
                    item(b.item(3, "DEV_ITEM"), field="total_bytes", value="-2000")], exit=0),
    Case("dupe-name-same", "dup16k", ["dir-isize", "inode-ref-missing", "name-duplicate"],
         "a dir item holds its one name twice (fsck-tests 067)",
         lambda b: [item(dir_entry(b, "DIR_ITEM", "file2"), append=True, bytes=dir_entry_bytes(b.ino("file2"), "file2"))]),
    Case("dupe-name-other", "dup16k", ["dir-isize", "dir-item-index-mismatch", "inode-ref-missing", "name-duplicate"],
         "a dir item holds its name a second time, naming another inode",
         lambda b: [item(dir_entry(b, "DIR_ITEM", "file2"), append=True, bytes=dir_entry_bytes(b.ino("small"), "file2"))]),
    Case("tree-ref-level", "dup16k", ["extent-level"],
         "a skinny metadata item keyed one level above its block (fsck-tests 053)",
         lambda b: [item(b.item(2, "METADATA_ITEM", b.leaf(7)), field="key.offset", value="+1")]),
    Case("tree-ref-level-noskinny", "single4k", ["extent-level"],
         "a non-skinny tree block's extent item names level 1 for a leaf",
         lambda b: [item(b.item(2, "EXTENT_ITEM", pred=lambda r: r["fields"]["flags"] == 2 and
                                r["fields"].get("level") == 0), field="level", value=1)]),
    Case("fifo-file-extent", "dup16k", ["file-extent-not-file"],
         "a small file's inode and entries made a fifo's, its inline extent left (fsck-tests 075)",
         lambda b: [item(inode(b, "small"), field="mode", value=hex(0o10644)),
                    item(dir_entry(b, "DIR_ITEM", "small"), field="type", value=5),
                    item(dir_entry(b, "DIR_INDEX", "small"), field="type", value=5)]),
    Case("inode-cache", "dup16k", ["inode-cache"], "an inode item of the deprecated free-inode cache",
         lambda b: [["--tree", "5", "--key", "18446744073709551604,INODE_ITEM,0", "--insert",
                     "--bytes", inode_item_bytes(0o100600)]]),
    # ---- second variants of the damage btrfs check 7.3 repairs (another group, chunk, tree, field)
    Case("bg-flags-meta", "dup16k", ["block-group-flags"], "the metadata block group says single",
         lambda b: [item(META_BG(b), field="flags", value="^0x20")]),
    Case("super-backup-chunk-root", "dup16k", ["super-backup-root-bad"],
         "one backup root's chunk root is not in a system chunk",
         lambda b: [sup(field="backup1.chunk_root", value=4096)], exit=0),
    Case("sys-chunk-array-align", "dup16k", ["sys-chunk-not-in-tree"],
         "the system chunk in the chunk tree has another io_align than the superblock's copy",
         lambda b: [item(SYS_CHUNK(b), field="io_align", value="+4096")]),
    Case("dev-extent-missing-meta", "dup16k", ["chunk-no-dev-extent", "dev-bytes-used"],
         "the dev extent of the metadata chunk's second (DUP) stripe is deleted",
         lambda b: [item(sorted(b.items(4, "DEV_EXTENT"), key=lambda r: r["key"][2])[-1], delete=True)]),
    Case("chunk-stripe-offset-meta", "dup16k", ["chunk-no-dev-extent", "dev-extent-no-chunk",
                                                 "tree-block-bad-copy"],
         "the metadata chunk's second stripe points 1 MiB further on the device",
         lambda b: [item(b.item(3, "CHUNK_ITEM", pred=lambda r: r["fields"]["type"] & 4),
                         field="stripe1.offset", value="+1048576")]),
    Case("tb-owner-csum", "single4k", ["tree-block-owner"], "the csum tree's leaf names the fs tree as owner",
         lambda b: [block(b.leaf(7, 0), field="header.owner", value=5)]),
    Case("extent-flags-backref", "dup16k", ["extent-type"],
         "another data extent item is flagged as a tree block with full backrefs",
         lambda b: [item(data_extent(b, lambda r: r["key"][2] == 40960), field="flags", value=0x102)]),
]
# The fixable cases and the repair classes that fix them (tests/scripts/test_repair_corpus.py).
FIXABLE: dict[str, tuple[str, ...]] = {
    "super-backup-root": ('backup-roots',),
    "bg-flags": ('block-group-flags',),
    "sys-chunk-array": ('sys-chunk-array',),
    "chunk-stripe-offset": ('dev-extents',),
    "tb-owner": ('tree-block-owner',),
    "extent-flags": ('extent-refs',),
    "bg-flags-meta": ('block-group-flags',),
    "super-backup-chunk-root": ('backup-roots',),
    "sys-chunk-array-align": ('sys-chunk-array',),
    "dev-extent-missing-meta": ('dev-extents', 'space-counters'),
    "chunk-stripe-offset-meta": ('tree-block-copies', 'dev-extents'),
    "tb-owner-csum": ('tree-block-owner',),
    "extent-flags-backref": ('extent-refs',),
    "dev-extent-chunk-offset": ('dev-extents',),
    "dev-extent-missing": ('dev-extents', 'space-counters'),
    "dev-extent-length": ('dev-extents', 'space-counters'),
    "dev-extent-overlap": ('dev-extents', 'space-counters'),
    "symlink-immutable": ('inodes',),
    "symlink-append": ('inodes',),
    "inline-ref-order": ('extent-refs',),
    "inline-ref-type": ('extent-refs',),
    "fsc-inode-mode": ('inodes',),
    "fifo-file-extent": ('stray-items',),
    "unknown-key-type": ('stray-items',),
    "extent-tree-dev-extent": ('stray-items',),
    "extent-key-unaligned": ('extent-refs', 'space-counters', 'free-space-tree'),
    "extent-key-unaligned-meta": ('extent-refs', 'space-counters', 'free-space-tree'),
    "foreign-type-root": ('stray-items',),
    "foreign-type-dev": ('stray-items',),
    "tb-future-root-leaf": ('tree-salvage',),
    "tb-future-root-node": ('tree-salvage',),
    "tb-future-extent-leaf": ('tree-salvage',),
    "fst-extent-unaligned": ('tree-salvage', 'free-space-tree'),
    "inode-cache": ('stray-items',),
    "tree-ref-level": ('extent-refs',),
    "tree-ref-level-noskinny": ('extent-refs',),
    "dupe-name-same": ('names', 'inodes'),
    "dupe-name-other": ('names', 'inodes'),
    "super-total-bytes-small": ('space-counters',),
    "dev-size-unaligned": ('space-counters',),
    "dev-size-unaligned-mismatch": ('space-counters',),
    "fsc-inode-mode-dir": ('inodes',),
    "bg-used": ('space-counters',),
    "csum-item-size": ('csums',),
    "csum-missing": ('csums',),
    "csum-outside": ('csums',),
    "data-extent-missing": ('extent-refs', 'free-space-tree', 'space-counters', 'csums'),
    "data-ref-count": ('extent-refs',),
    "data-ref-root": ('extent-refs',),
    "dev-item-bytes-used": ('space-counters',),
    "dev-item-total-bytes": ('space-counters',),
    "dir-entry-type": ('names',),
    "dir-index-location": ('names',),
    "dir-index-missing": ('names', 'inodes'),
    "dir-isize": ('inodes',),
    "dir-item-hash": ('names',),
    "dir-item-missing": ('names', 'inodes'),
    "dir-item-name": ('names',),
    "extent-refs-total": ('extent-refs',),
    "fst-extent-missing": ('free-space-tree',),
    "fst-info-count": ('free-space-tree',),
    "inode-generation": ('inodes',),
    "inode-item-missing": ('inode-items',),
    "inode-mode": ('inodes',),
    "inode-names-lost": ('inodes',),
    "inode-nbytes": ('inodes',),
    "inode-nlink": ('inodes',),
    "inode-ref-index": ('names',),
    "inode-ref-missing": ('names', 'inodes'),
    "inode-unreachable": ('inodes',),
    "metadata-item-missing": ('extent-refs', 'free-space-tree', 'space-counters',),
    "mirror-bytenr": ('tree-block-copies',),
    "mirror-chunk-tree": ('tree-block-copies',),
    "mirror-csum": ('tree-block-copies',),
    "mirror-fsid": ('tree-block-copies',),
    "mirror-generation": ('tree-block-copies',),
    "mirror-level": ('tree-block-copies',),
    "root-backref-missing": ('root-refs',),
    "root-ref-missing": ('root-refs',),
    "root-ref-name": ('subvol-links',),  # the backref's name is the one the dir entries carry
    "snapshot-ref-root": ('extent-refs',),
    "super-bytes-used": ('space-counters',),
    "super-copy0-magic": ('superblock-copies',),
    "super-copy1-csum": ('superblock-copies',),
    "super-copy1-differs": ('superblock-copies',),
    "super-copy1-stale": ('superblock-copies',),
    "super-total-bytes": ('space-counters',),
    "tb-fsid-all": ('csums',),  # the csum tree's root unreadable: dropped, rebuilt from the data
    "tb-csum-all": ('uuid-tree',),  # the uuid tree's root unreadable: rebuilt from the root items
    # blocks that verify but are laid out wrong or disagree with their pointer: rewritten
    # from their salvaged view (check/repair_salvage.c); what a dropped item held follows
    "tb-level-all": ('tree-salvage',),
    "tb-ptr-generation": ('tree-salvage',),
    "tb-generation-all": ('tree-salvage',),
    "tb-key-order": ('tree-salvage',),  # the key mended from its neighbours: nothing lost
    "tb-nritems": ('tree-salvage',),
    "tb-item-offset": ('tree-salvage',),
    "tb-subvol-entries": ('tree-salvage',),
    "root-item-generation": ('tree-salvage',),  # the root block copied: the root item takes its generation
    "tree-block-leaked": ('extent-refs', 'free-space-tree',),
    "tree-ref-noskinny": ('extent-refs',),
    "tree-ref-root": ('extent-refs',),
    "uuid-extra": ('uuid-tree',),
    "uuid-missing": ('uuid-tree',),
}
# repaired in part: the classes run, problems remain (repair-exit 4)
PARTIAL: set[str] = set()
for _c in CASES:
    _c.repair = FIXABLE.get(_c.name, ())
CASE_BY_NAME = {c.name: c for c in CASES}


# ---------------------------------------------------------------- making one case

def reference_fails(img: Path) -> bool:
    p = run(["btrfs", "check", "--readonly", img], check=False, timeout=300)
    return p.returncode != 0


def btk_check(img: Path, args=()) -> tuple[int, list[str]]:
    p = run([BUILD / "btk-check", "--format", "json", *args, img], check=False, timeout=300)
    try:
        ids = sorted({x["id"] for x in json.loads(p.stdout)["problems"]})
    except (ValueError, KeyError):
        ids = ["<no json: " + p.stderr.strip()[-200:] + ">"]
    return p.returncode, ids


def make_case(c: Case, base: Base, work: Path) -> bool:
    img = work / f"{c.name}.img"
    run(["cp", "--sparse=always", base.img, img])
    edits = c.edits(base)
    for e in edits:
        p = run([CORRUPT, *e, img], check=False)
        if p.returncode:
            print(f"FAIL {c.name}: btk-corrupt {' '.join(e)}: {p.stderr.strip()}")
            return False
    fails = reference_fails(img)
    rc, ids = btk_check(img, c.args)
    lines = [f"# {c.what}"]
    lines += [f"# how: btk-corrupt {' '.join(e)} IMG" for e in edits]
    lines += [f"base: {c.base}", f"exit: {c.exit}", f"problems: {' '.join(sorted(c.problems))}"]
    if c.args:
        lines.append(f"args: {' '.join(c.args)}")
    lines.append(f"btrfs-check: {'fails' if fails else 'passes'}")
    if LATEST_BTRFS.exists():  # btrfs-progs 7.3 (../shared/tools/ref-progs-latest): a second judge
        p = run([LATEST_BTRFS, "check", "--readonly", img], check=False, timeout=300)
        lines.append(f"btrfs-check-7.3: {'fails' if p.returncode else 'passes'}")
    if c.pending:
        lines.append(f"pending: {c.pending}")
    lines.append(f"repair: {' '.join(c.repair) if c.repair else 'none'}")
    lines.append(f"repair-exit: {1 if c.repair and c.name not in PARTIAL else c.exit}")
    (HERE / f"{c.name}.expect").write_text("\n".join(lines) + "\n")
    with open(HERE / f"{c.name}.img.xz", "wb") as out:
        subprocess.run(["xz", "-T1", "-c", str(img)], stdout=out, check=True)
    img.unlink()
    ok = rc == c.exit and ids == sorted(c.problems)
    print(f"{'ok  ' if ok else 'DIFF'} {c.name:24} expect {c.exit} {' '.join(sorted(c.problems))}"
          f"{'' if ok else f' | btk-check {rc} {chr(32).join(ids)}'}"
          f" | btrfs check {'fails' if fails else 'passes'}{' (pending)' if c.pending else ''}")
    return ok


def main(argv: list[str]) -> int:
    if "--list" in argv:
        for c in CASES:
            print(f"{c.name:24} {c.base:9} {' '.join(c.problems)}")
        return 0
    keep = None
    if "--keep" in argv:
        i = argv.index("--keep")
        keep = Path(argv[i + 1])
        del argv[i:i + 2]
    names = argv or [c.name for c in CASES]
    unknown = [n for n in names if n not in CASE_BY_NAME]
    if unknown:
        print(f"unknown case(s): {' '.join(unknown)}", file=sys.stderr)
        return 2
    for tool in (CORRUPT, BUILD / "btk-check", BUILD / "btk-inspect"):
        if not os.access(tool, os.X_OK):
            print(f"{tool} is not built (make all test-tools)", file=sys.stderr)
            return 2
    work = keep or Path(tempfile.mkdtemp(prefix="corpus-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        bases: dict[str, Base] = {}
        for name in dict.fromkeys(CASE_BY_NAME[n].base for n in names):
            img = work / f"base-{name}.img"
            if not img.exists():
                BASES[name](img)
            bases[name] = Base(name, img)
        ok = sum(make_case(CASE_BY_NAME[n], bases[CASE_BY_NAME[n].base], work) for n in names)
        print(f"{ok}/{len(names)} as expected")
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
