# SPDX-License-Identifier: GPL-2.0-only
"""A tree block's full-backref flag against the trees (extent-full-backref), found by an
extent-reference damage campaign judged by btrfs check 7.3 ("bad full backref"): the flag set
on a block its owner still holds or on a block of a tree never shared, or cleared on a block
only snapshots hold. btk took the flag for the truth and said clean (set) or could not repair
(cleared). Each variant: btk-check reports it; --repair (extent-refs) rewrites the flag and
only that; btk-check, btrfs check (and 7.3 where present) are then clean; the kernel reads
every file as before; the undo file gives the damaged bytes back."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import require_btk, run_btk, image_digest
from test_repair import baseline, check, corrupt, key_arg, problem_ids
from test_repair_item_fields import records, left_after
from test_tune import check_devices, kernel_fs, kernel_verify, original_hashes

LATEST = Path("/opt/btrfs-progs-latest/bin/btrfs")
FULL_BACKREF = 0x100
SUBVOL = lambda root: root == 5 or 256 <= root < 2**63  # noqa: E731


def level(r) -> int:
    return r["key"][2] if r["type"] == "METADATA_ITEM" else r["fields"].get("level", 0)


def data_leaves(recs) -> set[int]:
    """Subvolume leaves holding a file extent with a data reference (the flag matters there)."""
    return {r["block"] for r in recs if r.get("type") == "EXTENT_DATA" and r["tree"] != 2 and
            r["fields"].get("type") in (1, 2) and r["fields"].get("disk_bytenr")}


def tree_block(recs, want):
    leaves = data_leaves(recs)
    for r in recs:
        if r["tree"] == 2 and r.get("type") in ("METADATA_ITEM", "EXTENT_ITEM") and \
                r["fields"]["flags"] & 3 == 2 and want(r, leaves):
            return r
    pytest.skip("no tree block of that kind in this recipe")


def first_ref(r) -> dict:
    refs = r["fields"].get("inline_refs") or [{}]
    return refs[0]


# (recipe, which tree block's flag to flip: (extent item, data_leaves) -> bool)
VARIANTS = {
    # a leaf of the top subvolume that its owner still holds, with data refs: no full backrefs
    "set-owned-leaf": ("s16k-crc32c-zstd", lambda r, dl: not r["fields"]["flags"] & FULL_BACKREF and
                       r["key"][0] in dl and first_ref(r).get("type") == "TREE_BLOCK_REF" and
                       first_ref(r)["root"] == 5),
    # the checksum tree is never shared: none of its blocks has full backrefs
    "set-csum-tree": ("s16k-crc32c-zstd", lambda r, dl: first_ref(r).get("type") == "TREE_BLOCK_REF" and
                      first_ref(r)["root"] == 7),
    # without skinny metadata (an EXTENT_ITEM with tree block info), an owned leaf with data refs
    "set-owned-non-skinny": ("s64k-sha256-zlib", lambda r, dl: not r["fields"]["flags"] & FULL_BACKREF and
                             r["key"][0] in dl and first_ref(r).get("type") == "TREE_BLOCK_REF" and
                             SUBVOL(first_ref(r)["root"])),
    # a leaf only a snapshot holds (its owner copied it on write): its data refs are shared
    "clear-snapshot-leaf": ("s4k-xxhash-holes-lzo", lambda r, dl: r["fields"]["flags"] & FULL_BACKREF and
                            r["key"][0] in dl),
}


def latest_check(dev) -> subprocess.CompletedProcess | None:
    if not LATEST.exists():
        return None
    return subprocess.run([str(LATEST), "check", str(dev)], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("variant", [pytest.param(v, marks=pytest.mark.slow) if v == "set-owned-non-skinny" else v
                                     for v in VARIANTS])
def test_full_backref_flag(variant, tmp_path):
    name, want = VARIANTS[variant]
    devs = kernel_fs(name).copy_to(tmp_path)
    rec = tree_block(records(devs), want)
    damage_and_repair(name, devs, rec, tmp_path, "extent-full-backref",
                      "-f", "flags", "-v", f"^{FULL_BACKREF:#x}")


@pytest.mark.parametrize("name", ["s4k-xxhash-holes-lzo",
                                  pytest.param("s64k-sha256-zlib", marks=pytest.mark.slow)])
def test_full_backref_item_lost(name, tmp_path):
    """The extent item of a block with full backrefs deleted: the item extent-refs makes again
    has the flag (its children's refs are shared). Before, it was made without: btrfs check
    then said bad full backref (btk: extent-type, the block has the relocation header flag)."""
    devs = kernel_fs(name).copy_to(tmp_path)
    rec = tree_block(records(devs), lambda r, dl: r["fields"]["flags"] & FULL_BACKREF)
    damage_and_repair(name, devs, rec, tmp_path, "tree-block-not-allocated", "-d")


def damage_and_repair(name, devs, rec, tmp_path, want_id, *edit):
    """Damage the extent item rec; btk-check reports want_id; --repair (extent-refs) gives the item
    back as it was; both checks are clean; the undo gives the damage back; the kernel reads every
    file as before."""
    require_btk("btk-check")
    hashes = original_hashes(name)
    base_rc, base_ids, _ = baseline(name)
    corrupt(devs, "-t", "2", "-k", key_arg(rec["key"]), *edit)
    damaged = image_digest(devs[0])
    p = latest_check(devs[0])
    assert p is None or p.returncode != 0, p.stdout[-2000:]

    rc, objs, p = check(devs)
    assert rc == 4 and want_id in problem_ids(objs[0]), p.stdout

    undo = tmp_path / "u.undo"
    rc, objs, p = check(devs, "--repair", "--yes", "--undo-file", undo)
    assert rc == (1 if base_rc == 0 else 4), f"{p.stdout}\n{p.stderr}"
    assert "extent-refs" in {a["class"] for a in objs[1]["repairs"]}, objs[1]
    assert left_after(objs, base_ids) == list(base_ids), p.stdout
    fixed = next(r for r in records(devs) if r["tree"] == 2 and r.get("key") == rec["key"])
    assert fixed["fields"]["flags"] == rec["fields"]["flags"], fixed
    assert sorted(map(str, fixed["fields"].get("inline_refs", []))) == \
        sorted(map(str, rec["fields"].get("inline_refs", []))), fixed
    check_devices(devs)
    p = latest_check(devs[0])
    assert p is None or p.returncode == 0, p.stdout[-2000:]
    rolled = tmp_path / "rolled-back.img"
    subprocess.run(["cp", "--sparse=always", devs[0], rolled], check=True)
    p = run_btk("btk-undo", undo, rolled)
    assert p.returncode == 0, p.stderr
    assert image_digest(rolled) == damaged, "undo did not give the damaged image back"
    kernel_verify(devs, hashes, write=False)
