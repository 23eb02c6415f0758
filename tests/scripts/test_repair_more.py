# SPDX-License-Identifier: GPL-2.0-only
"""btk-check --repair, more classes: --clear-log, the csum tree (fixes and --rebuild-csum-tree),
and root refs <-> backrefs. Each: damage (or a log tree) -> --repair --yes -> btk-check clean
(what the undamaged image had), the reference `btrfs check` clean, and the kernel reads every file
as before the damage.
"""
from __future__ import annotations

from pathlib import Path

import dumptree
import fsbuild
from conftest import require_btk, run_btk
from test_repair import baseline, check, corrupt, key_arg, problem_ids
from test_tune import (check_devices, kernel_fs, kernel_verify, mounted_retry, needs, original_hashes,
                       tree_hashes, btk_super, SIMPLE)

LOG = "log-tree-16k"


def super_log_root(dev: Path) -> int:
    p = fsbuild.run(["btrfs", "inspect-internal", "dump-super", dev])
    for line in p.stdout.splitlines():
        f = line.split()
        if f and f[0] == "log_root":
            return int(f[1])
    raise AssertionError("no log_root in dump-super")


def hashes(devs, *options) -> dict[str, str]:
    with fsbuild.attached(devs, readonly=True) as loops, mounted_retry(loops, ["ro", *options]) as mnt:
        return tree_hashes(mnt)


def repaired(devs, *args, classes: set[str], base: str, warnings: frozenset[str] = frozenset()):
    """--repair --yes (no undo file): the classes ran, and what is left is what the undamaged
    image has (and at most the given warnings); a second check agrees; the reference check is
    clean."""
    base_rc, base_ids, _ = baseline(base)
    rc, objs, p = check(devs, "--repair", "--yes", "--no-undo", *args)
    assert rc == (1 if base_rc == 0 else 4), f"repair exit {rc}:\n{p.stdout}\n{p.stderr}"
    assert {a["class"] for a in objs[1]["repairs"]} == classes, objs[1]
    left = [i for i in problem_ids(objs[2]) if i not in warnings or i in base_ids]
    assert left == list(base_ids), f"left after the repair: {problem_ids(objs[2])}"
    rc, objs, _ = check(devs)
    assert rc == base_rc and [i for i in problem_ids(objs[0]) if i not in warnings or i in base_ids] == \
        list(base_ids), "second check"
    check_devices(devs)
    return objs


def test_clear_log(tmp_path):
    """The log is dropped: the kernel then shows the filesystem as of the last commit, which is
    what a mount that skips the log replay showed before."""
    require_btk("btk-check")
    devs = kernel_fs(needs(LOG)).copy_to(tmp_path)
    assert super_log_root(devs[0]) != 0, "the recipe left no log tree"
    committed = hashes(devs, "rescue=nologreplay")
    # without --clear-log the log is left alone
    rc, objs, _ = check(devs, "--repair", "--yes", "--no-undo")
    assert super_log_root(devs[0]) != 0
    assert "clear-log" not in {a["class"] for a in (objs[1]["repairs"] if len(objs) > 2 else [])}
    # a dry run says what it would drop, and writes nothing
    rc, objs, p = check(devs, "--clear-log", "--dry-run")
    assert any("log tree at" in a["action"] for a in objs[1]["repairs"]), objs
    assert super_log_root(devs[0]) != 0
    # a commit does not update the qgroup status generation yet (libfs/commit.c): the kernel
    # then rescans, which the check warns of
    repaired(devs, "--clear-log", classes={"clear-log"}, base=LOG, warnings=frozenset({"qgroup-inconsistent"}))
    assert super_log_root(devs[0]) == 0
    with fsbuild.attached(devs) as loops, mounted_retry(loops) as mnt:
        assert tree_hashes(mnt) == committed
        assert not (mnt / "logged-new").exists()


def test_root_refs(tmp_path):
    """A deleted ROOT_REF and a deleted ROOT_BACKREF (of another subvolume) come back from their
    mirrors, byte for byte; a backref moved to a parent that does not exist (its key's offset
    changed in the leaf) is removed, and the right one re-created."""
    require_btk("btk-check")
    devs = kernel_fs(needs(SIMPLE)).copy_to(tmp_path)
    before = {(it["type"], tuple(it["key"])): it["fields"] for it in dumptree.dump_tree(devs, "-t", "root").items
              if it["type"] in ("ROOT_REF", "ROOT_BACKREF")}
    refs = sorted(k for t, k in before if t == "ROOT_REF")
    assert len(refs) >= 3, before
    corrupt(devs, "-t", "root", "-k", key_arg(refs[0]), "-d")
    parent, _, child = refs[1]
    corrupt(devs, "-t", "root", "-k", f"{child},ROOT_BACKREF,{parent}", "-d")
    parent, _, child = refs[2]
    (back,) = [it for it in dumptree.dump_tree(devs, "-t", "root").items
               if it["type"] == "ROOT_BACKREF" and it["key"] == [child, 144, parent]]
    nowhere = 1 << 40  # no subvolume has that id
    corrupt(devs, "-b", str(back["block"]), "-o", str(101 + back["slot"] * 25 + 9), "-B",
            nowhere.to_bytes(8, "little").hex())
    rc, objs, _ = check(devs)
    assert rc == 4 and {"root-ref-missing", "root-backref-missing"} <= set(problem_ids(objs[0]))
    repaired(devs, classes={"root-refs"}, base=SIMPLE)
    after = {(it["type"], tuple(it["key"])): it["fields"] for it in dumptree.dump_tree(devs, "-t", "root").items
             if it["type"] in ("ROOT_REF", "ROOT_BACKREF")}
    assert after == before
    with fsbuild.attached(devs, readonly=True) as loops, mounted_retry(loops, ["ro"]) as mnt:
        assert tree_hashes(mnt) == original_hashes(SIMPLE)


def csum_items(devs) -> list[dict]:
    return [it for it in dumptree.dump_tree(devs, "-t", "csum").items if it["type"] == "EXTENT_CSUM"]


def csum_size_of(devs) -> int:
    return {0: 4, 1: 8}.get(btk_super(devs[0])["csum_type"], 32)


def split_csum_items(devs) -> None:
    """How the kernel lays out csum items varies from run to run (adjacent checksums are merged
    into one item, or not): split the biggest item in three contiguous ones, and the last item
    if it is alone in its leaf, so that the damages below always find what they need."""
    csize = csum_size_of(devs)
    biggest = max(csum_items(devs), key=lambda it: it["size"])
    count = biggest["size"] // csize
    assert count >= 3, f"no csum item holds 3 checksums: {csum_items(devs)}"
    corrupt(devs, "-t", "csum", "-k", key_arg(biggest["key"]), "-P", str(count // 3))
    second = biggest["key"][:2] + [biggest["key"][2] + count // 3 * 4096]
    corrupt(devs, "-t", "csum", "-k", key_arg(second), "-P", str(count // 3))
    last = csum_items(devs)[-1]
    if last["slot"] == 0:
        assert last["size"] >= 2 * csize, f"the last csum item is alone in its leaf: {last}"
        corrupt(devs, "-t", "csum", "-k", key_arg(last["key"]), "-P", "1")


def damage_csum_overlap(devs) -> None:
    """Move a csum item's key one block back into the item before it, which ends where it starts
    (same leaf, not its first slot)."""
    items = csum_items(devs)
    sector = 4096
    csize = csum_size_of(devs)
    for prev, it in zip(items, items[1:-1]):  # not the last: damage_csum_item_size's
        if it["block"] == prev["block"] and it["slot"] >= 1 and prev["size"] >= 2 * csize and \
                prev["key"][2] + prev["size"] // csize * sector == it["key"][2]:
            new = it["key"][2] - sector
            off = 101 + it["slot"] * 25 + 9
            corrupt(devs, "-b", str(it["block"]), "-o", str(off), "-B", new.to_bytes(8, "little").hex())
            return
    raise AssertionError(f"no two contiguous csum items in one leaf: {items}")


def damage_csum_item_size(devs) -> None:
    """The last csum item loses its first byte (its data offset moves up one byte, its size
    shrinks by one: the leaf stays well formed, the size is no multiple of a csum), and its key
    moves beyond every data extent."""
    items = csum_items(devs)
    block = items[-1]["block"]
    mine = [it for it in items if it["block"] == block]
    last = max(mine, key=lambda it: it["slot"])
    assert last["slot"] == len(mine) - 1 and last["slot"] >= 1
    offset = btk_super(devs[0])["nodesize"] - 101 - sum(it["size"] for it in mine)
    head = (offset + 1).to_bytes(4, "little") + (last["size"] - 1).to_bytes(4, "little")
    corrupt(devs, "-b", str(block), "-o", str(101 + last["slot"] * 25 + 17), "-B", head.hex())
    corrupt(devs, "-b", str(block), "-o", str(101 + last["slot"] * 25 + 9), "-B", (1 << 40).to_bytes(8, "little").hex())


def test_csum_tree_fix_and_rebuild(tmp_path):
    """Overlapping csum items are trimmed, an item of a wrong size that lies outside every data
    extent is removed (the moved item's checksums now sit on the wrong blocks: only the data can
    tell); then, with a csum item deleted too, --rebuild-csum-tree recomputes every checksum from the data: the kernel reads every file as before and scrub
    finds nothing."""
    require_btk("btk-check")
    devs = kernel_fs(needs(SIMPLE)).copy_to(tmp_path)
    base_ids = baseline(SIMPLE)[1]
    split_csum_items(devs)
    rc, objs, p = check(devs)
    assert set(problem_ids(objs[0])) == set(base_ids), f"split csum items are a valid layout:\n{p.stdout}"
    damage_csum_overlap(devs)
    damage_csum_item_size(devs)
    rc, objs, _ = check(devs)
    found = set(problem_ids(objs[0]))
    assert rc == 4 and {"csum-overlap", "csum-item-size", "csum-outside-extent"} <= found, found
    # the moved item's last block is left without a checksum: that the fix cannot tell
    rc, objs, p = check(devs, "--repair", "--yes", "--no-undo")
    assert [a["class"] for a in objs[1]["repairs"]][0] == "csums", objs[1]
    assert not {"csum-overlap", "csum-item-size", "csum-outside-extent"} & set(problem_ids(objs[2])), p.stdout
    assert set(problem_ids(objs[2])) <= set(base_ids) | {"csum-missing"}, p.stdout

    victim = csum_items(devs)[-1]
    corrupt(devs, "-t", "csum", "-k", key_arg(victim["key"]), "-d")
    rc, objs, _ = check(devs)
    assert rc == 4 and "csum-missing" in problem_ids(objs[0]), problem_ids(objs[0])
    objs = repaired(devs, "--rebuild-csum-tree", classes={"csums"}, base=SIMPLE)
    rc, objs, p = check(devs, "--check-data-csum")
    assert "data-csum-mismatch" not in problem_ids(objs[0]), p.stdout
    kernel_verify(devs, original_hashes(SIMPLE), write=False)


def test_help_and_man_page_document_the_options():
    p = run_btk("btk-check", "--help")
    man = (fsbuild.REPO / "doc" / "btk-check.8").read_text().replace("\\-", "-")
    text = " ".join(p.stdout.split())
    for opt in ("--clear-log", "--rebuild-csum-tree"):
        assert opt in text and opt in man, opt
    for cls in ("clear-log", "csums", "root-refs"):
        assert f".B {cls}\n" in man, f"repair class {cls} missing from doc/btk-check.8"
