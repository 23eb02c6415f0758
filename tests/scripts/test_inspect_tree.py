# SPDX-License-Identifier: GPL-2.0-only
"""btk-inspect tree --format jsonl against btrfs inspect-internal dump-tree, on every recipe."""
import collections

import pytest

import compare
import dumptree
from compare import item_id, report, split_records
from conftest import btk_tree_records, dump_of, error_lines, parse_jsonl, run_btk


def btk_parts(fs):
    records, stderr = btk_tree_records(fs.name)
    items, ptrs, _ = split_records(records)
    return items, ptrs, stderr


def index(recs, what):
    out = {}
    dups = []
    for r in recs:
        k = item_id(r)
        if k in out:
            dups.append(f"{what} {k} printed twice")
        out[k] = r
    assert not dups, report("duplicates", dups)
    return out


def test_clean_fs_says_nothing(fs):
    _, _, stderr = btk_parts(fs)
    assert not error_lines(stderr), stderr
    assert not stderr.strip(), f"warnings on a clean filesystem:\n{stderr}"


def test_device_order_does_not_matter(fs):
    if fs.recipe.ndev < 2:
        pytest.skip("single device")
    p = run_btk("btk-inspect", "tree", "--format", "jsonl", *reversed(fs.devices))
    assert p.returncode == 0, p.stderr
    assert parse_jsonl(p.stdout) == btk_tree_records(fs.name)[0]


def test_items_match(fs, fs_dump):
    items, _, _ = btk_parts(fs)
    ref = index(fs_dump.items, "dump-tree item")
    got = index(items, "btk item")
    problems = [f"missing item tree {k[0]} block {k[1]} slot {k[2]}: {ref[k]['type']} {ref[k]['key']}"
                for k in sorted(ref.keys() - got.keys())]
    problems += [f"extra item tree {k[0]} block {k[1]} slot {k[2]}: {got[k].get('type')} {got[k].get('key')}"
                 for k in sorted(got.keys() - ref.keys())]
    for k in sorted(ref.keys() & got.keys()):
        r, g = ref[k], got[k]
        for field in ("key", "type", "size"):
            if compare.norm(r[field]) != compare.norm(g[field]):
                problems.append(f"{k}: {field} want {r[field]!r}, got {g[field]!r}")
    assert not problems, report(f"{fs.name}: items differ from dump-tree", problems)


def test_node_pointers_match(fs, fs_dump):
    _, ptrs, _ = btk_parts(fs)
    ref = index(fs_dump.ptrs, "dump-tree pointer")
    got = index(ptrs, "btk pointer")
    problems = [f"missing pointer {k}: {ref[k]}" for k in sorted(ref.keys() - got.keys())]
    problems += [f"extra pointer {k}: {got[k]}" for k in sorted(got.keys() - ref.keys())]
    for k in sorted(ref.keys() & got.keys()):
        for field in ("key", "blockptr", "generation", "level"):
            if compare.norm(ref[k][field]) != compare.norm(got[k].get(field)):
                problems.append(f"{k}: {field} want {ref[k][field]!r}, got {got[k].get(field)!r}")
    assert not problems, report(f"{fs.name}: node pointers differ from dump-tree", problems)


def test_per_tree_item_counts(fs, fs_dump):
    items, _, _ = btk_parts(fs)
    got = collections.Counter(it["tree"] & dumptree.U64 for it in items)
    assert dict(got) == fs_dump.item_counts()


def test_decoded_fields_match(fs, fs_dump):
    items, _, _ = btk_parts(fs)
    got = {item_id(it): it for it in items}
    problems = []
    checked = collections.Counter()
    for it in fs_dump.items:
        g = got.get(item_id(it))
        if g is None or g.get("type") != it["type"]:
            continue            # reported by test_items_match
        if "fields" not in g:
            problems.append(f"{item_id(it)} {it['type']}: no 'fields'")
            continue
        diffs = compare.diff_item_fields(it["type"], it["fields"], g["fields"])
        checked[it["type"]] += 1
        problems += [f"{item_id(it)} {it['type']} {it['key']}: {d}" for d in diffs]
    assert not problems, report(f"{fs.name}: decoded fields differ from dump-tree", problems)
    assert checked["INODE_ITEM"] and checked["CHUNK_ITEM"]


def test_one_tree(fs, fs_dump):
    items, ptrs, _ = btk_parts(fs)
    subvols = sorted({it["key"][0] for it in fs_dump.items
                      if it["type"] == "ROOT_ITEM" and it["tree"] == 1 and 256 <= it["key"][0] < 1 << 48})
    for tree in [1, 3, 5] + subvols[-1:]:
        p = run_btk("btk-inspect", "tree", "-t", tree, "--format", "jsonl", *fs.devices)
        assert p.returncode == 0, p.stderr
        one_items, one_ptrs, _ = split_records(parse_jsonl(p.stdout))
        assert {item_id(i) for i in one_items} == {item_id(i) for i in items if i["tree"] == tree}
        assert {item_id(i) for i in one_ptrs} == {item_id(i) for i in ptrs if i["tree"] == tree}
        assert {item_id(i) for i in one_items} == {item_id(i) for i in fs_dump.items if i["tree"] == tree}


@pytest.mark.parametrize("name,tree", [("root", 1), ("chunk", 3), ("fs", 5), ("extent", 2)])
def test_tree_by_name(name, tree):
    from conftest import built
    fs = built("mkfs-single")
    by_id = run_btk("btk-inspect", "tree", "-t", tree, "--format", "jsonl", *fs.devices)
    by_name = run_btk("btk-inspect", "tree", "-t", name, "--format", "jsonl", *fs.devices)
    assert by_id.returncode == 0 and by_name.returncode == 0, by_name.stderr
    assert by_id.stdout == by_name.stdout


def test_one_block(fs, fs_dump):
    fs_blocks = [b for b in fs_dump.blocks if b["tree"] == 5]
    picks = [b for b in fs_blocks if b["level"] == 0][-1:] + [b for b in fs_blocks if b["level"] > 0][:1]
    for b in picks:
        p = run_btk("btk-inspect", "tree", "-b", b["bytenr"], "--format", "jsonl", *fs.devices)
        assert p.returncode == 0, p.stderr
        items, ptrs, _ = split_records(parse_jsonl(p.stdout))
        got = items if b["level"] == 0 else ptrs
        ref = [r for r in (fs_dump.items if b["level"] == 0 else fs_dump.ptrs)
               if r["tree"] == 5 and r["block"] == b["bytenr"]]
        assert [(r["block"], r["slot"], compare.norm(r["key"])) for r in got] == \
               [(r["block"], r["slot"], r["key"]) for r in ref]
        if b["level"] == 0:
            assert [(r["type"], r["size"]) for r in got] == [(r["type"], r["size"]) for r in ref]


def test_text_format(fs):
    p = run_btk("btk-inspect", "tree", *fs.devices)
    assert p.returncode == 0, p.stderr
    assert len(p.stdout.splitlines()) > 50
    # the text names every tree block it printed
    dump = dump_of(fs.name)
    assert all(str(b["bytenr"]) in p.stdout for b in dump.blocks[:200])
