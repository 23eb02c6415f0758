# SPDX-License-Identifier: GPL-2.0-only
"""btk-inspect heatmap: the PNG is decoded here by hand (zlib and the PNG
filters), each map found through its tEXt "btk-map" chunk, and the tiles
counted as the 4-connected regions of non-background pixels inside it: one
per chunk (by logical address), one per stripe on the device (by physical).
Each tile's colour says its type: data blue, metadata orange, system red."""
import json
import struct
import zlib
from pathlib import Path

import pytest

from conftest import built, run_btk, sample_copy

WHITE = (255, 255, 255)


def decode_png(path: Path):
    """(width, height, rows of (r, g, b) tuples, {text key: [values]}) of an 8-bit RGB PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, texts = 8, b"", {}
    while pos < len(data):
        (n,), kind = struct.unpack(">I", data[pos:pos + 4]), data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + n]
        assert zlib.crc32(kind + body) == struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0], kind
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert (depth, ctype, interlace) == (8, 2, 0)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"tEXt":
            k, v = body.split(b"\0", 1)
            texts.setdefault(k.decode(), []).append(v.decode())
        pos += 12 + n
    raw, stride, prev, rows = zlib.decompress(idat), w * 3, bytearray(w * 3), []
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - 3] if i >= 3 else 0
            b, c = prev[i], prev[i - 3] if i >= 3 else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[i:i + 3]) for i in range(0, stride, 3)])
        prev = line
    return w, h, rows, texts


def tiles(rows, x0, y0, side) -> list[tuple]:
    """The colour of each 4-connected region of non-white pixels in the square."""
    seen, out = set(), []
    for y in range(y0, y0 + side):
        for x in range(x0, x0 + side):
            if (x, y) in seen or rows[y][x] == WHITE:
                continue
            colour, stack = rows[y][x], [(x, y)]
            seen.add((x, y))
            while stack:
                cx, cy = stack.pop()
                for nx, ny in ((cx + 1, cy), (cx - 1, cy), (cx, cy + 1), (cx, cy - 1)):
                    if x0 <= nx < x0 + side and y0 <= ny < y0 + side and (nx, ny) not in seen \
                            and rows[ny][nx] != WHITE:
                        assert rows[ny][nx] == colour, "a tile has one colour"
                        seen.add((nx, ny))
                        stack.append((nx, ny))
            out.append(colour)
    return out


def kind(colour) -> str:
    r, g, b = colour
    return "DATA" if b > r else "SYSTEM" if r > 2 * g + 10 else "METADATA"


def heatmap(tmp_path, devices, *args):
    out = tmp_path / "map.png"
    p = run_btk("btk-inspect", "heatmap", "-o", out, *args, *devices)
    assert p.returncode == 0, p.stderr
    return decode_png(out)


def chunks(devices):
    return json.loads(run_btk("btk-inspect", "map", "--format", "json", *devices).stdout)["chunks"]


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return sample_copy(tmp_path_factory.mktemp("heat"))


def test_sample_by_logical(sample, tmp_path):
    w, h, rows, texts = heatmap(tmp_path, [sample], "--size", "256")
    (geometry,) = texts["btk-map"]
    x0, y0, side, n = map(int, geometry.split())
    want = [c["flags"].split("|")[0] for c in sorted(chunks([sample]), key=lambda c: c["logical"])]
    got = tiles(rows, x0, y0, side)
    assert n == len(want) == len(got) == 3
    assert sorted(kind(c) for c in got) == sorted(want)
    assert h > y0 + side + 40, "a legend below the map"


def test_sample_by_physical(sample, tmp_path):
    _, _, rows, texts = heatmap(tmp_path, [sample], "--by", "physical", "--size", "256")
    (geometry,) = texts["btk-map"]
    x0, y0, side, n, _, devid = geometry.split()
    stripes = sum(len(c["stripes"]) for c in chunks([sample]))   # DUP: two on the one device
    assert int(n) == stripes == len(tiles(rows, int(x0), int(y0), int(side))) == 5 and devid == "1"


def test_two_devices_by_physical(tmp_path):
    fs = built("raid1-2dev")
    _, _, rows, texts = heatmap(tmp_path, fs.devices, "--by", "physical", "--size", "128")
    maps = [g.split() for g in texts["btk-map"]]
    assert [m[5] for m in maps] == ["1", "2"]
    for x0, y0, side, n, _, devid in maps:
        want = sum(1 for c in chunks(fs.devices) for s in c["stripes"] if s["devid"] == int(devid))
        assert int(n) == want == len(tiles(rows, int(x0), int(y0), int(side)))
