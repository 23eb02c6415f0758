#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# Make tests/images/sample.img.xz: a small, real btrfs filesystem, made
# without root by mkfs.btrfs --rootdir --shrink (btrfs-progs >= 6.14), with
#
#   /hello.txt                 13 bytes: an inline extent
#   /big.bin                   300 KiB of text: regular data extents
#   /link -> hello.txt         a symlink
#   /dir/                      a subdirectory
#   /dir/nested.txt            a second small file
#   /dir/hello-hardlink.txt    a hard link to /hello.txt (nlink 2)
#
# label "btk-sample", fixed fsid and device uuid, DUP metadata, single data.
# Needs btk's build (BTK_BUILD_DIR, default build/) for the mkfs leftovers.
# File times are fixed; the filesystem's own times and the xz output still
# change with every run.
#
#   tests/images/make-sample.sh [OUTPUT.img.xz]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/sample.img.xz}

FSID=6b746273-616d-706c-6500-000000000001
DEVUUID=6b746273-616d-706c-6500-0000000000d1
STAMP='2024-01-01 00:00:00 UTC'

work=$(mktemp -d "${TMPDIR:-/tmp}/btk-sample.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/root
img=$work/sample.img

mkdir -p "$root/dir"
printf 'hello, btrfs\n' >"$root/hello.txt"
printf 'a file in a subdirectory\n' >"$root/dir/nested.txt"
# 300 KiB of numbered lines: real data extents that xz packs tightly
awk 'BEGIN { for (i = 0; i < 7680; i++) printf "btk sample line %06d ................\n", i }' \
    >"$root/big.bin"
[ "$(stat -c %s "$root/big.bin")" -eq 307200 ] || { echo "big.bin is not 300 KiB" >&2; exit 1; }
ln -s hello.txt "$root/link"
ln "$root/hello.txt" "$root/dir/hello-hardlink.txt"
find "$root" -exec touch -h -d "$STAMP" {} +

# mkfs needs room to fill the files in before --shrink cuts the image down
truncate -s 256M "$img"
mkfs.btrfs -q -f -L btk-sample -U "$FSID" --device-uuid "$DEVUUID" \
    -m dup -d single --rootdir "$root" --shrink "$img"
# what a current mkfs makes: without the free-space items of its temporary
# chunks, which btrfs check 7.x and btk-check fail (needs btk's build)
python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import fsbuild; fsbuild.drop_mkfs_leftovers(sys.argv[2:])' \
    "$here/../scripts" "$img"

# The image must be a clean filesystem for the reference checker.
btrfs check --readonly "$img" >"$work/check.log" 2>&1 || {
    cat "$work/check.log" >&2
    echo "make-sample.sh: btrfs check failed on the new image" >&2
    exit 1
}

xz -9e -T1 -c "$img" >"$out.tmp"
mv "$out.tmp" "$out"
echo "$out: $(stat -c %s "$img") bytes, $(stat -c %s "$out") compressed"
