# SPDX-License-Identifier: GPL-2.0-only
"""btk-check --repair on damaged items of subvolume trees and their data extents: a file extent
whose disk bytenr lies inside another extent or outside every chunk, one whose disk length
differs from its extent item's, malformed name items, unknown inode flags, checksums of data
only NODATASUM files use, and zeroed compressed inline data (what btrfs-image leaves). Each:
the damage is found, --repair leaves btk-check and the reference `btrfs check` clean (btrfs
check 7.3 too where it is installed), and the kernel reads the files as before.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import dumptree
import fsbuild
import oracle
from conftest import built
from test_repair import check, corrupt, key_arg, problem_ids
from test_tune import needs, SIMPLE

LATEST = Path("/opt/btrfs-progs-latest/bin/btrfs")
NODATASUM = 1
BEYOND_CHUNKS = 1 << 40


def damaged(tmp_path: Path) -> list[Path]:
    needs(SIMPLE)
    return built(SIMPLE).copy_to(tmp_path / "devs")


def tree_items(devs, tree: str, type_name: str) -> list[dict]:
    return [it for it in dumptree.dump_tree(devs, "-t", tree).items if it["type"] == type_name]


def regular_extents(devs, tree: str = "5") -> list[dict]:
    """Uncompressed regular file extents that use the whole of their disk extent."""
    return [it for it in tree_items(devs, tree, "EXTENT_DATA")
            if it["fields"].get("type") == 1 and it["fields"].get("disk_bytenr")
            and it["fields"].get("compression") == 0 and it["fields"].get("offset") == 0
            and it["fields"]["num_bytes"] == it["fields"]["disk_num_bytes"] >= 8192]


def latest_check(devs) -> subprocess.CompletedProcess | None:
    """btrfs check 7.3 (the newest), when it is installed."""
    if not LATEST.exists() or len(devs) != 1:
        return None
    with fsbuild.fsid_lock(devs):
        return fsbuild.run([LATEST, "check", "--readonly", devs[0]], check=False, timeout=600)


def found(devs, want: str) -> set[str]:
    rc, objs, p = check(devs)
    ids = set(problem_ids(objs[0]))
    assert rc == 4 and want in ids, f"exit {rc}, {ids}\n{p.stderr}"
    return ids


def repaired(devs, classes: set[str]) -> None:
    """--repair --yes: the classes ran, exit 1, a second check clean, both reference checks
    agree (quota groups may be left for a rescan)."""
    rc, objs, p = check(devs, "--repair", "--yes", "--no-undo")
    assert rc == 1, f"repair exit {rc}\n{p.stdout}{p.stderr}"
    ran = {a["class"] for run in objs if "repairs" in run for a in run["repairs"]}
    assert classes <= ran, ran
    rc, objs, p = check(devs)
    left = set(problem_ids(objs[0])) - {"qgroup-inconsistent"}
    assert rc == 0 and not left, f"after the repair: exit {rc}, {left}\n{p.stderr}"
    oracle.reference_check(devs)
    p = latest_check(devs)
    assert p is None or p.returncode == 0, f"btrfs check 7.3:\n{p.stdout[-3000:]}{p.stderr[-3000:]}"


def hashes_except(devs, skip: str | None = None) -> dict[str, str]:
    h = oracle.snapshot_hashes(devs)
    return {k: v for k, v in h.items() if skip is None or not k.endswith(skip)}


def test_file_extent_disk_length(tmp_path):
    """A file extent's disk length halved: its extent item (holding its reference) says the
    length; the file extent gets it back, as btrfs check --repair does."""
    devs = damaged(tmp_path)
    before = oracle.snapshot_hashes(devs)
    it = regular_extents(devs)[0]
    corrupt(devs, "-t", "5", "-k", key_arg(it["key"]), "-f", "disk_num_bytes",
            "-v", str(it["fields"]["disk_num_bytes"] // 2 // 4096 * 4096))
    found(devs, "file-extent-bad-range")
    repaired(devs, {"file-extent-bytenr"})
    assert oracle.snapshot_hashes(devs) == before


def test_file_extent_bytenr_inside_another_extent(tmp_path):
    """A disk bytenr moved a sector into its own extent: the extent names the file in an unused
    reference, the bytenr goes back there (in every subvolume whose leaf holds it)."""
    devs = damaged(tmp_path)
    before = oracle.snapshot_hashes(devs)
    it = regular_extents(devs)[-1]
    corrupt(devs, "-t", "5", "-k", key_arg(it["key"]), "-f", "disk_bytenr", "-v", "+4096")
    found(devs, "file-extent-bad-range")
    repaired(devs, {"file-extent-bytenr"})
    assert oracle.snapshot_hashes(devs) == before


def test_file_extent_outside_every_chunk_becomes_hole(tmp_path):
    """A disk bytenr beyond every chunk whose extent item is gone too: nothing says where the
    data was, the file extent becomes a hole (the rest of the filesystem reads as before)."""
    devs = damaged(tmp_path)
    before = oracle.snapshot_hashes(devs)
    it = regular_extents(devs)[0]
    f = it["fields"]
    corrupt(devs, "-t", "5", "-k", key_arg(it["key"]), "-f", "disk_bytenr", "-v", str(BEYOND_CHUNKS))
    corrupt(devs, "-t", "extent", "-k", f"{f['disk_bytenr']},EXTENT_ITEM,{f['disk_num_bytes']}", "-d")
    found(devs, "data-extent-not-allocated")
    repaired(devs, {"file-extent-bytenr"})
    after = oracle.snapshot_hashes(devs)
    changed = {k for k in before if after.get(k) != before[k]}
    assert after.keys() == before.keys() and changed, "the hole changed no file"
    assert len({before[k] for k in changed}) == 1, changed  # one file (its hard links, its snapshot copy)


@pytest.mark.parametrize("type_name,field,value,classes", [
    ("INODE_REF", "name_len", "200", {"stray-items", "names"}),   # the name runs past the item
    ("DIR_INDEX", "data_len", "5", {"stray-items", "names"}),     # data after a dir entry's name
    ("DIR_ITEM", "name_len", "250", {"stray-items", "names"}),    # the name runs past the item
    # neither an inode nor a subvolume (btrfs check repairs it the same way)
    ("DIR_INDEX", "location.type", "99", {"stray-items", "names"}),
], ids=["ref-name-len", "dir-index-data-len", "dir-item-name-len", "dir-index-location"])
def test_malformed_name_item(tmp_path, type_name, field, value, classes):
    """A name item the kernel refuses the leaf for: deleted, then made again from its mirrors."""
    devs = damaged(tmp_path)
    before = oracle.snapshot_hashes(devs)
    items = [it for it in tree_items(devs, "5", type_name) if it["key"][0] != it["key"][2]]
    corrupt(devs, "-t", "5", "-k", key_arg(items[len(items) // 2]["key"]), "-f", field, "-v", value)
    found(devs, "item-malformed")
    repaired(devs, classes)
    assert oracle.snapshot_hashes(devs) == before


def test_unknown_inode_flags(tmp_path):
    """A directory with a flag no kernel defines: the kernel refuses its leaf (the mount fails
    when it is the top directory's); the flag is cleared."""
    devs = damaged(tmp_path)
    before = oracle.snapshot_hashes(devs)
    corrupt(devs, "-t", "5", "-k", "256,INODE_ITEM,0", "-f", "flags", "-v", "^0x40000000")
    found(devs, "inode-flags-unknown")
    repaired(devs, {"inodes"})
    assert oracle.snapshot_hashes(devs) == before


def test_checksums_of_nodatasum_only_data(tmp_path):
    """NODATASUM set on a file of a subvolume (and its snapshot) whose data no checksummed file
    shares: the checksums are removed, the data stays."""
    devs = damaged(tmp_path)
    before = oracle.snapshot_hashes(devs)
    subvols = {it["fields"]["name"]: it["key"][2] for it in tree_items(devs, "root", "ROOT_REF")
               if "name" in it["fields"]}
    ino = next(it["key"][0] for it in tree_items(devs, str(subvols["subvol"]), "INODE_REF")
               if it["fields"]["refs"][0]["name"] == "inside")
    for tree in (subvols["subvol"], subvols["subvol-snap-ro"]):
        (inode,) = [it for it in tree_items(devs, str(tree), "INODE_ITEM") if it["key"][0] == ino]
        corrupt(devs, "-t", str(tree), "-k", f"{ino},INODE_ITEM,0", "-f", "flags",
                "-v", str(inode["fields"]["flags"] | NODATASUM))
    found(devs, "csum-nodatasum")
    repaired(devs, {"csums"})
    assert oracle.snapshot_hashes(devs) == before


def test_zeroed_compressed_inline_extent_is_not_corrupt(tmp_path):
    """btrfs-image zeroes inline data: a compressed inline extent of zeros is what a restored
    metadata dump holds, not damage (btrfs check accepts it); bytes flipped in it still are."""
    devs = damaged(tmp_path)
    it = next(it for it in tree_items(devs, "5", "EXTENT_DATA")
              if it["fields"].get("type") == 0 and it["fields"].get("compression"))
    corrupt(devs, "-t", "5", "-k", key_arg(it["key"]), "-o", "21", "-B", "00" * (it["size"] - 21))
    rc, objs, p = check(devs)
    assert "inline-extent-corrupt" not in problem_ids(objs[0]), p.stdout
    p = latest_check(devs)
    assert p is None or p.returncode == 0
