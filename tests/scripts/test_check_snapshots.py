# SPDX-License-Identifier: GPL-2.0-only
"""btk-check on snapshot lineages (doc/design.md, "Snapshots"): snapshots are
checked as deltas of one another, and a problem in a block several of them
share is reported once, naming them. Every damage is also checked with the
deltas off (BTK_CHECK_NO_SNAP_DELTA=1, each tree in full): the (problem, root)
pairs must be the same, and the reference `btrfs check` must fail too."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import fsbuild
from conftest import btk_path, parse_jsonl, run_btk, skip_or_fail

# vol: 3 directories of 500 files (4 KiB nodes: many leaves), a hard link
# across directories; s0..s3 read-only snapshots with changes between them
# (a create, a hard link into another directory, a rename); `gone` has two
# snapshots g0, g1 and is deleted (their parent no longer exists).
BUILD = r"""
set -e
IMG=$1
truncate -s 160M $IMG
mkfs.btrfs -q -f -n 4096 $IMG
M=$(mktemp -d); L=$(losetup -f --show $IMG)
trap 'umount $M 2>/dev/null; losetup -d $L; rmdir $M' EXIT
mount $L $M
btrfs -q subvolume create $M/vol
for d in a b c; do mkdir $M/vol/$d; for i in $(seq -w 1 500); do echo "$d $i" > $M/vol/$d/f$i; done; done
ln $M/vol/a/f001 $M/vol/b/link1
btrfs -q subvolume snapshot -r $M/vol $M/s0
echo new > $M/vol/c/new1
btrfs -q subvolume snapshot -r $M/vol $M/s1
ln $M/vol/a/f002 $M/vol/c/hl2
btrfs -q subvolume snapshot -r $M/vol $M/s2
mv $M/vol/b/f100 $M/vol/c/moved
btrfs -q subvolume snapshot -r $M/vol $M/s3
btrfs -q subvolume create $M/gone
for i in $(seq 1 60); do echo $i > $M/gone/g$i; done
btrfs -q subvolume snapshot -r $M/gone $M/g0
echo x > $M/gone/gx
btrfs -q subvolume snapshot -r $M/gone $M/g1
btrfs -q subvolume delete $M/gone >/dev/null
sync -f $M
"""


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    if os.geteuid() != 0 or not shutil.which("mkfs.btrfs"):
        skip_or_fail("needs root and mkfs.btrfs (loop mount)")
    img = tmp_path_factory.mktemp("snaps") / "snaps.img"
    p = subprocess.run(["bash", "-c", BUILD, "build", str(img)], capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        skip_or_fail(f"cannot build the snapshot image: {p.stderr[-2000:]}")
    fsbuild.drop_mkfs_leftovers([img])
    return img


@pytest.fixture(scope="module")
def layout(image):
    return Layout(image)


def tree_records(img) -> list[dict]:
    p = run_btk("btk-inspect", "tree", "--format", "jsonl", img)
    assert p.returncode == 0, p.stderr[-2000:]
    return parse_jsonl(p.stdout)


class Layout:
    """Which subvolume is which tree, and which leaf holds each item of each tree."""

    def __init__(self, img):
        self.recs = tree_records(img)
        self.ids = {r["fields"]["name"]: r["key"][2] for r in self.recs
                    if r.get("type") == "ROOT_REF" and r["tree"] == 1}
        self.leaf = {}   # (tree, key) -> leaf bytenr
        self.by_key: dict[tuple, dict[int, int]] = {}   # key -> {tree: leaf bytenr}
        for r in self.recs:
            if "type" in r and r["tree"] in self.ids.values():
                self.leaf[(r["tree"], tuple(r["key"]))] = r["block"]
                self.by_key.setdefault(tuple(r["key"]), {})[r["tree"]] = r["block"]

    def item(self, tree: str, type_: str, pred=lambda r: True) -> dict:
        t = self.ids[tree]
        return next(r for r in self.recs if r["tree"] == t and r.get("type") == type_ and pred(r))

    def ino(self, tree: str, dirname: str, name: str) -> int:
        d = self.dir_ino(tree, dirname)
        r = self.item(tree, "DIR_INDEX", lambda r: r["key"][0] == d and r["fields"]["entries"][0]["name"] == name)
        return r["fields"]["entries"][0]["location"][0]

    def dir_ino(self, tree: str, dirname: str) -> int:
        r = self.item(tree, "DIR_INDEX", lambda r: r["key"][0] == 256 and r["fields"]["entries"][0]["name"] == dirname)
        return r["fields"]["entries"][0]["location"][0]

    def sharing(self, tree: str, key) -> set[int]:
        """The trees whose copy of key is in the same leaf as tree's."""
        where = self.by_key[tuple(key)]
        return {t for t, b in where.items() if b == where[self.ids[tree]]}


def corrupt(img, tree_id: int, key, *change):
    tool = btk_path("tests/tools/btk-corrupt")
    if not tool.exists():
        skip_or_fail(f"{tool} is not built (make test-tools)")
    p = subprocess.run([str(tool), "--tree", str(tree_id), "--key", ",".join(map(str, key)), *change, str(img)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def check(img, full=False) -> tuple[int, list[dict], str]:
    env = dict(os.environ)
    if full:
        env["BTK_CHECK_NO_SNAP_DELTA"] = "1"
    p = subprocess.run([str(btk_path("btk-check")), "-v", "--format", "json", str(img)], capture_output=True,
                       text=True, env=env, timeout=300)
    assert p.returncode in (0, 4), p.stderr[-3000:]
    return p.returncode, json.loads(p.stdout)["problems"], p.stderr


def pairs(problems) -> set[tuple[str, int | None]]:
    """(problem id, root) for every root a report names."""
    out = set()
    for x in problems:
        m = re.match(r"root (\d+)", x["detail"])
        for root in x.get("roots") or [int(m.group(1)) if m else None]:
            out.add((x["id"], root))
    return out


def damaged_copy(image, tmp_path) -> Path:
    img = tmp_path / "d.img"
    subprocess.run(["cp", "--sparse=always", str(image), str(img)], check=True)
    return img


def check_both(img):
    """The delta check's problems; its (problem, root) pairs equal the full check's; btrfs check fails."""
    rc, probs, err = check(img)
    rc_full, probs_full, _ = check(img, full=True)
    assert rc == rc_full == 4
    assert pairs(probs) == pairs(probs_full), (probs, probs_full)
    ref = subprocess.run(["btrfs", "check", "--readonly", str(img)], capture_output=True, text=True, timeout=300)
    assert ref.returncode != 0, "btrfs check passed on a damaged image"
    return probs, err


def reported_once(image, lay, tmp_path, tree: str, key, change: list[str], problem: str):
    """Damage key of tree in place: one report of problem, naming every tree that shares its leaf."""
    img = damaged_copy(image, tmp_path)
    corrupt(img, lay.ids[tree], key, *change)
    probs, _ = check_both(img)
    found = [p for p in probs if p["id"] == problem]
    assert len(found) == 1 and set(found[0]["roots"]) == lay.sharing(tree, key), found


def test_clean_lineages_are_checked_as_deltas(image):
    rc, probs, err = check(image)
    assert rc == 0 and probs == []
    m = re.search(r"reused (\d+); (\d+) snapshot\(s\) checked as deltas", err)
    assert m and int(m.group(1)) > 0 and int(m.group(2)) == 5, err   # s1 s2 s3 vol, g1


def test_shared_leaf_damage_reported_once_naming_all_roots(image, layout, tmp_path):
    lay = layout
    ino = lay.ino("s0", "a", "f050")
    key = (ino, 1, 0)
    assert len(lay.sharing("s0", key)) >= 3   # the leaf of an untouched file: shared by the lineage
    reported_once(image, lay, tmp_path, "s0", key, ["--field", "nlink", "--value", "+1"], "inode-nlink")


def test_private_leaf_damage_reported_for_that_root_only(image, layout, tmp_path):
    lay = layout
    s1 = lay.ids["s1"]
    key = next(k for (t, k) in lay.leaf if t == s1 and k[1] == 1 and k[0] > 256 and lay.sharing("s1", k) == {s1})
    img = damaged_copy(image, tmp_path)
    corrupt(img, s1, key, "--field", "nlink", "--value", "+1")
    probs, _ = check_both(img)
    assert pairs(probs) == {("inode-nlink", s1)}, probs
    assert len(probs) == 1 and "roots" not in probs[0]


def test_damage_below_a_node_shared_by_some_snapshots(image, layout, tmp_path):
    """A leaf under a node that some members share and others do not."""
    lay = layout
    lineage = {lay.ids[n] for n in ("vol", "s0", "s1", "s2", "s3")}
    node_trees: dict[int, set[int]] = {}
    parent = {}
    for r in lay.recs:
        if "blockptr" in r and r["tree"] in lineage and r["level"] == 1:
            node_trees.setdefault(r["block"], set()).add(r["tree"])
            parent[r["blockptr"]] = r["block"]
    partial = {b for b, ts in node_trees.items() if 1 < len(ts) < len(lineage)}
    assert partial, "no level-1 node shared by only some snapshots"
    names = {i: n for n, i in lay.ids.items()}
    ok = [(t, k) for (t, k), b in lay.leaf.items() if t in lineage and k[1] == 1 and k[0] > 256
          and parent.get(b) in partial and 1 < len(lay.sharing(names[t], k)) < len(lineage)]
    assert ok, "no leaf shared by only some snapshots below such a node"
    tree, key = ok[0]
    sharing = lay.sharing(names[tree], key)
    img = damaged_copy(image, tmp_path)
    corrupt(img, tree, key, "--field", "nlink", "--value", "+1")
    probs, _ = check_both(img)
    assert {r for (_, r) in pairs(probs)} == sharing
    assert 1 < len(sharing) < len(lineage), sharing


def test_inode_straddling_a_shared_leaf_edge(image, layout, tmp_path):
    """Dir c changes in every snapshot (a leaf of its entries is private to
    each), another leaf of its entries stays shared: an entry damaged there
    is one problem for every tree holding that leaf."""
    lay = layout
    c = lay.dir_ino("s0", "c")
    idx = [tuple(r["key"]) for r in lay.recs if r["tree"] == lay.ids["s0"] and r.get("type") == "DIR_INDEX"
           and r["key"][0] == c]
    shared = [k for k in idx if len(lay.sharing("s0", k)) >= 3]
    assert shared, "no shared leaf of dir c's entries"
    reported_once(image, lay, tmp_path, "s0", shared[0], ["--field", "type", "--value", "7"], "dir-entry-type")


def test_hard_link_across_directories_in_private_blocks(image, layout, tmp_path):
    """c/hl2 (a link of a/f002) first exists in s2; its dir index deleted
    there: the trees holding that leaf lose the name, no other."""
    lay = layout
    c = lay.dir_ino("s2", "c")
    rec = lay.item("s2", "DIR_INDEX", lambda r: r["key"][0] == c and r["fields"]["entries"][0]["name"] == "hl2")
    key = tuple(rec["key"])
    sharing = lay.sharing("s2", key)
    assert lay.ids["s0"] not in sharing and lay.ids["s1"] not in sharing
    img = damaged_copy(image, tmp_path)
    corrupt(img, lay.ids["s2"], key, "--delete")
    probs, _ = check_both(img)
    assert {r for (i, r) in pairs(probs) if i == "dir-index-missing"} == sharing, probs


def test_snapshots_of_a_deleted_subvolume(image, layout, tmp_path):
    lay = layout
    assert "gone" not in lay.ids
    g0 = lay.ids["g0"]
    ino = lay.item("g0", "DIR_INDEX", lambda r: r["key"][0] == 256 and
                   r["fields"]["entries"][0]["name"] == "g5")["fields"]["entries"][0]["location"][0]
    key = (ino, 1, 0)
    assert lay.sharing("g0", key) == {g0, lay.ids["g1"]}
    reported_once(image, lay, tmp_path, "g0", key, ["--field", "nlink", "--value", "+1"], "inode-nlink")


def test_unreadable_shared_leaf_reported_once(image, layout, tmp_path):
    """A leaf every member of the lineage shares, unreadable (checksum wrong
    in both copies): one tree-block report naming the trees that reached it,
    one report of the lost keys naming every tree that holds the leaf, the
    same with the deltas off; btrfs check fails too."""
    lay = layout
    key = (lay.ino("s0", "a", "f050"), 1, 0)
    sharing = lay.sharing("s0", key)
    assert len(sharing) >= 3
    leaf = lay.leaf[(lay.ids["s0"], key)]
    img = damaged_copy(image, tmp_path)
    tool = btk_path("tests/tools/btk-corrupt")
    if not tool.exists():
        skip_or_fail(f"{tool} is not built (make test-tools)")
    p = subprocess.run([str(tool), "--block", str(leaf), "--offset", "200", "--bytes", "ff", "--no-csum", str(img)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    probs, _ = check_both(img)
    blocks = [x for x in probs if x["id"] == "tree-block-unreadable"]
    lost = [x for x in probs if x["id"] == "tree-root-unreadable"]
    assert len(blocks) == 1 and f"block {leaf} " in blocks[0]["detail"], probs
    assert set(blocks[0].get("roots") or [int(re.match(r"tree (\d+)", blocks[0]["detail"]).group(1))]) <= sharing
    assert len(lost) == 1 and set(lost[0]["roots"]) == sharing, lost
    assert f"[in {len(sharing)} roots:" in lost[0]["detail"]
