#!/usr/bin/env bash
# Make the filesystems fuzz/fuzz_image.c mutates (its "bases"):
#
# base.img.xz        one device. Small metadata (nodesize 4 KiB, DUP so the
#                    fallback to a second copy is reached), and as many item
#                    kinds as mkfs can make without root: inline, regular and
#                    zstd-compressed extents, csums, xattrs, a symlink, a hard
#                    link, a fifo, a directory with enough entries for a
#                    two-level fs tree, a subvolume (root refs, uuid items),
#                    quota and simple quota (qgroup items, owner refs), the
#                    free-space tree and the block-group tree.
# raid-{1,2,3}.img.xz  three devices, empty, RAID6 metadata and system
#                    chunks, RAID0 data: the striped mapping, several
#                    members, and a missing one when the harness drops it.
#
# The regression inputs in tests/images/fuzz/image/ are patches against these
# exact images: regenerating them (times and uuids of mkfs change) makes the
# inputs mean something else, so only do it together with a new corpus.
#
#   tests/images/fuzz/make-base.sh [OUTDIR] [single|raid|all]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
outdir=${1:-$here}
which=${2:-all}

work=$(mktemp -d "${TMPDIR:-/tmp}/btk-fuzzbase.XXXXXX")
trap 'rm -rf "$work"' EXIT

pack() { # image output
    xz -9e -T1 -c "$1" >"$2.tmp"
    mv "$2.tmp" "$2"
    echo "$2: $(stat -c %s "$1") bytes, $(stat -c %s "$2") compressed"
}

make_single() {
    local root=$work/root img=$work/base.img
    mkdir -p "$root/dir" "$root/sub"
    printf 'hello\n' >"$root/hello.txt"
    awk 'BEGIN { for (i = 0; i < 3000; i++) printf "%08x\n", (i * 2654435761) % 4294967296 }' \
        >"$root/dir/data.bin"
    awk 'BEGIN { for (i = 0; i < 1000; i++) print "compressible line" }' >"$root/dir/text.txt"
    ln -s hello.txt "$root/link"
    ln "$root/hello.txt" "$root/dir/hl"
    python3 -c "import os; os.setxattr('$root/hello.txt', 'user.test', b'val'); \
os.setxattr('$root/dir', 'user.\xc3\xa9', b'\x00\x01')"
    printf x >"$root/sub/f"
    for i in $(seq 1 30); do : >"$root/dir/file_with_a_longer_name_$i"; done
    mkfifo "$root/fifo"
    find "$root" -exec touch -h -d '2024-01-01 00:00:00 UTC' {} +

    truncate -s 64M "$img"
    mkfs.btrfs -q -f -n 4096 -m dup -d single -O quota,block-group-tree,squota \
        -U 6b746273-6675-7a7a-0000-000000000001 --device-uuid 6b746273-6675-7a7a-0000-0000000000d1 \
        --rootdir "$root" --subvol rw:sub --compress zstd --shrink "$img"
    btrfs check --readonly "$img" >"$work/check.log" 2>&1 || {
        cat "$work/check.log" >&2
        echo "make-base.sh: btrfs check failed on the new image" >&2
        exit 1
    }
    pack "$img" "$outdir/base.img.xz"
}

make_raid() {
    local devs=("$work/raid-1.img" "$work/raid-2.img" "$work/raid-3.img")
    # mkfs's minimum per device; --rootdir and --shrink take one device only
    for d in "${devs[@]}"; do truncate -s 131072000 "$d"; done
    mkfs.btrfs -q -f -n 4096 -m raid6 -d raid0 -O block-group-tree \
        -U 6b746273-6675-7a7a-0000-000000000002 "${devs[@]}" 2>&1 | grep -v -e RAID5/6 -e 'besides testing' >&2 || true
    btrfs inspect-internal dump-super "${devs[0]}" | grep -q 'num_devices.*3' || {
        echo "make-base.sh: mkfs of the raid base failed" >&2
        exit 1
    }
    for d in "${devs[@]}"; do pack "$d" "$outdir/$(basename "$d").xz"; done
}

case $which in
single) make_single ;;
raid) make_raid ;;
all) make_single; make_raid ;;
*) echo "usage: $0 [OUTDIR] [single|raid|all]" >&2; exit 2 ;;
esac
