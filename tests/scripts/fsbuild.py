# SPDX-License-Identifier: GPL-2.0-only
"""Build real btrfs filesystems for the pytest suite, and cache them.

A Recipe says how to make one filesystem: mkfs.btrfs options, number of
devices, mount options and whether (and how) the kernel populates it. Building
needs root and loop devices only when the recipe populates the filesystem;
mkfs-only recipes are built as an unprivileged user too.

Built images live in $BTK_TEST_CACHE (default <repo>/build/test-cache), in a
directory named after the recipe and a hash of everything that shapes the
image: the recipe, the population code below, and the mkfs.btrfs version. A
second pytest run (the ASan build, say) reuses them. Cached images are never
written by tests: copy them first (BuiltFS.copy_to) or attach them read-only.
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import hashlib
import inspect
import json
import os
import random
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time
from pathlib import Path

MiB = 1 << 20
REPO = Path(__file__).resolve().parents[2]
# Bump when the build procedure changes in a way the hashed sources do not show.
BUILD_FORMAT = 3


def cache_root() -> Path:
    root = Path(os.environ.get("BTK_TEST_CACHE") or REPO / "build" / "test-cache")
    root.mkdir(parents=True, exist_ok=True)
    return root


@dataclasses.dataclass(frozen=True)
class Recipe:
    name: str
    ndev: int = 1
    dev_size: int = 512 * MiB
    mkfs: tuple[str, ...] = ()
    mount: tuple[str, ...] = ()
    populate: bool = True        # False: mkfs only (no kernel needed)
    nfiles: int = 300            # files in the big directory
    log_tree: bool = False       # leave a log tree behind (fsync, then copy while mounted)

    @property
    def needs_kernel(self) -> bool:
        return self.populate


# Every axis at least once, not the cross product:
#   nodesize 4K/16K/64K; csum crc32c/xxhash/sha256/blake2; no-holes on/off; skinny
#   metadata on/off; mixed; block-group-tree; qgroups and simple quotas; 1-4 devices; profiles single/dup/raid0/1/10/1c3/1c4/5/6;
#   compression zstd/lzo/zlib (mount option, plus per-directory properties in every
#   populated fs); a log tree; mkfs-only filesystems.
RECIPES: list[Recipe] = [
    Recipe("s16k-crc32c-zstd", mkfs=("-n", "16k", "--csum", "crc32c", "-L", "btk test"),
           mount=("compress=zstd",)),
    Recipe("s4k-xxhash-holes-lzo", mkfs=("-n", "4k", "--csum", "xxhash", "-O", "^no-holes",
                                         "-d", "dup", "-m", "dup"),
           mount=("compress=lzo",), nfiles=5000),
    Recipe("s64k-sha256-zlib", mkfs=("-n", "64k", "--csum", "sha256", "-d", "single", "-m", "single",
                                     "-O", "^skinny-metadata"),
           mount=("compress=zlib",)),
    Recipe("mixed-4k-blake2", mkfs=("-M", "-n", "4k", "--csum", "blake2"),
           mount=("compress-force=zstd",)),
    Recipe("bgt-squota-xxhash", mkfs=("-O", "block-group-tree,squota", "--csum", "xxhash")),
    Recipe("log-tree-16k", mkfs=("-n", "16k",), mount=("commit=300",), log_tree=True),
    Recipe("raid0-2dev-blake2", ndev=2, dev_size=384 * MiB,
           mkfs=("-d", "raid0", "-m", "raid1", "--csum", "blake2"), mount=("compress=zstd",)),
    Recipe("raid1-2dev", ndev=2, dev_size=384 * MiB, mkfs=("-d", "raid1", "-m", "raid1")),
    Recipe("raid10-4dev", ndev=4, dev_size=320 * MiB, mkfs=("-d", "raid10", "-m", "raid10")),
    Recipe("raid1c3-3dev", ndev=3, dev_size=320 * MiB, mkfs=("-d", "raid1c3", "-m", "raid1c3")),
    Recipe("raid1c4-4dev-sha256", ndev=4, dev_size=320 * MiB,
           mkfs=("-d", "raid1c4", "-m", "raid1c4", "--csum", "sha256")),
    Recipe("raid5-3dev", ndev=3, dev_size=320 * MiB, mkfs=("-d", "raid5", "-m", "raid1")),
    Recipe("raid6-4dev-64k", ndev=4, dev_size=320 * MiB, mkfs=("-d", "raid6", "-m", "raid6", "-n", "64k")),
    Recipe("mkfs-single", populate=False, mkfs=("-n", "4k",)),
    Recipe("mkfs-2dev-xxhash", ndev=2, dev_size=256 * MiB, populate=False,
           mkfs=("-d", "raid0", "-m", "raid1", "--csum", "xxhash", "-L", "two devices")),
]
RECIPE_BY_NAME = {r.name: r for r in RECIPES}


@dataclasses.dataclass
class BuiltFS:
    recipe: Recipe
    dir: Path
    meta: dict

    @property
    def name(self) -> str:
        return self.recipe.name

    @property
    def devices(self) -> list[Path]:
        return [self.dir / f"dev{i}.img" for i in range(self.recipe.ndev)]

    def copy_to(self, dest: Path) -> list[Path]:
        """Sparse copies of the device images in dest, for tests that may write."""
        dest.mkdir(parents=True, exist_ok=True)
        out = []
        for dev in self.devices:
            target = dest / dev.name
            run(["cp", "--sparse=always", str(dev), str(target)])
            out.append(target)
        return out


# ---------------------------------------------------------------- processes

def run(cmd, *, timeout=120, check=True, input=None) -> subprocess.CompletedProcess:
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                       timeout=timeout, input=input)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({p.returncode}):\n{p.stdout}{p.stderr}")
    return p


@functools.lru_cache(maxsize=None)
def mkfs_version() -> str:
    return run(["mkfs.btrfs", "--version"]).stdout.strip()


def build_dir() -> Path:
    return Path(os.environ.get("BTK_BUILD_DIR") or REPO / "build")


FST_ITEM_TYPES = (198, 199, 200)    # free-space info, extent, bitmap


def drop_mkfs_leftovers(images) -> int:
    """Delete the free-space-tree items mkfs.btrfs before 6.16 leaves of its temporary chunks,
    below the lowest block group (with DUP metadata, its default), so that a fixture is what a
    current mkfs makes: btrfs check 7.x and btk-check fail a filesystem for them
    (test_fst_leftovers.py keeps them on purpose). Returns how many items went."""
    images = [str(i) for i in images]
    inspect_ = build_dir() / "btk-inspect"
    # a damaged filesystem (the corrupt corpus) may make the map exit non-zero, but it maps
    p = run([inspect_, "map", "--format", "json", *images], check=False)
    lowest = min(c["logical"] for c in json.loads(p.stdout)["chunks"])
    p = run([inspect_, "tree", "--format", "jsonl", "--tree", "10", *images], check=False)
    keys = [r["key"] for r in map(json.loads, filter(str.strip, p.stdout.splitlines()))
            if "key" in r and r["key"][1] in FST_ITEM_TYPES and 0 < r["key"][2]
            and r["key"][0] + r["key"][2] <= lowest]
    if keys:
        batch = "".join(f"-t 10 -k {o},{t},{n} -d\n" for o, t, n in keys)
        run([build_dir() / "tests" / "tools" / "btk-corrupt", "--batch", "-", *images], input=batch)
    return len(keys)


def mkfs(images, *opts, tool="mkfs.btrfs", check=True) -> subprocess.CompletedProcess:
    """mkfs.btrfs (or tool) OPTS IMAGES, then without what only an old mkfs leaves
    (drop_mkfs_leftovers): a fixture is what a current mkfs makes."""
    images = [str(i) for i in images]
    p = run([tool, *opts, *images], check=check)
    if p.returncode == 0:
        drop_mkfs_leftovers(images)
    return p


# ---------------------------------------------------------------- loop devices and mounts

_FSID_LOCKS = threading.local()


def _image_fsids(img) -> set[str]:
    """The uuids the kernel and btrfs-progs group a device by: its fsid, and with the
    METADATA_UUID feature its metadata_uuid too (a device whose fsid is another filesystem's
    metadata_uuid is taken for a member of it while an fsid change may be in progress)."""
    try:
        with open(img, "rb") as f:
            f.seek(65536)
            sb = f.read(1024)
    except OSError:
        return set()
    if len(sb) < 587:
        return set()
    out = {sb[32:48].hex()}
    if int.from_bytes(sb[188:196], "little") & (1 << 10):   # incompat METADATA_UUID
        out.add(sb[571:587].hex())
    return out


@contextlib.contextmanager
def fsid_lock(images):
    """Hold a machine-wide lock per fsid while loop devices of these images exist.
    The kernel and btrfs-progs find multi-device members by fsid, so two copies of one
    filesystem attached at once (parallel test workers) would be mistaken for each other.
    Re-entrant within a thread (a test may attach the same fsid again while holding it)."""
    held = getattr(_FSID_LOCKS, "held", None)
    if held is None:
        held = _FSID_LOCKS.held = {}
    mine = []
    try:
        for fsid in sorted(set().union(*map(_image_fsids, images))):
            if fsid in held:
                held[fsid][1] += 1
            else:
                fd = os.open(f"/tmp/btk-test-fsid-{fsid}.lock", os.O_RDWR | os.O_CREAT, 0o666)
                fcntl.flock(fd, fcntl.LOCK_EX)
                held[fsid] = [fd, 1]
            mine.append(fsid)
        yield
    finally:
        for fsid in mine:
            held[fsid][1] -= 1
            if held[fsid][1] == 0:
                os.close(held.pop(fsid)[0])


@contextlib.contextmanager
def attached(images, readonly=False):
    """Attach each image to a free loop device; always detach them again."""
    with fsid_lock(images), _attached(images, readonly) as loops:
        yield loops


@contextlib.contextmanager
def _attached(images, readonly):
    loops: list[str] = []
    try:
        for img in images:
            cmd = ["losetup", "--find", "--show"] + (["--read-only"] if readonly else []) + [str(img)]
            loops.append(run(cmd).stdout.strip())
        yield loops
    finally:
        for loop in reversed(loops):
            # Drop the kernel's record of the device so a later copy with the same
            # fsid/devid is not mistaken for it; harmless if it was never registered.
            run(["btrfs", "device", "scan", "--forget", loop], check=False)
            for attempt in range(20):
                if run(["losetup", "-d", loop], check=False).returncode == 0:
                    break
                time.sleep(0.1 * (attempt + 1))
            _wait_detached(loop)


def _wait_detached(loop: str, timeout: float = 10.0) -> None:
    """losetup -d of a device still open elsewhere (udev probing it, the kernel letting go of
    an unmounted filesystem) only marks it for detaching at the last close: until then it still
    shows the image, and a worker attaching another copy with the same fsid (the lock is
    released right after) would find both. Wait for it to be gone."""
    backing = Path("/sys/block") / Path(loop).name / "loop" / "backing_file"
    deadline = time.monotonic() + timeout
    while backing.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


@contextlib.contextmanager
def mounted(loops, options=()):
    """Mount a (multi-device) btrfs on a temporary directory; always unmount it."""
    mnt = Path(tempfile.mkdtemp(prefix="btk-mnt-"))
    opts = list(options) + [f"device={d}" for d in loops[1:]]
    cmd = ["mount", "-t", "btrfs"] + (["-o", ",".join(opts)] if opts else []) + [loops[0], str(mnt)]
    is_mounted = False
    try:
        run(cmd)
        is_mounted = True
        yield mnt
    finally:
        if is_mounted:
            for attempt in range(20):
                if run(["umount", str(mnt)], check=False).returncode == 0:
                    is_mounted = False
                    break
                time.sleep(0.1 * (attempt + 1))
            if is_mounted:
                run(["umount", "-l", str(mnt)], check=False)
        with contextlib.suppress(OSError):
            mnt.rmdir()


# ---------------------------------------------------------------- population (runs as root on a mount)

FICLONERANGE = 0x4020940D


def _write(path: Path, data: bytes, mode=0o644):
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, mode)


def _clone_range(src: Path, dst: Path, src_off: int, length: int, dst_off: int):
    with open(src, "rb") as s, open(dst, "r+b" if dst.exists() else "w+b") as d:
        arg = struct.pack("=qQQQ", s.fileno(), src_off, length, dst_off)
        fcntl.ioctl(d.fileno(), FICLONERANGE, arg)


def populate(mnt: Path, r: Recipe):
    """Fill a mounted filesystem with every kind of item the comparisons look at."""
    rng = random.Random(r.name)
    text = b"".join(b"line %06d: the quick brown fox jumps over the lazy dog\n" % i for i in range(40000))
    if "squota" not in ",".join(r.mkfs):        # simple quotas are on from mkfs
        run(["btrfs", "quota", "enable", mnt])

    # inline extents: random (incompressible) and text (compressible when compressing)
    for i in range(6):
        _write(mnt / f"small{i}", rng.randbytes(rng.randint(1, 1800)))
    _write(mnt / "inline-text", text[:1500])
    _write(mnt / "empty", b"")
    # names with spaces, and names that are not UTF-8
    _write(mnt / "name with  spaces ", b"x")
    with open(os.path.join(os.fsencode(mnt), b"latin1-\xe9t\xe9"), "wb") as f:
        f.write(b"not utf-8\n")
    # regular extents, incompressible and compressible
    _write(mnt / "random-3M", rng.randbytes(3 * MiB))
    _write(mnt / "text-2M", text[: 2 * MiB])
    # per-directory compression properties, whatever the mount option says
    for algo in ("zlib", "lzo", "zstd"):
        d = mnt / f"compress-{algo}"
        d.mkdir()
        run(["btrfs", "property", "set", d, "compression", algo])
        _write(d / "text", text[: 512 * 1024])
        _write(d / "inline", text[:900])
    # chattr +c on an empty file, then write
    (mnt / "chattr-c").touch()
    run(["chattr", "+c", mnt / "chattr-c"])
    _write(mnt / "chattr-c", text[: 300 * 1024])
    # sparse file: holes (explicit hole extents without no-holes)
    with open(mnt / "sparse", "wb") as f:
        f.truncate(64 * MiB)
        f.seek(1 * MiB)
        f.write(rng.randbytes(8192))
        f.seek(40 * MiB)
        f.write(rng.randbytes(4096))
    # preallocated extent, partly written
    fd = os.open(mnt / "prealloc", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.posix_fallocate(fd, 0, 2 * MiB)
        os.pwrite(fd, rng.randbytes(128 * 1024), 256 * 1024)
    finally:
        os.close(fd)
    # hardlinks, and enough long-named links in one directory to need INODE_EXTREF
    (mnt / "dir-a").mkdir()
    os.link(mnt / "random-3M", mnt / "hardlink-3M")
    os.link(mnt / "random-3M", mnt / "dir-a" / "hardlink-in-dir")
    links = mnt / "links"
    links.mkdir()
    for i in range(300):     # 300 * ~250 bytes overflows even a 64K leaf
        os.link(mnt / "small0", links / (f"{i:03d}-" + "L" * 236))
    # reflinks: whole file and a range (EXTENT_DATA with offset != 0)
    run(["cp", "--reflink=always", mnt / "random-3M", mnt / "reflink-3M"])
    _clone_range(mnt / "random-3M", mnt / "reflink-range", 1 * MiB, 1 * MiB, 0)
    # symlinks, special files
    os.symlink("small1", mnt / "symlink-short")
    os.symlink("/" + "/".join(["long-component"] * 60), mnt / "symlink-long")
    os.mkfifo(mnt / "fifo")
    os.mknod(mnt / "chardev", 0o600 | 0o020000, os.makedev(1, 3))
    os.mknod(mnt / "blockdev", 0o600 | 0o060000, os.makedev(7, 200))
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(mnt / "socket"))
    # xattrs: small, large, many; on a file and a directory
    os.setxattr(mnt / "small1", "user.small", b"v")
    os.setxattr(mnt / "small1", "user.big", b"x" * 2000)
    for i in range(20):
        os.setxattr(mnt / "dir-a", f"user.attr{i:02d}", b"value-%d" % i)
    # a big directory; some files deleted again
    big = mnt / "bigdir"
    big.mkdir()
    for i in range(r.nfiles):
        with open(big / f"file-{i:05d}", "wb") as f:
            if i % 3 == 0:
                f.write(b"%d\n" % i)
    for i in range(0, r.nfiles, 7):
        os.unlink(big / f"file-{i:05d}")
    # subvolume with its own files, a qgroup holding it
    run(["btrfs", "subvolume", "create", mnt / "subvol"])
    _write(mnt / "subvol" / "inside", rng.randbytes(200 * 1024))
    _write(mnt / "subvol" / "inline", b"inside a subvolume\n")
    run(["btrfs", "qgroup", "create", "1/100", mnt])
    subvol_id = run(["btrfs", "inspect-internal", "rootid", mnt / "subvol"]).stdout.strip()
    run(["btrfs", "qgroup", "assign", "--no-rescan", f"0/{subvol_id}", "1/100", mnt], check=False)
    run(["sync", "-f", mnt])
    # snapshots: read-only of the subvolume, writable of the top level; then COW
    # both sides so tree blocks become shared / full-backref
    run(["btrfs", "subvolume", "snapshot", "-r", mnt / "subvol", mnt / "subvol-snap-ro"])
    run(["btrfs", "subvolume", "snapshot", mnt, mnt / "snap"])
    _write(mnt / "small2", b"rewritten after the snapshot\n")
    with open(mnt / "random-3M", "r+b") as f:
        f.seek(512 * 1024)
        f.write(rng.randbytes(64 * 1024))
    _write(mnt / "snap" / "only-in-snap", rng.randbytes(20000))
    run(["btrfs", "quota", "rescan", "-w", mnt], check=False)
    run(["sync", "-f", mnt])


def leave_log_tree(mnt: Path, images: list[Path], dest: list[Path]):
    """fsync new data (which writes a log tree), then copy the devices before any commit."""
    rng = random.Random("log")
    paths = [mnt / "logged-new", mnt / "small3", mnt / "bigdir" / "logged-in-dir"]
    for i, p in enumerate(paths):
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, rng.randbytes(100 if i else 70000))
            os.fsync(fd)
        finally:
            os.close(fd)
    for src, dst in zip(images, dest):
        run(["cp", "--sparse=always", src, dst])


# ---------------------------------------------------------------- building and caching

def recipe_key(r: Recipe) -> str:
    h = hashlib.sha256()
    h.update(json.dumps(dataclasses.asdict(r), sort_keys=True).encode())
    for fn in (populate, leave_log_tree, _write, _clone_range, _build_into, mkfs, drop_mkfs_leftovers):
        h.update(inspect.getsource(fn).encode())
    h.update(str(BUILD_FORMAT).encode())
    h.update(mkfs_version().encode())
    return h.hexdigest()[:12]


def _build_into(r: Recipe, tmp: Path):
    images = [tmp / f"dev{i}.img" for i in range(r.ndev)]
    for img in images:
        with open(img, "wb") as f:
            f.truncate(r.dev_size)
    mkfs(images, "-f", "-q", *r.mkfs)
    if not r.populate:
        return
    # a log tree only survives in a copy taken while mounted: then work on other files
    work = [tmp / f"work{i}.img" for i in range(r.ndev)] if r.log_tree else images
    for img, w in zip(images, work):
        if w != img:
            img.rename(w)
    with attached(work) as loops:
        with mounted(loops, r.mount) as mnt:
            populate(mnt, r)
            if r.log_tree:
                leave_log_tree(mnt, work, images)
    for img, w in zip(images, work):
        if w != img:
            w.unlink()


def build(r: Recipe) -> BuiltFS:
    """The cached filesystem for a recipe, building it first if needed."""
    root = cache_root()
    key = recipe_key(r)
    final = root / f"{r.name}-{key}"
    with open(root / f".{r.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (final / "meta.json").exists():
            tmp = Path(tempfile.mkdtemp(prefix=f".{r.name}-", dir=root))
            try:
                t0 = time.monotonic()
                _build_into(r, tmp)
                meta = dict(recipe=dataclasses.asdict(r), key=key,
                            build_seconds=round(time.monotonic() - t0, 2), mkfs=mkfs_version())
                (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
                tmp.chmod(0o755)
                if final.exists():
                    shutil.rmtree(final)
                tmp.rename(final)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            # older builds of the same recipe are stale now
            for old in root.glob(f"{r.name}-*"):
                name, _, oldkey = old.name.rpartition("-")
                if old != final and old.is_dir() and name == r.name and len(oldkey) == len(key):
                    shutil.rmtree(old, ignore_errors=True)
        meta = json.loads((final / "meta.json").read_text())
    return BuiltFS(r, final, meta)


def update_meta(fs: BuiltFS, **items):
    """Record derived facts (e.g. the kernel's df) next to a cached image."""
    with open(cache_root() / f".{fs.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        meta = json.loads((fs.dir / "meta.json").read_text())
        meta.update(items)
        tmp = fs.dir / "meta.json.tmp"
        tmp.write_text(json.dumps(meta, indent=1))
        tmp.rename(fs.dir / "meta.json")
        fs.meta = meta


# ---------------------------------------------------------------- what the kernel says

def parse_fs_df(text: str) -> list[dict]:
    """`btrfs filesystem df -b` -> [{type, profile, total, used}] (GlobalReserve included)."""
    out = []
    for line in text.splitlines():
        if ":" not in line or "total=" not in line:
            continue
        head, rest = line.split(":", 1)
        typ, profile = (s.strip() for s in head.split(","))
        vals = dict(kv.strip().split("=") for kv in rest.split(","))
        out.append({"type": typ, "profile": profile, "total": int(vals["total"]), "used": int(vals["used"])})
    return out


def kernel_df(fs: BuiltFS, has_log_tree: bool) -> list[dict]:
    """Mount the cached image read-only (read-only loop devices too) and ask the kernel."""
    if "df" in fs.meta:
        return fs.meta["df"]
    opts = ["ro"] + (["rescue=nologreplay"] if has_log_tree else [])
    with attached(fs.devices, readonly=True) as loops:
        with mounted(loops, opts) as mnt:
            df = parse_fs_df(run(["btrfs", "filesystem", "df", "-b", mnt]).stdout)
    update_meta(fs, df=df)
    return df
