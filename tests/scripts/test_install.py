# SPDX-License-Identifier: GPL-2.0-only
"""What a distribution and an outside program get: `make install` into a DESTDIR
(programs, libbtk.so.0 and libbtk.a, headers, btk.pc, man pages, docs, bash
completions), a program compiled against the installed headers with
`pkg-config --cflags --libs btk` that opens the sample image and prints its
nodesize, `make uninstall` removing every file, and the `make dist` tarball
configuring and building on its own (without -Werror, which a git checkout
turns on). Both build, so both are slow tests (the ASan rerun skips them)."""
import os
import shutil
import subprocess

import pytest

import fsbuild
from conftest import BUILD_DIR, skip_or_fail, sample_copy

REPO = fsbuild.REPO
PROGRAMS = ["btk-check", "btk-convert", "btk-image", "btk-inspect", "btk-tune", "btk-undo"]

pytestmark = pytest.mark.slow

NODESIZE_C = r"""
#include <stdio.h>
#include <btk/btk.h>

int main(int argc, char **argv)
{
	struct fs_open_options o;
	struct fs_info *fs;
	char msg[600];
	const char *paths[1];

	if (argc != 2)
		return 2;
	paths[0] = argv[1];
	fs_open_options_init(&o);
	if (fs_open(paths, 1, &o, &fs, msg, sizeof(msg))) {
		fprintf(stderr, "%s\n", msg);
		return 1;
	}
	printf("nodesize %u\n", fs->nodesize);
	fs_close(fs);
	return 0;
}
"""


def make(*args, cwd=REPO, timeout=900):
    p = subprocess.run(["make", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"make {' '.join(args)}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p


def test_install_compile_against_it_uninstall(tmp_path):
    if "build-asan" in str(BUILD_DIR):
        pytest.skip("installs the plain build")
    for tool in ("pkg-config", "cc"):
        if not shutil.which(tool):
            skip_or_fail(f"{tool} is not installed")
    dest = tmp_path / "dest"
    make(f"B={BUILD_DIR}", "install", f"DESTDIR={dest}", "prefix=/usr")
    usr = dest / "usr"
    for p in PROGRAMS:
        assert os.access(usr / "bin" / p, os.X_OK), p
        assert (usr / "share/man/man8" / f"{p}.8").is_file(), p
        assert (usr / "share/bash-completion/completions" / p).is_file(), p
    assert (usr / "lib/libbtk.so.0").resolve().name == "libbtk.so.0.0.0"
    assert (usr / "lib/libbtk.a").is_file() and (usr / "lib/pkgconfig/btk.pc").is_file()
    assert (usr / "share/doc/btk/image-format.md").is_file() and (usr / "share/doc/btk/COPYING.LGPL").is_file()
    soname = subprocess.run(["objdump", "-p", str(usr / "lib/libbtk.so.0")], capture_output=True, text=True).stdout
    assert "SONAME               libbtk.so.0" in soname, soname

    env = dict(os.environ, PKG_CONFIG_PATH=str(usr / "lib/pkgconfig"), PKG_CONFIG_SYSROOT_DIR=str(dest))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "btk"], capture_output=True, text=True, env=env,
                           check=True).stdout.split()
    src = tmp_path / "nodesize.c"
    src.write_text(NODESIZE_C)
    exe = tmp_path / "nodesize"
    p = subprocess.run(["cc", "-Wall", "-Werror", "-o", str(exe), str(src), *flags], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    run = subprocess.run([str(exe), str(sample_copy(tmp_path))], capture_output=True, text=True,
                         env=dict(os.environ, LD_LIBRARY_PATH=str(usr / "lib")))
    assert run.returncode == 0 and run.stdout == "nodesize 16384\n", run.stdout + run.stderr
    ldd = subprocess.run(["ldd", str(exe)], capture_output=True, text=True,
                         env=dict(os.environ, LD_LIBRARY_PATH=str(usr / "lib"))).stdout
    assert str(usr / "lib/libbtk.so.0") in ldd, ldd

    # the completion offers the subcommands and the options of the installed programs
    comp = subprocess.run(["bash", "-c", f'source {usr}/share/bash-completion/completions/btk-inspect; '
                           f'PATH={usr}/bin:$PATH; COMP_WORDS=(btk-inspect ""); COMP_CWORD=1; _btk; '
                           'echo "${COMPREPLY[@]}"; COMP_WORDS=(btk-check --pr); COMP_CWORD=1; _btk; '
                           'echo "${COMPREPLY[@]}"'], capture_output=True, text=True)
    assert comp.stdout.split("\n")[:2] == ["super tree map usage heatmap", "--preen --progress"], comp.stdout + comp.stderr

    make(f"B={BUILD_DIR}", "uninstall", f"DESTDIR={dest}", "prefix=/usr")
    left = [str(f.relative_to(dest)) for f in dest.rglob("*") if not f.is_dir()]
    assert left == [], left


def test_dist_builds_on_its_own(tmp_path):
    if not (REPO / ".git").exists() or not shutil.which("autoreconf"):
        skip_or_fail("make dist needs a git checkout and autoreconf")
    version = subprocess.run(["sed", "-n", "s/^AC_INIT(\\[btk\\], \\[\\([^]]*\\)\\].*/\\1/p", "configure.ac"],
                             cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
    tarball = REPO / f"btk-{version}.tar.xz"
    try:
        make(f"B={BUILD_DIR}", "dist")
        subprocess.run(["tar", "-xJf", str(tarball), "-C", str(tmp_path)], check=True)
    finally:
        tarball.unlink(missing_ok=True)
    top = tmp_path / f"btk-{version}"
    assert (top / "configure").is_file() and not (top / ".git").exists()
    p = subprocess.run(["./configure", "--disable-tests"], cwd=top, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "WERROR = \n" in (top / "config.mk").read_text(), "a release tarball builds without -Werror"
    # btk-check alone (libfs, common, check: most of the sources) keeps CI's cost down
    make("-j2", "build/btk-check", cwd=top, timeout=1800)
    p = subprocess.run([str(top / "build/btk-check"), str(sample_copy(tmp_path))], capture_output=True, text=True)
    assert p.returncode == 0 and "no problems found" in p.stdout, p.stdout + p.stderr


def test_git_checkout_builds_with_werror():
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    config = (REPO / "config.mk").read_text()
    assert "WERROR = -Werror\n" in config or "--disable-werror" in (REPO / "config.log").read_text()
