#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# Line/branch coverage of a fuzz corpus: build a harness with clang source
# coverage (no sanitizers) around the replay driver, run every input once,
# and print llvm-cov's per-file report for the library sources it reaches.
#
#   fuzz/coverage.sh image|items|check CORPUS_DIR... [-- llvm-cov report options]
#
# Needs clang, llvm-profdata and llvm-cov (Debian: clang-14, llvm-14).
# Output goes to ${BTK_BUILD_DIR:-build}/fuzz/coverage-<harness>/.
set -euo pipefail

cd "$(dirname "$0")/.."
harness=${1:?usage: fuzz/coverage.sh image|items|check CORPUS_DIR...}
shift
dirs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do dirs+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift

pick() { for t in "$@"; do command -v "$t" >/dev/null && { echo "$t"; return; }; done; echo "$1"; }
CLANG=${FUZZ_CC:-$(pick clang clang-14)}
PROFDATA=$(pick llvm-profdata llvm-profdata-14)
COV=$(pick llvm-cov llvm-cov-14)
out=${BTK_BUILD_DIR:-build}/fuzz/coverage-$harness
mkdir -p "$out"

flags=$(sed -n 's/^DEP_CFLAGS = //p' config.mk)
libs=$(sed -n 's/^DEP_LIBS = //p' config.mk)
src=(libfs/*.c common/*.c inspect/item_json.c fuzz/base.c)
[ "$harness" = check ] && src+=($(ls check/*.c | grep -v '^check/main\.c$'))
# shellcheck disable=SC2086
"$CLANG" -std=gnu11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -I. $flags -g -O0 -w \
    -fprofile-instr-generate -fcoverage-mapping \
    -DBTK_FUZZ_BASE_DEFAULT="\"$PWD/${BTK_BUILD_DIR:-build}/fuzz/base.img\"" \
    -o "$out/replay" fuzz/replay.c "fuzz/fuzz_$harness.c" "${src[@]}" -lpthread $libs

rm -f "$out"/*.profraw
LLVM_PROFILE_FILE="$out/%p.profraw" "$out/replay" "${dirs[@]}" 2>/dev/null
"$PROFDATA" merge -sparse -o "$out/all.profdata" "$out"/*.profraw
# the read path the harnesses drive (other libfs files are not reachable from them)
files=(libfs/block.c libfs/blockgroups.c libfs/csum.c libfs/fs.c libfs/io.c libfs/super.c
       libfs/tree.c libfs/volumes.c libfs/walk.c libfs/names.c inspect/item_json.c)
# fuzz_check: btk-check's detection phases and the sorter behind them
[ "$harness" = check ] && files=(libfs/tree.c libfs/super.c libfs/recsort.c libfs/ebitmap.c
       $(ls check/*.c | grep -v -e '^check/main\.c$' -e '^check/repair'))
"$COV" report "$out/replay" -instr-profile="$out/all.profdata" "$@" "${files[@]}"
