#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# Generate ./configure from configure.ac.
set -e
cd "$(dirname "$0")"
autoreconf -fi
