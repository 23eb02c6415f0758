# SPDX-License-Identifier: GPL-2.0-only
"""Field damage to items that an item field-damage campaign against btrfs check 7.3 found btk
missing, misjudging or leaving unrepaired: root item refs, levels and drop levels; the dir entries
of subvolumes (id, name, type); an entry naming an inode as a subvolume; xattr types; an inode
mode whose file type its own items contradict; unknown inode flag bits; a data extent's
full-backref flag; a root ref whose name does not fill it. Each variant: btk-check reports the
expected problem; --repair mends it; btk-check and the reference check are then clean; the
kernel reads every file as before; the undo file gives the damaged bytes back."""
from __future__ import annotations

import pytest

from conftest import image_digest, require_btk
from test_repair import baseline, check, corrupt, key_arg, problem_ids
from test_repair_item_fields import left_after, pick, records, repair_and_verify
from test_tune import kernel_fs, needs, original_hashes, NO_HOLES_OFF, SIMPLE

S_IFMT = 0o170000


def subvol_id(recs, name):
    return pick(recs, 5, "DIR_INDEX", lambda r: r["fields"]["entries"][0].get("name") == name)["fields"]["entries"][0][
        "location"][0]


def root_item(name):
    return lambda recs: pick(recs, 1, "ROOT_ITEM", lambda r: r["key"][0] == subvol_id(recs, name))


def entry(type_, name):
    return lambda recs: pick(recs, 5, type_, lambda r: r["fields"]["entries"][0].get("name") == name)


def inode_named(name):
    def choose(recs):
        ino = entry("DIR_INDEX", name)(recs)["fields"]["entries"][0]["location"][0]
        return pick(recs, 5, "INODE_ITEM", lambda r: r["key"][0] == ino)
    return choose


def file_with_extents(recs):
    """A regular file of the top subvolume with regular (not inline) extents, one name."""
    regular = {r["key"][0] for r in recs if r.get("type") == "EXTENT_DATA" and r["tree"] == 5 and
               r["fields"].get("type") == 1}
    return pick(recs, 5, "INODE_ITEM", lambda r: r["key"][0] in regular and r["fields"]["nlink"] == 1 and
                r["fields"]["mode"] & S_IFMT == 0o100000)


def a_directory(recs):
    """A directory of the top subvolume that holds entries, not the top one."""
    dirs = {r["key"][0] for r in recs if r.get("type") == "DIR_INDEX" and r["tree"] == 5}
    return pick(recs, 5, "INODE_ITEM", lambda r: r["key"][0] in dirs and r["key"][0] > 256)


def value_of(v, recs):
    return v(recs) if callable(v) else v


# id: (record chooser, field, value (or a function of the records), the problem id it must cause)
VARIANTS = {
    "root-refs-high": (root_item("subvol"), "refs", "+1", "root-item-bad"),
    "root-refs-zero-linked": (root_item("snap"), "refs", "0", "root-item-bad"),
    "top-refs-zero": (lambda recs: pick(recs, 1, "ROOT_ITEM", lambda r: r["key"][0] == 5), "refs", "0",
                      "root-item-bad"),
    "root-drop-level": (root_item("subvol"), "drop_level", "8", "root-item-bad"),
    "root-level": (root_item("subvol-snap-ro"), "level", "8", "root-item-bad"),
    "subvol-entry-id": (entry("DIR_ITEM", "subvol"), "location.objectid", "0", "item-malformed"),
    "subvol-index-other": (entry("DIR_INDEX", "subvol"), "location.objectid",
                           lambda recs: str(subvol_id(recs, "subvol-snap-ro")), "root-dir-entry-missing"),
    "subvol-entry-name": (entry("DIR_ITEM", "snap"), "name", "^01", "name-hash"),
    "subvol-entry-type": (entry("DIR_INDEX", "subvol"), "type", "1", "dir-entry-type"),
    "file-entry-root-location": (entry("DIR_ITEM", "small3"), "location.type", "132", "dir-item-missing"),
    "xattr-type": (lambda recs: pick(recs, 5, "XATTR_ITEM"), "type", "0", "dir-entry-type"),
    "flags-garbage": (inode_named("random-3M"), "flags", "0xffffffffffffffff", "inode-flags-unknown"),
    "dir-mode-file": (a_directory, "mode", str(0o100644), "inode-type-items"),
    "file-mode-dir": (file_with_extents, "mode", str(0o40755), "inode-type-items"),
    "file-mode-symlink": (file_with_extents, "mode", str(0o120777), "inode-type-items"),
    "data-extent-full-backref": (lambda recs: pick(recs, 2, "EXTENT_ITEM", lambda r: r["fields"]["flags"] == 1),
                                 "flags", "^0x100", "extent-type"),
    "root-ref-name-len-0": (lambda recs: pick(recs, 1, "ROOT_REF"), "name_len", "0", "item-malformed"),
    "root-backref-name-len": (lambda recs: pick(recs, 1, "ROOT_BACKREF"), "name_len", "+1", "item-malformed"),
}
# the mode and flag cases again without no-holes (4K nodes): the repair that followed the mode
# punched holes there
OLD_STYLE = ["dir-mode-file", "file-mode-dir", "flags-garbage", "root-refs-high", "subvol-entry-id"]
# one of each kind of fix in the default run, and one without no-holes in the plain pass; the
# rest (about 10 s each) only in make check-extended: CI has to stay within its time
QUICK = {"root-refs-zero-linked", "root-level", "subvol-index-other", "file-entry-root-location", "dir-mode-file",
         "flags-garbage", "data-extent-full-backref", "root-ref-name-len-0"}


def _marks(recipe, variant):
    if recipe == SIMPLE and variant in QUICK:
        return ()
    return pytest.mark.slow if recipe == NO_HOLES_OFF and variant == "dir-mode-file" else pytest.mark.extended


CASES = [pytest.param(r, v, id=f"{r}-{v}", marks=_marks(r, v))
         for r, vs in ((SIMPLE, VARIANTS), (NO_HOLES_OFF, OLD_STYLE)) for v in vs]


@pytest.mark.parametrize("recipe,variant", CASES)
def test_item_damage_mended(recipe, variant, tmp_path):
    require_btk("btk-check")
    name = needs(recipe)
    devs = kernel_fs(name).copy_to(tmp_path)
    want = original_hashes(name)
    base_rc, base_ids, _ = baseline(name)
    choose, field, value, problem = VARIANTS[variant]
    recs = records(devs)
    rec = choose(recs)
    corrupt(devs, "-t", str(rec["tree"]), "-k", key_arg(rec["key"]), "-f", field, "-v", value_of(value, recs))
    damaged = image_digest(devs[0])

    rc, objs, p = check(devs)
    assert rc == 4 and problem in problem_ids(objs[0]), p.stdout

    objs = repair_and_verify(devs, tmp_path, base_rc, damaged, want)
    assert left_after(objs, base_ids) == list(base_ids), objs[-1]
