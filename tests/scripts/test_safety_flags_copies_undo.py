# SPDX-License-Identifier: GPL-2.0-only
"""Safety (issue 12): the feature gate, lost superblock copies, the undo directory.

- Feature flags: an incompat bit btk does not know opens nothing (btk-check exit 8, the bits in
  hex); a compat_ro bit it does not know is read with a warning and never written; zoned,
  extent-tree-v2, raid-stripe-tree and remap-tree are read but never written. Every refusal
  leaves the target's bytes as they were (sha1 before and after).
- A missing, stale or invalid secondary superblock copy is a warning (exit 0 alone), as for the
  kernel and btrfs check (btrfs-image -r writes the primary only); --repair rewrites the copies.
- The default undo file goes to $BTK_UNDO_DIR (else /var/lib/btk/undo), never the working
  directory; a directory that cannot be made is refused before the check starts.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

import fsbuild
from conftest import images_digest, btk_path, built, check_runs, require_btk, require_kernel, require_reference_tools, \
    run_btk, skip_or_fail, super_json

BASE = "mkfs-single"
SUPER_OFFSETS = (64 << 10, 64 << 20, 256 << 30)


def sha1(paths) -> list[str]:
    """Each image's bytes, hashed over its data segments only (a 260 GiB sparse image is read in
    milliseconds; a hole and written zeros are the same bytes)."""
    return images_digest(paths)


def corrupt(devs, *args):
    tool = btk_path("tests/tools/btk-corrupt")
    if not os.access(tool, os.X_OK):
        skip_or_fail(f"{tool} is not built (make test-tools)")
    p = subprocess.run([str(tool), *args, *map(str, devs)], capture_output=True, text=True)
    assert p.returncode == 0, f"btk-corrupt {args}: {p.stderr}"


def set_bits(devs, field: str, bits: int):
    """Set feature bits in every superblock copy of every device (checksum recomputed)."""
    corrupt(devs, "-S", "-f", field, "-v", f"^{bits:#x}")


def mkfs_sparse(img: Path, size: str, *opts) -> subprocess.CompletedProcess:
    subprocess.run(["truncate", "-s", size, str(img)], check=True)
    return fsbuild.mkfs([img], "-q", "-f", *opts, check=False)


def copy_of(name: str, tmp_path: Path) -> list[Path]:
    require_btk("btk-check")
    return built(name).copy_to(tmp_path / "devs")


def check(devs, *args, env=None):
    """btk-check --format json: (exit, [check, repair, after_repair] as the run has them, process)."""
    p = run_btk("btk-check", "--format", "json", *args, *map(str, devs)) if env is None else \
        subprocess.run([str(require_btk("btk-check")), "--format", "json", *args, *map(str, devs)],
                       capture_output=True, text=True, env=env)
    return p.returncode, check_runs(p.stdout), p


def refused(objs: list[dict], rc: int) -> bool:
    """The run's one document says it stopped before checking anything: an error, no problems."""
    return len(objs) == 1 and objs[0]["error"] and "problems" not in objs[0] and objs[0]["exit_status"] == rc


def ids_of(summary: dict) -> set[str]:
    return {pr["id"] for pr in summary["problems"]}


# ---------------------------------------------------------------- feature flags

UNKNOWN_INCOMPAT = (1 << 18) | (1 << 40)
UNKNOWN_COMPAT_RO = 1 << 10


def writers(devs, undo_dir: Path) -> dict[str, list[str]]:
    """One writing command of every btk writer on devs."""
    d = list(map(str, devs))
    return {
        "tune-label": ["btk-tune", "--label", "changed", *d],
        "tune-label-dry": ["btk-tune", "--dry-run", "--label", "changed", *d],
        "check-repair": ["btk-check", "--repair", "--yes", "--rebuild-uuid-tree", *d],
        "convert-profile": ["btk-convert", "profile", "--metadata", "single", "--system", "single", *d],
        "convert-bg-tree": ["btk-convert", "bg-tree", *d],
    }


def test_unknown_incompat_bit_opens_nothing(tmp_path):
    devs = copy_of(BASE, tmp_path)
    set_bits(devs, "incompat_flags", UNKNOWN_INCOMPAT)
    before = sha1(devs)
    rc, objs, p = check(devs)
    assert rc == 8, p.stderr
    assert "unsupported incompat feature flags 0x10000040000" in p.stderr, p.stderr
    assert refused(objs, 8) and "filesystem" not in objs[0], f"nothing is checked: {p.stdout}"
    for name, cmd in writers(devs, tmp_path).items():
        q = run_btk(*cmd)
        assert q.returncode != 0 and "0x10000040000" in q.stderr, f"{name}: {q.returncode} {q.stderr}"
    for cmd in (["btk-inspect", "tree", "--tree", "root", str(devs[0])],
                ["btk-image", "dump", str(devs[0]), str(tmp_path / "out.img")]):
        q = run_btk(*cmd)
        assert q.returncode != 0 and "0x10000040000" in q.stderr, f"{cmd}: {q.stderr}"
    assert not (tmp_path / "out.img").exists() or (tmp_path / "out.img").stat().st_size == 0
    assert sha1(devs) == before
    # the reference refuses too
    require_reference_tools()
    ref = subprocess.run(["btrfs", "check", "--readonly", str(devs[0])], capture_output=True, text=True)
    assert ref.returncode != 0 and "unsupported" in ref.stdout + ref.stderr


def test_unknown_compat_ro_bit_reads_with_a_warning_and_never_writes(tmp_path):
    devs = copy_of(BASE, tmp_path)
    set_bits(devs, "compat_ro_flags", UNKNOWN_COMPAT_RO)
    before = sha1(devs)
    rc, objs, p = check(devs)
    assert rc == 0 and objs[0]["problems"] == [], p.stdout + p.stderr
    assert "unknown compat_ro feature flags 0x400" in p.stderr, p.stderr
    for name, cmd in writers(devs, tmp_path).items():
        q = run_btk(*cmd)
        assert q.returncode != 0, f"{name} wrote: {q.stdout} {q.stderr}"
        assert "compat_ro feature flags 0x400" in q.stderr and "must not write" in q.stderr, f"{name}: {q.stderr}"
    # a repair says so before checking anything: exit 8, no check output
    q = run_btk("btk-check", "--repair", "--yes", *map(str, devs))
    assert q.returncode == 8 and "trees checked" not in q.stdout, q.stdout + q.stderr
    assert sha1(devs) == before


@pytest.mark.parametrize("bit,name", [(1 << 13, "extent-tree-v2"), (1 << 14, "raid-stripe-tree"),
                                      (1 << 17, "remap-tree")])
def test_read_only_formats_are_read_and_never_written(bit, name, tmp_path):
    devs = copy_of(BASE, tmp_path)
    set_bits(devs, "incompat_flags", bit)
    before = sha1(devs)
    rc, objs, p = check(devs)
    assert rc == 0, p.stdout + p.stderr
    assert f"does not interpret {name}" in p.stderr, p.stderr
    for label, cmd in writers(devs, tmp_path).items():
        q = run_btk(*cmd)
        assert q.returncode != 0 and name in q.stderr and "does not write" in q.stderr, f"{label}: {q.stderr}"
    assert sha1(devs) == before


def test_image_of_a_read_only_format_restores_only_as_it_was(tmp_path):
    """btk-image dumps a remap-tree filesystem (read), restores it byte for byte (original layout)
    but refuses the single layout, which rewrites the chunk and dev trees, before any output exists."""
    devs = copy_of(BASE, tmp_path)
    set_bits(devs, "incompat_flags", 1 << 17)
    img, out = tmp_path / "fs.btki", tmp_path / "out.img"
    p = run_btk("btk-image", "dump", str(devs[0]), str(img))
    assert p.returncode == 0 and "remap-tree" in p.stderr, p.stderr
    p = run_btk("btk-image", "restore", "--layout", "single", str(img), str(out))
    assert p.returncode != 0 and "remap-tree" in p.stderr and "does not write" in p.stderr, p.stderr
    assert not out.exists()
    p = run_btk("btk-image", "restore", str(img), str(out))
    assert p.returncode == 0, p.stderr


def test_zoned_is_read_and_never_written(tmp_path):
    require_reference_tools()
    require_btk("btk-tune")
    img = tmp_path / "zoned.img"
    p = mkfs_sparse(img, "4G", "-O", "zoned")
    if p.returncode != 0:
        pytest.skip(f"mkfs.btrfs -O zoned: {p.stderr}")
    before = sha1([img])
    q = run_btk("btk-tune", "--label", "x", str(img))
    assert q.returncode != 0 and "zoned" in q.stderr and "write pointer" in q.stderr, q.stderr
    q = run_btk("btk-check", "--repair", "--yes", "--no-undo", str(img))
    assert q.returncode == 8 and "zoned" in q.stderr, q.stderr
    assert sha1([img]) == before


def test_feature_gate_on_a_loop_device(tmp_path):
    """The same refusals through a real block device: unknown incompat (nothing opens) and
    unknown compat_ro (read, not written)."""
    require_kernel()
    devs = copy_of(BASE, tmp_path)
    set_bits(devs, "incompat_flags", UNKNOWN_INCOMPAT)
    other = built(BASE).copy_to(tmp_path / "ro")
    set_bits(other, "compat_ro_flags", UNKNOWN_COMPAT_RO)
    before = sha1(devs + other)
    with fsbuild.attached(devs) as loops:
        assert check(loops)[0] == 8
        q = run_btk("btk-tune", "--label", "x", *loops)
        assert q.returncode != 0 and "0x10000040000" in q.stderr, q.stderr
    with fsbuild.attached(other) as loops:
        rc, objs, p = check(loops)
        assert rc == 0 and "unknown compat_ro" in p.stderr, p.stderr
        q = run_btk("btk-tune", "--label", "x", *loops)
        assert q.returncode != 0 and "must not write" in q.stderr, q.stderr
    assert sha1(devs + other) == before


# the newest btrfs-progs names the newest bits (remap-tree: 7.x)
LATEST_BTRFS = "/opt/btrfs-progs-latest/bin/btrfs"


def dump_super_flag_names(dev) -> dict[str, list[str]]:
    """The names dump-super -f prints in parentheses under each *_flags line."""
    btrfs = LATEST_BTRFS if os.access(LATEST_BTRFS, os.X_OK) else "btrfs"
    text = subprocess.run([btrfs, "inspect-internal", "dump-super", "-f", str(dev)], capture_output=True,
                          text=True).stdout
    if "unknown flag: 0x20000" in text and btrfs == "btrfs":
        pytest.skip("this btrfs-progs does not name remap-tree (7.x does)")
    out = {}
    for field in ("compat_flags", "compat_ro_flags", "incompat_flags"):
        m = re.search(rf"^{field}\s+\S+\n((?:\s+[( ].*\n)*)", text, re.M)
        body = m[1] if m else ""
        names = re.findall(r"[( |]\s*([A-Z0-9_]+|unknown flag: 0x[0-9a-f]+)\s*(?=[|)\n])", body)
        out[field] = [n.strip() for n in names]
    return out


@pytest.mark.parametrize("field,bits", [("incompat_flags", 0), ("incompat_flags", 1 << 20),
                                        ("compat_ro_flags", 1 << 9), ("incompat_flags", 1 << 17)])
def test_inspect_super_names_flags_like_dump_super(field, bits, tmp_path):
    require_reference_tools()
    devs = built("bgt-squota-xxhash").copy_to(tmp_path / "devs")
    if bits:
        set_bits(devs, field, bits)
    p = run_btk("btk-inspect", "super", "--format", "json", str(devs[0]))
    assert p.returncode == 0, p.stderr
    got = super_json(p.stdout)
    ref = dump_super_flag_names(devs[0])
    for f in ("compat_flags", "compat_ro_flags", "incompat_flags"):
        assert got[f + "_names"] == ref[f], f"{f}: btk {got[f + '_names']}, dump-super {ref[f]}"
    text = run_btk("btk-inspect", "super", str(devs[0])).stdout
    assert "SIMPLE_QUOTA" in text and "BLOCK_GROUP_TREE" in text


# ---------------------------------------------------------------- superblock copies

def zero_copy(dev: Path, m: int):
    with open(dev, "r+b") as f:
        f.seek(SUPER_OFFSETS[m])
        f.write(bytes(4096))


def copy_generations(dev: Path) -> dict[int, int | None]:
    """Generation of each valid copy (None: invalid) per btk-inspect super --all-copies."""
    p = run_btk("btk-inspect", "super", "--all-copies", "--format", "json", str(dev))
    return {c["mirror"]: (c.get("generation") if c["valid"] else None) for c in super_json(p.stdout)}


DAMAGE = {
    "zeroed": lambda devs: zero_copy(devs[0], 1),
    "stale": lambda devs: [corrupt(devs, "-S", "-s", "1", "-f", f, "-v", "-1")
                           for f in ("generation", "chunk_root_generation")],
    "bad-csum": lambda devs: corrupt(devs, "-S", "-s", "1", "-f", "label", "-v", "str:X", "-n"),
}
WANT = {"zeroed": "super-copy-missing", "stale": "super-copy-stale", "bad-csum": "super-copy-missing"}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_secondary_copy_is_a_warning_and_repair_rewrites_it(damage, tmp_path):
    devs = copy_of(BASE, tmp_path)
    gen = copy_generations(devs[0])[0]
    DAMAGE[damage](devs)
    before = sha1(devs)
    rc, objs, p = check(devs)
    assert rc == 0 and ids_of(objs[0]) == {WANT[damage]}, p.stdout
    assert all(pr["severity"] == "warning" for pr in objs[0]["problems"]), objs[0]["problems"]
    assert sha1(devs) == before
    require_reference_tools()
    assert subprocess.run(["btrfs", "check", "--readonly", str(devs[0])], capture_output=True).returncode == 0
    undo = tmp_path / "copies.undo"
    rc, objs, p = check(devs, "--repair", "--yes", "--undo-file", str(undo))
    assert rc == 1, p.stdout + p.stderr
    assert copy_generations(devs[0]) == {0: gen, 1: gen}
    rc, objs, p = check(devs)
    assert rc == 0 and objs[0]["problems"] == [], p.stdout
    # the undo file gives the damaged bytes back
    u = run_btk("btk-undo", str(undo), *map(str, devs))
    assert u.returncode == 0, u.stderr
    assert sha1(devs) == before


def test_copy_2_of_a_large_sparse_image(tmp_path):
    require_reference_tools()
    require_btk("btk-check")
    img = tmp_path / "big.img"
    p = mkfs_sparse(img, "260G", "-K")
    assert p.returncode == 0, p.stderr
    gens = copy_generations(img)
    assert set(gens) == {0, 1, 2} and gens[2] == gens[0], gens
    zero_copy(img, 2)
    before = sha1([img])
    rc, objs, p = check([img])
    assert rc == 0 and ids_of(objs[0]) == {"super-copy-missing"}, p.stdout
    assert "copy 2" in objs[0]["problems"][0]["detail"]
    assert sha1([img]) == before
    rc, objs, p = check([img], "--repair", "--yes", "--no-undo")
    assert rc == 1, p.stdout + p.stderr
    assert copy_generations(img) == {0: gens[0], 1: gens[0], 2: gens[0]}


def test_btrfs_image_restore_checks_clean_and_repair_mounts(tmp_path):
    """btrfs-image -r writes the primary copy only: a warning, not an error; --repair writes the
    other copies, the kernel mounts the result and btrfs check passes."""
    require_reference_tools()
    require_btk("btk-check")
    # btrfs-image zeroes inline file data (a compressed inline extent then fails to decompress):
    # files made by mkfs --rootdir are neither compressed nor, at 64 KiB, inline
    root, src = tmp_path / "root", tmp_path / "src.img"
    (root / "dir").mkdir(parents=True)
    for i in range(20):
        (root / "dir" / f"f{i}").write_bytes(os.urandom(65536))
    subprocess.run(["truncate", "-s", "300M", str(src)], check=True)
    fsbuild.mkfs([src], "-q", "-f", "--rootdir", str(root))
    dump, img = tmp_path / "fs.dump", tmp_path / "restored.img"
    fsbuild.run(["btrfs-image", str(src), str(dump)])
    fsbuild.run(["btrfs-image", "-r", str(dump), str(img)])
    gens = copy_generations(img)
    assert gens.get(1) is None, f"btrfs-image -r wrote copy 1 after all: {gens}"
    before = sha1([img])
    rc, objs, p = check([img])
    assert ids_of(objs[0]) == {"super-copy-missing"} and rc == 0, p.stdout
    assert sha1([img]) == before
    rc, objs, p = check([img], "--repair", "--yes", "--no-undo")
    assert rc == 1, p.stdout + p.stderr
    assert copy_generations(img)[1] == gens[0]
    assert check([img])[0] == 0
    assert subprocess.run(["btrfs", "check", "--readonly", str(img)], capture_output=True).returncode == 0
    require_kernel()
    with fsbuild.attached([img]) as loops, fsbuild.mounted(loops, ("ro",)) as mnt:
        assert sorted(p.name for p in (mnt / "dir").iterdir()) == sorted(f"f{i}" for i in range(20))


# ---------------------------------------------------------------- the undo directory

def damaged(tmp_path) -> list[Path]:
    devs = copy_of(BASE, tmp_path)
    zero_copy(devs[0], 1)
    return devs


def test_undo_dir_that_cannot_be_made_is_refused_before_the_check(tmp_path):
    devs = damaged(tmp_path)
    before = sha1(devs)
    blocker = tmp_path / "file"
    blocker.write_text("")
    env = dict(os.environ, BTK_UNDO_DIR=str(blocker / "undo"))
    rc, objs, p = check(devs, "--repair", "--yes", env=env)
    assert rc == 8 and refused(objs, 8), p.stdout
    assert str(blocker / "undo") in p.stderr and "--undo-file" in p.stderr and "--no-undo" in p.stderr, p.stderr
    assert str(blocker / "undo") in objs[0]["error"] and "--no-undo" in objs[0]["error"], objs[0]
    assert sha1(devs) == before
    # --undo-file names one: the directory does not matter then
    rc, objs, p = check(devs, "--repair", "--yes", "--undo-file", str(tmp_path / "named.undo"), env=env)
    assert rc == 1 and (tmp_path / "named.undo").exists(), p.stderr


def test_undo_dir_in_a_read_only_place_is_refused(tmp_path):
    devs = damaged(tmp_path)
    before = sha1(devs)
    ro = tmp_path / "ro"
    ro.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(ro)], check=False)
    try:
        if not os.path.ismount(ro):
            pytest.skip("cannot mount a read-only tmpfs here")
        env = dict(os.environ, BTK_UNDO_DIR=str(ro / "undo"))
        rc, objs, p = check(devs, "--repair", "--yes", env=env)
        assert rc == 8 and "Read-only file system" in p.stderr and "--no-undo" in p.stderr, p.stderr
        assert sha1(devs) == before
    finally:
        subprocess.run(["umount", str(ro)], check=False)
