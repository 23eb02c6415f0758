# SPDX-License-Identifier: GPL-2.0-only
"""bench/check/run --snapshots: btk-check against `btrfs check --readonly` on
filesystems with K read-only snapshots of one subvolume (snapgen.py), for
K = 10, 100, 1000 (and 10000 with --big), two kinds each:
  timeline   F files in D directories, a few creates, deletes, renames,
             rewrites and a log append between two snapshots
  identical  the same files, K snapshots with no change between them
Prints per image: wall time and peak RSS of each tool, the unique tree blocks
(btk-check's count) and btk-check's time per unique tree block. The images
are kept in --scratch (made again only when missing)."""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LATEST = "/opt/btrfs-progs-latest/bin/btrfs"


def timed(cmd, timeout):
    """(wall s, peak RSS MiB, exit status or None when stopped, CPU s (user + system), stdout)."""
    t0 = time.monotonic()
    try:
        p = subprocess.run(["/usr/bin/time", "-f", "%e %M %U %S", "-o", "/dev/stderr", *cmd], capture_output=True,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return time.monotonic() - t0, None, None, None, ""
    last = p.stderr.strip().splitlines()[-1].split()
    return float(last[0]), int(last[1]) / 1024.0, p.returncode, float(last[2]) + float(last[3]), p.stdout


def image(a, kind, k):
    img = os.path.join(a.scratch, f"snap-{kind}-f{a.files}-d{a.dirs}-k{k}.img")
    if not os.path.exists(img):
        t0 = time.monotonic()
        cmd = [sys.executable, os.path.join(HERE, "snapgen.py"), img + ".tmp", "--files", str(a.files),
               "--dirs", str(a.dirs), "--snaps", str(k), "--size", a.size]
        subprocess.run(cmd + (["--identical"] if kind == "identical" else []), check=True)
        os.rename(img + ".tmp", img)
        print(f"  (made {os.path.basename(img)} in {time.monotonic() - t0:.0f} s)", flush=True)
    return img


def bench(a, kind, k):
    img = image(a, kind, k)
    btk = os.path.join(a.btk_bin, "btk-check")
    subprocess.run([btk, "-q", img], capture_output=True)   # warm the page cache
    wall, rss, rc, cpu, out = timed([btk, img], a.timeout)
    m = re.search(r"tree blocks: (\d+)", out)
    blocks = int(m.group(1)) if m else 0
    rows = [("btk-check", wall, rss, rc, cpu)]
    for name, tool in (("btrfs check", a.btrfs), ("btrfs check (latest)", LATEST)):
        if tool and os.access(tool, os.X_OK):
            w, r, c, u, _ = timed([tool, "check", "--readonly", img], a.timeout)
            rows.append((name, w, r, c, u))
    print(f"{kind} K={k}: {blocks} unique tree blocks; btk-check per block {1e6 * wall / max(blocks, 1):.0f} us "
          f"wall, {1e6 * (cpu or 0) / max(blocks, 1):.0f} us CPU; load average {os.getloadavg()[0]:.1f}")
    for name, w, r, c, u in rows:
        ratio = f"  btk/this {wall / w:.2f}x" if name != "btk-check" and c is not None and w > 0 else ""
        print(f"  {name:22} {('> %d' % a.timeout) if c is None else '%.2f' % w:>8} s  "
              f"{('%.2f' % u) if u is not None else '-':>7} s CPU  {('%.0f' % r) if r else '-':>6} MiB  "
              f"exit {'stopped' if c is None else c}{ratio}", flush=True)
    return {"kind": kind, "k": k, "blocks": blocks, "us_per_block": 1e6 * wall / max(blocks, 1),
            "runs": [{"tool": n, "wall_s": w, "rss_mib": r, "exit": c, "cpu_s": u} for n, w, r, c, u in rows]}


def main(argv):
    ap = argparse.ArgumentParser(prog="bench/check/run --snapshots", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--snapshots", action="store_true")
    ap.add_argument("--big", action="store_true", help="K = 10000 too")
    ap.add_argument("-k", type=int, action="append", help="only these K (repeatable)")
    ap.add_argument("--kind", choices=("timeline", "identical"), action="append")
    ap.add_argument("--files", type=int, default=40000)
    ap.add_argument("--dirs", type=int, default=400)
    ap.add_argument("--size", default="16G")
    ap.add_argument("--scratch", default="/tmp/btk-bench-snapshots")
    ap.add_argument("--btk-bin", default=os.path.join(os.path.dirname(os.path.dirname(HERE)), "build"))
    ap.add_argument("--btrfs", default=shutil.which("btrfs"))
    ap.add_argument("--timeout", type=float, default=1800)
    a = ap.parse_args(argv)
    os.makedirs(a.scratch, exist_ok=True)
    ks = a.k or ([10, 100, 1000] + ([10000] if a.big else []))
    for kind in a.kind or ("timeline", "identical"):
        for k in ks:
            bench(a, kind, k)
    return 0
