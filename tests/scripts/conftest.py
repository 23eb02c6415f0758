# SPDX-License-Identifier: GPL-2.0-only
"""Shared fixtures for the btk pytest suite.

- `fs`: one real filesystem per recipe (fsbuild.RECIPES), built once and cached on disk;
  `fs_dump`: its dump-tree, parsed.
- `run_btk(tool, *args)`: the one way tests run a btk program.
- Policy for what cannot run here (no root / loop devices, no btk binary yet):
  skip_or_fail() skips with the reason, or fails when BTK_REQUIRE_KERNEL_TESTS=1 (CI).
"""
from __future__ import annotations

import errno
import functools
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import dumptree  # noqa: E402
import fsbuild  # noqa: E402

REQUIRE = os.environ.get("BTK_REQUIRE_KERNEL_TESTS") == "1"
BUILD_DIR = Path(os.environ.get("BTK_BUILD_DIR") or fsbuild.REPO / "build")
CACHE_PREFIX = str(fsbuild.cache_root()) + os.sep
SANITIZER_MARKERS = ("AddressSanitizer", "LeakSanitizer", "UndefinedBehaviorSanitizer",
                     "runtime error:", "MemorySanitizer", "ThreadSanitizer")



def _terminated(signum, frame):
    # A plain SIGTERM would skip every `finally`: mounts and loop devices would stay behind.
    raise KeyboardInterrupt(f"terminated by signal {signum}")


signal.signal(signal.SIGTERM, _terminated)


# ---------------------------------------------------------------- policy

def skip_or_fail(reason: str):
    """What cannot run here is skipped, except in CI (BTK_REQUIRE_KERNEL_TESTS=1) where it fails."""
    if REQUIRE:
        pytest.fail(f"{reason} (BTK_REQUIRE_KERNEL_TESTS=1: this must run)", pytrace=False)
    pytest.skip(reason)


@functools.lru_cache(maxsize=None)
def kernel_unavailable() -> str | None:
    """Why kernel tests (mkfs + loop mount as root) cannot run, or None if they can."""
    if os.geteuid() != 0:
        return "kernel tests need root (loop devices and mounts)"
    for tool in ("mkfs.btrfs", "btrfs", "losetup", "mount"):
        if not shutil.which(tool):
            return f"kernel tests need {tool}"
    if not Path("/dev/loop-control").exists():
        return "no loop device support (/dev/loop-control missing)"
    if subprocess.run(["losetup", "--find"], capture_output=True).returncode != 0:
        return "no free loop device"
    fs = Path("/proc/filesystems").read_text()
    if "btrfs" not in fs:
        subprocess.run(["modprobe", "btrfs"], capture_output=True)
        if "btrfs" not in Path("/proc/filesystems").read_text():
            return "the kernel has no btrfs"
    return None


def require_kernel():
    reason = kernel_unavailable()
    if reason:
        skip_or_fail(reason)


def require_reference_tools():
    if not shutil.which("mkfs.btrfs") or not shutil.which("btrfs"):
        skip_or_fail("btrfs-progs (mkfs.btrfs, btrfs) not installed")


def btk_path(tool: str) -> Path:
    return BUILD_DIR / tool


def require_btk(tool: str = "btk-inspect") -> Path:
    path = btk_path(tool)
    if not os.access(path, os.X_OK):
        skip_or_fail(f"{path} is not built yet")
    return path


@functools.lru_cache(maxsize=None)
def sanitized_build() -> bool:
    """The programs under test are built with AddressSanitizer (make check-asan). The tests
    run in that pass too; a test may leave the kernel oracles to the plain pass, which
    applies them to the same test (their verdict is on btk's logic, not its memory use)."""
    path = btk_path("btk-check")
    try:
        return b"__asan_init" in path.read_bytes()
    except OSError:
        return False


# ---------------------------------------------------------------- running btk

def run_btk(tool: str, *args, timeout: float = 300, check_crash: bool = True) -> subprocess.CompletedProcess:
    """Run a btk program: captured text output, a timeout, and never a crash or sanitizer report."""
    path = require_btk(tool)
    env = dict(os.environ)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    where = f"{tool} {' '.join(map(str, args))}"
    # a cached image another test worker has attached would be refused as mounted
    cached = [a for a in map(str, args) if a.startswith(CACHE_PREFIX) and os.path.isfile(a)]
    try:
        with fsbuild.fsid_lock(cached):
            p = subprocess.run([str(path), *map(str, args)], capture_output=True, text=True,
                               errors="surrogateescape", timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{where} timed out after {timeout}s", pytrace=False)
    for marker in SANITIZER_MARKERS:
        assert marker not in p.stderr, f"sanitizer report from {where}:\n{p.stderr[-6000:]}"
    if check_crash:
        assert p.returncode >= 0 and p.returncode not in (134, 139), \
            f"{where} crashed (exit {p.returncode}):\n{p.stderr[-4000:]}"
    return p


def check_json(devices, *args):
    """btk-check --format json that must complete (exit 0 or 4): (exit, output, problem ids)."""
    p = run_btk("btk-check", "--format", "json", *args, *devices)
    assert p.returncode in (0, 4), f"btk-check exit {p.returncode}:\n{p.stderr[-3000:]}"
    out = json.loads(p.stdout)
    return p.returncode, out, {x["id"] for x in out["problems"]}


def sample_copy(where: Path) -> Path:
    """A fresh copy of the sample filesystem (tests/images/sample.img.xz: 100 MiB, one device,
    fixed fsid, label btk-sample, DUP metadata) in the directory where."""
    img = Path(where) / "sample.img"
    with open(img, "wb") as f:
        subprocess.run(["xz", "-dc", str(fsbuild.REPO / "tests/images/sample.img.xz")], stdout=f, check=True)
    return img


def check_runs(stdout: str) -> list[dict]:
    """btk-check --format json prints one document: its check, its "repair" and its "after_repair"
    (those it has), in that order."""
    doc = json.loads(stdout)
    assert doc["version"] == 1 and doc["program"] == "btk-check", doc
    return [doc] + [doc[k] for k in ("repair", "after_repair") if k in doc]


def super_json(stdout: str):
    """The superblock (or with --all-copies the list of copies) of the first device in
    btk-inspect super --format json's one document."""
    doc = json.loads(stdout)
    assert doc["version"] == 1 and doc["command"] == "super", doc
    dev = doc["devices"][0]
    return dev["superblock"] if "superblock" in dev else dev["copies"]


def error_lines(stderr: str, tool: str = "btk-inspect") -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(f"{tool}: error:")]


def assert_clean_error(p: subprocess.CompletedProcess, pattern: str | None = None):
    """A failure the user can read: non-zero exit, a '<tool>: error:' line, optional pattern."""
    tool = Path(p.args[0]).name
    assert p.returncode != 0, f"expected failure, got exit 0\nstdout: {p.stdout[:2000]}\nstderr: {p.stderr}"
    assert error_lines(p.stderr, tool), f"no '{tool}: error:' line in stderr:\n{p.stderr}"
    if pattern:
        assert re.search(pattern, p.stderr, re.I), f"stderr does not match /{pattern}/:\n{p.stderr}"


def image_digest(path) -> str:
    """What an image file holds, hashed without reading its holes: its size, then each
    1 MiB piece that is not all zeros, with its offset. Files with the same bytes get the same
    digest wherever either has holes; reading a 512 MiB image whole cost a second a test."""
    piece = 1 << 20
    zeros = bytes(piece)
    h = hashlib.sha256()
    size = os.path.getsize(path)
    h.update(size.to_bytes(8, "little"))
    with open(path, "rb") as f:
        pos = 0
        while pos < size:
            try:
                data = os.lseek(f.fileno(), pos, os.SEEK_DATA)
            except OSError as e:
                if e.errno == errno.ENXIO:
                    break
                raise
            hole = os.lseek(f.fileno(), data, os.SEEK_HOLE)
            start = data - data % piece
            while start < hole:
                f.seek(start)
                buf = f.read(piece)
                if buf != zeros[:len(buf)]:
                    h.update(start.to_bytes(8, "little"))
                    h.update(buf)
                start += piece
            pos = start
    return h.hexdigest()


def images_digest(paths) -> list[str]:
    return [image_digest(p) for p in paths]


def undone_digests(undo, devices, where: Path) -> list[str]:
    """btk-undo applied to copies of the devices (the kernel may mount the originals after):
    the copies' digests, to compare with the damaged images'."""
    copies = []
    for d in devices:
        c = where / ("undo-" + Path(d).name)
        subprocess.run(["cp", "--sparse=always", str(d), str(c)], check=True)
        copies.append(c)
    p = run_btk("btk-undo", str(undo), *map(str, copies))
    assert p.returncode == 0, p.stderr
    return images_digest(copies)


def parse_jsonl(text: str) -> list[dict]:
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise AssertionError(f"line {n} is not JSON ({e}): {line[:300]}") from None
    return out


# ---------------------------------------------------------------- building filesystems

class Builder:
    """Builds the recipes this session needs, in parallel (one per core), each at most once."""

    def __init__(self):
        self.lock = threading.Lock()
        self.needed: list[str] = []
        self.results: dict[str, object] = {}
        self.started = False

    def _build_one(self, name):
        r = fsbuild.RECIPE_BY_NAME[name]
        try:
            return fsbuild.build(r)
        except Exception as e:  # recorded and raised in the test that needs it
            return e

    def _prebuild(self):
        names = [n for n in self.needed if not fsbuild.RECIPE_BY_NAME[n].needs_kernel or not kernel_unavailable()]
        workers = max(1, min(len(names), os.cpu_count() or 2, 4))
        with ThreadPoolExecutor(workers) as ex:
            for name, res in zip(names, ex.map(self._build_one, names)):
                self.results[name] = res

    def get(self, name) -> fsbuild.BuiltFS:
        r = fsbuild.RECIPE_BY_NAME[name]
        require_reference_tools()
        if r.needs_kernel:
            require_kernel()
        with self.lock:
            if not self.started:
                self.started = True
                self._prebuild()
            if name not in self.results:
                self.results[name] = self._build_one(name)
        res = self.results[name]
        if isinstance(res, Exception):
            pytest.fail(f"building filesystem {name!r} failed: {res}", pytrace=False)
        return res


BUILDER = Builder()
RECIPE_NAMES = [r.name for r in fsbuild.RECIPES]


# Undo files a repair writes by default go to $BTK_UNDO_DIR (else /var/lib/btk/undo): one temporary
# directory for the whole run, so that tests leave nothing in /var/lib (workers inherit it).
_UNDO_DIR_MADE: list[str] = []


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: long kernel-oracle runs (crash replays, big images); the ASan rerun skips them")
    config.addinivalue_line(
        "markers", "extended: a wider matrix of damage CI already covers with a few cases of it; only "
        "make check-extended runs them")
    config.addinivalue_line(
        "markers", "no_sanitize: runs no btk code a sanitizer could judge (man pages, the reference "
        "tools' parsers, packaging); the ASan rerun skips them")
    if not os.environ.get("BTK_UNDO_DIR"):
        import tempfile
        _UNDO_DIR_MADE.append(tempfile.mkdtemp(prefix="btk-undo-"))
        os.environ["BTK_UNDO_DIR"] = _UNDO_DIR_MADE[0]


def pytest_unconfigure(config):
    for d in _UNDO_DIR_MADE:
        shutil.rmtree(d, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    """Note which recipes the selected tests use (as a parameter), to build them up front."""
    needed = []
    for item in items:
        cs = getattr(item, "callspec", None)
        for value in (cs.params.values() if cs else ()):
            if isinstance(value, str) and value in fsbuild.RECIPE_BY_NAME and value not in needed:
                needed.append(value)
    BUILDER.needed = needed


@pytest.fixture(scope="session", params=RECIPE_NAMES)
def fs(request) -> fsbuild.BuiltFS:
    """Every recipe's filesystem (cached images: never write to them)."""
    return BUILDER.get(request.param)


def built(name: str) -> fsbuild.BuiltFS:
    return BUILDER.get(name)


@functools.lru_cache(maxsize=None)
def dump_of(name: str) -> dumptree.DumpTree:
    return dumptree.dump_tree(BUILDER.get(name).devices)


@pytest.fixture(scope="session")
def fs_dump(fs) -> dumptree.DumpTree:
    return dump_of(fs.name)


@functools.lru_cache(maxsize=None)
def btk_tree_records(name: str) -> tuple[list[dict], str]:
    """btk-inspect tree --format jsonl over all devices of a recipe: (records, stderr)."""
    p = run_btk("btk-inspect", "tree", "--format", "jsonl", *BUILDER.get(name).devices)
    assert p.returncode == 0, f"btk-inspect tree failed ({p.returncode}):\n{p.stderr[-4000:]}"
    return parse_jsonl(p.stdout), p.stderr
