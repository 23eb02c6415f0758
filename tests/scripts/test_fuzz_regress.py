# SPDX-License-Identifier: GPL-2.0-only
"""Every input the fuzzers (fuzz/) ever crashed on, and their seeds, replayed
through the harnesses built with ASan + UBSan: a corrupted filesystem yields
problems, never a crash, a hang or a leak.

The replay binaries are `make fuzz-replay` (or `make check-fuzz-regress`),
built with the ordinary compiler, no clang needed; the test skips when they
are not built. tests/images/fuzz/image/ holds patches onto the base
filesystems tests/images/fuzz/{base,raid-1,raid-2,raid-3}.img.xz,
tests/images/fuzz/items/ single items, tests/images/fuzz/imgfile/ image files
(btrfs-image dumps and native btk images), tests/images/fuzz/check/ patches
onto the same bases run through every phase of btk-check.
"""
import lzma
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import skip_or_fail, BUILD_DIR, SANITIZER_MARKERS

REPO = Path(__file__).resolve().parents[2]
INPUTS = REPO / "tests/images/fuzz"
HARNESSES = ("image", "items", "imgfile", "check")   # imgfile: btk-image readers (image files, no base)
BASES = ("base", "raid-1", "raid-2", "raid-3")


def replay_binary(harness: str) -> Path:
    path = BUILD_DIR / "fuzz" / f"replay_{harness}"
    if not os.access(path, os.X_OK):
        skip_or_fail(f"{path} is not built (make fuzz-replay; make check builds it)")
    return path


@pytest.fixture(scope="module")
def base_images(tmp_path_factory) -> dict[str, Path]:
    """The unpacked base filesystems: those make unpacked, else fresh ones."""
    out = {}
    tmp = None
    for name in BASES:
        built = BUILD_DIR / "fuzz" / f"{name}.img"
        if built.exists():
            out[name] = built
            continue
        tmp = tmp or tmp_path_factory.mktemp("fuzz")
        out[name] = tmp / f"{name}.img"
        with lzma.open(INPUTS / f"{name}.img.xz") as src, open(out[name], "wb") as dst:
            shutil.copyfileobj(src, dst)
    return out


def last_input(stderr: str) -> str:
    started = [l for l in stderr.splitlines() if l.startswith("replay: ")]
    return started[-1][len("replay: "):] if started else "(before the first input)"


@pytest.mark.parametrize("harness", HARNESSES)
def test_fuzz_inputs_replay_clean(harness, base_images):
    binary = replay_binary(harness)
    inputs = sorted(p for p in (INPUTS / harness).iterdir() if p.is_file())
    assert inputs, f"no inputs in {INPUTS / harness}"
    env = dict(os.environ, BTK_FUZZ_BASE=str(base_images["base"]),
               BTK_FUZZ_RAID_BASE=":".join(str(base_images[f"raid-{i}"]) for i in (1, 2, 3)))
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    try:
        p = subprocess.run([str(binary), *map(str, inputs)], capture_output=True, text=True,
                           errors="replace", timeout=600, env=env)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"replay_{harness} hung (600 s) on {last_input(e.stderr or '')}", pytrace=False)
    where = f"replay_{harness} on {last_input(p.stderr)}"
    for marker in SANITIZER_MARKERS:
        assert marker not in p.stderr, f"sanitizer report from {where}:\n{p.stderr[-6000:]}"
    assert p.returncode == 0, f"{where} failed (exit {p.returncode}):\n{p.stderr[-4000:]}"
    replayed = sum(1 for l in p.stderr.splitlines() if l.startswith("replay: "))
    assert replayed == len(inputs), f"replay_{harness} ran {replayed} of {len(inputs)} inputs"
