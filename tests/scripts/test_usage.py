# SPDX-License-Identifier: GPL-2.0-only
"""btk-inspect usage / map against the kernel (btrfs filesystem df) and dump-tree."""
import json

import dumptree
import fsbuild
from conftest import require_kernel, run_btk

LOG_TREE = dumptree.u64(-6)


def btk_json(cmd, *args):
    p = run_btk("btk-inspect", cmd, "--format", "json", *args)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_usage_totals_match_kernel_df(fs, fs_dump):
    require_kernel()
    df = fsbuild.kernel_df(fs, has_log_tree=LOG_TREE in fs_dump.tree_order)
    want = {(d["type"], d["profile"]): (d["total"], d["used"]) for d in df if d["type"] != "GlobalReserve"}
    got = {(t["type"], t["profile"]): (t["total"], t["used"]) for t in btk_json("usage", *fs.devices)["totals"]}
    assert got == want, f"btk totals {got}\nkernel df {want}"


def test_usage_block_groups_match_dump_tree(fs, fs_dump):
    want = sorted((b["start"], b["length"], b["flags"], b["used"]) for b in fs_dump.block_groups())
    got = sorted((b["start"], b["length"], b["flags"], b["used"]) for b in btk_json("usage", *fs.devices)["block_groups"])
    assert got == want


def test_usage_totals_sum_block_groups(fs, fs_dump):
    """Totals per type and profile are the block groups summed (mixed: Data+Metadata)."""
    names = {1: "Data", 2: "System", 4: "Metadata", 5: "Data+Metadata"}
    want: dict = {}
    for b in fs_dump.block_groups():
        k = (names[b["flags"] & 7], dumptree.PROFILE_NAMES[b["flags"] & ~7])
        total, used = want.get(k, (0, 0))
        want[k] = (total + b["length"], used + b["used"])
    got = {(t["type"], t["profile"]): (t["total"], t["used"]) for t in btk_json("usage", *fs.devices)["totals"]}
    assert got == want


def test_usage_trees_nodes_per_level(fs, fs_dump):
    u = btk_json("usage", *fs.devices)
    nodesize = dumptree.dump_super(fs.devices[0])[0]["nodesize"]
    want = fs_dump.nodes_per_level()
    got = {}
    for t in u["trees"]:
        tree = t["tree"] & dumptree.U64
        levels = {lv["level"]: lv["nodes"] for lv in t["levels"] if lv["nodes"]}
        assert t["bytes"] == sum(levels.values()) * nodesize, t
        into = got.setdefault(tree, {})  # log trees share one id: add them up
        for lv, n in levels.items():
            into[lv] = into.get(lv, 0) + n
    # the log root tree and the log trees all carry the TREE_LOG id: compare their sum
    if LOG_TREE in want or LOG_TREE in got:
        assert sum(got.pop(LOG_TREE, {}).values()) == sum(want.pop(LOG_TREE, {}).values()), "log trees"
    assert got == want


def test_usage_text(fs):
    p = run_btk("btk-inspect", "usage", *fs.devices)
    assert p.returncode == 0, p.stderr
    assert "Metadata" in p.stdout or "Data+Metadata" in p.stdout


def test_map_matches_chunk_tree(fs, fs_dump):
    got = {c["logical"]: c for c in btk_json("map", *fs.devices)["chunks"]}
    want = {c["start"]: c for c in fs_dump.chunks()}
    assert got.keys() == want.keys()
    for start, c in want.items():
        g = got[start]
        assert (g["length"], g["type"]) == (c["length"], c["type"])
        assert [(s["devid"], s["physical"]) for s in g["stripes"]] == \
               [(s["devid"], s["offset"]) for s in c["stripes"]]


def expected_copies(chunk: dict, logical: int) -> list[tuple[int, int]]:
    """Where the data of `logical` lives, per profile (for RAID5/6: the data stripe only)."""
    off = logical - chunk["start"]
    sl, n, stripes = chunk["stripe_len"], chunk["num_stripes"], chunk["stripes"]
    profile = chunk["type"] & ~7
    nr, within = divmod(off, sl)
    if profile in (0, 16, 32, 512, 1024):             # single, RAID1, DUP, RAID1C3/4
        return [(s["devid"], s["offset"] + off) for s in stripes]
    if profile == 8:                                  # RAID0
        idx, row = nr % n, nr // n
        return [(stripes[idx]["devid"], stripes[idx]["offset"] + row * sl + within)]
    if profile == 64:                                 # RAID10
        sub = chunk["sub_stripes"]
        factor = n // sub
        idx, row = (nr % factor) * sub, nr // factor
        return [(stripes[idx + i]["devid"], stripes[idx + i]["offset"] + row * sl + within) for i in range(sub)]
    data = n - (1 if profile == 128 else 2)           # RAID5 / RAID6
    idx, row = nr % data, nr // data
    idx = (row + idx) % n
    return [(stripes[idx]["devid"], stripes[idx]["offset"] + row * sl + within)]


def test_map_logical(fs, fs_dump):
    for c in fs_dump.chunks():
        candidates = {c["start"], c["start"] + 4096 * 17, c["start"] + c["length"] - 4096,
                      c["start"] + c["stripe_len"] * 5 + 8192}
        for logical in sorted(x for x in candidates if x < c["start"] + c["length"]):
            got = btk_json("map", "--logical", logical, *fs.devices)
            copies = [(x["devid"], x["physical"]) for x in got["copies"]]
            want = expected_copies(c, logical)
            if c["type"] & (128 | 256):
                copies = copies[:1]
            assert got["chunk"] == c["start"]
            assert copies == want, f"logical {logical} in chunk {c['start']} type {c['type']:#x}"


def test_usage_shared_blocks_counted_once(fs, fs_dump):
    """Each tree's exclusive bytes plus the blocks several trees share (snapshots), counted
    once, make the total: every distinct tree block, which is what the metadata block groups
    count as used (log trees aside: their blocks have no extent items until replay)."""
    u = btk_json("usage", *fs.devices)
    nodesize = dumptree.dump_super(fs.devices[0])[0]["nodesize"]
    assert sum(t["exclusive_bytes"] for t in u["trees"]) + u["shared_bytes"] == u["total_tree_bytes"]
    for t in u["trees"]:
        assert 0 <= t["exclusive_bytes"] <= t["bytes"], t
    # what the trees reference: more than the total exactly when blocks are shared
    referenced = sum(t["bytes"] for t in u["trees"])
    assert (referenced > u["total_tree_bytes"]) == (u["shared_bytes"] > 0)
    blocks = {b["bytenr"] for b in fs_dump.blocks}
    assert u["total_tree_bytes"] == len(blocks) * nodesize
    if not u["mixed_block_groups"]:
        log = sum(t["bytes"] for t in u["trees"] if t["tree"] & dumptree.U64 == LOG_TREE)
        assert u["total_tree_bytes"] - log == u["metadata_used"], u
