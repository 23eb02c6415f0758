# SPDX-License-Identifier: GPL-2.0-only
"""What a distribution and an outside program get: `make install` into a DESTDIR
(programs, libbtk.so.0 and libbtk.a, headers, btk.pc, man pages, docs, bash
completions), a program compiled against the installed headers with
`pkg-config --cflags --libs btk` that opens the sample image read-only and
prints what the reference tools also read (nodesize, generation, the chunks,
the root tree's items) through the public API only, while the chunk map, the
device array, the superblock buffer, the error buffer and the block cache's
links stay out of its reach, `make uninstall` removing every file, and the `make dist` tarball
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

OUTSIDE_C = r"""
#include <stdio.h>
#include <btk/btk.h>

static int count_item(void *arg, const struct btrfs_key *key, const uint8_t *data, uint32_t size)
{
	(void)key;
	(void)data;
	(void)size;
	++*(unsigned long *)arg;
	return 0;
}

int main(int argc, char **argv)
{
	struct fs_open_options o;
	struct fs_info *fs;
	const char *paths[1];
	unsigned long items = 0;

	if (argc != 2)
		return 2;
	paths[0] = argv[1];
	fs_open_options_init(&o);
	if (fs_open(paths, 1, &o, &fs)) {
		fprintf(stderr, "%s (%s)\n", btk_last_error()->msg, btk_err_kind_name(btk_last_error()->kind));
		return 1;
	}
	printf("nodesize %u\n", fs->nodesize);
	printf("generation %llu\n", (unsigned long long)fs->generation);
	printf("label %s\n", (const char *)super_label_ptr(fs_super(fs)));
	for (unsigned i = 0; i < fs_num_devices(fs); i++)
		printf("device %llu\n", (unsigned long long)fs_device(fs, i)->devid);
	for (size_t i = 0; i < fs_chunk_count(fs); i++) {
		const struct chunk *c = fs_chunk(fs, i);
		printf("chunk %llu %llu %s\n", (unsigned long long)c->logical, (unsigned long long)c->length,
		       profile_name(c->type));
	}
	if (tree_each_item(fs, &fs->tree_root, count_item, &items) < 0) {
		fprintf(stderr, "%s\n", btk_error_msg());
		fs_close(fs);
		return 1;
	}
	printf("root tree items %lu\n", items);
	fs_close(fs);
	return 0;
}
"""

# What the installed headers must not let an outside program do: reach the
# chunk map, the device array, the raw superblock, the error buffer or the
# block cache's links (each line is compiled on its own and must fail).
PRIVATE_USES = [
    "size_t f(struct fs_info *fs) { return fs->chunks->count; }",
    "void *f(struct fs_info *fs) { return fs->chunks; }",
    "void *f(struct fs_info *fs) { return fs->devices; }",
    "unsigned f(struct fs_info *fs) { return fs->num_devices; }",
    "void *f(struct fs_info *fs) { return fs->super; }",
    "char *f(struct fs_info *fs) { return fs->errmsg; }",
    "void *f(struct tree_block *b) { return b->hash_next; }",
    "void *f(struct tree_block *b) { return b->lru_next; }",
]


def dump_tree_items(tool_out: str) -> int:
    return sum(1 for line in tool_out.splitlines() if line.lstrip().startswith("item ") and " key (" in line)


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
    # only the public headers are installed, and nothing under libfs/
    assert sorted(f.name for f in (usr / "include/btk").iterdir()) == \
        sorted(f.name for f in (REPO / "include/btk").glob("*.h"))
    src = tmp_path / "outside.c"
    src.write_text(OUTSIDE_C)
    exe = tmp_path / "outside"
    # the installed headers are ISO C11 (with the feature macros btk.pc sets)
    p = subprocess.run(["cc", "-std=c11", "-Wpedantic", "-Wall", "-Wextra", "-Werror", "-o", str(exe), str(src), *flags],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    img = sample_copy(tmp_path)
    run = subprocess.run([str(exe), str(img)], capture_output=True, text=True,
                         env=dict(os.environ, LD_LIBRARY_PATH=str(usr / "lib")))
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout.splitlines()
    # the reference tools read the same image: geometry, chunks, the root tree's items
    sup = subprocess.run(["btrfs", "inspect-internal", "dump-super", str(img)], capture_output=True, text=True,
                         check=True).stdout
    field = dict(line.split(None, 1) for line in sup.splitlines() if line and not line[0].isspace()
                 and len(line.split(None, 1)) == 2)
    assert out[0] == f"nodesize {field['nodesize'].strip()}" == "nodesize 16384", out
    assert out[1] == f"generation {field['generation'].strip()}", out
    assert out[2] == "label btk-sample" and out[3] == "device 1", out
    chunks = [line for line in out if line.startswith("chunk ")]
    tree = subprocess.run(["btrfs", "inspect-internal", "dump-tree", "-t", "chunk", str(img)],
                          capture_output=True, text=True, check=True).stdout
    ref = [f"chunk {w[w.index('CHUNK_ITEM') + 1].rstrip(')')}" for w in map(str.split, tree.splitlines())
           if "CHUNK_ITEM" in w and w[0] == "item"]
    assert [c.split()[0] + " " + c.split()[1] for c in chunks] == ref and len(ref) >= 3, (chunks, ref)
    assert {c.split()[3] for c in chunks} == {"single", "DUP"}, chunks
    roots = subprocess.run(["btrfs", "inspect-internal", "dump-tree", "-t", "root", str(img)],
                           capture_output=True, text=True, check=True).stdout
    assert out[-1] == f"root tree items {dump_tree_items(roots)}" and dump_tree_items(roots) > 5, out[-1]
    for i, use in enumerate(PRIVATE_USES):
        bad = tmp_path / f"private{i}.c"
        bad.write_text("#include <btk/btk.h>\n" + use + "\n")
        p = subprocess.run(["cc", "-c", "-o", os.devnull, str(bad), *flags], capture_output=True, text=True)
        assert p.returncode != 0, f"the public headers let an outside program compile: {use}"
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
