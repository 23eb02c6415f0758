# SPDX-License-Identifier: GPL-2.0-only
"""scripts/api-check, the libfs API boundary (doc/design.md): the tree as it
is passes, and each kind of breach in a program source (a private libfs
header, a private member of struct fs_info, the block cache's links, an
installed header reaching into libfs/) makes it fail and name the line, while
tests and a commented-out use do not. No filesystem, well under a second."""
import shutil
import subprocess

import fsbuild

REPO = fsbuild.REPO
CHECK = REPO / "scripts/api-check"


def run(top):
    return subprocess.run([str(CHECK), str(top)], capture_output=True, text=True)


def test_tree_passes():
    p = run(REPO)
    assert p.returncode == 0, p.stdout + p.stderr


def test_each_breach_fails(tmp_path):
    shutil.copytree(REPO / "include/btk", tmp_path / "include/btk")
    (tmp_path / "check").mkdir()
    (tmp_path / "tests/unit").mkdir(parents=True)
    ok = '#include <btk/fs.h>\n#include "check/check.h"\n#include "common/cli.h"\n' + "/* fs->errmsg in a comment */\nint f(struct fs_info *fs) { return fs->nodesize; }\n"
    (tmp_path / "check/ok.c").write_text(ok)
    (tmp_path / "tests/unit/test_x.c").write_text('#include "libfs/fdio.h"\nint g(struct fs_info *fs);\n')
    assert run(tmp_path).returncode == 0, run(tmp_path).stdout
    breaches = {
        'x.c:1: includes libfs/fdio.h': '#include "libfs/fdio.h"\n',
        'x.c:2: uses fs->chunks': '#include <btk/volumes.h>\nint n(struct fs_info *fs) { return fs->chunks != 0; }\n',
        'x.c:1: uses fs->errmsg': 'const char *m(struct fs_info *fs) { return fs->errmsg; }\n',
        'x.c:1: uses fs->super': 'const void *s(struct fs_info *fs) { return fs->super; }\n',
        'x.c:1: uses fs->devices': 'void *d(struct fs_info *fs) { return fs->devices; }\n',
        'x.c:1: uses ->hash_next': 'void *h(struct tree_block *b) { return b->hash_next; }\n',
        'x.c:1: includes image/, another program': '#include "image/imgio.h"\n',
    }
    for want, text in breaches.items():
        (tmp_path / "check/x.c").write_text(text)
        p = run(tmp_path)
        assert p.returncode == 1 and f"check/{want}" in p.stdout, (want, p.stdout)
    (tmp_path / "check/x.c").unlink()
    # an installed header that includes a private one would not compile once installed
    (tmp_path / "include/btk/fs.h").write_text((REPO / "include/btk/fs.h").read_text()
                                               + '#include "libfs/trans_internal.h"\n')
    p = run(tmp_path)
    assert p.returncode == 1 and "include/btk/fs.h" in p.stdout and "libfs/trans_internal.h" in p.stdout, p.stdout
