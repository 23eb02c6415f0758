# SPDX-License-Identifier: GPL-2.0-only
"""A zoned filesystem (mkfs.btrfs -O zoned on a regular file: emulated zones)
keeps its superblock copies in log zones, not at 64 MiB and 256 GiB; mkfs
writes the primary only. btk-check must not call the missing fixed-offset
copies invalid (the reference passes)."""
import subprocess

import fsbuild
from conftest import check_json, require_reference_tools


def test_emulated_zoned_mkfs_checks_clean(tmp_path):
    require_reference_tools()
    img = tmp_path / "zoned.img"
    subprocess.run(["truncate", "-s", "4G", str(img)], check=True)
    fsbuild.mkfs([img], "-q", "-f", "-O", "zoned")
    _, out, _ = check_json([img])
    assert out["problems"] == [], out["problems"][:5]
    ref = subprocess.run(["btrfs", "check", "--readonly", str(img)], capture_output=True, text=True)
    assert ref.returncode == 0, ref.stdout + ref.stderr
