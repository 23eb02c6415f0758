# SPDX-License-Identifier: GPL-2.0-only
"""The reference parsers (dumptree.py) on real dump-tree / dump-super output.

These need no btk binary: they check that what the btk comparisons rely on was
read completely and correctly from the reference tools.
"""
import collections

import pytest

import dumptree
from conftest import dump_of

# the reference tools and Python only
pytestmark = pytest.mark.no_sanitize

# Fields every item of these types must have decoded (the contract's list).
REQUIRED_FIELDS = {
    "INODE_ITEM": {"generation", "transid", "size", "nbytes", "block_group", "nlink", "uid", "gid", "mode",
                   "rdev", "flags", "sequence", "atime", "ctime", "mtime", "otime"},
    "INODE_REF": {"refs"},
    "DIR_ITEM": {"entries"}, "DIR_INDEX": {"entries"}, "XATTR_ITEM": {"entries"},
    "EXTENT_DATA": {"generation", "type"},
    "EXTENT_ITEM": {"refs", "generation", "flags", "inline_refs"},
    "METADATA_ITEM": {"refs", "generation", "flags", "inline_refs"},
    "CHUNK_ITEM": {"length", "owner", "stripe_len", "type", "io_align", "io_width", "sector_size",
                   "num_stripes", "sub_stripes", "stripes"},
    "DEV_EXTENT": {"chunk_tree", "chunk_objectid", "chunk_offset", "length", "chunk_tree_uuid"},
    "BLOCK_GROUP_ITEM": {"used", "chunk_objectid", "flags"},
}


def test_items_and_pointers_match_nritems(fs, fs_dump):
    per_block = collections.Counter((it["tree"], it["block"]) for it in fs_dump.items)
    per_node = collections.Counter((p["tree"], p["block"]) for p in fs_dump.ptrs)
    assert fs_dump.blocks, "no tree blocks parsed"
    for b in fs_dump.blocks:
        got = per_node[(b["tree"], b["bytenr"])] if b["level"] else per_block[(b["tree"], b["bytenr"])]
        assert got == b["nritems"], f"block {b['bytenr']} of tree {b['tree']}: {got} != nritems {b['nritems']}"
    assert sum(b["nritems"] for b in fs_dump.blocks if b["level"] == 0) == len(fs_dump.items)
    assert fs_dump.trailer["uuid"] and fs_dump.trailer["total_bytes"] > 0


def test_slots_are_dense_and_keys_sorted(fs_dump):
    by_block = collections.defaultdict(list)
    for it in fs_dump.items:
        by_block[(it["tree"], it["block"])].append(it)
    for p in fs_dump.ptrs:
        by_block[(p["tree"], p["block"])].append(p)
    for recs in by_block.values():
        assert [r["slot"] for r in recs] == list(range(len(recs)))
        keys = [tuple(r["key"]) for r in recs]
        assert keys == sorted(keys), "keys out of order: objectid/type/offset decoding is wrong"


def test_node_pointers_lead_to_printed_children(fs_dump):
    blocks = {(b["tree"], b["bytenr"]): b for b in fs_dump.blocks}
    for p in fs_dump.ptrs:
        child = blocks.get((p["tree"], p["blockptr"]))
        assert child is not None, f"child {p['blockptr']} of node {p['block']} not printed"
        assert child["level"] == p["level"] - 1
        assert child["generation"] == p["generation"]


def test_every_root_item_tree_is_walked(fs_dump):
    # the root tree and the log root tree list trees by ROOT_ITEM
    roots = {it["key"][0] for it in fs_dump.items if it["type"] == "ROOT_ITEM" and it["tree"] in (1, dumptree.u64(-6))}
    walked = set(fs_dump.tree_order)
    assert {1, 3} <= walked
    assert roots <= walked, f"trees with a ROOT_ITEM but not walked: {roots - walked}"


def test_required_fields_decoded(fs_dump):
    seen = collections.Counter()
    for it in fs_dump.items:
        req = REQUIRED_FIELDS.get(it["type"])
        if req is None:
            continue
        seen[it["type"]] += 1
        missing = req - set(it["fields"])
        assert not missing, f"{it['type']} at {it['block']}/{it['slot']}: missing {missing}"
        f = it["fields"]
        if it["type"] == "EXTENT_DATA":
            want = {0: {"inline_size", "ram_bytes", "compression"},
                    1: {"disk_bytenr", "disk_num_bytes", "offset", "num_bytes", "ram_bytes", "compression"},
                    2: {"disk_bytenr", "disk_num_bytes", "offset", "num_bytes"}}[f["type"]]
            assert want <= set(f), f"EXTENT_DATA at {it['block']}/{it['slot']}: {f}"
        if it["type"] in ("DIR_ITEM", "DIR_INDEX", "XATTR_ITEM"):
            for e in f["entries"]:
                assert {"location", "transid", "data_len", "name_len", "type", "name"} <= set(e)
                assert len(e["name"].encode("utf-8", "surrogateescape")) == e["name_len"]
        if it["type"] == "INODE_REF":
            for r in f["refs"]:
                assert len(r["name"].encode("utf-8", "surrogateescape")) == r["name_len"]
        if it["type"] == "CHUNK_ITEM":
            assert len(f["stripes"]) == f["num_stripes"]
            assert it["size"] == 48 + 32 * f["num_stripes"]
        if it["type"] in ("EXTENT_ITEM", "METADATA_ITEM"):
            for r in f["inline_refs"]:
                assert not r["type"].startswith("UNKNOWN"), r
    for t in ("INODE_ITEM", "CHUNK_ITEM", "DEV_EXTENT", "BLOCK_GROUP_ITEM", "INODE_REF", "DIR_ITEM"):
        assert seen[t], f"no {t} at all"


def test_population_reached_the_disk(fs, fs_dump):
    """The populated filesystems hold what the comparisons are meant to cover."""
    if not fs.recipe.populate:
        pytest.skip("mkfs-only recipe")
    types = collections.Counter(it["type"] for it in fs_dump.items)
    for t in ("XATTR_ITEM", "INODE_EXTREF", "EXTENT_DATA", "ROOT_REF", "QGROUP_INFO", "UUID_KEY_SUBVOL",
              "EXTENT_CSUM"):
        assert types[t], f"no {t}"
    extents = [it["fields"] for it in fs_dump.items_by_type("EXTENT_DATA")]
    assert {0, 1, 2} <= {e["type"] for e in extents}, "want inline, regular and prealloc extents"
    assert {0, 1, 2, 3} <= {e.get("compression") for e in extents}, "want none/zlib/lzo/zstd extents"
    assert any(e.get("offset") for e in extents), "want a partially referenced extent"
    refs = collections.Counter(r["type"] for it in fs_dump.items
                               if it["type"] in ("EXTENT_ITEM", "METADATA_ITEM")
                               for r in it["fields"]["inline_refs"])
    assert refs["TREE_BLOCK_REF"] and refs["EXTENT_DATA_REF"]
    assert refs["SHARED_BLOCK_REF"] or refs["SHARED_DATA_REF"], "snapshot COW should leave shared refs"
    subvols = {it["key"][0] for it in fs_dump.items if it["type"] == "ROOT_ITEM" and 256 <= it["key"][0] < 1 << 48}
    assert len(subvols) >= 3, "subvolume, its snapshot and a snapshot of the top level"
    if "^no-holes" in fs.recipe.mkfs:
        assert any(e["type"] == 1 and e["disk_bytenr"] == 0 for e in extents), "want explicit holes"
    if fs.recipe.log_tree:
        assert dumptree.u64(-6) in fs_dump.tree_order
    if "squota" in ",".join(fs.recipe.mkfs):
        assert refs["EXTENT_OWNER_REF"], "simple quotas put owner refs on data extents"
    entries = [e for it in fs_dump.items_by_type("DIR_INDEX") for e in it["fields"]["entries"]]
    assert {1, 2, 3, 4, 5, 6, 7} <= {e["type"] for e in entries}, "every kind of file"
    names = {e["name"] for e in entries}
    assert "latin1-\udce9t\udce9" in names and "name with  spaces " in names


def test_chunks_block_groups_dev_extents_agree(fs_dump):
    chunks = {c["start"]: c for c in fs_dump.chunks()}
    bgs = {b["start"]: b for b in fs_dump.block_groups()}
    assert chunks.keys() == bgs.keys()
    for start, bg in bgs.items():
        assert bg["length"] == chunks[start]["length"]
        assert bg["flags"] == chunks[start]["type"]
    dev_extents = collections.Counter(it["fields"]["chunk_offset"] for it in fs_dump.items_by_type("DEV_EXTENT"))
    for start, c in chunks.items():
        assert dev_extents[start] == c["num_stripes"]


def test_single_tree_dump_equals_subset(fs):
    full = dump_of(fs.name)
    for tree in (1, 3, 5):
        one = dumptree.dump_tree(fs.devices, "-t", tree)
        assert one.tree_order == [tree]
        assert one.items == [it for it in full.items if it["tree"] == tree]
        assert one.ptrs == [p for p in full.ptrs if p["tree"] == tree]


def test_dump_super_every_device(fs, fs_dump):
    chunks = {c["start"]: c for c in fs_dump.chunks()}
    devids = set()
    for dev in fs.devices:
        (sb,) = dumptree.dump_super(dev)
        assert sb["_csum_match"] and sb["_magic_match"] and sb["_dev_item_fsid_match"]
        assert sb["magic"] == "_BHRfS_M" and sb["bytenr"] == 65536
        assert sb["fsid"] == fs_dump.trailer["uuid"]
        assert sb["total_bytes"] == fs_dump.trailer["total_bytes"]
        assert sb["num_devices"] == fs.recipe.ndev
        devids.add(sb["dev_item"]["devid"])
        assert sb["sys_chunk_array"], "no system chunk parsed"
        for entry in sb["sys_chunk_array"]:
            c = chunks[entry["key"][2]]
            assert entry["chunk"] == {k: v for k, v in c.items() if k != "start"}
        assert sb["backup_roots"] and all("tree_root" in b and "num_devices" in b for b in sb["backup_roots"])
        copies = dumptree.dump_super(dev, "-a")
        assert [c["_super_bytenr"] for c in copies] == [65536, 64 << 20]
        for c in copies:
            assert c["bytenr"] == c["_super_bytenr"] and c["_csum_match"]
            assert c["generation"] == sb["generation"]
    assert devids == set(range(1, fs.recipe.ndev + 1))
    if "-L" in fs.recipe.mkfs:
        assert sb["label"] == fs.recipe.mkfs[fs.recipe.mkfs.index("-L") + 1]


def test_key_and_flag_words():
    assert dumptree.parse_key("key (FIRST_CHUNK_TREE CHUNK_ITEM 22020096)") == [256, 228, 22020096]
    assert dumptree.parse_key("key (FS_TREE ROOT_ITEM -1)") == [5, 132, dumptree.U64]
    assert dumptree.parse_key("key (0 QGROUP_INFO 1/100)") == [0, 242, (1 << 48) | 100]
    assert dumptree.parse_key("key (0x4630a3c1eaa3be5a UUID_KEY_SUBVOL 0xbded2cb3a81c8f95)") == \
        [0x4630a3c1eaa3be5a, 251, 0xbded2cb3a81c8f95]
    assert dumptree.parse_key("key (FREE_SPACE UNTYPED 30408704)") == [dumptree.u64(-11), 0, 30408704]
    assert dumptree.parse_key("key (0 UNKNOWN.0 0)") == [0, 0, 0]
    assert dumptree.bg_flags("DATA|METADATA") == 5
    assert dumptree.bg_flags("SYSTEM|RAID1C4") == 2 | 1024
    assert dumptree.bg_flags("DATA|single") == 1
    assert dumptree.extent_flags("TREE_BLOCK|FULL_BACKREF") == 258
