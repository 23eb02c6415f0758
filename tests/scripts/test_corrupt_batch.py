# SPDX-License-Identifier: GPL-2.0-only
"""tests/tools/btk-corrupt --batch: many edits with one open of the filesystem.

Edits to items of the same leaf must all land (the block cache must not hand a
later edit the leaf as it was before an earlier one), a failing line stops the
batch with its exit status, and the result is what the same edits give one
run at a time."""
import subprocess

from conftest import btk_path, built, btk_tree_records, skip_or_fail

BASE = "s16k-crc32c-zstd"


def tool():
    t = btk_path("tests/tools/btk-corrupt")
    if not t.exists():
        skip_or_fail(f"{t} is not built (make test-tools)")
    return str(t)


def corrupt(devices, *args, check=True):
    p = subprocess.run([tool(), *map(str, args), *map(str, devices)], capture_output=True, text=True)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def same_leaf_extents():
    """Three data extent items of one extent-tree leaf."""
    recs, _ = btk_tree_records(BASE)
    by_leaf = {}
    for r in recs:
        if r.get("tree") == 2 and r.get("type") == "EXTENT_ITEM" and r["fields"]["flags"] == 1:
            by_leaf.setdefault(r["block"], []).append(r)
    for items in by_leaf.values():
        if len(items) >= 3:
            return items[:3]
    raise AssertionError("no extent-tree leaf with three data extent items")


def key(r):
    return f"{r['key'][0]},EXTENT_ITEM,{r['key'][2]}"


def refs(devices, r):
    out = corrupt(devices, "-t", "extent", "-k", key(r), "-f", "refs", "-g").stdout
    return int(out.split("refs: ")[1].split()[0])


def run_batch(tmp_path, text, check=True):
    """A fresh copy of the base, the batch text applied to it: (devices, process)."""
    devices = built(BASE).copy_to(tmp_path)
    batch = tmp_path / "edits.txt"
    batch.write_text(text)
    return devices, corrupt(devices, "--batch", batch, check=check)


def test_batch_edits_of_one_leaf_all_land(tmp_path):
    a, b, c = same_leaf_extents()
    devices, p = run_batch(tmp_path, f"# refs\n-t extent -k {key(a)} -f refs -v +1\n\n"
                                     f"-t extent -k {key(b)} -f refs -v +2\n"
                                     f"  -t extent -k {key(a)} -f refs -v +1\n")
    assert "batch: 5 of 5 lines done" in p.stdout
    assert refs(devices, a) == a["fields"]["refs"] + 2
    assert refs(devices, b) == b["fields"]["refs"] + 2
    assert refs(devices, c) == c["fields"]["refs"]


def test_batch_stops_at_a_bad_line(tmp_path):
    a, b, _ = same_leaf_extents()
    devices, p = run_batch(tmp_path, f"-t extent -k {key(a)} -f refs -v +1\n"
                                     f"-t extent -k {key(b)} -f no-such-field -v 1\n"
                                     f"-t extent -k {key(b)} -f refs -v +1\n", check=False)
    assert p.returncode == 2, p.stdout + p.stderr
    assert refs(devices, a) == a["fields"]["refs"] + 1
    assert refs(devices, b) == b["fields"]["refs"]
    # --batch takes no edit of its own
    assert corrupt(devices, "--batch", tmp_path / "edits.txt", "-S", "-f", "flags", "-g",
                   check=False).returncode == 2
