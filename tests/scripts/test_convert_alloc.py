# SPDX-License-Identifier: GPL-2.0-only
"""btk-convert profile when its own transaction must allocate metadata and system chunks.

On a filesystem whose metadata block groups are full, the conversion's first tree block needs a
new chunk. BTK_TEST_ALLOC_FULL (libfs/alloc.c, for tests only) makes the allocator count every
block group that existed when the transaction started as full, so that happens on any filesystem,
and both kinds (the chunk tree's system blocks, the other trees' metadata blocks) get one.
The new chunks must take the target profile (else one chunk of the old profile outlives the
conversion) and stay off the device space planned for the new copies, whose dev extents the
transaction records only later (else the two overlap). Judged by `btrfs filesystem df`, the
reference `btrfs check`, the kernel reading every file back, btk-check and the chunk map.
"""
from __future__ import annotations

import json

import pytest

import oracle
from conftest import built, require_kernel, run_btk

# (recipe, conversion, profile every metadata and system chunk has afterwards)
CASES = [
    ("s64k-sha256-zlib", ["--metadata", "dup"], "DUP"),        # single -> DUP: adds copies
    ("s16k-crc32c-zstd", ["--metadata", "single"], "single"),  # DUP -> single: drops copies
    ("raid1-2dev", ["--metadata", "dup"], "DUP"),              # RAID1 -> DUP: adds one, drops one
]

PARITY = {"RAID5": 1, "RAID6": 2}


def chunk_map(devices) -> list[dict]:
    p = run_btk("btk-inspect", "map", "--format", "json", *devices)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)["chunks"]


def stripe_size(c: dict) -> int:
    n = len(c["stripes"])
    if c["profile"] == "RAID0":
        return c["length"] // n
    if c["profile"] == "RAID10":
        return c["length"] * 2 // n
    if c["profile"] in PARITY:
        return c["length"] // (n - PARITY[c["profile"]])
    return c["length"]  # the mirror family: a full copy per stripe


def overlapping_stripes(chunks: list[dict]) -> list:
    """Pairs of stripes (of any chunks) that share device space."""
    spans = sorted((s["devid"], s["physical"], s["physical"] + stripe_size(c), c["logical"])
                   for c in chunks for s in c["stripes"])
    return [(a, b) for a, b in zip(spans, spans[1:]) if a[0] == b[0] and b[1] < a[2]]


def count_of(chunks: list[dict], kind: str) -> int:
    return sum(kind in c["flags"].split("|") for c in chunks)


@pytest.mark.parametrize("name,args,target", CASES, ids=[f"{c[0]}:{c[2]}" for c in CASES])
def test_chunk_allocated_mid_conversion(tmp_path, monkeypatch, name, args, target):
    require_kernel()
    devices = built(name).copy_to(tmp_path)
    hashes = oracle.snapshot_hashes(devices)
    before = chunk_map(devices)
    with monkeypatch.context() as m:
        m.setenv("BTK_TEST_ALLOC_FULL", "1")
        p = run_btk("btk-convert", "profile", *args, "--yes", *devices)
    assert p.returncode == 0, p.stderr
    after = chunk_map(devices)
    for kind in ("METADATA", "SYSTEM"):  # the knob worked: the transaction allocated both kinds
        assert count_of(after, kind) > count_of(before, kind), (kind, after)
    assert not overlapping_stripes(after), overlapping_stripes(after)
    assert {c["profile"] for c in after if "DATA" not in c["flags"]} == {target}, after
    chk = run_btk("btk-check", *devices)
    assert chk.returncode == 0, chk.stdout + chk.stderr
    oracle.reference_check(devices)
    df = oracle.kernel_roundtrip(devices, hashes, write_more=False)
    shown = {(d["type"], d["profile"]) for d in df if d["type"] in ("Metadata", "System")}
    assert shown == {("Metadata", target), ("System", target)}, df
