#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# Make tests/images/half-dropped.img.xz (with --quota: half-dropped-qgroups.img.xz,
# quotas enabled before anything is written): a filesystem whose deleted subvolume
# the kernel had only partly dropped when it was unmounted (its root item has
# refs 0 and a drop_progress key; the subtrees left of it are freed). Which
# point the cleaner reaches before the remount is up to the kernel's timing,
# so the script retries until the root item shows a drop in progress.
# Needs root (loop device, mount), mkfs.btrfs, python3, xz, btk-inspect and btk-corrupt.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
inspect=${BTK_BUILD_DIR:-$here/../../build}/btk-inspect
quota=false
out=$here/half-dropped.img.xz
if [ "${1:-}" = --quota ]; then
	quota=true
	out=$here/half-dropped-qgroups.img.xz
fi
img=$(mktemp /tmp/half-dropped.XXXXXX)
trap 'rm -f "$img"' EXIT
for attempt in $(seq 1 30); do
	rm -f "$img"
	truncate -s 128M "$img"
	mkfs.btrfs -q -f -n 4k "$img"
	# what a current mkfs makes: without its temporary chunks' free-space items
	python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import fsbuild; fsbuild.drop_mkfs_leftovers(sys.argv[2:])' \
		"$here/../scripts" "$img"
	loop=$(losetup -f --show "$img")
	mnt=$(mktemp -d)
	mount "$loop" "$mnt"
	if $quota; then
		btrfs quota enable "$mnt"
	fi
	btrfs subvolume create "$mnt/kept" >/dev/null
	btrfs subvolume create "$mnt/big" >/dev/null
	python3 - "$mnt" <<'PY'
import os, sys
m = sys.argv[1]
for d in range(16):
    os.mkdir(f"{m}/big/d{d}")
    for i in range(400):
        with open(f"{m}/big/d{d}/f{i}", "w") as f:
            f.write("x" * (i % 300))
for i in range(50):
    with open(f"{m}/kept/f{i}", "w") as f:
        f.write("kept %d\n" % i)
PY
	sync
	btrfs subvolume delete -c "$mnt/big" >/dev/null
	sleep "0.0$((attempt % 10))"
	mount -o remount,ro "$mnt"
	umount "$mnt"
	losetup -d "$loop"
	rmdir "$mnt"
	if "$inspect" tree -t 1 "$img" 2>/dev/null | grep -A1 "refs 0 drop_progress" | grep -q "drop_level [1-9]"; then
		xz -9 -c "$img" > "$out"
		echo "attempt $attempt: $("$inspect" tree -t 1 "$img" | grep -o 'refs 0 drop_progress ([^)]*)')"
		exit 0
	fi
done
echo "the kernel never left the drop half done in 30 attempts" >&2
exit 1
