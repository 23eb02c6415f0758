# SPDX-License-Identifier: GPL-2.0-only
"""Extent items whose key gives a length the kernel refuses (zero, off the sector grid, or
running past the address space): the item is made again at the length its users give, for data
extents and for old-style tree-block items; the check counts such an item as holding no space."""
from __future__ import annotations

import pytest

import dumptree
from conftest import images_digest, require_btk
from test_repair import check, corrupt, key_arg, problem_ids
from test_repair_rebuild import NON_SKINNY, assert_undo_restores
from test_tune import kernel_fs, kernel_verify, needs, original_hashes

LENGTHS = ["+1", "0", "0xffffffffffffffff"]


def extent_keys(devs, tree_block: bool):
    return [tuple(it["key"]) for it in dumptree.dump_tree(devs, "-t", "extent").items
            if it["type"] == "EXTENT_ITEM" and bool(it["fields"].get("flags", 0) & 2) == tree_block]


@pytest.mark.parametrize("kind", ["data", "tree-block"])
@pytest.mark.parametrize("length", LENGTHS)
def test_refused_extent_length_made_again(tmp_path, kind, length):
    require_btk("btk-check")
    require_btk("btk-undo")
    if not NON_SKINNY:
        pytest.skip("no recipe without skinny metadata")
    name = needs(NON_SKINNY)
    want = original_hashes(name)
    devs = kernel_fs(name).copy_to(tmp_path / "devs")
    keys = extent_keys(devs, kind == "tree-block")
    key = keys[len(keys) // 2]
    corrupt(devs, "-t", "extent", "-k", key_arg(key), "-f", "key.offset", "-v", length)
    damaged = images_digest(devs)
    rc, objs, _ = check(devs)
    assert rc == 4 and "item-malformed" in problem_ids(objs[0]), problem_ids(objs[0])

    undo = tmp_path / "r.undo"
    rc, objs, p = check(devs, "--repair", "--yes", "--undo-file", undo)
    assert rc == 1, p.stdout + p.stderr
    assert "extent-refs" in {a["class"] for a in objs[1]["repairs"]}, objs[1]
    assert key in extent_keys(devs, kind == "tree-block"), "the item was not made again at its length"
    assert_undo_restores(devs, undo, damaged, tmp_path / "undo")
    kernel_verify(devs, want, write=False)
