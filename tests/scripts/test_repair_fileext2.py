# SPDX-License-Identifier: GPL-2.0-only
"""btk-check --repair on file extent items the kernel refuses: two file extents of an inode whose
ranges overlap (a key offset moved into the extent before it, a length grown past the next one),
and fields no kernel writes (encryption, other_encoding, an unknown compression or type, a
generation from the future). Each: the damage is found, --repair runs the class, btk-check and
the reference `btrfs check` (7.3 too where installed) are clean after it, and every file reads
back as before (no data that a reference still names is lost).
"""
from __future__ import annotations

import json

import pytest

import oracle
from conftest import built, run_btk
from test_repair import corrupt, key_arg
from test_repair_fileext import found, repaired
from test_tune import needs, SIMPLE, NO_HOLES_OFF

REG, PREALLOC = 1, 2


def fs_copy(tmp_path, recipe):
    needs(recipe)
    return built(recipe).copy_to(tmp_path / "devs")


def file_extents(devs) -> list[dict]:
    """The EXTENT_DATA items of the top subvolume (btk-inspect: dump-tree 6.14 omits encryption)."""
    p = run_btk("btk-inspect", "tree", "--format", "jsonl", "-t", "5", *devs)
    items = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    return [it for it in items if it.get("type") == "EXTENT_DATA"]


def data_extent(it, *, compressed=None, ftype=REG) -> bool:
    f = it["fields"]
    return (f["type"] == ftype and bool(f.get("disk_bytenr")) and
            (compressed is None or bool(f["compression"]) == compressed))


def consecutive(devs, **kw) -> tuple[dict, dict]:
    """Two data extents of one file, one after the other."""
    ex = file_extents(devs)
    for a, b in zip(ex, ex[1:]):
        if a["key"][0] == b["key"][0] and data_extent(a, **kw) and data_extent(b, **kw):
            return a, b
    pytest.skip("no file with two such extents")


EXTENDED = pytest.mark.extended   # the wider matrix: make check-extended


@pytest.mark.parametrize("recipe,how", [
    (SIMPLE, "key-back"), (NO_HOLES_OFF, "length-grown"),
    pytest.param(NO_HOLES_OFF, "key-back", marks=EXTENDED), pytest.param(SIMPLE, "length-grown", marks=EXTENDED),
], ids=["16k-key-back", "4k-holes-length-grown", "4k-holes-key-back", "16k-length-grown"])
def test_file_extent_overlap(tmp_path, recipe, how):
    """A file extent's key moved a sector into the extent before it (its data reference still
    names where it was: it goes back there), or an extent's length grown a sector past the next
    one's start (both references agree: the length is cut there). Nothing is lost."""
    devs = fs_copy(tmp_path, recipe)
    before = oracle.snapshot_hashes(devs)
    a, b = consecutive(devs, compressed=how == "key-back")
    if how == "key-back":
        corrupt(devs, "-t", "5", "-k", key_arg(b["key"]), "-f", "key.offset", "-v", "-4096")
    else:
        corrupt(devs, "-t", "5", "-k", key_arg(a["key"]), "-f", "num_bytes",
                "-v", str(b["key"][2] - a["key"][2] + 4096))
    found(devs, "file-extent-overlap")
    repaired(devs, {"file-extent-overlap"})
    assert oracle.snapshot_hashes(devs) == before


def pick(devs, kind: str) -> dict:
    ex = file_extents(devs)
    want = {"compressed": lambda it: data_extent(it, compressed=True),
            "plain": lambda it: data_extent(it, compressed=False),
            "prealloc": lambda it: data_extent(it, ftype=PREALLOC),
            "inline": lambda it: it["fields"]["type"] == 0,
            "hole": lambda it: it["fields"]["type"] == REG and not it["fields"].get("disk_bytenr")}[kind]
    return next(it for it in ex if want(it))


@pytest.mark.parametrize("kind,field,value", [
    ("compressed", "encryption", "1"),
    pytest.param("plain", "other_encoding", "3", marks=EXTENDED),
    ("compressed", "compression", "4"),    # the decompressor that gives ram_bytes back is found
    pytest.param("plain", "compression", "7", marks=EXTENDED),  # none does, ram_bytes long: uncompressed
    pytest.param("inline", "compression", "5", marks=EXTENDED),
    ("prealloc", "type", "3"),             # no checksums: preallocated again
    pytest.param("plain", "type", "255", marks=EXTENDED),       # checksummed: regular
    ("plain", "generation", "+1000000"),   # its data extent's generation
], ids=["enc", "other-enc", "comp-zstd", "comp-none", "comp-inline", "type-prealloc", "type-reg", "gen"])
def test_file_extent_fields(tmp_path, kind, field, value):
    """A field the kernel's tree checker (or btrfs check) refuses: set from the item, its data
    and the checksums; every file reads back as before."""
    devs = fs_copy(tmp_path, SIMPLE)
    before = oracle.snapshot_hashes(devs)
    it = pick(devs, kind)
    corrupt(devs, "-t", "5", "-k", key_arg(it["key"]), "-f", field, "-v", value)
    found(devs, "file-extent-bad")
    repaired(devs, {"file-extent-fields"})
    assert oracle.snapshot_hashes(devs) == before
    (after,) = [x for x in file_extents(devs) if x["key"] == it["key"]]
    assert after["fields"] == it["fields"], (it, after)


@pytest.mark.parametrize("recipe,kind,value", [
    (SIMPLE, "plain", "+1"),            # the tree checker refuses it: the disk length
    (SIMPLE, "plain", "0"),             # shorter than its range (btrfs check): the disk length
    (SIMPLE, "compressed", "0"),        # what its data decompresses to
    pytest.param(SIMPLE, "compressed", "^0x10", marks=EXTENDED),
    (NO_HOLES_OFF, "hole", "+1"),       # a hole's length
    pytest.param(NO_HOLES_OFF, "hole", "4096", marks=EXTENDED),   # shorter than the hole
], ids=["plain-unaligned", "plain-zero", "compressed-zero", "compressed-unaligned", "hole-unaligned",
        "hole-short"])
def test_file_extent_ram_bytes(tmp_path, recipe, kind, value):
    """ram_bytes off the sector grid (the kernel refuses the leaf) or shorter than the range the
    extent holds (btrfs check calls it invalid; 7.3 cannot repair it): set to what the kernel
    writes, the item is as it was and every file reads back as before."""
    devs = fs_copy(tmp_path, recipe)
    before = oracle.snapshot_hashes(devs)
    it = pick(devs, kind)
    corrupt(devs, "-t", "5", "-k", key_arg(it["key"]), "-f", "ram_bytes", "-v", value)
    found(devs, "file-extent-bad")
    repaired(devs, {"file-extent-fields"})
    assert oracle.snapshot_hashes(devs) == before
    (after,) = [x for x in file_extents(devs) if x["key"] == it["key"]]
    if kind == "hole":   # the kernel wrote some holes longer in ram_bytes than they are: not kept
        it["fields"]["ram_bytes"] = it["fields"]["num_bytes"]
    assert after["fields"] == it["fields"], (it, after)
