# SPDX-License-Identifier: GPL-2.0-only
"""tests/tools/btk-trans-xattr, which adds extended attributes to a file through libfs
transactions: where it is, and the values it writes."""
from __future__ import annotations

import os
from pathlib import Path

from conftest import BUILD_DIR, skip_or_fail

_PATTERN = bytes((j * 7 + 1) & 0xFF for j in range(65536))


def tool() -> Path:
    t = BUILD_DIR / "tests" / "tools" / "btk-trans-xattr"
    if not os.access(t, os.X_OK):
        skip_or_fail(f"{t} is not built (make test-tools)")
    return t


def value(i: int, size: int) -> bytes:
    """Byte j of value i is (i * 131 + j * 7 + 1) mod 256."""
    return _PATTERN[:size].translate(bytes((k + i * 131) & 0xFF for k in range(256)))
