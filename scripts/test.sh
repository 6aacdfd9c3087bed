#!/usr/bin/env bash
# test.sh -- set up, build, and run every test that needs no GPU; then the
# file parsers and tokenizer tests again under AddressSanitizer + UBSan.
# This is the command CI runs (.ci/run) and the README gives.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh" "$root/build"
jobs=$(nproc 2>/dev/null || echo 2)
(cd "$root/build" && ctest -LE "gpu|multigpu" --output-on-failure -j"$jobs")
# sanitizer pass over the parsers (label unit); test_jit compiles the kernel
# registry for sm_90 only here, one specialization of each source file (the
# plain pass above compiles every one for sm_80 / sm_89 / sm_90)
"$root/scripts/build.sh" "$root/build-asan" -DKILN_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=Debug
(cd "$root/build-asan" && KT_JIT_ARCH=sm_90 KT_JIT_ONE_PER_FILE=1 ASAN_OPTIONS=detect_leaks=1 ctest -L unit --output-on-failure -j"$jobs")
