# SPDX-License-Identifier: GPL-2.0-only
"""Writing onto the wrong target, onto a device shorter than its dev item says, and
interrupting a check: btk must refuse before the first byte (the target's sha1 is the
same before and after) or stop cleanly, and say so.

Real loop devices and mounts: the kernel's view of what is mounted is the oracle.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import random
import re
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import fsbuild
from conftest import btk_path, built, require_btk, require_kernel, run_btk
from fsbuild import MiB, attached, mounted, run


def sha1(path) -> str:
    h = hashlib.sha1()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def assert_refused(p, pattern, rc=1, tool="btk-image"):
    assert p.returncode == rc, f"expected exit {rc}, got {p.returncode}:\n{p.stdout}\n{p.stderr}"
    assert f"{tool}: error:" in p.stderr, p.stderr
    assert re.search(pattern, p.stderr, re.I), f"stderr does not match /{pattern}/:\n{p.stderr}"


def fresh_fs(path, size=128 * MiB) -> Path:
    """Another filesystem (its own fsid) to be overwritten or mounted."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.truncate(size)
    run(["mkfs.btrfs", "-q", "-f", path])
    return path


def dump_of_copy(tmp_path, name="mkfs-single"):
    """A copy of a cached filesystem and a btk image of it."""
    (dev,) = built(name).copy_to(tmp_path / "src")
    img = tmp_path / "src.btkimg"
    p = run_btk("btk-image", "dump", dev, img)
    assert p.returncode == 0, p.stderr
    return dev, img


# ---------------------------------------------------------------- btk-image targets

def test_dump_refuses_a_second_member(tmp_path):
    """`btk-image dump DEV1 DEV2` with the output forgotten: DEV2 is a member, not an output."""
    require_kernel()
    devs = built("mkfs-2dev-xxhash").copy_to(tmp_path)
    before = [sha1(d) for d in devs]
    with attached(devs) as loops:
        # by the loop device, and by the file behind it
        for out in (loops[1], devs[1]):
            p = run_btk("btk-image", "dump", loops[0], out)
            assert_refused(p, r"device of the filesystem being read")
    assert [sha1(d) for d in devs] == before


def test_dump_refuses_a_member_found_by_fsid(tmp_path):
    """Not attached, not opened: the second image holds the filesystem's fsid."""
    devs = built("mkfs-2dev-xxhash").copy_to(tmp_path)
    before = sha1(devs[1])
    p = run_btk("btk-image", "dump", devs[0], devs[1])
    assert p.returncode == 1, p.stderr
    assert sha1(devs[1]) == before


def test_image_refuses_mounted_targets(tmp_path):
    """A mounted block device, and the file behind a mounted loop device, for dump and
    restore (even with --force)."""
    require_kernel()
    src, img = dump_of_copy(tmp_path)
    victim = fresh_fs(tmp_path / "victim.img")
    before = sha1(victim)
    with attached([victim]) as loops, mounted(loops, ("ro",)):
        for out in (loops[0], victim):
            p = run_btk("btk-image", "dump", src, out)
            assert_refused(p, r"mounted")
            for force in ([], ["-f"]):
                p = run_btk("btk-image", "restore", *force, img, out)
                assert_refused(p, r"mounted")
    assert sha1(victim) == before


def test_restore_refuses_a_filesystem_unless_forced(tmp_path):
    src, img = dump_of_copy(tmp_path)
    other = fresh_fs(tmp_path / "other.img")
    before = sha1(other)
    p = run_btk("btk-image", "restore", img, other)
    assert_refused(p, r"holds a filesystem \(btrfs\).*--force")
    assert sha1(other) == before
    p = run_btk("btk-image", "restore", "--force", img, other)
    assert p.returncode == 0, p.stderr
    p = run_btk("btk-check", other)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.parametrize("cmd", ["dump", "restore"])
def test_image_refuses_another_signature(cmd, tmp_path):
    """Any signature libblkid knows (here: swap space), not only filesystems btk reads."""
    src, img = dump_of_copy(tmp_path)
    target = tmp_path / "swap"
    with open(target, "wb") as f:
        f.truncate(64 * MiB)
    run(["mkswap", target])
    before = sha1(target)
    p = run_btk("btk-image", *((cmd, src) if cmd == "dump" else (cmd, img)), target)
    assert_refused(p, r"holds .*swap")
    assert sha1(target) == before and os.path.getsize(target) == 64 * MiB


def test_dump_to_stdout_redirected_onto_a_filesystem(tmp_path):
    require_kernel()
    (src,) = built("mkfs-single").copy_to(tmp_path / "src")
    victim = fresh_fs(tmp_path / "victim.img")
    before = sha1(victim)
    with attached([victim]) as loops, open(loops[0], "wb") as out:
        p = subprocess.run([str(btk_path("btk-image")), "dump", str(src), "-"], stdout=out,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    assert_refused(p, r"stdout holds a filesystem")
    assert sha1(victim) == before


def test_restore_refuses_its_own_image_and_a_repeated_output(tmp_path):
    src, img = dump_of_copy(tmp_path)
    before = sha1(img)
    p = run_btk("btk-image", "restore", "-f", img, img)
    assert_refused(p, r"read or written already")
    assert sha1(img) == before
    p = run_btk("btk-image", "restore", img, tmp_path / "new", tmp_path / "new")
    assert_refused(p, r"given twice")
    assert not (tmp_path / "new").exists()


def test_restore_refuses_a_short_block_device_even_forced(tmp_path):
    require_kernel()
    src, img = dump_of_copy(tmp_path)
    small = tmp_path / "small"
    with open(small, "wb") as f:
        f.write(os.urandom(4096))
        f.truncate(16 * MiB)
    before = sha1(small)
    with attached([small]) as loops:
        p = run_btk("btk-image", "restore", "-f", img, loops[0])
        assert_refused(p, r"holds 16777216 bytes, but its device item says")
    assert sha1(small) == before


def test_image_writes_new_and_empty_files(tmp_path):
    """What is fine stays fine: a new file, an empty file, a file without a signature."""
    src, img = dump_of_copy(tmp_path)
    empty = tmp_path / "empty"
    empty.touch()
    junk = tmp_path / "junk"
    junk.write_bytes(b"not an image\n" * 100)
    for out in (tmp_path / "new.btkimg", empty, junk):
        p = run_btk("btk-image", "dump", src, out)
        assert p.returncode == 0, p.stderr
    p = run_btk("btk-image", "restore", img, tmp_path / "restored")
    assert p.returncode == 0, p.stderr


def test_in_place_writers_refuse_a_file_behind_a_mounted_loop(tmp_path):
    require_kernel()
    (dev,) = built("mkfs-single").copy_to(tmp_path)
    before = sha1(dev)
    with attached([dev]) as loops, mounted(loops, ("ro",)):
        for tool, args in (("btk-tune", ["--label", "x"]), ("btk-convert", ["bg-tree"]),
                           ("btk-check", ["--repair", "-y"])):
            p = run_btk(tool, *args, dev)
            assert_refused(p, r"mounted", rc=8 if tool == "btk-check" else 1, tool=tool)
    assert sha1(dev) == before


# ---------------------------------------------------------------- a device shorter than its dev item

SHORT_WRITERS = [
    ("btk-tune", ["--label", "short"], 1),
    ("btk-convert", ["profile", "--metadata", "single"], 1),
    ("btk-convert", ["bg-tree"], 1),
    ("btk-check", ["--repair", "-y", "--no-undo"], 8),
]


@pytest.mark.parametrize("cut", [4096, 1 * MiB])
@pytest.mark.parametrize("tool,args,rc", SHORT_WRITERS, ids=lambda v: v if isinstance(v, str) else None)
def test_short_image_refused_by_writers(tool, args, rc, cut, tmp_path):
    (dev,) = built("mkfs-single").copy_to(tmp_path)
    size = os.path.getsize(dev) - cut
    os.truncate(dev, size)
    before = sha1(dev)
    p = run_btk(tool, *args, dev)
    assert_refused(p, r"holds \d+ bytes, but its device item says \d+.*nothing was written", rc=rc, tool=tool)
    assert os.path.getsize(dev) == size, "the file grew"
    assert sha1(dev) == before
    assert "success" not in p.stdout.lower()


def test_short_block_device_refused(tmp_path):
    require_kernel()
    (dev,) = built("mkfs-single").copy_to(tmp_path)
    os.truncate(dev, os.path.getsize(dev) - 64 * 1024)
    before = sha1(dev)
    with attached([dev]) as loops:
        p = run_btk("btk-tune", "--label", "short", loops[0])
        assert_refused(p, r"device item says", tool="btk-tune")
    assert sha1(dev) == before


def test_short_image_readers_warn(tmp_path):
    (dev,) = built("mkfs-single").copy_to(tmp_path)
    os.truncate(dev, os.path.getsize(dev) - 4096)
    before = sha1(dev)
    p = run_btk("btk-check", dev)
    assert p.returncode == 4 and "smaller" in p.stderr and "dev-total-bytes" in p.stdout, p.stdout + p.stderr
    p = run_btk("btk-image", "dump", dev, tmp_path / "short.btkimg")
    assert p.returncode == 0 and "smaller" in p.stderr, p.stderr
    p = run_btk("btk-inspect", "super", dev)
    assert p.returncode == 0, p.stderr
    assert sha1(dev) == before


# ---------------------------------------------------------------- cancelling a check

MANY_FILES = 100_000


def many_files_image() -> Path:
    """A filesystem the kernel filled with 100,000 files (a check of about a second),
    built once and cached. Four writers, one per quarter of the directories: the kernel's
    work on two cores instead of one (the set of files is the same; their inode numbers
    are not)."""
    d = fsbuild.cache_root() / f"many-files-{MANY_FILES}-v2"     # v2: without mkfs' leftovers
    img = d / "dev0.img"
    d.mkdir(parents=True, exist_ok=True)
    with open(d / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if img.exists():
            return img
        tmp = d / "dev0.img.tmp"
        with open(tmp, "wb") as f:
            f.truncate(1024 * MiB)
        fsbuild.mkfs([tmp], "-q", "-f")
        with attached([tmp]) as loops, mounted(loops) as mnt:
            with ThreadPoolExecutor(4) as ex:
                list(ex.map(lambda k: fill_dirs(mnt, range(k, MANY_FILES // 250, 4)), range(4)))
        os.rename(tmp, img)
    return img


def fill_dirs(mnt: Path, dirs):
    for i in dirs:
        sub = mnt / f"d{i:04d}"
        sub.mkdir()
        for j in range(250):
            fd = os.open(sub / f"f{j:04d}", os.O_WRONLY | os.O_CREAT, 0o644)
            os.write(fd, b"x" * (100 + (j % 7) * 700))
            os.close(fd)


def check_interrupted(dev, delay, fmt):
    cmd = [str(btk_path("btk-check")), *(["--format", "json"] if fmt == "json" else []), str(dev)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


@pytest.mark.slow
def test_check_cancelled_at_random_moments(tmp_path):
    """SIGINT at ten random moments of a check: always the cancelled line (or "cancelled":
    true) and exit 32; the one problem the filesystem has (a bad superblock copy, found by
    the first phase) is shown whenever that phase finished, and nothing else ever is (an
    unfinished phase must not report what it had not joined yet)."""
    require_kernel()
    require_btk("btk-check")
    dev = tmp_path / "dev0.img"
    run(["cp", "--sparse=always", many_files_image(), dev])
    with open(dev, "r+b") as f:           # the magic of superblock copy 1
        f.seek(64 * MiB + 64)
        f.write(b"XXXXXXXX")
    damage = re.compile(r"^(ERROR|warning) \[super-copy-[a-z-]+\]: .*copy 1", re.M)
    start = time.monotonic()
    p = run_btk("btk-check", dev)
    whole = time.monotonic() - start
    problems = re.findall(r"^(?:ERROR|warning) .*$", p.stdout, re.M)
    assert len(problems) == 1 and damage.search(p.stdout), p.stdout + p.stderr
    rng = random.Random(os.environ.get("BTK_TEST_SEED", "cancel"))
    moments = sorted(rng.uniform(0.02, whole * 0.9) for _ in range(10))
    cancelled = 0
    for n, delay in enumerate(moments):
        fmt = "json" if n % 3 == 2 else "text"
        rc, out, err = check_interrupted(dev, delay, fmt)
        where = f"SIGINT after {delay:.3f}s of {whole:.2f}s ({fmt}):\n{out[-3000:]}\n{err[-2000:]}"
        if rc in (0, 4):   # the check ended before the signal came
            continue
        cancelled += 1
        assert rc == 32, where
        if fmt == "json":
            res = json.loads(out)
            assert res["cancelled"] is True, where
            first_done = res["cancelled_phase"] != "superblocks"
            ids = [x["id"] for x in res["problems"]]
            assert ids == (["super-copy-invalid"] if first_done else []) or \
                (first_done and len(ids) == 1 and ids[0].startswith("super-copy")), where
            assert res["errors"] + res["warnings"] == len(ids), where
        else:
            m = re.search(r"^check cancelled during ([a-z ]+): results incomplete$", out, re.M)
            assert m, where
            lines = re.findall(r"^(?:ERROR|warning) .*$", out, re.M)
            assert len(lines) == (m.group(1) != "superblocks"), where
            assert all(damage.match(line) for line in lines), where
            assert "no problems found" not in out, where
    assert cancelled >= 5, f"only {cancelled} of 10 signals came before the check ended"

def interrupted(cmd, delay):
    proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out, err


@pytest.mark.slow
def test_convert_interrupted_commits_whole_or_nothing(tmp_path):
    """SIGINT during `btk-convert profile` (DUP -> single): the filesystem is byte for byte
    unchanged (and says so), or converted whole; the reference check passes either way."""
    require_kernel()
    src = many_files_image()
    before = sha1(src)
    rng = random.Random(os.environ.get("BTK_TEST_SEED", "convert"))
    for delay in sorted(rng.uniform(0.05, 1.5) for _ in range(3)):
        dev = tmp_path / "dev0.img"
        run(["cp", "--sparse=always", src, dev])
        rc, out, err = interrupted([btk_path("btk-convert"), "profile", "--metadata", "single", "-y", dev], delay)
        where = f"SIGINT after {delay:.3f}s: exit {rc}\n{out}\n{err}"
        if rc == 1:
            assert "cancelled" in err and "unchanged" in err, where
            assert sha1(dev) == before, where
        else:
            assert rc == 0 and "converted" in err, where
        p = run(["btrfs", "check", dev], check=False)
        assert p.returncode == 0, where + p.stdout + p.stderr
        dev.unlink()


@pytest.mark.slow
def test_restore_interrupted_is_never_a_filesystem(tmp_path):
    """SIGINT during a restore: exit 1, the output is said to be incomplete (or untouched),
    and it carries no btrfs superblock the kernel or btk would take for a filesystem."""
    src = many_files_image()
    img = tmp_path / "big.btkimg"
    assert run_btk("btk-image", "dump", "-q", "--data", src, img).returncode == 0
    rng = random.Random(os.environ.get("BTK_TEST_SEED", "restore"))
    for delay in sorted(rng.uniform(0.05, 0.8) for _ in range(3)):
        out_img = tmp_path / "restored.img"
        rc, out, err = interrupted([btk_path("btk-image"), "restore", img, out_img], delay)
        where = f"SIGINT after {delay:.3f}s: exit {rc}\n{err}"
        if rc == 0:
            continue
        assert rc == 1 and "cancelled" in err, where
        assert "incomplete" in err or "nothing was written" in err, where
        if not out_img.exists():     # cancelled before the output was created: nothing to mistake
            assert "nothing was written" in err, where
            continue
        p = run_btk("btk-inspect", "super", out_img)
        assert p.returncode != 0 and "not a btrfs" in p.stderr, where + p.stderr
        out_img.unlink(missing_ok=True)


def test_claimed_device_and_the_file_behind_it_refused(tmp_path):
    """A loop device another program holds open exclusively (as mkfs, a mount or a running
    btk do), and the file behind it: refused for writing, still readable."""
    require_kernel()
    src, img = dump_of_copy(tmp_path)
    (dev,) = built("mkfs-single").copy_to(tmp_path / "claimed")
    before = sha1(dev)
    with attached([dev]) as loops:
        fd = os.open(loops[0], os.O_RDONLY | os.O_EXCL)
        try:
            for target in (loops[0], dev):
                p = run_btk("btk-image", "restore", "-f", img, target)
                assert_refused(p, r"in use .*opened exclusively")
                p = run_btk("btk-tune", "--label", "x", target)
                assert_refused(p, r"in use", tool="btk-tune")
            p = run_btk("btk-check", dev)
            assert p.returncode == 0, p.stdout + p.stderr
        finally:
            os.close(fd)
    assert sha1(dev) == before


def test_second_loop_device_of_a_mounted_file_refused(tmp_path):
    """Two loop devices in front of one file, one of them mounted: the other is the same
    storage, and writing it is refused."""
    require_kernel()
    src, img = dump_of_copy(tmp_path)
    victim = fresh_fs(tmp_path / "victim.img")
    before = sha1(victim)
    with attached([victim]) as first, attached([victim]) as second, mounted(first, ("ro",)):
        p = run_btk("btk-image", "restore", "-f", img, second[0])
        assert_refused(p, r"in use: .* mounted")
        p = run_btk("btk-tune", "--label", "x", second[0])
        assert_refused(p, r"mounted", tool="btk-tune")
    assert sha1(victim) == before
