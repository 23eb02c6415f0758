# SPDX-License-Identifier: GPL-2.0-only
"""Progress lines as a user and a log see them: on a terminal (--progress
draws as if it were one) quick phases leave nothing behind and each line
carries the run's overall percentage and ETA; --progress=plain writes whole
lines (no carriage return) for logs; the data-checksum phase and image
restore know their totals, so they show a percentage and an ETA."""
import re
import subprocess

from conftest import require_btk, run_btk, sample_copy


def screen(stderr: str) -> list[str]:
    """What stays on a terminal: each line as its last carriage return left it."""
    return [line.split("\r")[-1].strip() for line in stderr.split("\n") if line.split("\r")[-1].strip()]


def test_terminal_keeps_no_quick_lines_and_shows_overall(tmp_path):
    img = sample_copy(tmp_path)
    # bytes: text mode would turn each carriage return into a newline
    p = subprocess.run([str(require_btk("btk-check")), "--progress", "--check-data-csum", str(img)],
                       capture_output=True)
    err = p.stderr.decode()
    assert p.returncode == 0, err
    assert "\r" in err and screen(err) == [], f"left on the terminal: {screen(err)}"
    assert re.search(r"\rtree blocks: .*; overall \d+%, ETA (\d+:\d\d|--:--)", err), err


def test_plain_lines_with_data_checksum_percentage(tmp_path):
    img = sample_copy(tmp_path)
    p = run_btk("btk-check", "--progress=plain", "--check-data-csum", img)
    assert p.returncode == 0 and "\r" not in p.stderr, p.stderr
    (line,) = [x for x in p.stderr.splitlines() if x.startswith("data checksums:")]
    assert re.match(r"data checksums: 300\.00KiB \(100\.0%\), .*done in \d+:\d\d$", line), line
    assert not [x for x in p.stderr.splitlines() if x.startswith(("checking:", "superblocks:"))], p.stderr


def test_restore_shows_the_share_of_the_image_read(tmp_path):
    img = sample_copy(tmp_path)
    dump = tmp_path / "sample.btk"
    assert run_btk("btk-image", "dump", "-q", img, dump).returncode == 0
    p = run_btk("btk-image", "restore", "--progress=plain", dump, tmp_path / "out.img")
    assert p.returncode == 0 and "\r" not in p.stderr, p.stderr
    (line,) = [x for x in p.stderr.splitlines() if x.startswith("restoring")]
    assert re.match(r"restoring \(image read\): .* \(100\.0%\), .*done in", line), line
    assert run_btk("btk-image", "restore", "--progress=fancy", dump, tmp_path / "o2.img").returncode != 0
