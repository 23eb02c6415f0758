# SPDX-License-Identifier: GPL-2.0-only
"""btk-check's fsck(8) manners: -n, -y, -p/-a (preen), -f, -C FD, the one JSON
document of a run, and util-linux fsck calling it as fsck.btrfs. On copies of
the sample image (tests/images/sample.img.xz: 100 MiB, fixed fsid, label
btk-sample, DUP metadata)."""
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import (image_digest, BUILD_DIR, btk_path, check_runs, require_btk, require_kernel, run_btk, sample_copy,
                      skip_or_fail)
from fsbuild import attached

SAMPLE_FSID = "6b746273-616d-706c-6500-000000000001"


@pytest.fixture
def sample(tmp_path) -> Path:
    return sample_copy(tmp_path)


def corrupt(img, *args):
    tool = BUILD_DIR / "tests" / "tools" / "btk-corrupt"
    if not os.access(tool, os.X_OK):
        skip_or_fail(f"{tool} is not built (make test-tools)")
    p = subprocess.run([str(tool), *map(str, args), str(img)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def digest(img) -> str:
    return image_digest(img)


def bad_super_copy(img):
    """A bad primary superblock (copy 0, the only one the kernel and btrfs check read; btk opens
    copy 1): an error whose repair (a copy of the good one) needs no decision. A bad secondary
    copy alone is only a warning (super-copy-missing, exit 0; see lost_super_copy)."""
    corrupt(img, "-S", "-s", "0", "-o", "300", "-B", "ffff", "-n")


def lost_super_copy(img):
    """A bad secondary copy (copy 1), as btrfs-image -r leaves: a warning the kernel repairs itself."""
    corrupt(img, "-S", "-s", "1", "-o", "300", "-B", "ffff", "-n")


def wrong_nlink(img):
    """A link count one too high: which of count and names is right is a decision."""
    corrupt(img, "-t", "5", "-k", "257,INODE_ITEM,0", "-f", "nlink", "-v", "+1")


def ids(doc) -> set:
    return {p["id"] for p in doc["problems"]}


def test_text_names_the_filesystem(sample):
    p = run_btk("btk-check", sample)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == f"Checking filesystem on {sample}", lines
    assert lines[1] == f"UUID: {SAMPLE_FSID}" and lines[2] == "Label: btk-sample", lines


def test_json_one_document_names_the_filesystem(sample):
    p = run_btk("btk-check", "--format", "json", sample)
    doc = json.loads(p.stdout)
    assert doc["version"] == 1 and doc["program"] == "btk-check" and doc["exit_status"] == 0
    assert doc["cancelled"] is False and doc["problems"] == []
    fs = doc["filesystem"]
    assert fs["fsid"] == SAMPLE_FSID and fs["label"] == "btk-sample"
    assert [d["path"] for d in fs["devices"]] == [str(sample)]


def test_json_repair_is_one_document(sample, tmp_path):
    bad_super_copy(sample)
    p = run_btk("btk-check", "--format", "json", "--repair", "--yes", "--undo-file", tmp_path / "u.undo", sample)
    assert p.returncode == 1, p.stderr
    runs = check_runs(p.stdout)       # json.loads: one document, or it raises
    assert len(runs) == 3 and runs[0]["exit_status"] == 1
    assert ids(runs[0]) == {"super-copy-invalid"} and runs[2]["problems"] == []
    assert [a["class"] for a in runs[1]["repairs"]][0] == "superblock-copies"
    assert runs[1]["undo_file"] == str(tmp_path / "u.undo")


def test_json_operational_error_is_a_document(tmp_path):
    notfs = tmp_path / "zeros.img"
    notfs.write_bytes(bytes(1 << 20))
    p = run_btk("btk-check", "--format", "json", notfs)
    doc = json.loads(p.stdout)
    assert p.returncode == 8 and doc["exit_status"] == 8 and doc["error"], p.stdout


def test_no_answers_no(sample):
    wrong_nlink(sample)
    before = digest(sample)
    p = run_btk("btk-check", "-n", sample)
    assert p.returncode == 4 and "[inode-nlink]" in p.stdout, p.stdout + p.stderr
    assert digest(sample) == before
    assert run_btk("btk-check", "-n", "--repair", sample).returncode == 16
    assert run_btk("btk-check", "-n", "-y", sample).returncode == 16


def test_yes_repairs(sample, tmp_path, monkeypatch):
    wrong_nlink(sample)
    cwd, undo_dir = tmp_path / "cwd", tmp_path / "undo"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("BTK_UNDO_DIR", str(undo_dir))  # the default undo file goes there, not to the cwd
    p = run_btk("btk-check", "-y", sample)
    assert p.returncode == 1, p.stdout + p.stderr
    assert run_btk("btk-check", sample).returncode == 0
    assert list(undo_dir.glob("btk-check-*.undo")) and not list(cwd.iterdir())


@pytest.mark.parametrize("flag", ["-p", "-a"])
def test_preen_repairs_what_needs_no_decision(sample, tmp_path, flag, monkeypatch):
    bad_super_copy(sample)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BTK_UNDO_DIR", str(tmp_path / "undo"))
    p = run_btk("btk-check", flag, sample)
    assert p.returncode == 1, p.stdout + p.stderr
    assert run_btk("btk-check", sample).returncode == 0
    assert not list(tmp_path.rglob("*.undo")), "preen writes no undo file unless asked"


def test_preen_leaves_decisions_and_exits_4(sample):
    bad_super_copy(sample)
    wrong_nlink(sample)
    p = run_btk("btk-check", "-p", sample)
    assert p.returncode == 4, p.stdout + p.stderr
    assert "not repairing inodes unattended" in p.stderr
    after = run_btk("btk-check", "--format", "json", sample)
    assert ids(json.loads(after.stdout)) == {"inode-nlink"}, after.stdout


def test_force_is_accepted_and_format_is_long(sample):
    p = run_btk("btk-check", "-f", "--format", "json", sample)
    assert p.returncode == 0 and json.loads(p.stdout)["problems"] == []


def test_progress_fd_machine_lines(sample):
    r, w = os.pipe()
    path = require_btk("btk-check")
    p = subprocess.run([str(path), "-C", str(w), str(sample)], pass_fds=(w,), capture_output=True, text=True)
    os.close(w)
    with os.fdopen(r) as f:
        lines = f.read().splitlines()
    assert p.returncode == 0, p.stderr
    passes = []
    for line in lines:
        m = re.fullmatch(r"(\d+) (\d+) (\d+) (\S+)", line)
        assert m and m[4] == str(sample) and int(m[2]) <= int(m[3]), line
        passes.append(int(m[1]))
    assert passes == sorted(passes) and passes[0] == 1 and passes[-1] >= 8, lines
    # every pass ends at its maximum
    last = {}
    for line in lines:
        n, cur, mx, _ = line.split(" ")
        last[n] = (cur, mx)
    assert all(cur == mx for cur, mx in last.values()), last
    p0 = run_btk("btk-check", "-C", "0", sample)
    assert re.search(r"^1 \d+ \d+ ", p0.stdout, re.M), p0.stdout


def test_list_problems(tmp_path):
    p = run_btk("btk-check", "--list-problems", "--format", "json")
    doc = json.loads(p.stdout)
    rows = doc["problems"]
    assert p.returncode == 0 and len(rows) >= 80
    by_id = {r["id"]: r for r in rows}
    assert by_id["super-copy-invalid"]["repair_class"] == "superblock-copies" and by_id["super-copy-invalid"]["preen"]
    assert by_id["inode-nlink"]["repair_class"] == "inodes" and not by_id["inode-nlink"]["preen"]
    assert by_id["dev-extent-beyond-device"]["repair_class"] is None
    text = run_btk("btk-check", "--list-problems").stdout.splitlines()
    assert len(text) == len(rows)


def fsck_path(tmp_path) -> str:
    """A PATH on which util-linux fsck finds fsck.btrfs -> btk-check before btrfs-progs' own."""
    if not shutil.which("fsck"):
        skip_or_fail("util-linux fsck is not installed")
    bindir = tmp_path / "bin"
    if not bindir.exists():
        bindir.mkdir()
        (bindir / "fsck.btrfs").symlink_to(btk_path("btk-check"))
    return f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}"


def fsck(tmp_path, *args):
    env = dict(os.environ, PATH=fsck_path(tmp_path))
    return subprocess.run(["fsck", "-V", "-t", "btrfs", *map(str, args)], capture_output=True, text=True, env=env,
                          timeout=120)


def test_fsck_calls_btk_check_through_the_symlink(sample, tmp_path):
    require_btk("btk-check")
    p = fsck(tmp_path, "-a", sample)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"fsck.btrfs -a {sample}" in p.stdout and f"Checking filesystem on {sample}" in p.stdout, p.stdout
    bad_super_copy(sample)
    before = digest(sample)
    p = fsck(tmp_path, "-n", sample)
    assert p.returncode == 4 and "[super-copy-invalid]" in p.stdout, p.stdout + p.stderr
    assert digest(sample) == before
    p = fsck(tmp_path, "-a", sample)
    assert p.returncode == 1, p.stdout + p.stderr
    # a lost secondary copy (every btrfs-image -r restore) does not fail the boot: a warning, exit 0
    lost_super_copy(sample)
    p = fsck(tmp_path, "-n", sample)
    assert p.returncode == 0 and "warning [super-copy-missing]" in p.stdout, p.stdout + p.stderr
    wrong_nlink(sample)
    p = fsck(tmp_path, "-a", sample)
    assert p.returncode == 4, p.stdout + p.stderr


# util-linux fsck (2.38) looks for fsck.TYPE on $PATH, and on /sbin when PATH is unset or
# empty (fsck -t btrfs never probes). In a mount namespace of its own, a tmpfs over /sbin
# holds only the symlink a package installs, fsck.btrfs -> btk-check, and fsck runs without
# PATH: it can find nothing else (not btrfs-progs' fsck.btrfs, a no-op script).
FSCK_IN_NAMESPACE = r'''
set -eu
cp "$(command -v fsck)" "$STAGE/fsck"
mount -t tmpfs btk-sbin /sbin
ln -s "$BTK_CHECK" /sbin/fsck.btrfs
exec env -u PATH "$STAGE/fsck" -V -t btrfs "$@"
'''


def fsck_sbin(tmp_path, *args):
    for tool in ("unshare", "fsck"):
        if not shutil.which(tool):
            skip_or_fail(f"util-linux {tool} is not installed")
    stage = tmp_path / "stage"
    stage.mkdir(exist_ok=True)
    env = dict(os.environ, STAGE=str(stage), BTK_CHECK=str(btk_path("btk-check")))
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", FSCK_IN_NAMESPACE,
                           "fsck-ns", *map(str, args)], capture_output=True, text=True, env=env, timeout=120)


def test_fsck_finds_the_symlink_in_sbin_on_a_loop_device(sample, tmp_path):
    """The boot-time call, `fsck -t btrfs -a DEV`, on a loop device: a clean filesystem exits
    0; a bad primary superblock is preened (exit 1, then clean); a wrong link count is not a
    preen repair (exit 4, unchanged), nor does -n repair anything."""
    require_kernel()
    require_btk("btk-check")
    with attached([sample]) as (loop,):
        p = fsck_sbin(tmp_path, "-a", loop)
        out = p.stdout + p.stderr
        assert f"[/sbin/fsck.btrfs (1) -- {loop}] fsck.btrfs -a {loop}" in p.stdout, out
        assert p.returncode == 0 and f"Checking filesystem on {loop}" in p.stdout, out
    bad_super_copy(sample)
    with attached([sample]) as (loop,):
        p = fsck_sbin(tmp_path, "-a", loop)
        assert p.returncode == 1 and "[super-copy-invalid]" in p.stdout, p.stdout + p.stderr
        p = fsck_sbin(tmp_path, "-a", loop)
        assert p.returncode == 0, p.stdout + p.stderr
    wrong_nlink(sample)
    before = digest(sample)
    with attached([sample]) as (loop,):
        for flag in ("-a", "-n"):
            p = fsck_sbin(tmp_path, flag, loop)
            assert p.returncode == 4 and "[inode-nlink]" in p.stdout, (flag, p.stdout + p.stderr)
    assert digest(sample) == before
