#!/bin/sh
# Generate ./configure from configure.ac.
set -e
cd "$(dirname "$0")"
autoreconf -fi
