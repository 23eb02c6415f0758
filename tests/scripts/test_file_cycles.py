# SPDX-License-Identifier: GPL-2.0-only
"""scripts/file-cycles: a circle of files that call each other fails the check,
one-way calls and the allowed copy-on-write core pass, and the built tree has
no circle outside its allowlist."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

TOP = Path(__file__).resolve().parents[2]
SCRIPT = TOP / "scripts" / "file-cycles"


def build(tmp, sources):
    """Compile {path: C text} into tmp/build/<path>.o; return the build dir."""
    b = tmp / "build"
    for rel, text in sources.items():
        src = tmp / rel
        src.parent.mkdir(parents=True, exist_ok=True)
        src.write_text(text)
        obj = b / (rel[:-2] + ".o")
        obj.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cc", "-c", "-o", str(obj), str(src)], check=True)
    return b


def run(build_dir, src=None):
    args = [sys.executable, str(SCRIPT)] + (["--src", str(src)] if src else []) + [str(build_dir)]
    return subprocess.run(args, capture_output=True, text=True)


def test_circle_fails_with_its_symbols(tmp_path):
    b = build(tmp_path, {
        "check/a.c": "int b_helper(void);\nint a_main(void) { return b_helper(); }\n",
        "check/b.c": "int a_main(void);\nint b_helper(void) { return 1; }\nint b_other(void) { return a_main(); }\n",
        "check/c.c": "int a_main(void);\nint c_top(void) { return a_main(); }\n",
    })
    r = run(b, tmp_path)
    assert r.returncode == 1, r.stdout
    assert "circle of 2 files: check/a.c check/b.c" in r.stdout
    assert "check/a.c -> check/b.c: b_helper" in r.stdout
    assert "check/b.c -> check/a.c: a_main" in r.stdout
    assert "check/c.c" not in r.stdout.split("file-cycles:")[0]


def test_stale_object_without_source_is_left_out(tmp_path):
    b = build(tmp_path, {
        "check/a.c": "int b_helper(void);\nint a_main(void) { return b_helper(); }\n",
        "check/b.c": "int a_main(void);\nint b_helper(void) { return a_main(); }\n",
    })
    (tmp_path / "check" / "b.c").unlink()
    r = run(b, tmp_path)
    assert r.returncode == 0, r.stdout


def test_library_objects_under_pic_are_read(tmp_path):
    """The library is compiled position-independent into build/pic/: a circle
    there must fail as one among the program objects does."""
    b = build(tmp_path, {
        "libfs/a.c": "int b_helper(void);\nint a_main(void) { return b_helper(); }\n",
        "libfs/b.c": "int a_main(void);\nint b_helper(void) { return a_main(); }\n",
    })
    (b / "pic").mkdir()
    (b / "libfs").rename(b / "pic" / "libfs")
    r = run(b, tmp_path)
    assert r.returncode == 1, r.stdout
    assert "circle of 2 files: libfs/a.c libfs/b.c" in r.stdout


def test_object_older_than_its_source_is_left_out(tmp_path):
    """An object left by an earlier layout (build/libfs/ beside build/pic/libfs/)
    is older than its source: reading it would report circles long gone."""
    b = build(tmp_path, {
        "libfs/a.c": "int b_helper(void);\nint a_main(void) { return b_helper(); }\n",
        "libfs/b.c": "int a_main(void);\nint b_helper(void) { return a_main(); }\n",
    })
    later = os.path.getmtime(b / "libfs" / "b.o") + 10
    (tmp_path / "libfs" / "b.c").write_text("int b_helper(void) { return 1; }\n")
    os.utime(tmp_path / "libfs" / "b.c", (later, later))
    r = run(b, tmp_path)
    assert r.returncode == 0, r.stdout


def test_one_way_calls_pass(tmp_path):
    b = build(tmp_path, {
        "check/a.c": "int b_helper(void);\nint a_main(void) { return b_helper(); }\n",
        "check/b.c": "int b_helper(void) { return 1; }\n",
    })
    r = run(b, tmp_path)
    assert r.returncode == 0, r.stdout
    assert "0 circles" in r.stdout


def test_allowed_core_passes(tmp_path):
    b = build(tmp_path, {
        "libfs/trans_tree.c": "int alloc_tree_block(void);\nint trans_insert_item(void) { return alloc_tree_block(); }\n",
        "libfs/alloc.c": "int trans_insert_item(void);\nint alloc_tree_block(void) { return 0; }\n"
                         "int alloc_more(void) { return trans_insert_item(); }\n",
    })
    r = run(b, tmp_path)
    assert r.returncode == 0, r.stdout
    assert "1 allowed, 0 not allowed" in r.stdout


def test_built_tree_has_no_circle_outside_the_allowlist():
    build_dir = Path(os.environ.get("BTK_BUILD_DIR", TOP / "build"))
    if not (build_dir / "libfs").is_dir():
        pytest.skip(f"no objects under {build_dir}")
    r = run(build_dir)
    assert r.returncode == 0, r.stdout
