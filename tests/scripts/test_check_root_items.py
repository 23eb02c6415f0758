# SPDX-License-Identifier: GPL-2.0-only
"""Root items that point at an older root block of their tree (btrfs-progs fsck-tests 006: a lost
root item update). The extent tree still holds the newest root block; btk-check reports the root
item outdated and --repair points it back at that block, as `btrfs check --repair` does, instead
of rewriting the extent tree to the old tree (which loses the newest changes). The repaired
filesystem holds the newest files.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import fsbuild
from conftest import require_btk, require_kernel, require_reference_tools, run_btk
from test_repair import check, corrupt, problem_ids

MiB = 1 << 20
LATEST = Path("/opt/btrfs-progs-latest/bin")


def progs(tool: str) -> str:
    return str(LATEST / tool) if (LATEST / tool).exists() else tool


def root_item(img: Path, tree: int) -> dict:
    p = run_btk("btk-inspect", "tree", "--format", "jsonl", "--tree", "1", img)
    for line in p.stdout.splitlines():
        r = json.loads(line)
        if r.get("type") == "ROOT_ITEM" and r["key"][0] == tree:
            return r
    raise LookupError(tree)


def write_files(d: Path, names):
    for n in names:
        (d / n).write_bytes(f"{n}\n".encode())


def listing(mnt: Path) -> dict[str, bytes]:
    out = {}
    for root, _, files in os.walk(mnt):
        for f in files:
            p = Path(root) / f
            out[str(p.relative_to(mnt))] = p.read_bytes()
    return out


# "bytenr": only the root item's bytenr and level lost the update, its generation is the newest
# block's (the old block then fails the transid check as well: the salvage leaves that tree alone)
@pytest.mark.parametrize("tree,grow,lost", [(256, False, "all"), (256, True, "all"), (5, False, "all"),
                                            (256, True, "bytenr"), (5, False, "bytenr")])
def test_outdated_root_item(tmp_path, tree, grow, lost):
    require_btk("btk-check")
    require_kernel()
    img = tmp_path / "img"
    with open(img, "wb") as f:
        f.truncate(256 * MiB)
    fsbuild.mkfs([img], "-q", "-f", "-n", "4k", tool=progs("mkfs.btrfs"))
    with fsbuild.attached([img]) as loops, fsbuild.mounted(loops) as mnt:
        fsbuild.run(["btrfs", "subvolume", "create", mnt / "sv"])
        write_files(mnt / "sv", [f"a{i}" for i in range(4 if grow else 40)])
        write_files(mnt, [f"t{i}" for i in range(40)])
    old = root_item(img, tree)["fields"]
    with fsbuild.attached([img]) as loops, fsbuild.mounted(loops) as mnt:
        d = mnt / "sv" if tree == 256 else mnt
        write_files(d, [f"b{i}" for i in range(400 if grow else 20)])
        for i in range(3 if grow else 10):
            (d / (f"a{i}" if tree == 256 else f"t{i}")).unlink()
        newest = listing(mnt)
    new = root_item(img, tree)["fields"]
    assert new["bytenr"] != old["bytenr"] and (new["level"] > old["level"]) == grow
    for field in ("bytenr", "level") if lost == "bytenr" else ("bytenr", "generation", "generation_v2", "level"):
        corrupt([img], "--tree", "1", "--key", f"{tree},ROOT_ITEM,0", "--field", field, "--value", str(old[field]))

    rc, objs, p = check([img])
    assert rc == 4 and "root-item-outdated" in problem_ids(objs[0]), p.stdout
    rc, objs, p = check([img], "--repair", "--yes", "--no-undo")
    assert rc == 1, f"repair exit {rc}\n{p.stdout}{p.stderr}"
    assert {a["class"] for a in objs[1]["repairs"] if a.get("changes", 1)} >= {"root-items"}, objs[1]
    assert {a["class"] for a in objs[1]["repairs"]} <= {"root-items", "tree-salvage"}, objs[1]
    assert root_item(img, tree)["fields"]["bytenr"] == new["bytenr"]
    require_reference_tools()
    r = fsbuild.run([progs("btrfs"), "check", "--readonly", img], check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    with fsbuild.attached([img]) as loops, fsbuild.mounted(loops) as mnt:
        assert listing(mnt) == newest
