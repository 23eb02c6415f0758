# SPDX-License-Identifier: GPL-2.0-only
"""Parsers for the reference tools' text: `btrfs inspect-internal dump-tree` and
`dump-super -f` (btrfs-progs 6.14), into records shaped like btk-inspect's JSON.

dump-tree words are mapped to the member names of the structs in include/btk/format.h
(e.g. "links" -> nlink, "gen" -> generation, "extent data disk byte X nr Y" ->
disk_bytenr, disk_num_bytes), symbolic objectids and type names to numbers,
flag words (DATA|METADATA|DUP, TREE_BLOCK|FULL_BACKREF, ...) to bit values.

Records:
  item: {"tree", "block", "slot", "key": [o, t, off], "type": NAME, "size", "fields": {...}}
  ptr:  {"tree", "block", "level", "slot", "key", "blockptr", "generation"}
  block header: {"tree", "bytenr", "level", "nritems", "generation", "owner"}
Members dump-tree 6.14 never prints are simply absent, so they cannot be checked:
  EXTENT_DATA encryption, other_encoding (and ram_bytes, compression of prealloc extents);
  INODE_ITEM reserved; ROOT_ITEM's embedded inode item and reserved; ROOT_REF name_len;
  the xattr value only up to 255 bytes. Names and values are printed with C escapes
  (string_print_escape_special): unescape() undoes them.
  dump-super -f: dev_item.start_offset, reserved, padding, backup roots' unused_64/unused_8,
  and backup slots that are all zero.
"""
from __future__ import annotations

import re
import subprocess

import fsbuild

U64 = (1 << 64) - 1


def u64(v: int) -> int:
    return v & U64


OBJECTIDS = {
    "ROOT_TREE": 1, "DEV_ITEMS": 1, "EXTENT_TREE": 2, "CHUNK_TREE": 3, "DEV_TREE": 4,
    "FS_TREE": 5, "ROOT_TREE_DIR": 6, "CSUM_TREE": 7, "QUOTA_TREE": 8, "UUID_TREE": 9,
    "FREE_SPACE_TREE": 10, "BLOCK_GROUP_TREE": 11, "RAID_STRIPE_TREE": 12, "DEV_STATS": 0,
    "BALANCE": u64(-4), "ORPHAN": u64(-5), "TREE_LOG": u64(-6), "LOG_FIXUP": u64(-7),
    "TREE_RELOC": u64(-8), "DATA_RELOC_TREE": u64(-9), "EXTENT_CSUM": u64(-10),
    "FREE_SPACE": u64(-11), "FREE_INO": u64(-12), "MULTIPLE": u64(-255),
    "FIRST_CHUNK_TREE": 256,
}
KEY_TYPES = {
    "INODE_ITEM": 1, "INODE_REF": 12, "INODE_EXTREF": 13, "XATTR_ITEM": 24,
    "VERITY_DESC_ITEM": 36, "VERITY_MERKLE_ITEM": 37, "ORPHAN_ITEM": 48,
    "DIR_LOG_ITEM": 60, "DIR_LOG_INDEX": 72, "DIR_ITEM": 84, "DIR_INDEX": 96,
    "EXTENT_DATA": 108, "CSUM_ITEM": 120, "EXTENT_CSUM": 128, "ROOT_ITEM": 132,
    "ROOT_BACKREF": 144, "ROOT_REF": 156, "EXTENT_ITEM": 168, "METADATA_ITEM": 169,
    "EXTENT_OWNER_REF": 172, "TREE_BLOCK_REF": 176, "EXTENT_DATA_REF": 178,
    "EXTENT_REF_V0": 180, "SHARED_BLOCK_REF": 182, "SHARED_DATA_REF": 184,
    "BLOCK_GROUP_ITEM": 192, "FREE_SPACE_INFO": 198, "FREE_SPACE_EXTENT": 199,
    "FREE_SPACE_BITMAP": 200, "DEV_EXTENT": 204, "DEV_ITEM": 216, "CHUNK_ITEM": 228,
    "RAID_STRIPE": 230, "QGROUP_STATUS": 240, "QGROUP_INFO": 242, "QGROUP_LIMIT": 244,
    "QGROUP_RELATION": 246, "TEMPORARY_ITEM": 248, "PERSISTENT_ITEM": 249,
    "DEV_REPLACE": 250, "UUID_KEY_SUBVOL": 251, "UUID_KEY_RECEIVED_SUBVOL": 252,
    "STRING_ITEM": 253, "UNTYPED": 0,
}
KEY_TYPE_NAMES = {v: k for k, v in KEY_TYPES.items() if k != "UNTYPED"}
BG_FLAGS = {"DATA": 1, "SYSTEM": 2, "METADATA": 4, "RAID0": 8, "RAID1": 16, "DUP": 32,
            "RAID10": 64, "RAID5": 128, "RAID6": 256, "RAID1C3": 512, "RAID1C4": 1024, "single": 0}
PROFILE_NAMES = {0: "single", 8: "RAID0", 16: "RAID1", 32: "DUP", 64: "RAID10", 128: "RAID5",
                 256: "RAID6", 512: "RAID1C3", 1024: "RAID1C4"}
EXTENT_FLAGS = {"DATA": 1, "TREE_BLOCK": 2, "FULL_BACKREF": 256}
DIR_TYPES = {"FILE": 1, "DIR": 2, "CHRDEV": 3, "BLKDEV": 4, "FIFO": 5, "SOCK": 6, "SYMLINK": 7, "XATTR": 8}
QGROUP_STATUS_FLAGS = {"ON": 1, "OFF": 0, "SCANNING": 2, "INCONSISTENT": 4, "SIMPLE_MODE": 8}
TREE_LABEL_IDS = {"root tree": 1, "chunk tree": 3, "log root tree": u64(-6)}

class ParseError(Exception):
    pass


# ---------------------------------------------------------------- small converters

def objectid(tok: str) -> int:
    if tok in OBJECTIDS:
        return OBJECTIDS[tok]
    if tok == "-1":
        return U64
    if tok.startswith("0x"):
        return int(tok, 16)
    if "/" in tok:                       # qgroup level/subvolid
        level, sub = tok.split("/")
        return (int(level) << 48) | int(sub)
    return int(tok)


def key_type(tok: str) -> int:
    if tok in KEY_TYPES:
        return KEY_TYPES[tok]
    if tok.startswith("UNKNOWN."):
        return int(tok.split(".", 1)[1])
    raise ParseError(f"unknown key type {tok!r}")


KEY_RE = re.compile(r"key \((\S+) (\S+) (\S+)\)")


def parse_key(text: str) -> list[int]:
    m = KEY_RE.search(text)
    if not m:
        raise ParseError(f"no key in {text!r}")
    return [objectid(m.group(1)), key_type(m.group(2)), objectid(m.group(3))]


def bg_flags(word: str) -> int:
    v = 0
    for part in word.split("|"):
        if part.startswith("UNKNOWN.0x"):
            v |= int(part[len("UNKNOWN."):], 16)
        else:
            v |= BG_FLAGS[part]
    return v


def extent_flags(word: str) -> int:
    v = 0
    for part in filter(None, word.split("|")):
        v |= EXTENT_FLAGS[part]
    return v


def hexflags(word: str) -> int:
    """'0x8(NOCOMPRESS)' -> 8"""
    return int(word.split("(", 1)[0], 16)


def timespec(word: str) -> dict:
    sec, nsec = word.split(".")
    return {"sec": int(sec), "nsec": int(nsec)}


def pairs(line: str, names: dict[str, str], conv=int) -> dict:
    """'a 1 b 2' with names {'a': 'x', 'b': 'y'} -> {'x': 1, 'y': 2}"""
    toks = line.split()
    out = {}
    for i in range(0, len(toks) - 1):
        if toks[i] in names:
            out[names[toks[i]]] = conv(toks[i + 1])
    return out


def ident(*names):
    return {n: n for n in names}


ESCAPES = {"a": 7, "b": 8, "e": 27, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, " ": 32, "\\": 92}


def unescape(text: str) -> str:
    """Undo string_print_escape_special(): C escapes, '\\ ' for space, '\\ooo' for other
    unprintable bytes. Bytes that are not UTF-8 come back as surrogates (surrogateescape)."""
    raw = text.encode("utf-8", "surrogateescape")
    out = bytearray()
    i = 0
    while i < len(raw):
        c = raw[i]
        if c == 0x5C and i + 1 < len(raw):
            nxt = chr(raw[i + 1])
            if nxt in ESCAPES:
                out.append(ESCAPES[nxt])
                i += 2
                continue
            if raw[i + 1:i + 4].isdigit() and len(raw[i + 1:i + 4]) == 3:
                out.append(int(raw[i + 1:i + 4], 8) & 0xFF)
                i += 4
                continue
        out.append(c)
        i += 1
    return out.decode("utf-8", "surrogateescape")


# ---------------------------------------------------------------- item body decoders
# Each gets the item's key and its body lines (tabs stripped) and returns "fields".

def dec_inode(key, lines):
    f = {}
    f.update(pairs(lines[0], ident("generation", "transid", "size", "nbytes")))
    m = re.match(r"block group (\d+) mode (\d+) links (\d+) uid (\d+) gid (\d+) rdev (\d+)", lines[1])
    f.update(block_group=int(m[1]), mode=int(m[2], 8), nlink=int(m[3]), uid=int(m[4]),
             gid=int(m[5]), rdev=int(m[6]))
    m = re.match(r"sequence (\d+) flags (\S+)", lines[2])
    f.update(sequence=int(m[1]), flags=hexflags(m[2]))
    for line in lines[3:7]:
        name, val = line.split()[:2]
        f[name] = timespec(val)
    return f


NAME_RE = re.compile(r"index (\d+) (?:parent (\d+) )?namelen (\d+) name: (.*)$")


def dec_inode_ref(key, lines):
    refs = []
    for line in lines:
        m = NAME_RE.match(line)
        if not m:
            raise ParseError(f"inode ref line {line!r}")
        ref = {"index": int(m[1]), "name_len": int(m[3]), "name": unescape(m[4])}
        if m[2] is not None:
            ref["parent_objectid"] = int(m[2])
        refs.append(ref)
    return {"refs": refs}


def dec_dir(key, lines):
    entries = []
    cur = None
    for line in lines:
        if line.startswith("location key ("):
            m = re.match(r"location (key \(.*\)) type (\S+)$", line)
            t = m[2]
            cur = {"location": parse_key(m[1]),
                   "type": DIR_TYPES[t] if t in DIR_TYPES else int(t.split(".")[1])}
            entries.append(cur)
        elif line.startswith("transid ") and cur is not None and "transid" not in cur:
            cur.update(pairs(line, ident("transid", "data_len", "name_len")))
        elif line.startswith("name: ") and cur is not None and "name" not in cur:
            cur["name"] = unescape(line[len("name: "):])
        elif line.startswith("data ") and cur is not None and "data" not in cur:
            cur["data"] = unescape(line[len("data "):])
        else:
            raise ParseError(f"dir item line {line!r}")
    return {"entries": entries}


def dec_file_extent(key, lines):
    f = {}
    m = re.match(r"generation (\d+) type (\d+) ", lines[0])
    f.update(generation=int(m[1]), type=int(m[2]))
    for line in lines[1:]:
        if m := re.match(r"inline extent data size (\d+) ram_bytes (\d+) compression (\d+)", line):
            f.update(inline_size=int(m[1]), ram_bytes=int(m[2]), compression=int(m[3]))
        elif m := re.match(r"(?:extent|prealloc) data disk byte (\d+) nr (\d+)", line):
            f.update(disk_bytenr=int(m[1]), disk_num_bytes=int(m[2]))
        elif m := re.match(r"(?:extent|prealloc) data offset (\d+) nr (\d+)(?: ram (\d+))?", line):
            f.update(offset=int(m[1]), num_bytes=int(m[2]))
            if m[3] is not None:
                f["ram_bytes"] = int(m[3])
        elif m := re.match(r"extent compression (\d+)", line):
            f["compression"] = int(m[1])
        else:
            raise ParseError(f"file extent line {line!r}")
    return f


INLINE_REF_RE = re.compile(r"\((\d+) 0x([0-9a-f]+)\) (.*)$")


def dec_extent(key, lines):
    m = re.match(r"refs (\d+) gen (\d+) flags (\S*)", lines[0])
    f = {"refs": int(m[1]), "generation": int(m[2]), "flags": extent_flags(m[3])}
    refs = []
    for line in lines[1:]:
        if line.startswith("tree block skinny level "):
            f["_skinny_level"] = int(line.split()[-1])
        elif line.startswith("tree block key ("):
            f["key"] = parse_key(line)
            f["level"] = int(line.split()[-1])
        elif m := INLINE_REF_RE.match(line):
            rtype, offset, rest = int(m[1]), int(m[2], 16), m[3]
            if rtype == 176 and (r := re.match(r"tree block backref root (\S+)$", rest)):
                refs.append({"type": "TREE_BLOCK_REF", "root": objectid(r[1])})
            elif rtype == 182 and (r := re.match(r"shared block backref parent (\d+)$", rest)):
                refs.append({"type": "SHARED_BLOCK_REF", "parent": int(r[1])})
            elif rtype == 178 and (r := re.match(
                    r"extent data backref root (\S+) objectid (\d+) offset (\d+) count (\d+)$", rest)):
                refs.append({"type": "EXTENT_DATA_REF", "root": objectid(r[1]), "objectid": int(r[2]),
                             "offset": int(r[3]), "count": int(r[4])})
            elif rtype == 184 and (r := re.match(r"shared data backref parent (\d+) count (\d+)$", rest)):
                refs.append({"type": "SHARED_DATA_REF", "parent": int(r[1]), "count": int(r[2])})
            elif rtype == 172 and (r := re.match(r"t?extent owner root (\S+)$", rest)):
                refs.append({"type": "EXTENT_OWNER_REF", "root": objectid(r[1])})
            else:
                refs.append({"type": KEY_TYPE_NAMES.get(rtype, f"UNKNOWN.{rtype}"), "_offset": offset,
                             "_raw": rest})
        else:
            raise ParseError(f"extent item line {line!r}")
    f["inline_refs"] = refs
    return f


def dec_chunk(key, lines):
    f = {}
    m = re.match(r"length (\d+) owner (\d+) stripe_len (\d+) type (\S+)", lines[0])
    f.update(length=int(m[1]), owner=int(m[2]), stripe_len=int(m[3]), type=bg_flags(m[4]))
    f.update(pairs(lines[1], ident("io_align", "io_width", "sector_size")))
    f.update(pairs(lines[2], ident("num_stripes", "sub_stripes")))
    stripes = []
    for line in lines[3:]:
        if m := re.match(r"stripe (\d+) devid (\d+) offset (\d+)", line):
            stripes.append({"devid": int(m[2]), "offset": int(m[3])})
        elif line.startswith("dev_uuid "):
            stripes[-1]["dev_uuid"] = line.split()[1]
        else:
            raise ParseError(f"chunk line {line!r}")
    f["stripes"] = stripes
    return f


def dec_dev_item(key, lines):
    f = {}
    for line in lines:
        if line.startswith(("uuid ", "fsid ")):
            name, val = line.split()
            f[name] = val
        else:
            f.update(pairs(line, ident("devid", "total_bytes", "bytes_used", "io_align", "io_width",
                                       "sector_size", "type", "generation", "start_offset",
                                       "dev_group", "seek_speed", "bandwidth")))
    return f


def dec_dev_extent(key, lines):
    f = {"chunk_tree": int(lines[0].split()[-1])}
    f.update(pairs(lines[1], ident("chunk_objectid", "chunk_offset", "length")))
    f["chunk_tree_uuid"] = lines[2].split()[-1]
    return f


def dec_block_group(key, lines):
    m = re.match(r"block group used (\d+) chunk_objectid (\d+) flags (\S+)", lines[0])
    return {"used": int(m[1]), "chunk_objectid": int(m[2]), "flags": bg_flags(m[3])}


def dec_root_item(key, lines):
    f = {}
    for line in lines:
        if line.startswith("drop_progress "):
            f["drop_progress"] = parse_key(line)
            f["drop_level"] = int(line.split()[-1])
        elif line.startswith(("uuid ", "parent_uuid ", "received_uuid ")):
            name, val = line.split()
            f[name] = val
        elif line.split()[0] in ("ctime", "otime", "stime", "rtime"):
            name, val = line.split()[:2]
            f[name] = timespec(val)
        elif line.startswith("last_snapshot "):
            m = re.match(r"last_snapshot (\d+) flags (\S+) refs (\d+)", line)
            f.update(last_snapshot=int(m[1]), flags=hexflags(m[2]), refs=int(m[3]))
        else:
            f.update(pairs(line, ident("generation", "root_dirid", "bytenr", "byte_limit", "bytes_used",
                                       "level", "generation_v2", "ctransid", "otransid", "stransid",
                                       "rtransid")))
    return f


def dec_root_ref(key, lines):
    m = re.match(r"root (?:ref|backref) key dirid (\d+) sequence (\d+) name (.*)$", lines[0])
    return {"dirid": int(m[1]), "sequence": int(m[2]), "name": unescape(m[3])}


def dec_free_space_info(key, lines):
    m = re.match(r"free space info extent count (\d+) flags (\d+)", lines[0])
    return {"extent_count": int(m[1]), "flags": int(m[2])}


def dec_qgroup_status(key, lines):
    m = re.match(r"version (\d+) generation (\d+) flags (\S+) scan (\d+)(?: enable_gen (\d+))?", lines[0])
    flags = 0
    for part in m[3].split("|"):
        flags |= QGROUP_STATUS_FLAGS[part]
    f = {"version": int(m[1]), "generation": int(m[2]), "flags": flags, "rescan": int(m[4])}
    if m[5] is not None:
        f["enable_gen"] = int(m[5])
    return f


def dec_persistent(key, lines):
    if lines[0].startswith("persistent item objectid DEV_STATS") and len(lines) >= 3:
        return {"values": [int(v) for v in lines[2].split()[1::2]]}
    return {"_raw": list(lines)}


def dec_qgroup_info(key, lines):
    f = {"generation": int(lines[0].split()[-1])}
    body = " ".join(lines[1:])
    f.update(pairs(body, {"referenced": "rfer", "referenced_compressed": "rfer_cmpr",
                          "exclusive": "excl", "exclusive_compressed": "excl_cmpr"}))
    return f


def dec_qgroup_limit(key, lines):
    f = {"flags": int(lines[0].split()[-1], 16)}
    f.update(pairs(" ".join(lines[1:]), {"max_referenced": "max_rfer", "max_exclusive": "max_excl",
                                         "rsv_referenced": "rsv_rfer", "rsv_exclusive": "rsv_excl"},
                   conv=lambda s: u64(int(s))))
    return f


def dec_uuid(key, lines):
    return {"subvol_ids": [int(line.split()[-1]) for line in lines]}


def dec_csum(key, lines):
    m = re.match(r"range start (\d+)(?: end (\d+) length (\d+))?", lines[0])
    f = {"_range_start": int(m[1])}
    if m[3] is not None:
        f["_range_length"] = int(m[3])
    return f


DECODERS = {
    "INODE_ITEM": dec_inode, "INODE_REF": dec_inode_ref, "INODE_EXTREF": dec_inode_ref,
    "DIR_ITEM": dec_dir, "DIR_INDEX": dec_dir, "XATTR_ITEM": dec_dir,
    "EXTENT_DATA": dec_file_extent, "EXTENT_ITEM": dec_extent, "METADATA_ITEM": dec_extent,
    "CHUNK_ITEM": dec_chunk, "DEV_ITEM": dec_dev_item, "DEV_EXTENT": dec_dev_extent,
    "BLOCK_GROUP_ITEM": dec_block_group, "ROOT_ITEM": dec_root_item,
    "ROOT_REF": dec_root_ref, "ROOT_BACKREF": dec_root_ref,
    "FREE_SPACE_INFO": dec_free_space_info, "QGROUP_STATUS": dec_qgroup_status,
    "QGROUP_INFO": dec_qgroup_info, "QGROUP_LIMIT": dec_qgroup_limit,
    "PERSISTENT_ITEM": dec_persistent, "UUID_KEY_SUBVOL": dec_uuid, "UUID_KEY_RECEIVED_SUBVOL": dec_uuid,
    "EXTENT_CSUM": dec_csum,
}


# ---------------------------------------------------------------- dump-tree

class DumpTree:
    """Everything one dump-tree run printed."""

    def __init__(self):
        self.items: list[dict] = []
        self.ptrs: list[dict] = []
        self.blocks: list[dict] = []
        self.trailer: dict = {}
        self.tree_order: list[int] = []

    def items_by_type(self, name):
        return [it for it in self.items if it["type"] == name]

    def item_counts(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for it in self.items:
            out[it["tree"]] = out.get(it["tree"], 0) + 1
        return out

    def nodes_per_level(self) -> dict[int, dict[int, int]]:
        """tree -> {level: number of tree blocks}, as walked (shared blocks count in each tree)."""
        out: dict[int, dict[int, int]] = {}
        for b in self.blocks:
            lv = out.setdefault(b["tree"], {})
            lv[b["level"]] = lv.get(b["level"], 0) + 1
        return out

    def chunks(self) -> list[dict]:
        return [dict(it["fields"], start=it["key"][2]) for it in self.items_by_type("CHUNK_ITEM")
                if it["tree"] == 3]

    def block_groups(self) -> list[dict]:
        return [dict(it["fields"], start=it["key"][0], length=it["key"][2])
                for it in self.items_by_type("BLOCK_GROUP_ITEM")]

    def mirrors(self, logical: int) -> list[tuple[int, int]]:
        """(devid, physical) of every copy of `logical` in a non-striped chunk (single/DUP/RAID1*)."""
        for c in self.chunks():
            if c["start"] <= logical < c["start"] + c["length"]:
                if c["type"] & (8 | 64 | 128 | 256):
                    raise ValueError("striped chunk: not supported here")
                return [(s["devid"], s["offset"] + logical - c["start"]) for s in c["stripes"]]
        raise KeyError(f"no chunk holds {logical}")


HEADER_RE = re.compile(r"^(leaf|node) (\d+) (?:level (\d+) )?items (\d+) free space (-?\d+) "
                       r"generation (\d+) owner (\S+)$")
ITEM_RE = re.compile(r"^\titem (\d+) (key \(.*\)) itemoff (\d+) itemsize (\d+)$")
PTR_RE = re.compile(r"^\t(key \(.*\)) block (\d+) gen (\d+)$")
TREE_LABEL_RE = re.compile(r"^([a-z ]+) tree (key \(.*\)) ?$")


def parse_dump_tree(text: str) -> DumpTree:
    d = DumpTree()
    tree = None
    block = None
    item = None
    body: list[str] = []
    slot = 0

    def finish_item():
        nonlocal item, body
        if item is not None:
            dec = DECODERS.get(item["type"])
            try:
                item["fields"] = dec(item["key"], body) if dec else {"_raw": list(body)}
            except (ParseError, TypeError, AttributeError, IndexError, KeyError, ValueError) as e:
                raise ParseError(f"cannot decode {item['type']} at block {item['block']} slot "
                                 f"{item['slot']}: {e}\n" + "\n".join(body)) from e
            d.items.append(item)
        item, body = None, []

    for line in text.splitlines():
        if line.startswith("\t\t") or (item is not None and line.startswith("\t(172 ")):
            if item is None:
                raise ParseError(f"item body outside an item: {line!r}")
            body.append(line.strip("\t"))
            continue
        finish_item()
        if m := ITEM_RE.match(line):
            key = parse_key(m[2])
            tname = line.split("(", 1)[1].split(")")[0].split()[1]
            item = {"tree": tree, "block": block["bytenr"], "slot": int(m[1]), "key": key,
                    "type": tname, "size": int(m[4]), "_itemoff": int(m[3])}
        elif m := PTR_RE.match(line):
            d.ptrs.append({"tree": tree, "block": block["bytenr"], "level": block["level"], "slot": slot,
                           "key": parse_key(m[1]), "blockptr": int(m[2]), "generation": int(m[3])})
            slot += 1
        elif m := HEADER_RE.match(line):
            if tree is None:
                raise ParseError(f"tree block before any tree label: {line!r}")
            block = {"tree": tree, "bytenr": int(m[2]), "level": int(m[3] or 0), "nritems": int(m[4]),
                     "generation": int(m[6]), "owner": objectid(m[7])}
            d.blocks.append(block)
            slot = 0
        elif line in TREE_LABEL_IDS:
            tree = TREE_LABEL_IDS[line]
            d.tree_order.append(tree)
        elif m := TREE_LABEL_RE.match(line):
            tree = parse_key(m[2])[0]
            d.tree_order.append(tree)
        elif re.match(r"^(leaf|node) \d+ flags ", line) or line.startswith(("fs uuid ", "chunk uuid ")):
            pass
        elif line.startswith("btrfs-progs v") or not line.strip():
            pass
        elif m := re.match(r"^(total bytes|bytes used|uuid) (\S+)$", line):
            d.trailer[m[1].replace(" ", "_")] = m[2] if m[1] == "uuid" else int(m[2])
        else:
            raise ParseError(f"unexpected dump-tree line: {line!r}")
    finish_item()
    return d


def dump_tree(devices, *args, timeout=300) -> DumpTree:
    with fsbuild.fsid_lock(devices):  # not while another test worker has the image mounted
        p = subprocess.run(["btrfs", "inspect-internal", "dump-tree", "--noscan", *map(str, args),
                            *map(str, devices)], capture_output=True, text=True, timeout=timeout,
                           errors="surrogateescape")
    if p.returncode != 0:
        raise RuntimeError(f"dump-tree failed ({p.returncode}): {p.stderr}")
    d = parse_dump_tree(p.stdout)
    d.stderr = p.stderr
    return d


# ---------------------------------------------------------------- dump-super

SUPER_NAMES = {
    "csum_type": "csum_type", "csum": "csum", "bytenr": "bytenr", "flags": "flags", "magic": "magic",
    "fsid": "fsid", "metadata_uuid": "metadata_uuid", "label": "label", "generation": "generation",
    "root": "root", "sys_array_size": "sys_chunk_array_size",
    "chunk_root_generation": "chunk_root_generation", "root_level": "root_level",
    "chunk_root": "chunk_root", "chunk_root_level": "chunk_root_level", "log_root": "log_root",
    "log_root_transid (deprecated)": "unused_log_root_transid", "log_root_level": "log_root_level",
    "total_bytes": "total_bytes", "bytes_used": "bytes_used", "sectorsize": "sectorsize",
    "nodesize": "nodesize", "leafsize (deprecated)": "unused_leafsize", "stripesize": "stripesize",
    "root_dir": "root_dir_objectid", "num_devices": "num_devices", "compat_flags": "compat_flags",
    "compat_ro_flags": "compat_ro_flags", "incompat_flags": "incompat_flags",
    "cache_generation": "cache_generation", "uuid_tree_generation": "uuid_tree_generation",
    "nr_global_roots": "nr_global_roots", "block_group_root": "block_group_root",
    "block_group_root_generation": "block_group_root_generation",
    "block_group_root_level": "block_group_root_level",
}
STRING_FIELDS = {"fsid", "metadata_uuid", "label", "uuid"}
BACKUP_ROOT_RE = re.compile(r"^(?:backup_)?(tree|chunk|extent|fs|dev|csum)_root:\s+(\d+)\s+gen: (\d+)\s+level: (\d+)$")


def parse_dump_super(text: str) -> list[dict]:
    """dump-super -f [-a] text -> one dict per superblock printed."""
    supers: list[dict] = []
    sb = None
    section = None
    chunk_lines: list[str] = []
    chunk_key = None

    def finish_chunk():
        nonlocal chunk_key, chunk_lines
        if chunk_key is not None:
            sb["sys_chunk_array"].append({"key": chunk_key, "chunk": dec_chunk(chunk_key, chunk_lines)})
        chunk_key, chunk_lines = None, []

    for raw in text.splitlines():
        line = raw.rstrip("\n")
        if m := re.match(r"^superblock: bytenr=(\d+), device=(.*)$", line):
            if sb is not None:
                finish_chunk()
            sb = {"_super_bytenr": int(m[1]), "_device": m[2], "sys_chunk_array": [], "backup_roots": [],
                  "dev_item": {}}
            supers.append(sb)
            section = None
            continue
        if sb is None or line.startswith("----") or not line.strip():
            continue
        if line.startswith("sys_chunk_array["):
            section = "sys"
            continue
        if line.startswith("backup_roots["):
            finish_chunk()
            section = "backup"
            continue
        if section == "sys":
            if m := re.match(r"^\titem \d+ (key \(.*\))$", line):
                finish_chunk()
                chunk_key = parse_key(m[1])
            else:
                chunk_lines.append(line.strip())
            continue
        if section == "backup":
            s = line.strip()
            if m := re.match(r"^backup (\d+):$", s):
                sb["backup_roots"].append({"_slot": int(m[1])})
            elif m := BACKUP_ROOT_RE.match(s):
                b = sb["backup_roots"][-1]
                b[f"{m[1]}_root"] = int(m[2])
                b[f"{m[1]}_root_gen"] = int(m[3])
                b[f"{m[1]}_root_level"] = int(m[4])
            elif m := re.match(r"^backup_(total_bytes|bytes_used|num_devices):\s+(\d+)$", s):
                sb["backup_roots"][-1][m[1]] = int(m[2])
            else:
                raise ParseError(f"backup root line {line!r}")
            continue
        if line.startswith("\t\t\t"):           # "( FLAG | FLAG )" continuation lines
            continue
        if "\t" not in line:
            raise ParseError(f"unexpected dump-super line {line!r}")
        name, _, value = line.partition("\t")
        value = value.lstrip("\t")
        if name.startswith("dev_item."):
            member = name[len("dev_item."):]
            if member in ("uuid", "fsid"):
                sb["dev_item"][member] = value.split()[0]
                if member == "fsid":
                    sb["_dev_item_fsid_match"] = value.endswith("[match]")
            else:
                sb["dev_item"][member] = int(value)
            continue
        if name == "csum_size":
            sb["_csum_size"] = int(value)
            continue
        if name not in SUPER_NAMES:
            raise ParseError(f"unknown dump-super field {name!r}")
        member = SUPER_NAMES[name]
        if member == "csum":
            sb["csum"] = value.split()[0][2:]
            sb["_csum_match"] = value.endswith("[match]")
        elif member == "magic":
            sb["magic"] = value.split()[0]
            sb["_magic_match"] = value.endswith("[match]")
        elif member == "csum_type":
            sb["csum_type"] = int(value.split()[0])
        elif member in STRING_FIELDS:
            sb[member] = value
        elif value.startswith("0x"):
            sb[member] = int(value, 16)
        else:
            sb[member] = int(value)
    if sb is not None:
        finish_chunk()
    return supers


def dump_super(device, *args, timeout=60) -> list[dict]:
    p = subprocess.run(["btrfs", "inspect-internal", "dump-super", "-f", *map(str, args), str(device)],
                       capture_output=True, text=True, timeout=timeout, errors="surrogateescape")
    if p.returncode != 0 and not p.stdout:
        raise RuntimeError(f"dump-super failed ({p.returncode}): {p.stderr}")
    return parse_dump_super(p.stdout)
