#!/usr/bin/env bash
# fuzz_server.sh [SECONDS] [TARGET...] -- build the server's libFuzzer
# targets (tests/fuzz/fuzz_server_*.c) with clang, ASan and UBSan and run
# each for SECONDS (default 60; 0 builds them without running):
#   fuzz_server_decode  request bodies -> the OpenAI request decoder
#   fuzz_server_sse     engine events -> UTF-8 carry, chunks, SSE framing
#   fuzz_server_stop    ids + stop strings -> the engine's text stream
# Corpora grow under $FUZZ_OUT (default build-fuzz/); seeds come from
# tests/fuzz/seeds/TARGET. A crash is copied to tests/fuzz/regress/TARGET/
# (commit it: tests/test_server_fuzz.c replays those files in every test
# run) and the script exits 1.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
secs="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_server_decode fuzz_server_sse fuzz_server_stop)
out="${FUZZ_OUT:-$root/build-fuzz}"
command -v clang >/dev/null || { echo "fuzz_server.sh: clang is required (apt-get install clang)" >&2; exit 1; }
mkdir -p "$out"

# libkiln with the same instrumentation, for the stop-string target
if [[ " ${targets[*]} " == *" fuzz_server_stop "* ]]; then
  cmake -S "$root" -B "$out/lib" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DKILN_SANITIZE=address,undefined -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link" -DKILN_GPU=OFF >/dev/null
  ninja -C "$out/lib" kiln_static >/dev/null
fi
cflags=(-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
        -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -I"$root/include" -I"$root/engine" -I"$root/runtime/base"
        -I"$root/runtime" $(pkg-config --cflags jansson))
api=("$root/server/api_decode.c" "$root/server/api_encode.c")
status=0
for t in "${targets[@]}"; do
  src="$root/tests/fuzz/$t.c"
  [ -f "$src" ] || { echo "fuzz_server.sh: no target $t" >&2; exit 2; }
  if [ "$t" = fuzz_server_stop ]; then
    clang "${cflags[@]}" -DFUZZ_SOURCE_DIR="\"$root\"" "$src" "${api[@]}" "$out/lib/libkiln.a" \
      $(pkg-config --libs lua5.4 jansson libpcre2-8) -lm -ldl -lpthread -o "$out/$t"
  else
    clang "${cflags[@]}" "$src" "${api[@]}" $(pkg-config --libs jansson) -o "$out/$t"
  fi
  [ "$secs" -gt 0 ] || { echo "built $out/$t"; continue; }
  corpus="$out/corpus/$t"
  mkdir -p "$corpus"
  dirs=("$corpus")
  for d in "$root/tests/fuzz/seeds/$t" "$root/tests/fuzz/regress/$t"; do [ -d "$d" ] && dirs+=("$d"); done
  echo "== $t: ${secs} s"
  rm -f "$out/crash-$t-"*
  if ! KILN_SOURCE_DIR="$root" "$out/$t" -max_total_time="$secs" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
       -print_final_stats=1 -artifact_prefix="$out/crash-$t-" "${dirs[@]}" 2>"$out/$t.log"; then
    tail -40 "$out/$t.log" >&2
    mkdir -p "$root/tests/fuzz/regress/$t"
    for f in "$out/crash-$t-"*; do
      [ -f "$f" ] && cp "$f" "$root/tests/fuzz/regress/$t/" && echo "   crasher kept: tests/fuzz/regress/$t/$(basename "$f")" >&2
    done
    status=1
  else
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$out/$t.log" | tr '\n' ' '
    echo
  fi
done
exit $status
