# SPDX-License-Identifier: GPL-2.0-only
"""btk-check: quota groups (phase_qgroups.c, qgroups_reach.c).

The recipes with traditional qgroups (a level-1 group over a subvolume,
snapshots sharing blocks, 4K nodes with full-backref blocks) and with simple
quotas must verify clean, as `btrfs check` (which verifies qgroups too) does;
copies with one qgroup number changed must show qgroup-mismatch, and
`btrfs check` must fail on them too. A status marked inconsistent skips the
numbers with a warning, like btrfs check."""
import pytest

from conftest import built
import fsbuild
import oracle
from test_check_refs import check_json, corrupt

QG_IDS = {"qgroup-mismatch", "qgroup-inconsistent", "qgroup-item-bad"}
TRAD = "s16k-crc32c-zstd"        # qgroups; 1/100 holds subvolume 256; snapshots 257 (of 256), 258 (of 5)
DEEP = "s4k-xxhash-holes-lzo"    # 4K nodes: taller trees, shared (full-backref) blocks between 5 and 258
SIMPLE = "bgt-squota-xxhash"     # simple quotas from mkfs
LEVEL1 = (1 << 48) | 100         # qgroup 1/100


def reference(devices):
    return fsbuild.run(["btrfs", "check", "--readonly", str(devices[0])], check=False, timeout=300)


@pytest.mark.parametrize("name", [TRAD, DEEP, SIMPLE])
def test_quota_recipes_verify_clean(name):
    fs = built(name)
    rc, out, ids = check_json(fs.devices, "--memory-limit", "16M")
    assert not ids & QG_IDS, [x for x in out["problems"] if x["id"] in QG_IDS]
    # 0/5, 0/256, 0/257, 0/258 and 1/100 all compared (not skipped)
    assert out["qgroups_verified"] >= 5
    oracle.reference_check(fs.devices)


def test_spilling_sorters_give_the_same_numbers(monkeypatch):
    fs = built(DEEP)
    monkeypatch.setenv("BTK_CHECK_SORT_BUDGET", "64K")
    monkeypatch.setenv("BTK_RECSORT_RUN_RECORDS", "200")  # 64 KiB alone spills only on some builds of the image
    _, out, ids = check_json(fs.devices)
    assert not ids & QG_IDS
    assert out["qgroups_verified"] >= 5 and out["sort_spilled_bytes"] > 0


@pytest.mark.parametrize("name,qgroup,field,value", [
    (TRAD, 256, "rfer", "+4096"),        # a subvolume
    (TRAD, LEVEL1, "excl", "-4096"),     # a level-1 group
    (DEEP, 258, "excl", "+4096"),        # a snapshot sharing blocks (full backrefs) with 0/5
    (DEEP, 5, "rfer", "-16384"),
    (SIMPLE, 5, "rfer", "-4096"),        # simple quotas: data by owner ref, tree blocks by owner
    (SIMPLE, LEVEL1, "excl", "+4096"),
], ids=["trad-subvol-rfer", "trad-level1-excl", "deep-snapshot-excl", "deep-top-rfer", "squota-rfer",
        "squota-level1-excl"])
def test_changed_number_is_a_mismatch(tmp_path, name, qgroup, field, value):
    devs = built(name).copy_to(tmp_path)
    corrupt(devs, "-t", "quota", "-k", f"0,QGROUP_INFO,{qgroup}", "-f", field, "-v", value)
    rc, out, ids = check_json(devs)
    assert rc == 4 and ids == {"qgroup-mismatch"}, out["problems"]
    want = f"qgroup {qgroup >> 48}/{qgroup & ((1 << 48) - 1)}:"
    assert any(x["detail"].startswith(want) for x in out["problems"]), out["problems"]
    p = reference(devs)
    assert p.returncode != 0 and "are different" in p.stdout, p.stdout[-2000:]


def test_inconsistent_status_skips_the_numbers(tmp_path):
    devs = built(TRAD).copy_to(tmp_path)
    corrupt(devs, "-t", "quota", "-k", "0,QGROUP_INFO,256", "-f", "rfer", "-v", "+4096")
    # status flags (offset 16): ON | INCONSISTENT
    corrupt(devs, "-t", "quota", "-k", "0,QGROUP_STATUS,0", "-o", "16", "-B", "0500000000000000")
    rc, out, ids = check_json(devs)
    assert rc == 0 and ids == {"qgroup-inconsistent"}, out["problems"]
    assert out["qgroups_verified"] == 0
    assert reference(devs).returncode == 0   # btrfs check: "a difference ... is expected"


def test_relation_without_mirror(tmp_path):
    devs = built(TRAD).copy_to(tmp_path)
    corrupt(devs, "-t", "quota", "-k", f"{LEVEL1},QGROUP_RELATION,256", "-d")
    rc, out, ids = check_json(devs)
    assert ids == {"qgroup-item-bad"}, out["problems"]
    assert any("no mirror" in x["detail"] for x in out["problems"])


def test_subvolume_without_qgroup(tmp_path):
    devs = built(TRAD).copy_to(tmp_path)
    corrupt(devs, "-t", "quota", "-k", "0,QGROUP_INFO,257", "-d")
    rc, out, ids = check_json(devs)
    assert ids == {"qgroup-item-bad"}, out["problems"]
    details = [x["detail"] for x in out["problems"]]
    assert any("subvolume 257 has no qgroup 0/257" in d for d in details), details
