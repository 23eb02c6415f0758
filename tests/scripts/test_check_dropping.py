# SPDX-License-Identifier: GPL-2.0-only
"""A deleted subvolume the kernel had only partly dropped when it was unmounted
(tests/images/half-dropped.img.xz, made by tests/images/make-half-dropped.sh):
its root item has refs 0 and a drop_progress key at drop_level 1. The subtrees
left of that key are freed (their blocks may be reused); the rest of the tree
still stands and is still referenced.

btk-check must walk only what stands (the reference passes on this image), yet
still check every block that stands; btk-image must dump it so that the
restored copy checks clean."""
import lzma
import re
import shutil

import pytest

from conftest import check_json, run_btk
import oracle

IMAGE = __import__("pathlib").Path(__file__).resolve().parents[1] / "images" / "half-dropped.img.xz"
DEAD = 257   # the deleted subvolume ("big"); 256 ("kept") is live


@pytest.fixture
def half_dropped(tmp_path):
    img = tmp_path / "half-dropped.img"
    with lzma.open(IMAGE) as src, open(img, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return img


def _dead_tree_leaves(img) -> list[int]:
    """The leaves of the dead tree in key order, as the on-disk blocks still show them
    (btk-inspect prints what is there, dropped or not)."""
    p = run_btk("btk-inspect", "tree", "-t", str(DEAD), str(img))
    assert p.returncode == 0, p.stderr
    return [int(m) for m in re.findall(r"^leaf (\d+) ", p.stdout, re.M)]


def _flip_byte(img, bytenr: int, offset: int = 200):
    """A single-device image maps logical to physical 1:1 only through its chunks: ask btk-inspect."""
    p = run_btk("btk-inspect", "map", "--logical", str(bytenr), str(img))
    assert p.returncode == 0, p.stderr
    physical = int(re.search(r"physical (\d+)", p.stdout).group(1))
    with open(img, "r+b") as f:
        f.seek(physical + offset)
        b = f.read(1)
        f.seek(physical + offset)
        f.write(bytes([b[0] ^ 0xFF]))


def test_half_dropped_subvolume_checks_clean(half_dropped):
    p = run_btk("btk-inspect", "tree", "-t", "1", str(half_dropped))
    assert re.search(rf"key \({DEAD} ROOT_ITEM 0\)", p.stdout)
    assert re.search(r"refs 0 drop_progress \(\d+ \w+ \d+\)\s+drop_level 1", p.stdout), "not a half-dropped image"
    _, out, _ = check_json([half_dropped])
    assert out["problems"] == [], out["problems"][:5]
    oracle.reference_check([half_dropped])


def test_dropped_blocks_are_not_read_but_standing_ones_are(half_dropped, tmp_path):
    leaves = _dead_tree_leaves(half_dropped)
    assert len(leaves) > 20
    _flip_byte(half_dropped, leaves[0])     # left of the drop key: freed, not part of the tree any more
    _, out, _ = check_json([half_dropped])
    assert out["problems"] == [], out["problems"][:5]
    _flip_byte(half_dropped, leaves[-1])    # right of it: still in the tree
    _, out, ids = check_json([half_dropped])
    assert any(str(leaves[-1]) in x["detail"] for x in out["problems"]), out["problems"][:5]


def test_image_round_trip_of_a_half_dropped_subvolume(half_dropped, tmp_path):
    dump = tmp_path / "hd.btkimg"
    p = run_btk("btk-image", "dump", str(half_dropped), str(dump))
    assert p.returncode == 0 and "unreadable" not in p.stderr, p.stderr
    out_img = tmp_path / "restored.img"
    p = run_btk("btk-image", "restore", str(dump), str(out_img))
    assert p.returncode == 0, p.stderr
    _, out, _ = check_json([out_img])
    assert out["problems"] == [], out["problems"][:5]


def test_half_dropped_subvolume_qgroups_match_the_kernel(tmp_path):
    """With quotas on, the kernel's numbers for the half-dropped subvolume count
    only what still stands; btk-check computes the same (the reference walks the
    dropped subtrees too and reports 'Counts for qgroup id: 0/257 are different')."""
    img = tmp_path / "hq.img"
    with lzma.open(IMAGE.with_name("half-dropped-qgroups.img.xz")) as src, open(img, "wb") as dst:
        shutil.copyfileobj(src, dst)
    _, out, _ = check_json([img])
    assert out["problems"] == [] and out["qgroups_verified"] >= 3, out["problems"][:5]
