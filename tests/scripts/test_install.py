# SPDX-License-Identifier: GPL-2.0-only
"""What a distribution and an outside program get: `make install` into a DESTDIR
(programs, libbtk.so.0 and libbtk.a, headers, btk.pc, man pages, docs, bash
completions), a program compiled against the installed headers with
`pkg-config --cflags --libs btk` that opens the sample image and prints its
nodesize, `make uninstall` removing every file, and the `make dist` tarball
configuring and building on its own (without -Werror, which a git checkout
turns on) into the Debian packages. Both build, so both are slow tests (the
ASan rerun skips them: they test packaging, not code paths)."""
import os
import re
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
    # sbindir as Debian's (and as configure --sbindir=/sbin writes it into config.mk)
    make(f"B={BUILD_DIR}", "install", f"DESTDIR={dest}", "prefix=/usr", "sbindir=/sbin")
    usr = dest / "usr"
    assert os.readlink(dest / "sbin/fsck.btrfs") == "/usr/bin/btk-check"
    assert not (usr / "sbin").exists() and not (usr / "bin/fsck.btrfs").exists()
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

    # another package's fsck.btrfs (btrfs-progs' script) is neither replaced nor removed
    foreign = dest / "sbin/fsck.btrfs"
    foreign.unlink()
    foreign.write_text("#!/bin/sh\nexit 0\n")
    p = make(f"B={BUILD_DIR}", "install", f"DESTDIR={dest}", "prefix=/usr", "sbindir=/sbin")
    assert "leaving" in p.stdout and foreign.read_text() == "#!/bin/sh\nexit 0\n", p.stdout
    make(f"B={BUILD_DIR}", "uninstall", f"DESTDIR={dest}", "prefix=/usr", "sbindir=/sbin")
    left = [str(f.relative_to(dest)) for f in dest.rglob("*") if not f.is_dir()]
    assert left == ["sbin/fsck.btrfs"], left


def test_dist_builds_on_its_own_and_into_debian_packages(tmp_path):
    """`make dist`, then from the tarball alone: ./configure (its defaults: no -Werror; its
    --sbindir), and `dpkg-buildpackage -b -us -uc` with the tarball's ./configure (no
    autoreconf): the btk, libbtk0 and libbtk-dev packages hold the programs and their man
    pages, libbtk.so.0, the headers, libbtk.so/.a and btk.pc, and the packaged btk-check
    checks the sample. One build in all (at -O0: it proves the packaging, not the optimiser);
    without debhelper the tarball builds btk-check instead, and the test then skips (CI fails)."""
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
    p = subprocess.run(["./configure", "--disable-tests", "--sbindir=/opt/btk-sbin"], cwd=top, capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    config = (top / "config.mk").read_text()
    assert "WERROR = \n" in config, "a release tarball builds without -Werror"
    assert "sbindir = /opt/btk-sbin\n" in config, "configure --sbindir is honoured"
    sample = sample_copy(tmp_path)
    if not (shutil.which("dpkg-buildpackage") and shutil.which("dh")):
        make("-j2", "CFLAGS=-O0", "build/btk-check", cwd=top, timeout=1800)
        p = subprocess.run([str(top / "build/btk-check"), str(sample)], capture_output=True, text=True)
        assert p.returncode == 0 and "no problems found" in p.stdout, p.stdout + p.stderr
        skip_or_fail("debhelper and dpkg-dev are not installed (scripts/install-deps installs them)")
    configure = (top / "configure").read_bytes()
    env = dict(os.environ, DEB_BUILD_OPTIONS="noopt noautodbgsym parallel=2")
    p = subprocess.run(["dpkg-buildpackage", "-b", "-us", "-uc"], cwd=top, capture_output=True, text=True,
                       env=env, timeout=1800)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-3000:]
    assert (top / "configure").read_bytes() == configure, "the tarball's ./configure was not used as it is"
    assert re.search(r"^no problems found$", p.stdout, re.M), "dh_auto_test's quick check did not run"
    debs = {d.name.split("_")[0]: d for d in tmp_path.glob("*.deb")}
    assert sorted(debs) == ["btk", "libbtk-dev", "libbtk0"], sorted(tmp_path.iterdir())

    def contents(pkg):
        out = subprocess.run(["dpkg", "-c", str(debs[pkg])], capture_output=True, text=True, check=True).stdout
        return {line.split()[5].lstrip(".") for line in out.splitlines()}

    btk = contents("btk")
    for prog in PROGRAMS:
        assert f"/usr/bin/{prog}" in btk and f"/usr/share/man/man8/{prog}.8.gz" in btk, (prog, sorted(btk))
        assert f"/usr/share/bash-completion/completions/{prog}" in btk, prog
    assert not any("fsck.btrfs" in f for f in btk), "fsck.btrfs is btrfs-progs' to ship"
    lib = contents("libbtk0")
    assert any(re.fullmatch(r"/usr/lib/[^/]+/libbtk\.so\.0\.0\.0", f) for f in lib), sorted(lib)
    dev = contents("libbtk-dev")
    for want in (r"/usr/include/btk/btk\.h", r"/usr/lib/[^/]+/libbtk\.a", r"/usr/lib/[^/]+/libbtk\.so",
                 r"/usr/lib/[^/]+/pkgconfig/btk\.pc"):
        assert any(re.fullmatch(want, f) for f in dev), (want, sorted(dev))
    # the packaged program works
    root = tmp_path / "root"
    subprocess.run(["dpkg", "-x", str(debs["btk"]), str(root)], check=True)
    p = subprocess.run([str(root / "usr/bin/btk-check"), str(sample)], capture_output=True, text=True)
    assert p.returncode == 0 and "no problems found" in p.stdout, p.stdout + p.stderr


def test_git_checkout_builds_with_werror():
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    config = (REPO / "config.mk").read_text()
    assert "WERROR = -Werror\n" in config or "--disable-werror" in (REPO / "config.log").read_text()
