# SPDX-License-Identifier: GPL-2.0-only
"""A data chunk's item lost (deleted) or malformed (left out of the chunk map): btk-check now
reports block-group-no-chunk (btrfs check: the block group "didn't find the relative chunk"), and
the chunk-items class makes the chunk item again from its block group and dev extents. After
btrfs check --repair 7.3 the reference check is clean, but the kernel refuses to mount ("found bg
but no related chunk", measured on a 16K DUP image). Each variant: btk repairs, btk-check and the
reference check are clean, the kernel reads every file as before the damage, the undo file gives
the damaged image back. Single, DUP and RAID1 data (their stripes each hold the whole chunk)."""
from __future__ import annotations

import json
import subprocess

import pytest

from conftest import require_btk, run_btk, images_digest
from test_repair import baseline, check, corrupt, problem_ids
from test_tune import check_devices, kernel_fs, kernel_verify, needs, original_hashes


def data_chunk(devs) -> int:
    p = run_btk("btk-inspect", "tree", "--format", "jsonl", "-t", "chunk", *devs)
    assert p.returncode == 0, p.stderr
    chunks = [json.loads(l) for l in p.stdout.splitlines() if '"CHUNK_ITEM"' in l]
    data = [c for c in chunks if c["fields"]["type"] & 1 and not c["fields"]["type"] & 6]
    assert data, "no data chunk"
    return max(data, key=lambda c: c["fields"]["length"])["key"][2]


DAMAGE = {
    "deleted": ("-d",),
    "no-stripes": ("-f", "num_stripes", "-v", "0"),
    "size-mismatch": ("-f", "num_stripes", "-v", "+1"),
}


# single data (16K nodes), DUP data (4K nodes, no no-holes), RAID1 data on two devices
@pytest.mark.parametrize("name,damage", [("s16k-crc32c-zstd", "deleted"), ("s16k-crc32c-zstd", "no-stripes"),
                                         ("s4k-xxhash-holes-lzo", "deleted"), ("raid1-2dev", "size-mismatch")])
def test_lost_chunk_item_made_again(name, damage, tmp_path):
    require_btk("btk-check")
    devs = kernel_fs(name).copy_to(tmp_path)
    want = original_hashes(name)
    base_rc, base_ids, _ = baseline(name)
    logical = data_chunk(devs)
    corrupt(devs, "-t", "chunk", "-k", f"256,CHUNK_ITEM,{logical}", *DAMAGE[damage])
    damaged = images_digest(devs)

    rc, objs, p = check(devs)
    assert rc == 4 and "block-group-no-chunk" in problem_ids(objs[0]), p.stdout

    undo = tmp_path / "u.undo"
    rc, objs, p = check(devs, "--repair", "--yes", "--undo-file", undo)
    assert rc == (1 if base_rc == 0 else 4), f"{p.stdout}\n{p.stderr}"
    assert "chunk-items" in {a["class"] for a in objs[1]["repairs"]}, objs[1]
    left = [i for i in problem_ids(objs[-1]) if i != "qgroup-inconsistent" or i in base_ids]
    assert left == list(base_ids), p.stdout
    assert data_chunk(devs) == logical
    check_devices(devs)

    rolled = [tmp_path / f"rolled-{i}.img" for i in range(len(devs))]
    for d, r in zip(devs, rolled):
        subprocess.run(["cp", "--sparse=always", d, r], check=True)
    p = run_btk("btk-undo", undo, *rolled)
    assert p.returncode == 0, p.stderr
    assert images_digest(rolled) == damaged, "undo did not give the damaged image back"
    kernel_verify(devs, want, write=False)


def test_striped_chunk_is_left(tmp_path):
    """A RAID0 chunk's stripe order is not in its dev extents: its lost item is reported and
    left (exit 4), and nothing is written."""
    require_btk("btk-check")
    name = needs("raid0-2dev-blake2")
    devs = kernel_fs(name).copy_to(tmp_path)
    logical = data_chunk(devs)
    corrupt(devs, "-t", "chunk", "-k", f"256,CHUNK_ITEM,{logical}", "-d")
    damaged = images_digest(devs)
    rc, objs, p = check(devs, "--repair", "--yes", "--no-undo")
    assert rc == 4 and "block-group-no-chunk" in problem_ids(objs[-1]), p.stdout
    assert any("left" in a["action"] for a in objs[1]["repairs"] if a["class"] == "chunk-items"), objs[1]
    assert images_digest(devs) == damaged


def system_chunk(devs) -> int:
    p = run_btk("btk-inspect", "tree", "--format", "jsonl", "-t", "chunk", *devs)
    return next(json.loads(l)["key"][2] for l in p.stdout.splitlines()
                if '"CHUNK_ITEM"' in l and json.loads(l)["fields"]["type"] & 2)


def test_system_chunk_sub_stripes_differ(tmp_path):
    """A DUP system chunk whose chunk-tree item says sub_stripes 0 while the superblock's array
    says 1: nothing is placed differently (sub_stripes places data in RAID10 only), the kernel
    and btrfs check take it, and btk-check's array-against-tree comparison flagged it. The array
    repair left it ('placed elsewhere'); now the array is rebuilt from the tree."""
    require_btk("btk-check")
    name = needs("s16k-crc32c-zstd")
    devs = kernel_fs(name).copy_to(tmp_path)
    want = original_hashes(name)
    base_rc, base_ids, _ = baseline(name)
    corrupt(devs, "-t", "chunk", "-k", f"256,CHUNK_ITEM,{system_chunk(devs)}", "-f", "sub_stripes", "-v", "0")
    rc, objs, p = check(devs, "--repair", "--yes", "--no-undo")
    assert rc == (1 if base_rc == 0 else 4), f"{p.stdout}\n{p.stderr}"
    assert "sys-chunk-array" in {a["class"] for a in objs[1]["repairs"]}, objs[1]
    assert problem_ids(objs[-1]) == list(base_ids), p.stdout
    check_devices(devs)
    kernel_verify(devs, want, write=False)
