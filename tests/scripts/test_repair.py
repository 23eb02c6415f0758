# SPDX-License-Identifier: GPL-2.0-only
"""btk-check --repair on real filesystems, damaged on purpose with tests/tools/btk-corrupt.

For each repair class: the first check finds the damage (exit 4), `--repair --yes` fixes it
(exit 1), a second check is clean (exit 0), and then what no one here wrote decides: the
reference `btrfs check` is clean, the kernel mounts the filesystem and every file reads back
identical (hashes taken before the damage), scrub is clean; and `btk-undo` puts the damaged
image back byte for byte. The free-space-tree rebuild is also crashed at every write of its
write log: every crash leaves the damaged old filesystem or the repaired new one.

Exit codes are judged against a check of the undamaged copy: while the checker reports
something on a pristine image (a detection bug of another phase), the same must remain after
the repair, and the repair then exits 4 instead of 1.
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

import dumptree
import fsbuild
from conftest import images_digest, BUILD_DIR, built, check_runs, require_btk, run_btk, skip_or_fail
import crash
from test_tune import (check_devices, kernel_fs, kernel_verify, mounted_retry, needs,
                       original_hashes, super_of, SIMPLE, RAID1_2DEV)


def corrupt_tool() -> Path:
    tool = BUILD_DIR / "tests" / "tools" / "btk-corrupt"
    if not os.access(tool, os.X_OK):
        skip_or_fail(f"{tool} is not built (make test-tools)")
    return tool


def corrupt(devs, *args):
    p = fsbuild.run([corrupt_tool(), *args, *devs], check=False)
    assert p.returncode == 0, f"btk-corrupt {args} failed:\n{p.stdout}{p.stderr}"


def check(devs, *args, env=None) -> tuple[int, list[dict], subprocess.CompletedProcess]:
    """btk-check --format json: (exit status, the JSON objects it printed, the process)."""
    p = run_btk("btk-check", "--format", "json", *args, *devs, timeout=600)
    return p.returncode, check_runs(p.stdout) if p.stdout.strip() else [], p


def problem_ids(summary: dict) -> list[str]:
    return sorted({pr["id"] for pr in summary["problems"]})


@functools.lru_cache(maxsize=None)
def baseline(name: str) -> tuple[int, tuple[str, ...], tuple]:
    """What btk-check says of the undamaged image, and its uuid items (on a copy: other tests
    attach the cached image)."""
    tmp = Path(tempfile.mkdtemp(prefix="btk-repair-baseline-"))
    try:
        devs = built(name).copy_to(tmp)
        rc, objs, p = check(devs)
        uuids = tuple(uuid_items(devs))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    assert rc in (0, 4), p.stderr
    return rc, tuple(problem_ids(objs[0])), uuids


def first_block_of_tree(devs, tree: int) -> int:
    d = dumptree.dump_tree(devs, "-t", str(tree))
    return d.blocks[0]["bytenr"]


def first_item(devs, tree: str, type_name: str, last: bool = False) -> list[int]:
    d = dumptree.dump_tree(devs, "-t", tree)
    keys = [it["key"] for it in d.items if it["type"] == type_name]
    return keys[-1] if last else keys[0]


def key_arg(key) -> str:
    return ",".join(map(str, key))


# Each damage: (id, recipe, the problem ids it must cause, a function that damages devs).
def damage_super_copy(devs):
    corrupt(devs[:1], "-S", "-s", "1", "-o", "300", "-B", "ffff", "-n")


def damage_tree_block_copy(devs):
    # the root of the extent tree: DUP (one device) or RAID1 (two) metadata
    corrupt(devs, "-b", first_block_of_tree(devs, 2), "-c", "2", "-o", "300", "-B", "ffff", "-n")


def damage_counters(devs):
    bg = first_item(devs, "extent", "BLOCK_GROUP_ITEM")
    corrupt(devs, "-t", "extent", "-k", key_arg(bg), "-f", "used", "-v", "+8192")
    corrupt(devs, "-S", "-f", "bytes_used", "-v", "+4096")
    corrupt(devs, "-t", "chunk", "-k", "1,DEV_ITEM,1", "-f", "bytes_used", "-v", "+1048576")


def damage_free_space(devs):
    # the last block group's items (mkfs may leave items of groups that no longer exist first)
    ext = first_item(devs, "free-space", "FREE_SPACE_EXTENT", last=True)
    corrupt(devs, "-t", "free-space", "-k", key_arg(ext), "-d")
    info = first_item(devs, "free-space", "FREE_SPACE_INFO", last=True)
    corrupt(devs, "-t", "free-space", "-k", key_arg(info), "-f", "extent_count", "-v", "+3")


def damage_free_space_root(devs):
    # the superblock still claims the tree: the kernel refuses to mount this
    corrupt(devs, "-t", "root", "-k", "10,132,0", "-d")


def damage_uuid_tree(devs):
    corrupt(devs, "-t", "uuid", "-k", key_arg(first_item(devs, "uuid", "UUID_KEY_SUBVOL")), "-d")


def uuid_items(devs) -> list[tuple]:
    d = dumptree.dump_tree(devs, "-t", "uuid")
    return [(tuple(it["key"]), tuple(it["fields"]["subvol_ids"])) for it in d.items]


# id: (recipe, problem ids the damage must cause, damage, the repair class, extra btk-check arguments)
DAMAGES = {
    "super-copy": (SIMPLE, {"super-copy-missing"}, damage_super_copy, "superblock-copies"),
    "tree-block-copy": (SIMPLE, {"tree-block-bad-copy"}, damage_tree_block_copy, "tree-block-copies"),
    "tree-block-copy-raid1": (RAID1_2DEV, {"tree-block-bad-copy"}, damage_tree_block_copy,
                              "tree-block-copies"),
    "counters": (SIMPLE, {"block-group-used", "super-bytes-used", "dev-bytes-used"}, damage_counters,
                 "space-counters"),
    "free-space": (SIMPLE, {"free-space-mismatch"}, damage_free_space, "free-space-tree"),
    # its blocks stay allocated with no tree using them: the extent-refs class frees them first
    "free-space-root": (SIMPLE, {"free-space-mismatch", "tree-block-leaked"}, damage_free_space_root,
                        ("extent-refs", "free-space-tree")),
    # the check does not detect a lost uuid item yet (uuid-tree-missing): ask for the rebuild
    "uuid-tree": (SIMPLE, set(), damage_uuid_tree, "uuid-tree", ("--rebuild-uuid-tree",)),
}


def damaged_copy(name, damage, where: Path) -> list[Path]:
    devs = kernel_fs(name).copy_to(where)
    damage(devs)
    return devs


def repair_cycle(cases: list[str], tmp_path: Path, keep_repaired: bool = False) -> tuple[str, list[Path]]:
    """Damage a copy of the cases' recipe with every case's damage (in order), then: the check
    finds each, --repair --yes runs exactly the cases' classes and leaves what the undamaged
    image has, a second check agrees, the uuid tree is as before, and btk-undo on a byte copy
    of the repaired devices (keep_repaired: of a copy of them) gives back the damaged ones exactly.
    Returns (recipe, devices)."""
    (name,) = {DAMAGES[c][0] for c in cases}
    needs(name)
    require_btk("btk-check")
    require_btk("btk-undo")
    want_ids = set().union(*(DAMAGES[c][1] for c in cases))
    classes = {k for c in cases for k in ((DAMAGES[c][3],) if isinstance(DAMAGES[c][3], str) else DAMAGES[c][3])}
    extra = [a for c in cases for a in (DAMAGES[c][4] if len(DAMAGES[c]) > 4 else ())]
    base_rc, base_ids, pristine_uuids = baseline(name)
    devs = kernel_fs(name).copy_to(tmp_path / "devs")
    for c in cases:
        DAMAGES[c][2](devs)
    damaged = images_digest(devs)

    rc, objs, _ = check(devs)
    ids = set(problem_ids(objs[0]))
    # a lost secondary superblock copy is a warning: exit 0 when nothing else is wrong
    want_rc = 4 if want_ids - {"super-copy-missing", "super-copy-stale"} else 0
    assert (rc == want_rc or not want_ids) and want_ids <= ids, f"first check: exit {rc}, {ids}"
    assert images_digest(devs) == damaged, "a check without --repair wrote"

    undo = tmp_path / "repair.undo"
    rc, objs, p = check(devs, "--repair", "--yes", "--undo-file", undo, *extra)
    assert rc == (1 if base_rc == 0 else 4), f"repair exit {rc}:\n{p.stdout}\n{p.stderr}"
    first, actions, after = objs
    assert {a["class"] for a in actions["repairs"]} == classes, actions
    assert actions["undo_file"] == str(undo)
    # extent reference repairs mark quota groups inconsistent (the kernel's numbers no longer follow)
    quiet = {"qgroup-inconsistent"} - set(base_ids) if "extent-refs" in classes else set()
    assert [i for i in problem_ids(after) if i not in quiet] == list(base_ids), \
        f"left after the repair: {problem_ids(after)}"

    rc, objs, _ = check(devs)
    assert (rc, tuple(i for i in problem_ids(objs[0]) if i not in quiet)) == (base_rc, base_ids), "second check"
    assert tuple(uuid_items(devs)) == pristine_uuids

    back = devs
    if keep_repaired:
        back = [tmp_path / "undo" / d.name for d in devs]
        back[0].parent.mkdir()
        for d, b in zip(devs, back):
            fsbuild.run(["cp", "--sparse=always", d, b])
    else:
        check_devices(devs)  # the reference check, before the undo
    u = run_btk("btk-undo", undo, *back)
    assert u.returncode == 0, u.stderr
    assert images_digest(back) == damaged, "btk-undo did not restore the damaged image byte for byte"
    if keep_repaired:
        for b in back:
            b.unlink()
    return name, devs


@pytest.mark.parametrize("case", list(DAMAGES))
def test_repair_class(case, tmp_path):
    """One class at a time; the reference btrfs check judges the result."""
    repair_cycle([case], tmp_path)


# Every class at once on one image (the tree-block damage last: the others rewrite whole blocks),
# and the RAID1 case; then the kernel: mount, every file identical, scrub clean, btrfs check.
@pytest.mark.parametrize("cases", [["counters", "free-space", "uuid-tree", "super-copy", "tree-block-copy"],
                                   ["tree-block-copy-raid1"]], ids=["all-classes", "raid1"])
def test_repair_then_kernel(cases, tmp_path):
    name, devs = repair_cycle(cases, tmp_path, keep_repaired=True)
    kernel_verify(devs, original_hashes(name), write=False)


def test_dry_run_writes_nothing(tmp_path):
    require_btk("btk-check")
    devs = damaged_copy(SIMPLE, damage_counters, tmp_path)
    before = images_digest(devs)
    rc, objs, p = check(devs, "--repair", "--dry-run")
    assert rc == 4, p.stderr
    assert "dry run: nothing was written" in p.stderr
    assert objs[1]["dry_run"] and {a["class"] for a in objs[1]["repairs"]} == {"space-counters"}
    assert any("block group" in a["action"] for a in objs[1]["repairs"])
    assert images_digest(devs) == before
    # text output; and no undo file appears in the current directory
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    t = subprocess.run([str(require_btk("btk-check")), "--repair", "--dry-run", *devs], cwd=cwd,
                       capture_output=True, text=True)
    assert "repair space-counters: would: block group" in t.stdout, t.stdout
    assert not list(cwd.iterdir()) and images_digest(devs) == before


def test_default_undo_file_and_no_undo(tmp_path):
    require_btk("btk-check")
    devs = damaged_copy(SIMPLE, damage_super_copy, tmp_path / "devs")
    gen = super_of(devs[0])["generation"]
    fsid = super_of(devs[0])["fsid"]
    work = tmp_path / "cwd"
    work.mkdir()
    work.chmod(0o555)       # like / at boot: nothing may need to be written here
    undo_dir = tmp_path / "var" / "undo"
    env = dict(os.environ, BTK_UNDO_DIR=str(undo_dir))
    path = require_btk("btk-check")
    p = subprocess.run([str(path), "--repair", "--yes", *devs], cwd=work, capture_output=True, text=True,
                       env=env)
    assert p.returncode in (0, 1, 4), p.stderr
    assert not list(work.iterdir()), p.stderr
    assert [f.name for f in undo_dir.iterdir()] == [f"btk-check-{fsid}-{gen}.undo"], p.stderr
    assert (undo_dir.stat().st_mode & 0o777) == 0o700
    assert f"{undo_dir}/btk-check-{fsid}-{gen}.undo" in p.stderr
    # --no-undo: nothing in the current directory
    devs = damaged_copy(SIMPLE, damage_super_copy, tmp_path / "devs2")
    empty = tmp_path / "cwd2"
    empty.mkdir()
    p = subprocess.run([str(path), "--repair", "--yes", "--no-undo", *devs], cwd=empty, capture_output=True,
                       text=True, env=env)
    assert p.returncode in (0, 1, 4) and not list(empty.iterdir()), p.stderr
    assert len(list(undo_dir.iterdir())) == 1, p.stderr


def test_repair_needs_yes_without_terminal(tmp_path):
    require_btk("btk-check")
    devs = damaged_copy(SIMPLE, damage_super_copy, tmp_path)
    before = images_digest(devs)
    path = require_btk("btk-check")
    p = subprocess.run([str(path), "--repair", *devs], stdin=subprocess.DEVNULL, capture_output=True, text=True)
    assert p.returncode == 16 and "--yes" in p.stderr, p.stderr
    assert images_digest(devs) == before


@pytest.mark.parametrize("args,pattern", [
    # --yes implies --repair (fsck -y); -n contradicts it
    (["-n", "--yes"], "contradicts"),
    (["--dry-run"], "go with --repair"),
    (["--repair", "--yes", "--no-undo", "--undo-file", "x"], "makes no sense"),
])
def test_usage_errors(args, pattern, tmp_path):
    img = tmp_path / "none.img"
    img.write_bytes(b"")
    p = run_btk("btk-check", *args, img)
    assert p.returncode == 16 and pattern in p.stderr, p.stderr


def test_mounted_filesystem_is_refused(tmp_path):
    require_btk("btk-check")
    devs = kernel_fs(SIMPLE).copy_to(tmp_path)
    with fsbuild.attached(devs) as loops, mounted_retry(loops):
        p = run_btk("btk-check", "--repair", "--yes", "--no-undo", loops[0])
        assert p.returncode == 8 and "mounted" in p.stderr, p.stderr


def test_rebuild_free_space_tree_on_a_clean_filesystem(tmp_path):
    require_btk("btk-check")
    devs = kernel_fs(SIMPLE).copy_to(tmp_path)
    base_rc, base_ids, _ = baseline(SIMPLE)
    rc, objs, p = check(devs, "--rebuild-free-space-tree", "--yes", "--no-undo")
    assert rc == (1 if base_rc == 0 else 4), p.stderr
    assert any("rebuilt for" in a["action"] for a in objs[1]["repairs"]), objs[1]
    assert problem_ids(objs[2]) == list(base_ids)
    kernel_verify(devs, original_hashes(SIMPLE), write=False)


def test_help_and_man_page_document_every_option():
    p = run_btk("btk-check", "--help")
    man = (fsbuild.REPO / "doc" / "btk-check.8").read_text().replace("\\-", "-")
    text = " ".join(p.stdout.split())
    for opt in ("--repair", "--yes", "--dry-run", "--undo-file", "--no-undo", "--rebuild-free-space-tree",
                "--rebuild-uuid-tree"):
        assert opt in text, f"{opt} missing from --help"
        assert opt in man, f"{opt} missing from doc/btk-check.8"
    for cls in ("superblock-copies", "tree-block-copies", "space-counters", "free-space-tree", "uuid-tree",
                "extent-refs", "names", "inodes"):
        assert cls in man, f"repair class {cls} missing from doc/btk-check.8"


@pytest.mark.slow
def test_free_space_tree_rebuild_crash_at_every_write(tmp_path):
    """Crash after each write of the rebuild (and with unflushed writes persisted in any subset):
    the filesystem is the damaged one (same generation, same problems) or the repaired one
    (next generation, the baseline's problems only, and the reference check agrees)."""
    name = SIMPLE
    require_btk("btk-check")
    base_rc, base_ids, _ = baseline(name)
    damaged = damaged_copy(name, damage_free_space, tmp_path / "damaged")
    old_gen = super_of(damaged[0])["generation"]
    damaged_ids = problem_ids(check(damaged)[1][0])
    work = [tmp_path / "work" / d.name for d in damaged]
    work[0].parent.mkdir()
    for d, w in zip(damaged, work):
        fsbuild.run(["cp", "--sparse=always", d, w])
    log = tmp_path / "wlog"
    p = crash.record(log, "btk-check", "--repair", "--yes", "--no-undo", *work)
    assert p.returncode in (1, 4), p.stderr
    wl = crash.count(log)
    assert wl.writes > 0
    seen = {"old": 0, "new": 0}
    pts = crash.points(wl, around_flushes=True)
    for k, seed, devs in crash.replay(damaged, log, crash.states(pts, seeds=(1, 2, 3), every=3),
                                      tmp_path / "crash"):
        gen = super_of(devs[0])["generation"]
        ids = problem_ids(check(devs)[1][0])
        if gen == old_gen:
            assert ids == damaged_ids, f"after {k} writes (seed {seed}): old generation but {ids}"
            seen["old"] += 1
        else:
            assert gen == old_gen + 1, (k, seed, gen)
            # between the first and the last superblock write, the copies not yet written are
            # stale: a warning (the kernel reads the newest copy), not a third state
            ids = [i for i in ids if i != "super-copy-stale"]
            assert ids == list(base_ids), f"after {k} writes (seed {seed}): new generation but {ids}"
            if seed is None and k in (wl.writes, pts[-2]):
                fsbuild.run(["btrfs", "check", "--readonly", devs[0]])
            seen["new"] += 1
    assert seen["old"] and seen["new"], seen
