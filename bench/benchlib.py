# SPDX-License-Identifier: GPL-2.0-only
"""What the bench scripts share: running tools under /usr/bin/time, cold caches, loop devices
whose /sys/block/loopN/stat counts a tool's reads and writes, and cleanup of what they made."""
import os
import subprocess
import sys
import tempfile
import time

TIME_BIN = "/usr/bin/time"


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(argv, check=True, **kw):
    p = subprocess.run(argv, capture_output=True, text=True, **kw)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed (exit {p.returncode}):\n{p.stderr.strip()}")
    return p


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except OSError:
        return float("nan")


def dev_stat(dev):
    """(sectors read, sectors written) of a block device, from /sys/block/X/stat."""
    with open(f"/sys/block/{os.path.basename(dev)}/stat") as f:
        v = f.read().split()
    return int(v[2]), int(v[6])


def stat_delta(a, b):
    return {"read_bytes": (b[0] - a[0]) * 512, "written_bytes": (b[1] - a[1]) * 512}


def allocated_bytes(path):
    st = os.stat(path)
    return st.st_blocks * 512


class Resources:
    """Loop devices and mounts made by this script, undone in reverse order."""

    def __init__(self):
        self.loops = []
        self.mounts = []

    def attach(self, img):
        dev = run(["losetup", "--find", "--show", img]).stdout.strip()
        if not dev.startswith("/dev/loop"):
            raise RuntimeError(f"losetup gave {dev!r}")
        self.loops.append(dev)
        return dev

    def detach(self, dev):
        if dev in self.loops:
            run(["losetup", "-d", dev], check=False)
            self.loops.remove(dev)

    def mount(self, dev, mnt):
        run(["mount", "-t", "btrfs", dev, mnt])
        self.mounts.append(mnt)

    def umount(self, mnt):
        if mnt in self.mounts:
            p = run(["umount", mnt], check=False)
            if p.returncode != 0:
                log(f"warning: umount {mnt} failed: {p.stderr.strip()}")
                return False
            self.mounts.remove(mnt)
        return True

    def cleanup(self):
        for m in list(reversed(self.mounts)):
            self.umount(m)
        for d in list(reversed(self.loops)):
            self.detach(d)


def timed(argv):
    """Run under /usr/bin/time: (wall_s by perf_counter, maxrss_kib, user_s, sys_s, rc, stdout, stderr)."""
    fd, tpath = tempfile.mkstemp(prefix="bench-time.", dir="/tmp")
    os.close(fd)
    try:
        t0 = time.perf_counter()
        p = subprocess.run([TIME_BIN, "-f", "%e %M %U %S", "-o", tpath] + argv, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        with open(tpath) as f:
            lines = [line for line in f.read().splitlines() if line.strip()]
        _, m, u, s = lines[-1].split()
        return wall, int(m), float(u), float(s), p.returncode, p.stdout, p.stderr
    finally:
        os.unlink(tpath)


def copy_image(src, dst):
    t0 = time.perf_counter()
    run(["cp", "--sparse=always", src, dst])
    os.sync()
    return time.perf_counter() - t0


def fmt_bytes(n):
    if n >= 1e9:
        return f"{n / 1e9:.2f} GB"
    if n >= 1e6:
        return f"{n / 1e6:.2f} MB"
    return f"{n / 1e3:.0f} kB"


def data_segments(path, ranges):
    """The allocated (non-hole) parts of each (offset, length) of a sparse file."""
    segs = []
    fd = os.open(path, os.O_RDONLY)
    try:
        for off, length in ranges:
            pos, end = off, off + length
            while pos < end:
                try:
                    d = os.lseek(fd, pos, os.SEEK_DATA)
                except OSError:
                    break
                if d >= end:
                    break
                h = min(os.lseek(fd, d, os.SEEK_HOLE), end)
                segs.append((d, h - d))
                pos = h
    finally:
        os.close(fd)
    return segs


def read_segments(dev, segs, bufsize=1 << 20):
    """Read every segment of dev sequentially, bufsize at a time; return (bytes, seconds)."""
    buf = bytearray(bufsize)
    total = 0
    fd = os.open(dev, os.O_RDONLY)
    try:
        t0 = time.perf_counter()
        for off, length in segs:
            pos, end = off, off + length
            while pos < end:
                n = min(bufsize, end - pos)
                got = os.preadv(fd, [memoryview(buf)[:n]], pos)
                if got <= 0:
                    raise RuntimeError(f"short read on {dev} at {pos}")
                pos += got
                total += got
        secs = time.perf_counter() - t0
    finally:
        os.close(fd)
    return total, secs


def chunk_stripe_ranges(chunks, flag, devid=1):
    """(physical, length) of every stripe on devid of the chunks whose flags name flag,
    from `btk-inspect map --format json`."""
    out = []
    for c in chunks:
        if flag not in c["flags"].split("|"):
            continue
        n, prof = len(c["stripes"]), c["profile"].lower()
        if prof == "raid0":
            size = c["length"] // n
        elif prof == "raid10":
            size = c["length"] * 2 // n
        elif prof in ("raid5", "raid6"):
            size = c["length"] // (n - (1 if prof == "raid5" else 2))
        else:
            size = c["length"]
        out += [(s["physical"], size) for s in c["stripes"] if s["devid"] == devid]
    return sorted(out)
