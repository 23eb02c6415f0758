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
	char msg[600];
	const char *paths[1];
	unsigned long items = 0;

	if (argc != 2)
		return 2;
	paths[0] = argv[1];
	fs_open_options_init(&o);
	if (fs_open(paths, 1, &o, &fs, msg, sizeof(msg))) {
		fprintf(stderr, "%s\n", msg);
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
		fprintf(stderr, "%s\n", fs_error_message(fs));
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
