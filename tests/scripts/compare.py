# SPDX-License-Identifier: GPL-2.0-only
"""Comparing btk-inspect's JSON with the parsed reference output (dumptree.py)."""
from __future__ import annotations

import re

from dumptree import U64

# Item types whose decoded fields must all be present in btk's output and equal
# (everything dump-tree prints for them). Other types are compared where btk
# gives a field of the same name.
STRICT_TYPES = {"INODE_ITEM", "INODE_REF", "DIR_ITEM", "DIR_INDEX", "XATTR_ITEM", "EXTENT_DATA",
                "EXTENT_ITEM", "METADATA_ITEM", "CHUNK_ITEM", "DEV_EXTENT", "BLOCK_GROUP_ITEM"}
# In dir entries dump-tree also prints the xattr value ("data"); btk gives it as data_hex,
# and only up to 64 bytes (doc/inspect-tree-jsonl.md).
OPTIONAL_IN_ENTRIES = {"data"}
# Names that are not UTF-8 come as name_hex instead of name.
HEX_ALTERNATIVES = {"name": "name_hex", "data": "data_hex"}
UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
MAX_REPORT = 25


def norm(v):
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v & U64
    if isinstance(v, str) and UUID_RE.match(v):
        return v.lower()
    if isinstance(v, list):
        return [norm(x) for x in v]
    if isinstance(v, dict):
        return {k: norm(x) for k, x in v.items() if not k.startswith("_")}
    return v


def diff_value(path: str, ref, got, optional=frozenset()) -> list[str]:
    """Differences between a reference value and btk's, for every member the reference has."""
    if isinstance(ref, dict):
        if not isinstance(got, dict):
            return [f"{path}: want an object {norm(ref)}, got {got!r}"]
        out = []
        for k, v in ref.items():
            if k.startswith("_"):
                continue
            if k not in got and HEX_ALTERNATIVES.get(k) in got:
                want = v.encode("utf-8", "surrogateescape").hex()
                if got[HEX_ALTERNATIVES[k]] != want:
                    out.append(f"{path}.{HEX_ALTERNATIVES[k]}: want {want}, got {got[HEX_ALTERNATIVES[k]]!r}")
                continue
            if k not in got:
                if k not in optional:
                    out.append(f"{path}.{k}: missing (want {norm(v)!r})")
                continue
            out += diff_value(f"{path}.{k}", v, got[k], optional)
        return out
    if isinstance(ref, list):
        if not isinstance(got, list) or len(got) != len(ref):
            return [f"{path}: want {norm(ref)!r}, got {got!r}"]
        out = []
        for i, (r, g) in enumerate(zip(ref, got)):
            out += diff_value(f"{path}[{i}]", r, g, optional)
        return out
    if norm(ref) != norm(got):
        return [f"{path}: want {norm(ref)!r}, got {norm(got)!r}"]
    return []


def diff_item_fields(item_type: str, ref: dict, got: dict) -> list[str]:
    if item_type in STRICT_TYPES:
        return diff_value("fields", ref, got, OPTIONAL_IN_ENTRIES)
    # elsewhere: only the members btk chose to print
    shared = {k: v for k, v in ref.items() if k in got}
    return diff_value("fields", shared, got, OPTIONAL_IN_ENTRIES)


def item_id(rec) -> tuple:
    return (rec["tree"] & U64, rec["block"], rec["slot"])


def split_records(records: list[dict]) -> tuple[list[dict], list[dict], list[dict]]:
    """jsonl records -> (items, node pointers, anything else)."""
    items, ptrs, other = [], [], []
    for r in records:
        if "blockptr" in r:
            ptrs.append(r)
        elif "type" in r and "key" in r and "size" in r:
            items.append(r)
        else:
            other.append(r)
    return items, ptrs, other


def report(title: str, problems: list[str]) -> str:
    more = f"\n... and {len(problems) - MAX_REPORT} more" if len(problems) > MAX_REPORT else ""
    return f"{title}: {len(problems)} problem(s)\n" + "\n".join(problems[:MAX_REPORT]) + more


def hex_prefix_equal(ref_hex: str, got) -> bool:
    """A checksum: btk may print csum_size bytes or all 32, with or without 0x."""
    if isinstance(got, list):
        got = "".join(f"{b:02x}" for b in got)
    if not isinstance(got, str):
        return False
    g = got.lower().removeprefix("0x")
    return g[: len(ref_hex)] == ref_hex.lower() and set(g[len(ref_hex):]) <= {"0"}


MAGIC = 0x4D5F53665248425F


def diff_super(ref: dict, got: dict) -> list[str]:
    """dump-super -f (parsed) against one btk super JSON object."""
    out = []
    for k, v in ref.items():
        if k.startswith("_") or k in ("backup_roots", "sys_chunk_array"):
            continue
        if k not in got:
            out.append(f"{k}: missing (want {v!r})")
        elif k == "csum":
            if not hex_prefix_equal(v, got[k]):
                out.append(f"csum: want {v}, got {got[k]!r}")
        elif k == "magic":
            if got[k] not in (MAGIC, "_BHRfS_M"):
                out.append(f"magic: got {got[k]!r}")
        else:
            out += diff_value(k, v, got[k])
    out += diff_value("sys_chunk_array", ref["sys_chunk_array"], got.get("sys_chunk_array"))
    backups = got.get("backup_roots")
    if not isinstance(backups, list) or len(backups) != 4:
        out.append(f"backup_roots: want a list of 4, got {backups!r}")
        return out
    printed = {b["_slot"]: b for b in ref["backup_roots"]}
    for slot in range(4):
        if slot in printed:
            out += diff_value(f"backup_roots[{slot}]", printed[slot], backups[slot])
        elif backups[slot].get("tree_root") or backups[slot].get("tree_root_gen"):
            out.append(f"backup_roots[{slot}]: dump-super shows it empty, btk has {backups[slot]}")
    return out
