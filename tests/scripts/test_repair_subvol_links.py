# SPDX-License-Identifier: GPL-2.0-only
"""Root items, root refs and subvolume links, damaged one way each on a small filesystem with
nested subvolumes, a subvolume in a directory, a snapshot of a subvolume and a read-only snapshot
of the top level: btk-check finds each, --repair (classes root-item-fields, subvol-links,
root-items, which also makes a lost subvolume root item again) leaves btk-check and the reference `btrfs check` clean, the kernel reads every file as
before the damage (or, for a subvolume no name survives, under /lost+found), and btk-undo puts the
damaged image back byte for byte. btrfs-progs 7.3, where installed, is asked too: what it says of
the damage (it repairs none of the link kinds and cannot open the misdirected extent root), and
that btk's result passes it.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

import fsbuild
from conftest import images_digest, require_btk, require_kernel, require_reference_tools, run_btk
from test_repair import check, corrupt, problem_ids

MiB = 1 << 20
LATEST = Path("/opt/btrfs-progs-latest/bin/btrfs")
SV1, NESTED, SV2, SNAP1, SNAPRO = 256, 257, 258, 259, 260


def items(img: Path, tree: int) -> list[dict]:
    p = run_btk("btk-inspect", "tree", "--format", "jsonl", "--tree", str(tree), img)
    return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]


def root_item(img: Path, oid: int) -> dict:
    (r,) = [r for r in items(img, 1) if r.get("type") == "ROOT_ITEM" and r["key"][0] == oid]
    return r


def key_of(r: dict) -> str:
    return ",".join(map(str, r["key"]))


def entries(img: Path, parent: int, child: int, kind: str) -> list[dict]:
    return [r for r in items(img, parent) if r.get("type") == kind and
            any(e["location"][:2] == [child, 132] for e in r["fields"]["entries"])]


def listing(mnt: Path) -> dict[str, str]:
    out = {}
    for root, dirs, files in os.walk(mnt):
        for name in dirs:
            out[str((Path(root) / name).relative_to(mnt)) + "/"] = "dir"
        for name in files:
            p = Path(root) / name
            out[str(p.relative_to(mnt))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """sv1 (nested inside), d1/sv2, snap1 (of sv1), snapro (read-only, of the top level); 4K nodes,
    no skinny metadata, no no-holes (old filesystems' layout): its image and what the kernel reads."""
    require_btk("btk-check")
    require_kernel()
    require_reference_tools()
    img = tmp_path_factory.mktemp("subvol-links") / "base.img"
    with open(img, "wb") as f:
        f.truncate(160 * MiB)
    fsbuild.mkfs([img], "-q", "-f", "-n", "4k", "-O", "^skinny-metadata,^no-holes")
    with fsbuild.attached([img]) as loops, fsbuild.mounted(loops) as mnt:
        (mnt / "f1").write_bytes(b"top\n")
        (mnt / "d1").mkdir()
        fsbuild.run(["btrfs", "-q", "subvolume", "create", mnt / "sv1"])
        (mnt / "sv1" / "g1").write_bytes(os.urandom(9000))
        fsbuild.run(["btrfs", "-q", "subvolume", "create", mnt / "sv1" / "nested"])
        (mnt / "sv1" / "nested" / "n1").write_bytes(b"nested\n")
        fsbuild.run(["btrfs", "-q", "subvolume", "create", mnt / "d1" / "sv2"])
        (mnt / "d1" / "sv2" / "h1").write_bytes(b"sv2\n")
        fsbuild.run(["btrfs", "-q", "subvolume", "snapshot", mnt / "sv1", mnt / "snap1"])
        (mnt / "snap1" / "g1").write_bytes(b"changed\n")
        fsbuild.run(["btrfs", "-q", "subvolume", "snapshot", "-r", mnt, mnt / "snapro"])
    with fsbuild.attached([img], readonly=True) as loops, fsbuild.mounted(loops, ["ro"]) as mnt:
        files = listing(mnt)
    ids = {r["key"][0] for r in items(img, 1) if r.get("type") == "ROOT_ITEM"}
    assert {SV1, NESTED, SV2, SNAP1, SNAPRO} <= ids, ids
    return img, files


def ref(parent, child, field, value, back=False):
    k = f"{child},ROOT_BACKREF,{parent}" if back else f"{parent},ROOT_REF,{child}"
    return lambda img: corrupt([img], "-t", "1", "-k", k, "-f", field, "-v", value)


def del_refs(parent, child):
    def damage(img):
        corrupt([img], "-t", "1", "-k", f"{parent},ROOT_REF,{child}", "-d")
        corrupt([img], "-t", "1", "-k", f"{child},ROOT_BACKREF,{parent}", "-d")
    return damage


def del_entries(parent, child, kinds=("DIR_ITEM", "DIR_INDEX")):
    def damage(img):
        for kind in kinds:
            for r in entries(img, parent, child, kind):
                corrupt([img], "-t", str(parent), "-k", key_of(r), "-d")
    return damage


def entries_at(parent, child, other):
    def damage(img):
        for kind in ("DIR_ITEM", "DIR_INDEX"):
            for r in entries(img, parent, child, kind):
                corrupt([img], "-t", str(parent), "-k", key_of(r), "-f", "location.objectid", "-v", str(other))
    return damage


def del_root_item(oid):
    return lambda img: corrupt([img], "-t", "1", "-k", key_of(root_item(img, oid)), "-d")


def root_field(oid, field, value):
    return lambda img: corrupt([img], "-t", "1", "-k", key_of(root_item(img, oid)), "-f", field, "-v", value)


def extent_root_at(other):
    def damage(img):
        corrupt([img], "-t", "1", "-k", "2,ROOT_ITEM,0", "-f", "bytenr", "-v",
                str(root_item(img, other)["fields"]["bytenr"]))
    return damage


def root_block_extent_generation(oid, delta):
    def damage(img):
        b = root_item(img, oid)["fields"]["bytenr"]
        (r,) = [r for r in items(img, 2) if r["key"][0] == b and r.get("type") in ("EXTENT_ITEM", "METADATA_ITEM")]
        corrupt([img], "-t", "2", "-k", key_of(r), "-f", "generation", "-v", delta)
    return damage


def both(*damages):
    def damage(img):
        for d in damages:
            d(img)
    return damage


# (id, damage, a problem btk finds, whether 7.3 finds it, whether files move to /lost+found)
CASES = [
    ("ref-name", ref(5, SV1, "name", "^01"), "root-ref-mismatch", True, False),
    ("backref-sequence", ref(5, SV1, "sequence", "+5", back=True), "root-ref-mismatch", True, False),
    ("nested-backref-dirid", ref(SV1, NESTED, "dirid", "+1", back=True), "root-ref-mismatch", True, False),
    ("dir-index-gone", del_entries(5, SV1, ("DIR_INDEX",)), "root-dir-entry-missing", True, False),
    ("dir-item-gone", del_entries(5, SV2, ("DIR_ITEM",)), "root-dir-entry-missing", True, False),
    ("nested-entries-gone", del_entries(SV1, NESTED), "root-dir-entry-missing", True, False),
    ("entries-name-no-subvolume", entries_at(5, SNAP1, 999), "root-dir-entry-missing", True, False),
    ("nested-refs-gone", del_refs(SV1, NESTED), "root-unreferenced", True, False),
    ("refs-and-source-entries-gone", both(del_refs(5, SV2), del_entries(5, SV2)), "root-unreferenced", True, False),
    ("no-name-left", both(del_refs(5, SNAPRO), del_entries(5, SNAPRO)), "root-unreferenced", True, True),
    ("root-item-gone", del_root_item(SV2), "root-dir-entry-dangling", True, False),
    ("nested-root-item-gone", del_root_item(NESTED), "root-dir-entry-dangling", True, False),
    ("unknown-flags", root_field(SV1, "flags", "0x100"), "root-item-bad", False, False),
    ("last-snapshot-future", root_field(SV2, "last_snapshot", "+100"), "root-item-bad", False, False),
    ("generation-v2-future", root_field(NESTED, "generation_v2", "+100"), "root-item-bad", False, False),
    ("root-dirid", root_field(NESTED, "root_dirid", "300"), "root-item-bad", True, False),
    ("level", root_field(SV2, "level", "1"), "root-item-bad", True, False),
    ("extent-root-elsewhere", extent_root_at(7), "root-item-bad", True, False),
    ("extent-root-level", root_field(2, "level", "1"), "root-item-bad", True, False),
    ("root-block-extent-generation", root_block_extent_generation(SV1, "-1"), "extent-generation", True, False),
]


@pytest.mark.parametrize("name,damage,problem,progs_finds,lost", CASES, ids=[c[0] for c in CASES])
def test_repair_subvol_link_or_root_item(base, tmp_path, name, damage, problem, progs_finds, lost):
    img0, files = base
    img = tmp_path / "img"
    fsbuild.run(["cp", "--sparse=always", img0, img])
    damage(img)
    damaged = images_digest([img])
    rc, objs, p = check([img])
    assert rc == 4 and problem in problem_ids(objs[0]), p.stdout
    if LATEST.exists():
        r = fsbuild.run([LATEST, "check", "--readonly", img], check=False)
        assert (r.returncode != 0) == progs_finds, r.stdout + r.stderr

    undo = tmp_path / "undo"
    rc, objs, p = check([img], "--repair", "--yes", "--undo-file", undo)
    assert rc == 1, f"repair exit {rc}\n{p.stdout}{p.stderr}"
    rc, objs, p = check([img])
    assert rc == 0, p.stdout
    for progs in ["btrfs"] + ([LATEST] if LATEST.exists() else []):
        r = fsbuild.run([progs, "check", "--readonly", img], check=False)
        assert r.returncode == 0, f"{progs}:\n{r.stdout}{r.stderr}"
    with fsbuild.attached([img], readonly=True) as loops, fsbuild.mounted(loops, ["ro"]) as mnt:
        now = listing(mnt)
    if lost:
        moved = {k.replace("lost+found/subvol-260/", "snapro/"): v for k, v in now.items()
                 if k.startswith("lost+found/subvol-260/")}
        assert moved == {k: v for k, v in files.items() if k.startswith("snapro/")}, now
    else:
        assert now == files

    r = run_btk("btk-undo", undo, img)
    assert r.returncode == 0, r.stderr
    assert images_digest([img]) == damaged
