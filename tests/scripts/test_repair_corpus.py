# SPDX-License-Identifier: GPL-2.0-only
"""btk-check --repair on every image of the corruption corpus (tests/images/corrupt/), both runs
(e2fsprogs' expect.1 / expect.2): the expect file's `repair:` and `repair-exit:` say what must happen.

A fixable image: the check exits as expected (4), `--repair --yes` runs exactly the listed
classes and exits 1, a second check is clean (0), the reference `btrfs check` is clean, the kernel
mounts it, and `btk-undo` gives back the damaged image byte for byte. An image with damage that is
not fixable: `--repair --yes` exits like the check and writes nothing at all.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import fsbuild
from conftest import images_digest, check_runs, require_btk, require_kernel, require_reference_tools, run_btk
from test_check import EXPECTS, LATEST_BTRFS, corpus_images, parse_expect  # noqa: F401 (fixture)
from test_tune import mounted_retry


def copy(src: Path, dst: Path) -> None:
    fsbuild.run(["cp", "--sparse=always", src, dst])


def repair_fields(e: dict) -> tuple[list[str], int]:
    classes = e.get("repair", "none").split()
    return ([] if classes == ["none"] else classes), int(e.get("repair-exit", e["exit"]))


def run_json(*args) -> tuple[int, list[dict], subprocess.CompletedProcess]:
    p = run_btk("btk-check", "--format", "json", *args, timeout=300)
    return p.returncode, check_runs(p.stdout) if p.stdout.strip() else [], p


@pytest.mark.parametrize("expect", EXPECTS, ids=[p.stem for p in EXPECTS])
def test_corpus_repair(expect, corpus_images, tmp_path):  # noqa: F811
    require_btk("btk-check")
    e = parse_expect(expect)
    classes, repair_exit = repair_fields(e)
    damaged = corpus_images[e["name"]]
    img = tmp_path / "img"
    copy(damaged, img)
    undo = tmp_path / "repair.undo"

    rc, objs, p = run_json(*e["args"], "--repair", "--yes", "--undo-file", undo, img)
    assert rc == repair_exit, f"repair exit {rc}, want {repair_exit}:\n{p.stdout}\n{p.stderr}"
    if not classes:
        assert images_digest([img]) == images_digest([damaged]), "a repair of unfixable damage wrote"
        return
    assert sorted({a["class"] for a in objs[1]["repairs"]}) == sorted(classes), objs[1]
    if repair_exit != 1:  # a partial repair (a block dropped, what it held not all rebuilt)
        assert objs[2]["problems"], objs[2]
    else:
        assert objs[2]["problems"] == [], objs[2]
        rc, objs, p = run_json(*e["args"], img)
        assert rc == 0 and objs[0]["problems"] == [], f"second run: {p.stdout}"
        require_reference_tools()
        r = fsbuild.run(["btrfs", "check", "--readonly", img], check=False)
        assert r.returncode == 0, f"btrfs check after the repair:\n{r.stdout}{r.stderr}"
        # images made with btrfs-progs 7.3 (their expect files record its verdict): it is a judge too
        if "btrfs-check-7.3" in e and LATEST_BTRFS.exists():
            r = fsbuild.run([LATEST_BTRFS, "check", "--readonly", img], check=False)
            assert r.returncode == 0, f"btrfs check 7.3 after the repair:\n{r.stdout}{r.stderr}"

    # btk-undo on a copy: the damaged image comes back byte for byte
    back = tmp_path / "back"
    copy(img, back)
    u = run_btk("btk-undo", undo, back)
    assert u.returncode == 0, u.stderr
    assert images_digest([back]) == images_digest([damaged]), "btk-undo did not restore the damaged image"


# The kernel mounts every repaired image (one test: the images share an fsid, so one at a time).
def test_corpus_repaired_images_mount(corpus_images, tmp_path):  # noqa: F811
    require_btk("btk-check")
    require_kernel()
    fixable = [parse_expect(x) for x in EXPECTS]
    fixable = [e for e in fixable if repair_fields(e)[0] and repair_fields(e)[1] == 1]
    assert fixable
    for e in fixable:
        img = tmp_path / f"{e['name']}.img"
        copy(corpus_images[e["name"]], img)
        p = run_btk("btk-check", *e["args"], "--repair", "--yes", "--no-undo", img)
        assert p.returncode == 1, f"{e['name']}: {p.stderr}"
        with fsbuild.attached([img]) as loops, mounted_retry(loops, ("ro",)) as mnt:
            assert any(Path(mnt).iterdir()), f"{e['name']}: nothing in the mounted filesystem"
        img.unlink()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["data-ref-count", "tree-block-leaked", "inode-nlink", "dir-item-hash"])
def test_corpus_repair_crash_at_every_write(name, corpus_images, tmp_path):  # noqa: F811
    """Crash the repair after each write (and with unflushed writes persisted in any subset): the
    image is the damaged one (old generation, the same problems) or the repaired one (a newer
    generation, clean, and the reference check agrees). The extent-refs repair of a reference
    count, of a moved tree-block item (created + deleted extents, free-space tree), the inodes
    repair of a link count, and the names repair re-keying a dir item."""
    import crash
    from test_tune import super_of

    require_btk("btk-check")
    e = parse_expect(next(x for x in EXPECTS if x.stem == name))
    classes, _ = repair_fields(e)
    damaged = tmp_path / "damaged.img"
    copy(corpus_images[name], damaged)
    old_gen = super_of(damaged)["generation"]
    damaged_ids = sorted({x["id"] for x in run_json(damaged)[1][0]["problems"]})
    assert damaged_ids == sorted(e["problems"])
    work = tmp_path / "work.img"
    copy(damaged, work)
    log = tmp_path / "wlog"
    p = crash.record(log, "btk-check", "--repair", "--yes", "--no-undo", work)
    assert p.returncode == 1, p.stderr
    wl = crash.count(log)
    assert wl.writes > 0
    # one transaction per class: with several classes, states between them are allowed too
    gens = {old_gen, old_gen + len(classes)}
    seen = {"old": 0, "new": 0}
    pts = crash.points(wl, around_flushes=True)
    for k, seed, devs in crash.replay([damaged], log, crash.states(pts, seeds=(1, 2), every=3),
                                      tmp_path / "crash"):
        gen = super_of(devs[0])["generation"]
        ids = sorted({x["id"] for x in run_json(devs[0])[1][0]["problems"]} - {"super-copy-stale"})
        assert old_gen <= gen <= old_gen + len(classes), (k, seed, gen)
        if gen not in gens:
            # between two classes: the first one's problems are gone, nothing new came
            assert set(ids) < set(damaged_ids), f"after {k} writes (seed {seed}): generation {gen}: {ids}"
        if gen == old_gen:
            assert ids == damaged_ids, f"after {k} writes (seed {seed}): old generation but {ids}"
            seen["old"] += 1
        elif gen == old_gen + len(classes):
            assert ids == [], f"after {k} writes (seed {seed}): new generation but {ids}"
            if seed is None and k == wl.writes:
                r = fsbuild.run(["btrfs", "check", "--readonly", devs[0]], check=False)
                assert r.returncode == 0, r.stdout + r.stderr
            seen["new"] += 1
    assert seen["old"] and seen["new"], seen
