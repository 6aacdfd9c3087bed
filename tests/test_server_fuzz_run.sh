#!/usr/bin/env bash
# label: fuzz
# Runs the server fuzzers (scripts/fuzz_server.sh) for a bounded time:
# $KILN_FUZZ_SECONDS per target (default 20). A crash fails the test and the
# crasher is copied to tests/fuzz/regress/<target>/ (commit it; test_server_fuzz
# replays it). Needs clang with libFuzzer (Debian: clang, libclang-rt-dev);
# missing clang skips outside CI and fails in CI.
set -euo pipefail
src="${KILN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
if ! command -v clang >/dev/null || ! echo 'int LLVMFuzzerTestOneInput(const char*d,unsigned long n){return 0;}' |
     clang -x c - -fsanitize=fuzzer -o /dev/null 2>/dev/null; then
  if [ -n "${CI:-}" ] || [ -e "$src/.venv/.kiln-setup-done" ]; then
    echo "FAIL: clang with libFuzzer is missing although scripts/setup.sh ran" >&2; exit 1
  fi
  echo "SKIP: clang with libFuzzer is not installed (run scripts/setup.sh)"; exit 77
fi
FUZZ_OUT="${KILN_BUILD_DIR:-$src/build}/fuzz" exec "$src/scripts/fuzz_server.sh" "${KILN_FUZZ_SECONDS:-20}"
