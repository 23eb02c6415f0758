# SPDX-License-Identifier: GPL-2.0-only
"""btk-check on filesystem shapes its own corpus does not use, and on btrfs-image dumps.

The damaged images of other tools' test suites were made years ago: 4K nodes without
skinny metadata, no-holes or a free-space tree (v1 space cache), mixed block groups, no
extref, and most are btrfs-image dumps, restored with `btrfs-image -r` (inline data, data
blocks and data checksums zeroed). Each test makes one such small filesystem (seconds),
damages it the way those images were damaged, and holds btk-check to what btrfs check 7.3
says of it: an undamaged one is clean, a damaged one is found and repaired."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import fsbuild
import oracle
from conftest import require_kernel, run_btk

PROGS_LATEST = Path("/opt/btrfs-progs-latest/bin/btrfs")
OLD_4K = ("-n", "4k", "-O", "^skinny-metadata,^no-holes,^free-space-tree")
TEXT = b"".join(b"line %06d: the quick brown fox jumps over the lazy dog\n" % i for i in range(2000))


def make_fs(img: Path, mkfs_opts, mount_opts, fill) -> Path:
    """mkfs.btrfs a 256 MiB image, mount it with mount_opts, fill(mountpoint), unmount."""
    require_kernel()
    fsbuild.run(["truncate", "-s", "256M", img])
    fsbuild.mkfs([img], "-f", *mkfs_opts)
    with fsbuild.attached([img]) as loops, fsbuild.mounted(loops, mount_opts) as mnt:
        fill(mnt)
        fsbuild.run(["sync", "-f", mnt])
    return img


def btrfs_image_roundtrip(src: Path, out: Path) -> Path:
    """What the fsck-tests images are: `btrfs-image SRC` restored with `btrfs-image -r`."""
    if not shutil.which("btrfs-image"):
        pytest.skip("btrfs-image is not installed")
    dump = out.with_suffix(".dump")
    fsbuild.run(["btrfs-image", src, dump])
    fsbuild.run(["btrfs-image", "-r", dump, out])
    return out


def fill_compressed_inline(mnt: Path):
    (mnt / "comp").mkdir()
    fsbuild.run(["btrfs", "property", "set", mnt / "comp", "compression", "zstd"])
    (mnt / "comp" / "inline").write_bytes(TEXT[:1500])
    (mnt / "plain").write_bytes(b"plain inline\n")


@pytest.fixture(scope="module")
def restored_compressed_inline(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("shapes-inline")
    src = make_fs(d / "src.img", OLD_4K, ("space_cache=v1",), fill_compressed_inline)
    return btrfs_image_roundtrip(src, d / "restored.img")


def test_restored_compressed_inline_is_not_damage(restored_compressed_inline, tmp_path):
    """btrfs-image zeroes inline data: a compressed inline extent then no longer decompresses.
    btrfs check 7.3 calls the restored image clean; btk-check warns (inline-extent-zeroed) and
    exits 0; its repair (which writes the superblock copies the restore left out) keeps the
    extent as it is."""
    p = run_btk("btk-check", restored_compressed_inline)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "[inline-extent-zeroed]" in p.stdout
    img = tmp_path / "r.img"
    shutil.copy(restored_compressed_inline, img)
    p = run_btk("btk-check", "--repair", "--yes", "--no-undo", img)
    assert p.returncode in (0, 1), p.stdout + p.stderr
    assert "inline-extent" not in p.stdout.split("checking again")[0].split("repair ", 1)[-1]
    p = run_btk("btk-check", img)
    assert p.returncode == 0 and "[inline-extent-zeroed]" in p.stdout, p.stdout + p.stderr


def test_garbled_compressed_inline_is_still_damage(restored_compressed_inline, tmp_path):
    """Not every undecompressible inline extent is a dump's: one that is not all zeroes stays
    the error inline-extent-corrupt."""
    img = tmp_path / "r.img"
    shutil.copy(restored_compressed_inline, img)
    ino = inode_of(img, "comp", "inline")
    fsbuild.run([corrupt_tool(), "-t", "5", "-k", f"{ino},108,0", "-o", "21", "-B", "28b52ffd", img])
    p = run_btk("btk-check", img)
    assert p.returncode == 4, p.stdout + p.stderr
    assert "[inline-extent-corrupt]" in p.stdout


def fill_files(mnt: Path):
    (mnt / "inline").write_bytes(b"an inline file\n")
    (mnt / "small").write_bytes(os.urandom(8192))
    (mnt / "dir").mkdir()
    (mnt / "dir" / "text").write_bytes(TEXT[:40000])
    os.symlink("small", mnt / "symlink")
    with open(mnt / "multi", "wb") as f:     # three extents, one per commit
        for _ in range(3):
            f.write(os.urandom(65536))
            f.flush()
            fsbuild.run(["sync", "-f", mnt])
    (mnt / "dup-a").write_bytes(b"first\n")
    (mnt / "dup-b").write_bytes(b"second\n")
    fsbuild.run(["btrfs", "subvolume", "create", mnt / "sub"])
    (mnt / "sub" / "data").write_bytes(os.urandom(40000))
    fsbuild.run(["btrfs", "subvolume", "snapshot", mnt / "sub", mnt / "snap"])


@pytest.fixture(scope="module")
def old_raw(tmp_path_factory) -> tuple[Path, dict]:
    """(image, file hashes) of a small raw filesystem of the old shape."""
    d = tmp_path_factory.mktemp("shapes-old")
    img = make_fs(d / "old.img", OLD_4K, ("space_cache=v1",), fill_files)
    return img, oracle.snapshot_hashes([img])


def damaged_copy(src: Path, dest: Path, *edits: str) -> Path:
    """A copy of src with btk-corrupt's batch edits applied."""
    shutil.copy(src, dest)
    fsbuild.run([corrupt_tool(), "--batch", "-", dest], input="\n".join(edits) + "\n")
    return dest


def assert_repaired(img: Path, problem: str, hashes: dict | None):
    """btk-check finds problem (exit 4); --repair fixes it (exit 1); then btk-check and the
    reference checks are clean and every file reads back as before."""
    p = run_btk("btk-check", img)
    assert p.returncode == 4 and f"[{problem}]" in p.stdout, p.stdout + p.stderr
    p = run_btk("btk-check", "--repair", "--yes", "--no-undo", img)
    assert p.returncode == 1, p.stdout + p.stderr
    p = run_btk("btk-check", img)
    assert p.returncode == 0, p.stdout + p.stderr
    oracle.reference_check([img])
    if PROGS_LATEST.exists():
        q = fsbuild.run([PROGS_LATEST, "check", "--readonly", img], check=False)
        assert q.returncode == 0, q.stdout + q.stderr
    if hashes is not None:
        assert oracle.snapshot_hashes([img]) == hashes


def test_unknown_inode_flags_are_cleared(old_raw, tmp_path):
    """An inode flag the kernel does not know makes its tree checker refuse the whole leaf
    (btrfs check 7.3 does not look): reported, and the repair clears the unknown bits."""
    src, hashes = old_raw
    img = damaged_copy(src, tmp_path / "f.img", f"-t 5 -k {inode_of(src, 'small')},1,0 -f flags -v ^0x40000000")
    assert_repaired(img, "inode-flags-unknown", hashes)


def test_symlink_without_its_target_extent(old_raw, tmp_path):
    """Without no-holes, btrfs check 7.3 wants a symlink's size covered by extents; a leaf
    salvage that drops its inline extent, or a deleted one, leaves it uncovered. btk-check
    reports it (file-extent-hole) and the repair, which cannot invent the target (a hole is
    no target: 7.3 refuses one), sets the size to 0: an empty link that mounts and reads."""
    src, hashes = old_raw
    ino = inode_of(src, "symlink")
    img = damaged_copy(src, tmp_path / "s.img", f"-t 5 -k {ino},108,0 -d")
    # (os.walk takes a link to "" for a directory: the other files are compared)
    assert_repaired(img, "file-extent-hole", {k: v for k, v in hashes.items() if k != "symlink"})
    with fsbuild.attached([img]) as loops, fsbuild.mounted(loops, ("ro",)) as mnt:
        assert os.readlink(mnt / "symlink") == ""


def file_extent_keys(img: Path, ino: int, tree: int = 5) -> list[list[int]]:
    return [r["key"] for r in fs_items(img, tree) if r.get("key", [0, 0])[:2] == [ino, 108] and "blockptr" not in r]


def test_file_extent_length_past_its_extent(old_raw, tmp_path):
    """A file extent's length grown past its extent (and into the next one: an overlap):
    the file's reference to the extent is there, so the length is what is wrong; the repair
    cuts it to what the extent holds (btrfs check 7.3 reports it and cannot repair it)."""
    src, hashes = old_raw
    ino = inode_of(src, "multi")
    key = file_extent_keys(src, ino)[1]
    img = damaged_copy(src, tmp_path / "n.img", f"-t 5 -k {key[0]},{key[1]},{key[2]} -f num_bytes -v +4096")
    assert_repaired(img, "file-extent-bad", hashes)


def test_file_extent_offset_in_a_shared_leaf(old_raw, tmp_path):
    """A file extent's offset damaged in a leaf a subvolume and its snapshot share: the
    reference the offset implies is missing and the file's one reference names the offset
    that fits; the repair takes it back from there (7.3 cannot repair it)."""
    src, hashes = old_raw
    key = file_extent_keys(src, 257, tree=256)[0]
    img = damaged_copy(src, tmp_path / "o.img", f"-t 256 -k {key[0]},{key[1]},{key[2]} -f offset -v +4096")
    assert_repaired(img, "file-extent-bad", hashes)


def test_duplicate_name_is_renamed(old_raw, tmp_path):
    """Two inodes under one name in a directory (its dir item holds the name twice, each
    with its dir index and inode ref): btrfs check 7.3 reports it and cannot repair it. The
    later one is renamed NAME_INODE, its three items written again under the new name."""
    src, hashes = old_raw
    a, b = inode_of(src, "dup-a"), inode_of(src, "dup-b")
    items = fs_items(src)
    def entry(typ, name):
        return next(r for r in items if r.get("key", [0, 0])[:2] == [256, typ] and "blockptr" not in r
                    and r["fields"]["entries"][0]["name"] == name)
    idx_b, item_a, item_b = entry(96, "dup-b"), entry(84, "dup-a"), entry(84, "dup-b")
    # dup-b's entry as dup-a's dir item would hold it: location, transid, data_len, name_len, type, name
    ent = (b.to_bytes(8, "little") + bytes([1]) + bytes(8) + item_b["fields"]["entries"][0]["transid"]
           .to_bytes(8, "little") + bytes(2) + (5).to_bytes(2, "little") + bytes([1]) + b"dup-a")
    img = damaged_copy(src, tmp_path / "d.img",
                       f"-t 5 -k 256,96,{idx_b['key'][2]} -f name -v ^0000000003",
                       f"-t 5 -k {b},12,256 -f name -v ^0000000003",
                       f"-t 5 -k 256,84,{item_b['key'][2]} -d",
                       f"-t 5 -k 256,84,{item_a['key'][2]} -A -B {ent.hex()}")
    want = {k: v for k, v in hashes.items() if k != "dup-b"}
    want[f"dup-a_{b}"] = hashes["dup-b"]
    assert_repaired(img, "name-duplicate", want)
    assert a != b


# ---------------------------------------------------------------- helpers

def corrupt_tool() -> Path:
    tool = fsbuild.build_dir() / "tests" / "tools" / "btk-corrupt"
    if not os.access(tool, os.X_OK):
        pytest.skip(f"{tool} is not built (make test-tools)")
    return tool


def fs_items(img: Path, tree: int = 5) -> list[dict]:
    import json
    p = run_btk("btk-inspect", "tree", "--format", "jsonl", "--tree", str(tree), img)
    return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]


def inode_of(img: Path, *path: str, tree: int = 5) -> int:
    """The inode number of PATH (names from the top of TREE), from its dir index items."""
    items = fs_items(img, tree)
    ino = 256
    for name in path:
        for r in items:
            if r.get("key", [0, 0])[:2] == [ino, 96] and "blockptr" not in r:
                f = r["fields"]
                ents = f.get("entries", [f]) if isinstance(f, dict) else f
                hit = [e for e in ents if e.get("name") == name]
                if hit:
                    loc = hit[0]["location"]
                    ino = loc[0] if isinstance(loc, list) else loc["objectid"]
                    break
        else:
            raise KeyError(name)
    return ino
