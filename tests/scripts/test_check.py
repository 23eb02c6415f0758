# SPDX-License-Identifier: GPL-2.0-only
"""btk-check: clean filesystems are clean (and `btrfs check` agrees), every image of the
corruption corpus (tests/images/corrupt/, see its README) yields exactly its expected
problem ids, text and JSON agree, and exit codes follow fsck(8)."""
from __future__ import annotations

import fcntl
import hashlib
import os
import json
import re
import subprocess
import threading
from pathlib import Path

import pytest

import fsbuild
import oracle
from conftest import RECIPE_NAMES, built, require_reference_tools, run_btk

CORPUS = fsbuild.REPO / "tests" / "images" / "corrupt"
EXPECTS = sorted(CORPUS.glob("*.expect"))


def parse_expect(path: Path) -> dict:
    e = {"name": path.stem, "exit": 4, "problems": [], "args": [], "btrfs-check": "passes", "pending": ""}
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        k, _, v = line.partition(":")
        v = v.strip()
        if k == "exit":
            e["exit"] = int(v)
        elif k in ("problems", "args"):
            e[k] = v.split()
        else:
            e[k] = v
    return e


class _Unpacked(dict):
    """Corpus images by name, each unpacked when a test first asks for it: a test of one image
    does not wait for all of them."""
    def __init__(self, unpack):
        super().__init__()
        self._unpack = unpack
        self._expects = {e.stem: e for e in EXPECTS}

    def __missing__(self, name: str) -> Path:
        self[name] = self._unpack(self._expects[name])[1]
        return self[name]


@pytest.fixture(scope="session")
def corpus_images() -> dict[str, Path]:
    """Corpus images by name, decompressed once into the test cache (named by content hash)."""
    out_dir = fsbuild.cache_root() / "corrupt"
    out_dir.mkdir(exist_ok=True)

    def unpack(expect: Path) -> tuple[str, Path]:
        xz = expect.with_name(expect.stem + ".img.xz")
        digest = hashlib.sha256(xz.read_bytes()).hexdigest()[:12]
        img = out_dir / f"{expect.stem}-{digest}.img"
        if img.exists():
            return expect.stem, img
        # one unpack per image for all test workers (the others wait on its lock); xz writes
        # a regular file sparse itself, a pipe into cp had to scan every byte (17 GiB in all)
        with open(img.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not img.exists():
                tmp = img.with_suffix(f".{os.getpid()}-{threading.get_ident()}.tmp")
                with open(tmp, "wb") as out:
                    subprocess.run(["xz", "-dc", str(xz)], stdout=out, check=True)
                tmp.rename(img)
        return expect.stem, img

    return _Unpacked(unpack)


def text_ids(stdout: str) -> set[str]:
    return set(re.findall(r"^(?:ERROR|warning) \[([a-z0-9-]+)\]", stdout, re.M))


def check_json(*args) -> tuple[subprocess.CompletedProcess, dict]:
    p = run_btk("btk-check", "--format", "json", *args)
    try:
        doc = json.loads(p.stdout)
    except json.JSONDecodeError as e:
        raise AssertionError(f"btk-check --format json printed no JSON ({e}):\n{p.stdout[:2000]}\n{p.stderr}")
    return p, doc


# ---------------------------------------------------------------- clean filesystems

# Clean filesystems btk-check does not pass yet: remove an entry when its bug is fixed.
KNOWN_FALSE_POSITIVES: dict[str, str] = {}


@pytest.mark.parametrize("name", RECIPE_NAMES)
def test_clean_recipe(name, request):
    """Every filesystem of the test matrix is clean, and the reference check agrees."""
    if name in KNOWN_FALSE_POSITIVES:
        request.applymarker(pytest.mark.xfail(reason=KNOWN_FALSE_POSITIVES[name], strict=False))
    fs = built(name)
    p, doc = check_json(*fs.devices)
    assert p.returncode == 0 and doc["problems"] == [], \
        f"btk-check on clean {name}: exit {p.returncode}\n{json.dumps(doc['problems'], indent=1)[:4000]}\n{p.stderr}"
    assert doc["errors"] == 0 and doc["tree_blocks"] > 0
    oracle.reference_check(fs.devices)


# ---------------------------------------------------------------- the corruption corpus

def test_corpus_is_big_enough():
    assert len(EXPECTS) >= 40, f"only {len(EXPECTS)} corpus images in {CORPUS}"
    for e in EXPECTS:
        assert e.with_name(e.stem + ".img.xz").exists(), f"{e.name} has no image"


@pytest.mark.parametrize("expect", EXPECTS, ids=[e.stem for e in EXPECTS])
def test_corpus_image(expect, corpus_images, request):
    e = parse_expect(expect)
    if e["pending"]:
        request.applymarker(pytest.mark.xfail(reason=f"pending: {e['pending']}", strict=False))
    img = corpus_images[e["name"]]
    p, doc = check_json(*e["args"], img)
    ids = sorted({x["id"] for x in doc["problems"]})
    assert (p.returncode, ids) == (e["exit"], sorted(e["problems"])), \
        f"{e['name']}: btk-check exit {p.returncode} ids {ids}, expected exit {e['exit']} ids " \
        f"{sorted(e['problems'])}\n{json.dumps(doc['problems'], indent=1)[:3000]}\n{p.stderr[-2000:]}"
    # the text output names the same problems, with the same exit status
    t = run_btk("btk-check", *e["args"], img)
    assert t.returncode == p.returncode and text_ids(t.stdout) == set(ids), t.stdout[-3000:]


@pytest.mark.parametrize("expect", [e for e in EXPECTS if parse_expect(e)["btrfs-check"] == "fails"],
                         ids=lambda e: e.stem)
def test_corpus_reference_also_fails(expect, corpus_images):
    """Where the expect file says the reference catches the damage, it still does."""
    require_reference_tools()
    p = fsbuild.run(["btrfs", "check", "--readonly", corpus_images[expect.stem]], check=False, timeout=300)
    assert p.returncode != 0, f"btrfs check passes on {expect.stem}, the expect file says it fails"


# btrfs-progs 7.3 beside the Debian package (../shared/tools/ref-progs-latest), a second judge
LATEST_BTRFS = Path("/opt/btrfs-progs-latest/bin/btrfs")


@pytest.mark.parametrize("expect", [e for e in EXPECTS if parse_expect(e).get("btrfs-check-7.3") in ("fails", "passes")],
                         ids=lambda e: e.stem)
def test_corpus_reference_latest(expect, corpus_images):
    """Where the expect file records btrfs check 7.3's verdict, 7.3 (when installed) still gives it."""
    if not LATEST_BTRFS.exists():
        pytest.skip("btrfs-progs 7.3 is not installed")
    want = parse_expect(expect)["btrfs-check-7.3"]
    p = fsbuild.run([LATEST_BTRFS, "check", "--readonly", corpus_images[expect.stem]], check=False, timeout=300)
    assert (p.returncode == 0) == (want == "passes"), f"btrfs check 7.3 on {expect.stem}: exit {p.returncode}, " \
        f"the expect file says it {want}\n{p.stdout[-2000:]}{p.stderr[-2000:]}"


# ---------------------------------------------------------------- command line

def test_exit_clean_and_json_summary():
    fs = built("mkfs-single")
    p, doc = check_json(fs.devices[0])
    assert p.returncode == 0
    for k in ("errors", "warnings", "tree_blocks", "tree_bytes", "items", "trees", "bytes_used", "problems"):
        assert k in doc, f"no {k!r} in the JSON summary"
    t = run_btk("btk-check", fs.devices[0])
    assert t.returncode == 0 and "no problems found" in t.stdout


def test_progress_filesystem_trees_in_name_records():
    """The tree-block walk also feeds the filesystem-tree checks (blocks
    shared by snapshots are read again for them and counted in its line, which
    ends at 100%); the filesystem-tree phase then joins the name records and
    counts them, so its line ends at 100% of a real size."""
    fs = built("s16k-crc32c-zstd")
    p = run_btk("btk-check", "--progress=plain", *fs.devices)
    assert p.returncode == 0, p.stderr
    for phase in ("tree blocks", "filesystem trees"):
        lines = [l.strip() for l in p.stderr.replace("\r", "\n").splitlines() if l.startswith(phase + ":")]
        assert lines, p.stderr
        assert re.match(phase + r": [1-9]\d*\.\d\d[KMG]iB \(100\.0%\), .*done in", lines[-1]), lines[-1]


def test_progress_extent_references_in_extent_tree_bytes():
    """The extent-reference phase counts the extent-tree leaves it reads
    against those the tree-block walk found, so its line ends at 100% of a
    real size (it used to stay at 0.00B with no percentage)."""
    fs = built("mkfs-single")
    p = run_btk("btk-check", "--progress=plain", fs.devices[0])
    assert p.returncode == 0, p.stderr
    lines = [l.strip() for l in p.stderr.splitlines() if l.startswith("extent references and checksums:")]
    assert lines, p.stderr
    assert re.match(r"extent references and checksums: [1-9]\d*\.\d\d[KMG]iB \(100\.0%\), .*done in",
                    lines[-1]), lines[-1]


def test_exit_operational_error(tmp_path):
    notfs = tmp_path / "zeros.img"
    notfs.write_bytes(bytes(1 << 20))
    for target in (notfs, tmp_path / "missing.img"):
        p = run_btk("btk-check", target)
        assert p.returncode == 8, f"{target}: exit {p.returncode}\n{p.stderr}"
        assert "btk-check: error:" in p.stderr


@pytest.mark.parametrize("args", [[], ["--no-such-option", "x"], ["--format", "xml", "x"],
                                  ["--memory-limit", "1K", "x"], ["--super", "3", "x"], ["--jobs", "0", "x"]],
                         ids=["no-device", "bad-option", "bad-format", "tiny-memory-limit", "bad-super", "zero-jobs"])
def test_exit_usage_error(args):
    p = run_btk("btk-check", *args)
    assert p.returncode == 16, f"btk-check {args}: exit {p.returncode}\n{p.stderr}"


def test_help_lists_every_option():
    """Every long option defined in check/*.c appears in --help (and the help exits 0)."""
    src = "".join(f.read_text() for f in (fsbuild.REPO / "check").glob("*.c"))
    block = src[src.index("struct argp_option"):]
    block = block[:block.index("{ 0 }")]
    names = re.findall(r'\{\s*"([a-z][a-z0-9-]*)"', block)
    assert "memory-limit" in names
    p = run_btk("btk-check", "--help")
    assert p.returncode == 0
    for n in names + ["quiet", "verbose", "progress", "version"]:
        assert f"--{n}" in p.stdout, f"--{n} missing from btk-check --help"
