# SPDX-License-Identifier: GPL-2.0-only
"""The man pages: roff without warnings (groff -ww -z), the PROBLEMS section of
btk-check.8 as the registry makes it (scripts/gen-problems-man --check), and every
long option of every program and subcommand (their --help) documented in its page."""
import json
import re
import shutil
import subprocess

import pytest

import fsbuild
from conftest import BUILD_DIR, require_btk, run_btk, sample_copy

# roff and option lists: nothing for ASan to see
pytestmark = pytest.mark.no_sanitize

DOC = fsbuild.REPO / "doc"
PAGES = sorted(DOC.glob("*.8"))
# program -> its subcommands ([] when it has none)
PROGRAMS = {
    "btk-check": [],
    "btk-convert": ["profile", "bg-tree"],
    "btk-image": ["dump", "restore", "info"],
    "btk-inspect": ["super", "tree", "map", "usage", "heatmap"],
    "btk-tune": [],
    "btk-undo": [],
}


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_groff_clean(page):
    if not shutil.which("groff"):
        pytest.skip("groff is not installed")
    p = subprocess.run(["groff", "-ww", "-z", "-man", str(page)], capture_output=True, text=True)
    assert p.returncode == 0 and not p.stderr, p.stderr


def test_problems_section_up_to_date():
    require_btk("btk-check")
    p = subprocess.run([str(fsbuild.REPO / "scripts" / "gen-problems-man"), "--check", str(BUILD_DIR)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr


def test_every_problem_id_in_the_page():
    import json
    ids = [x["id"] for x in json.loads(run_btk("btk-check", "--list-problems", "--format", "json").stdout)["problems"]]
    page = (DOC / "btk-check.8").read_text().replace("\\-", "-")
    assert [i for i in ids if f".B {i}\n" not in page] == []


def long_options(help_text: str) -> set[str]:
    """The long options argp lists (the names before the description of each option line)."""
    names = set()
    for line in help_text.splitlines():
        if re.match(r" {2,6}-", line):
            names |= set(re.findall(r"--([a-z][a-z0-9-]+)", re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]))
    return names - {"help", "usage", "version"}


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_every_option_documented(program):
    page = (DOC / f"{program}.8").read_text().replace("\\-", "-").replace("\\f[BIR]", "")
    missing = []
    for sub in PROGRAMS[program] or [None]:
        args = [sub, "--help"] if sub else ["--help"]
        p = run_btk(program, *args)
        assert p.returncode == 0, p.stderr
        missing += [f"{sub or ''} --{o}" for o in sorted(long_options(p.stdout)) if f"--{o}" not in page]
    assert missing == [], f"{program}.8 lacks: {missing}"


@pytest.fixture
def sample(tmp_path):
    return sample_copy(tmp_path)


def test_tune_short_metadata_uuid_as_documented(sample):
    """btk-tune.8 writes -M=UUID: it works (it used to be refused as the UUID '=...')."""
    new = "6b746273-616d-706c-6500-0000000000ff"
    p = run_btk("btk-tune", f"-M={new}", sample)
    assert p.returncode == 0, p.stderr
    doc = json.loads(run_btk("btk-inspect", "super", "--format", "json", sample).stdout)
    sb = doc["devices"][0]["superblock"]
    assert sb["fsid"] == new and sb["metadata_uuid"] == "6b746273-616d-706c-6500-000000000001"
    assert run_btk("btk-check", sample).returncode == 0


@pytest.mark.parametrize("args,ok", [
    (["-c", "19"], True), (["-c", "20"], False), (["-c", "0"], False),
    (["--compress", "lz4", "-c", "12"], True), (["--compress", "lz4", "-c", "13"], False),
    (["--format", "btrfs-image", "-c", "0"], True), (["--format", "btrfs-image", "-c", "10"], False),
    (["--compress", "none", "-c", "1"], False)])
def test_image_compress_level_ranges(sample, tmp_path, args, ok):
    """btk-image.8's -c ranges are enforced: zstd 1-19, lz4 1-12, btrfs-image zlib 0-9."""
    p = run_btk("btk-image", "dump", "-q", *args, sample, tmp_path / "out.img")
    assert (p.returncode == 0) == ok, p.stderr
    if not ok:
        assert "btk-image: error:" in p.stderr and not (tmp_path / "out.img").exists()
