# SPDX-License-Identifier: GPL-2.0-only
"""btk-check --rebuild-extent-tree: a new extent tree from the trees that use the extents.

On filesystems with snapshots, reflinks, compression and quotas (the fsbuild recipes): the
rebuilt tree of a sound filesystem holds the same references as the kernel's (full backrefs
included); a filesystem whose whole extent tree is unreadable, or whose references were damaged,
comes back clean for btk-check and the reference `btrfs check`, the kernel mounts it and reads
every file as before, and btk-undo gives back the damaged image byte for byte.
"""
from __future__ import annotations


import pytest

import dumptree
import fsbuild
from conftest import images_digest, require_btk, run_btk
from test_repair import check, corrupt, first_block_of_tree, key_arg, problem_ids
from test_tune import SIMPLE, check_devices, kernel_fs, kernel_verify, needs, original_hashes

NON_SKINNY = next((r.name for r in fsbuild.RECIPES if "^skinny-metadata" in r.mkfs), None)
SQUOTA = next((r.name for r in fsbuild.RECIPES if any("squota" in a for a in r.mkfs)), None)
# trees the rebuild's own transaction copies: their blocks move, their items are the kernel's anyway
COPIED_TREES = {1, 2, 8, 10, 11}
QGROUP_WARNING = "qgroup-inconsistent"


def extent_items(devs) -> dict[tuple, dict]:
    """The extent tree's references of data extents and of subvolume tree blocks (key -> the
    item without its generation and first key), keyed references included."""
    out = {}
    for it in dumptree.dump_tree(devs, "-t", "extent").items:
        if it["type"] == "BLOCK_GROUP_ITEM":
            continue
        f = dict(it["fields"])
        f.pop("generation", None)
        f.pop("key", None)  # old-style items: the first key when allocated (the rebuild writes today's)
        roots = {r.get("root") for r in f.get("inline_refs", [])}
        if it["type"] in ("METADATA_ITEM", "EXTENT_ITEM") and f.get("flags", 0) & 2 and roots & COPIED_TREES:
            continue
        if it["type"] == "TREE_BLOCK_REF" and it["key"][2] in COPIED_TREES:
            continue
        out[tuple(it["key"])] = f
    return out


def assert_undo_restores(devs, undo, damaged, where):
    """btk-undo on copies of the repaired devices (in where) gives back the damaged ones byte for byte."""
    back = [where / d.name for d in devs]
    where.mkdir()
    for d, b in zip(devs, back):
        fsbuild.run(["cp", "--sparse=always", d, b])
    u = run_btk("btk-undo", undo, *back)
    assert u.returncode == 0, u.stderr
    assert images_digest(back) == damaged, "btk-undo did not restore the damaged image byte for byte"
    for b in back:
        b.unlink()


def rebuild(devs, *args):
    """--rebuild-extent-tree --yes: exit 1, only the extent-tree class (and, for problems it
    leaves to them, csums and space counters: device bytes_used) ran, and only the qgroup warning is left; a second check agrees;
    the reference check is clean."""
    rc, objs, p = check(devs, "--rebuild-extent-tree", "--yes", *args)
    assert rc == 1, f"rebuild exit {rc}:\n{p.stdout}\n{p.stderr}"
    classes = {a["class"] for a in objs[1]["repairs"]}
    assert "extent-tree" in classes and classes <= {"extent-tree", "csums", "space-counters"}, objs[1]
    assert not {"extent-refs", "free-space-tree"} & classes
    assert any("quota groups marked inconsistent" in a["action"] for a in objs[1]["repairs"]), objs[1]
    assert problem_ids(objs[2]) == [QGROUP_WARNING], f"left after the rebuild: {problem_ids(objs[2])}"
    rc, objs, _ = check(devs)
    assert rc == 0 and problem_ids(objs[0]) == [QGROUP_WARNING], "second check"
    check_devices(devs)


def test_rebuild_of_a_sound_tree_keeps_every_reference(tmp_path):
    """Snapshots share blocks (some with full backrefs), reflinks share data: the rebuilt tree
    has the same items as the kernel wrote, but for the trees the rebuild itself copies."""
    require_btk("btk-check")
    devs = kernel_fs(needs(SIMPLE)).copy_to(tmp_path)
    before = extent_items(devs)
    assert any(f.get("flags", 0) & 0x100 for f in before.values()), "the recipe has no full-backref block"
    rebuild(devs, "--no-undo")
    after = extent_items(devs)
    assert after == before, [k for k in before.keys() | after.keys() if before.get(k) != after.get(k)][:10]


@pytest.mark.parametrize("how", ["--rebuild-extent-tree", "--repair"])
def test_rebuild_of_an_unreadable_extent_tree(tmp_path, how):
    """Every copy of the extent tree's root is garbage: no extent item, no block group item is
    left to read; the free-space tree's root too. The rebuild brings the filesystem back, asked
    for or not (the plain repair rebuilds when only those trees are unreadable); the kernel
    reads every file as before; btk-undo restores the damaged image exactly."""
    require_btk("btk-check")
    require_btk("btk-undo")
    name = needs(SIMPLE)
    want = original_hashes(name)
    devs = kernel_fs(name).copy_to(tmp_path / "devs")
    for tree in (2, 10):
        corrupt(devs, "-b", str(first_block_of_tree(devs, tree)), "-o", "300", "-B", "ffffffff", "-n")
    damaged = images_digest(devs)
    rc, objs, _ = check(devs)
    assert rc == 4 and "tree-root-unreadable" in problem_ids(objs[0]), problem_ids(objs[0])

    undo = tmp_path / "rebuild.undo"
    if how == "--repair":
        rc, objs, _ = check(devs, "--repair", "--yes", "--undo-file", undo)
        assert rc == 1 and "extent-tree" in {a["class"] for a in objs[1]["repairs"]}, objs
    else:
        rebuild(devs, "--undo-file", undo)
    assert_undo_restores(devs, undo, damaged, tmp_path / "undo")
    kernel_verify(devs, want)


def test_rebuild_of_wrong_references_without_skinny_metadata(tmp_path):
    """Old-style tree block items (with their first key): a data extent's refs and a reference
    count are wrong and a tree block's item is gone; the rebuild writes them as the kernel did."""
    require_btk("btk-check")
    devs = kernel_fs(needs(NON_SKINNY)).copy_to(tmp_path)
    before = extent_items(devs)
    data = [k for k, f in before.items() if k[1] == 168 and f["flags"] & 1 and f.get("inline_refs")]
    tree = [k for k, f in before.items() if k[1] == 168 and f["flags"] & 2]
    corrupt(devs, "-t", "extent", "-k", key_arg(data[0]), "-f", "refs", "-v", "+3")
    corrupt(devs, "-t", "extent", "-k", key_arg(tree[-1]), "-d")
    rc, objs, _ = check(devs)
    assert rc == 4 and {"extent-refs-total", "tree-block-not-allocated"} <= set(problem_ids(objs[0])), \
        problem_ids(objs[0])
    rebuild(devs, "--no-undo")
    assert extent_items(devs) == before


def test_rebuild_refused_with_simple_quotas(tmp_path):
    """Owner references of simple quotas exist only in the extent tree: no rebuild, nothing
    written, an operational error."""
    require_btk("btk-check")
    devs = kernel_fs(needs(SQUOTA)).copy_to(tmp_path)
    digest = images_digest(devs)
    rc, _, p = check(devs, "--rebuild-extent-tree", "--yes", "--no-undo")
    assert rc & 8 and "simple quotas" in p.stderr, p.stderr
    assert images_digest(devs) == digest


@pytest.mark.slow
def test_rebuild_crash_at_every_write(tmp_path):
    """Crash the rebuild of an unreadable extent tree after each write (and with unflushed
    writes persisted in any subset): the damaged filesystem (old generation, the same problems)
    or the rebuilt one (next generation, only the qgroup warning; the reference check agrees)."""
    import crash
    from test_tune import super_of

    require_btk("btk-check")
    damaged = kernel_fs(needs(SIMPLE)).copy_to(tmp_path / "damaged")
    corrupt(damaged, "-b", str(first_block_of_tree(damaged, 2)), "-o", "300", "-B", "ffffffff", "-n")
    old_gen = super_of(damaged[0])["generation"]
    damaged_ids = problem_ids(check(damaged)[1][0])
    work = [tmp_path / "work" / d.name for d in damaged]
    work[0].parent.mkdir()
    for d, w in zip(damaged, work):
        fsbuild.run(["cp", "--sparse=always", d, w])
    log = tmp_path / "wlog"
    p = crash.record(log, "btk-check", "--rebuild-extent-tree", "--yes", "--no-undo", *work)
    assert p.returncode == 1, p.stderr
    wl = crash.count(log)
    assert wl.writes > 0
    seen = {"old": 0, "new": 0}
    pts = crash.points(wl, around_flushes=True)
    for k, seed, devs in crash.replay(damaged, log, crash.states(pts, seeds=(1, 2), every=3), tmp_path / "crash"):
        gen = super_of(devs[0])["generation"]
        ids = [i for i in problem_ids(check(devs)[1][0]) if i != "super-copy-stale"]
        if gen == old_gen:
            assert ids == damaged_ids, f"after {k} writes (seed {seed}): old generation but {ids}"
            seen["old"] += 1
        else:
            assert gen == old_gen + 1, (k, seed, gen)
            assert ids == [QGROUP_WARNING], f"after {k} writes (seed {seed}): new generation but {ids}"
            if seed is None and k == wl.writes:
                fsbuild.run(["btrfs", "check", "--readonly", devs[0]])
            seen["new"] += 1
    assert seen["old"] and seen["new"], seen


@pytest.mark.parametrize("tree,klass", [(10, "free-space-tree"), (9, "uuid-tree")])
def test_unreadable_derived_tree_is_rebuilt(tree, klass, tmp_path):
    """A tree built from others whose root has no good copy: --repair drops it whole (its
    blocks freed through the extent tree) and builds it again; nothing else is blocked by it."""
    require_btk("btk-check")
    devs = kernel_fs(needs(SIMPLE)).copy_to(tmp_path)
    corrupt(devs, "-b", str(first_block_of_tree(devs, tree)), "-o", "300", "-B", "ffffffff", "-n")
    rc, objs, _ = check(devs)
    assert rc == 4 and "tree-root-unreadable" in problem_ids(objs[0]), problem_ids(objs[0])
    rc, objs, p = check(devs, "--repair", "--yes", "--no-undo")
    assert rc == 1, f"repair exit {rc}:\n{p.stdout}\n{p.stderr}"
    assert {a["class"] for a in objs[1]["repairs"]} == {klass}, objs[1]
    assert any("unreadable block(s): dropped whole" in a["action"] for a in objs[1]["repairs"]), objs[1]
    assert problem_ids(objs[2]) == []
    check_devices(devs)


def test_unreadable_csum_leaf_is_rebuilt_from_the_data(tmp_path):
    """A csum-tree leaf bad on every copy: --repair drops the csum tree whole (blocks below the bad
    one freed through the extent tree) and writes every checksum again from the data; the reference
    check is clean, the kernel mounts it, every file reads back as before and scrub finds nothing."""
    require_btk("btk-check")
    name = needs(SIMPLE)
    want = original_hashes(name)
    devs = kernel_fs(name).copy_to(tmp_path)
    leaves = [b["bytenr"] for b in dumptree.dump_tree(devs, "-t", "7").blocks if b["level"] == 0]
    assert leaves
    corrupt(devs, "-b", str(leaves[-1]), "-o", "300", "-B", "ffffffff", "-n")
    rc, objs, _ = check(devs)
    assert rc == 4 and "tree-block-unreadable" in problem_ids(objs[0]), problem_ids(objs[0])
    rc, objs, p = check(devs, "--repair", "--yes", "--no-undo")
    assert rc == 1, f"repair exit {rc}:\n{p.stdout}\n{p.stderr}"
    assert {a["class"] for a in objs[1]["repairs"]} == {"csums"}, objs[1]
    assert any("unreadable block(s): dropped whole" in a["action"] for a in objs[1]["repairs"]), objs[1]
    assert problem_ids(objs[2]) == [], objs[2]
    rc, objs, _ = check(devs)
    assert rc == 0 and problem_ids(objs[0]) == [], "second check"
    kernel_verify(devs, want, write=False)
