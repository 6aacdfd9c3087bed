#!/usr/bin/env bash
# build.sh [BUILD_DIR] [extra cmake args...] -- configure and build kiln.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-$root/build}"; shift || true
cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_WERROR=ON "$@" >/dev/null
ninja -C "$dir"
