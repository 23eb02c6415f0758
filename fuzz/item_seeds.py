#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Write one fuzz_items seed per distinct (key type, owner tree) found in the
leaves of a single-device btrfs image (default: the fuzz base image).

    fuzz/item_seeds.py IMAGE OUTDIR [MAX_PER_TYPE]

A seed is the fuzz_items input layout: u8 type, u8 csum_size, u8 owner,
u64le objectid, u64le offset, item body. Tree blocks are found by walking
from the superblock's root and chunk root through the chunk map, so only
live blocks are used.
"""
import hashlib
import os
import struct
import sys

SB_OFF = 0x10000
HDR = 101
ITEM = 25
KPTR = 33
CSUM_SIZES = {0: 4, 1: 8, 2: 32, 3: 32}


def main():
    img_path, out = sys.argv[1], sys.argv[2]
    per_type = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    img = open(img_path, "rb").read()
    sb = img[SB_OFF:SB_OFF + 4096]
    root, chunk_root = struct.unpack_from("<QQ", sb, 0x50)
    nodesize = struct.unpack_from("<I", sb, 0x94)[0]
    csum_size = CSUM_SIZES.get(struct.unpack_from("<H", sb, 0xc4)[0], 4)
    sys_size = struct.unpack_from("<I", sb, 0xa0)[0]
    chunks = []  # (logical, length, physical)

    def add_chunk(logical, item):
        length = struct.unpack_from("<Q", item, 0)[0]
        physical = struct.unpack_from("<Q", item, 48 + 8)[0]
        chunks.append((logical, length, physical))

    arr = sb[0x32b:0x32b + sys_size]
    pos = 0
    while pos < len(arr):
        logical = struct.unpack_from("<Q", arr, pos + 9)[0]
        pos += 17
        nstripes = struct.unpack_from("<H", arr, pos + 44)[0]
        add_chunk(logical, arr[pos:])
        pos += 48 + 32 * nstripes

    def block(logical):
        for lo, ln, ph in chunks:
            if lo <= logical < lo + ln:
                off = ph + logical - lo
                return img[off:off + nodesize]
        raise KeyError(logical)

    def walk(logical, owner, visit):
        b = block(logical)
        level, nritems = b[100], struct.unpack_from("<I", b, 96)[0]
        if level:
            for i in range(nritems):
                walk(struct.unpack_from("<Q", b, HDR + i * KPTR + 17)[0], owner, visit)
            return
        for i in range(nritems):
            o = HDR + i * ITEM
            objectid, typ, offset, doff, dsize = struct.unpack_from("<QBQII", b, o)
            visit(owner, objectid, typ, offset, b[HDR + doff:HDR + doff + dsize])

    def chunk_visit(owner, objectid, typ, offset, data):
        if typ == 228 and not any(c[0] == offset for c in chunks):
            add_chunk(offset, data)

    walk(chunk_root, 3, chunk_visit)
    roots = []

    def root_visit(owner, objectid, typ, offset, data):
        if typ == 132:
            roots.append((objectid, struct.unpack_from("<Q", data, 176)[0]))

    walk(root, 1, root_visit)
    seen = {}
    os.makedirs(out, exist_ok=True)

    def seed_visit(owner, objectid, typ, offset, data):
        k = (typ, owner if typ == 0 else 0)
        if seen.get(k, 0) >= per_type:
            return
        seen[k] = seen.get(k, 0) + 1
        owner_byte = owner if owner < 0xf0 else 0xff
        blob = struct.pack("<BBBQQ", typ, csum_size, owner_byte, objectid, offset) + data
        name = "seed-type%03d-%s" % (typ, hashlib.sha1(blob).hexdigest()[:12])
        with open(os.path.join(out, name), "wb") as f:
            f.write(blob)

    for owner, bytenr in [(1, root), (3, chunk_root)] + roots:
        walk(bytenr, owner, seed_visit)
    print("%s: %d seeds" % (out, sum(seen.values())))


if __name__ == "__main__":
    main()
