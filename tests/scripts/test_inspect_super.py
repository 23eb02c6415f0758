# SPDX-License-Identifier: GPL-2.0-only
"""btk-inspect super --format json against btrfs inspect-internal dump-super -f / -a."""
import json
import re

import pytest

import dumptree
from compare import diff_super, report
from conftest import run_btk, super_json
from fsbuild import REPO

# struct members that are padding, or named differently by the contract
NOT_FIELDS = {"reserved", "padding", "super_roots", "unused_64", "unused_8"}


def struct_members(struct: str) -> list[str]:
    """Member names of a struct in include/btk/format.h: the names the JSON must use."""
    text = (REPO / "include" / "btk" / "format.h").read_text()
    body = re.search(r"struct %s \{(.*?)\n\} PACKED;" % struct, text, re.S)[1]
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    return [m for m in re.findall(r"(\w+)(?:\[[^\]]*\])?;", body) if m not in NOT_FIELDS]


def btk_super(*args) -> object:
    p = run_btk("btk-inspect", "super", "--format", "json", *args)
    assert p.returncode == 0, p.stderr
    return super_json(p.stdout)


def test_super_matches_dump_super(fs):
    problems = []
    for dev in fs.devices:
        (ref,) = dumptree.dump_super(dev)
        got = btk_super(dev)
        problems += [f"{dev.name}: {d}" for d in diff_super(ref, got)]
    assert not problems, report(f"{fs.name}: superblock differs from dump-super -f", problems)


def test_super_has_every_member(fs):
    got = btk_super(fs.devices[0])
    missing = [m for m in struct_members("btrfs_super_block") if m not in got]
    missing += [f"dev_item.{m}" for m in struct_members("btrfs_dev_item") if m not in got.get("dev_item", {})]
    for i, b in enumerate(got.get("backup_roots", [])):
        missing += [f"backup_roots[{i}].{m}" for m in struct_members("btrfs_root_backup") if m not in b]
    for i, c in enumerate(got.get("sys_chunk_array", [])):
        missing += [f"sys_chunk_array[{i}].chunk.{m}" for m in struct_members("btrfs_chunk")
                    if m not in c.get("chunk", {})]
    assert not missing, f"members of format.h structs missing from the JSON: {missing}"
    assert isinstance(got["label"], str) and isinstance(got["fsid"], str)


def test_all_copies_match_dump_super_all(fs):
    problems = []
    for dev in fs.devices:
        ref = {c["_super_bytenr"]: c for c in dumptree.dump_super(dev, "-a")}
        got = btk_super("--all-copies", dev)
        assert isinstance(got, list), f"--all-copies should print a list, got {type(got)}"
        by_mirror = {c["mirror"]: c for c in got}
        for mirror, offset in enumerate((64 << 10, 64 << 20, 256 << 30)):
            if offset not in ref:           # beyond the end of the device
                c = by_mirror.get(mirror)
                if c is not None and c.get("valid"):
                    problems.append(f"{dev.name} mirror {mirror}: no such copy, btk calls it valid")
                continue
            c = by_mirror.get(mirror)
            if c is None:
                problems.append(f"{dev.name}: mirror {mirror} missing")
                continue
            want_valid = ref[offset]["_csum_match"] and ref[offset]["_magic_match"]
            if c.get("valid") is not want_valid:
                problems.append(f"{dev.name} mirror {mirror}: valid {c.get('valid')!r}, want {want_valid}")
            problems += [f"{dev.name} mirror {mirror}: {d}" for d in diff_super(ref[offset], c)]
    assert not problems, report(f"{fs.name}: superblock copies differ from dump-super -a", problems)


@pytest.mark.parametrize("copy", [0, 1])
def test_select_copy(copy):
    from conftest import built
    fs = built("mkfs-single")
    (ref,) = dumptree.dump_super(fs.devices[0], "-s", copy)
    got = btk_super("--super", copy, fs.devices[0])
    assert not diff_super(ref, got)
    assert got["bytenr"] == (64 << 10 if copy == 0 else 64 << 20)


def test_text_format(fs):
    p = run_btk("btk-inspect", "super", fs.devices[0])
    assert p.returncode == 0, p.stderr
    (ref,) = dumptree.dump_super(fs.devices[0])
    assert ref["fsid"] in p.stdout and str(ref["generation"]) in p.stdout
