# SPDX-License-Identifier: GPL-2.0-only
"""Every command with --format json prints exactly one JSON document (json.loads of
the whole output), which starts with the schema version, the program and the btk
version: btk-check (a check, a listing, a failure), btk-inspect super/map/usage,
btk-image info. (btk-inspect tree --format jsonl is a stream of records by design:
doc/inspect-tree-jsonl.md.)"""
import json

import pytest

from conftest import run_btk, sample_copy


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return sample_copy(tmp_path_factory.mktemp("json"))


def one_document(tool, *args, status=(0,)):
    p = run_btk(tool, *args)
    assert p.returncode in status, f"{tool} {args}: exit {p.returncode}\n{p.stderr}"
    doc = json.loads(p.stdout)  # raises on a second document
    assert isinstance(doc, dict) and doc["version"] == 1 and doc["program"] == tool and doc["btk_version"], doc
    return doc


def test_check(sample):
    doc = one_document("btk-check", "--format", "json", sample)
    assert doc["filesystem"]["label"] == "btk-sample" and doc["exit_status"] == 0


def test_check_list_problems():
    assert one_document("btk-check", "--list-problems", "--format", "json")["problems"]


def test_check_failure(tmp_path):
    bad = tmp_path / "zeros.img"
    bad.write_bytes(bytes(1 << 20))
    doc = one_document("btk-check", "--format", "json", bad, status=(8,))
    assert doc["exit_status"] == 8, doc
    # the failure's kind from libfs' typed error record, not parsed from the message
    assert doc["error_kind"] == "invalid" and "not a btrfs filesystem" in doc["error"], doc


def test_inspect_super(sample):
    doc = one_document("btk-inspect", "super", "--format", "json", sample, sample)
    assert [d["superblock"]["label"] for d in doc["devices"]] == ["btk-sample"] * 2
    doc = one_document("btk-inspect", "super", "--all-copies", "--format", "json", sample)
    assert [c["mirror"] for c in doc["devices"][0]["copies"]] == [0, 1]


def test_inspect_map(sample):
    chunks = one_document("btk-inspect", "map", "--format", "json", sample)["chunks"]
    assert {c["flags"].split("|")[0] for c in chunks} == {"DATA", "METADATA", "SYSTEM"}
    doc = one_document("btk-inspect", "map", "--format", "json", "--logical", chunks[0]["logical"], sample)
    assert doc["copies"][0]["physical"] == chunks[0]["stripes"][0]["physical"]


def test_inspect_usage(sample):
    assert one_document("btk-inspect", "usage", "--format", "json", sample)["trees"]


def test_image_info(sample, tmp_path):
    img = tmp_path / "sample.btk"
    assert run_btk("btk-image", "dump", sample, img).returncode == 0
    assert one_document("btk-image", "info", "--format", "json", img)["command"] == "info"


# Usage errors and failures before a program's own output: still exactly one document, with
# "error" and "exit_status" (16 for btk-check as fsck(8) wants, 1 for the others), and the
# message stderr shows. Each form of asking for JSON, each program, each kind of usage error.
USAGE_ERRORS = [
    ("btk-check", ["--format", "json", "--bogus", "x"], 16, "unrecognized option '--bogus'"),
    ("btk-check", ["--format=json"], 16, "Usage: btk-check"),
    ("btk-check", ["--form", "json", "-n", "-y", "x"], 16, "-n (repair nothing) contradicts"),
    ("btk-check", ["--format", "json", "--format", "xml", "x"], 16, "invalid --format 'xml'"),
    ("btk-inspect", ["--format", "json"], 1, "unknown command '--format'"),
    ("btk-inspect", ["super", "--format", "json"], 1, "Usage: btk-inspect super"),
    ("btk-inspect", ["map", "--format=json", "--bogus", "x"], 1, "unrecognized option '--bogus'"),
    ("btk-inspect", ["usage", "--format", "json", "/nonexistent/dev"], 1, "/nonexistent/dev"),
    ("btk-inspect", ["tree", "--format", "json", "x"], 1, "invalid --format 'json' (expected text or jsonl)"),
    ("btk-image", ["info", "--format", "json"], 1, "Usage: btk-image info"),
    ("btk-image", ["info", "--format", "json", "/nonexistent/img"], 1, "/nonexistent/img"),
    ("btk-convert", ["--format=json", "profile"], 1, "unknown command '--format=json'"),
    ("btk-tune", ["--format", "json", "x"], 1, "unrecognized option '--format'"),
    ("btk-undo", ["--format", "json", "x"], 1, "unrecognized option '--format'"),
]


@pytest.mark.parametrize("tool,args,status,error", USAGE_ERRORS,
                         ids=[f"{t}-{'-'.join(a)[:40]}" for t, a, _, _ in USAGE_ERRORS])
def test_usage_error_is_one_document(tool, args, status, error):
    doc = one_document(tool, *args, status=(status,))
    assert doc["exit_status"] == status and error in doc["error"], doc
    p = run_btk(tool, *args)
    assert error in p.stderr, p.stderr     # stderr keeps the message for a person


def test_text_usage_error_prints_nothing_on_stdout():
    """Without --format json (or with it after "--", where it is not an option) a usage error
    is text on stderr only."""
    for args in (["--bogus"], ["--", "--format", "json"]):
        p = run_btk("btk-check", *args)
        assert p.returncode in (8, 16) and p.stdout == "", (args, p.stdout)


def test_failure_after_a_document_adds_none(sample):
    """A run that printed its document and then exits non-zero prints no second one."""
    doc = one_document("btk-inspect", "super", "--format", "json", sample, "/nonexistent/dev", status=(1,))
    assert doc["exit_status"] == 1 and doc["command"] == "super", doc
