#!/usr/bin/env bash
# fuzz.sh [SECONDS_PER_TARGET] [TARGET...] -- build the libFuzzer targets in
# tests/fuzz (tokenizer, tokenizer_files, chat, safetensors, config) with
# clang, ASan and UBSan, and run each for a bounded time (default 60 s). Any
# crasher, leak or timeout is copied to tests/data/fuzz/<target>/, where the
# ctest tests test_tokenizer_fuzz_regress (tokenizer, tokenizer_files, chat)
# and test_model_files_fuzz_regress (safetensors, config) replay it; commit
# it with the fix.
# Needs clang and libclang-rt (apt-get install clang libclang-rt-14-dev).
# Not part of CI. The tokenizer target reads ../shared/fixtures (or
# $KILN_FUZZ_FIXTURES).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
secs="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(tokenizer tokenizer_files chat safetensors config)
build="$root/build-fuzz"
mkdir -p "$build/obj"
# The library parts the targets use (base, tokenizer, chat, config and
# safetensors parsing), compiled with coverage for libFuzzer. log.c goes
# through a copy without the NULL initializers of its static _Atomic
# pointers, which clang 14 rejects (static storage is zero-initialized
# anyway). config.c looks up built-in configs in the embedded file table,
# which the CMake build generates; here it is an empty stub.
cflags=(-g -O1 -std=c11 -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
        -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -I"$root/include" -I"$root/runtime/base" -I"$root/engine"
        $(pkg-config --cflags jansson libpcre2-8))
sed -E 's/(_Atomic[^=;]*) = NULL;/\1;/' "$root/runtime/base/log.c" > "$build/obj/log_clang.c"
printf '#include "embed.h"\nconst kiln_embedded_file kiln_embedded_files[] = {{NULL, NULL, 0}};\nconst size_t kiln_embedded_count = 0;\n' \
    > "$build/obj/embedded_stub.c"
objs=()
for f in "$root"/runtime/base/error.c "$build/obj/log_clang.c" "$root"/runtime/base/util.c \
         "$root"/runtime/base/dtype.c "$root"/runtime/base/embed.c "$build/obj/embedded_stub.c" \
         "$root"/engine/tokenizer/*.c "$root"/engine/chat/*.c "$root"/engine/config.c "$root"/engine/safetensors.c; do
    o="$build/obj/$(basename "$f" .c).o"
    clang "${cflags[@]}" -c "$f" -o "$o" # always: headers change struct layouts
    objs+=("$o")
done
deps="$(pkg-config --libs jansson libpcre2-8)"
found=0
for t in "${targets[@]}"; do
    src="$root/tests/fuzz/fuzz_$t.c"
    [ -f "$src" ] || { echo "no such target: $t" >&2; exit 2; }
    bin="$build/fuzz_$t"
    clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -DKILN_FUZZ_MAIN \
        -DKILN_FUZZ_SOURCE_DIR="\"$root\"" -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE \
        -I"$root/include" -I"$root/runtime/base" -I"$root/engine" "$src" "${objs[@]}" $deps -lm -ldl -lpthread \
        -o "$bin"
    corpus="$build/corpus/$t" crashes="$build/crashes/$t"
    mkdir -p "$corpus" "$crashes"
    cp -n "$root/tests/data/fuzz/$t/"* "$corpus/" 2>/dev/null || true
    if [ "$t" = chat ]; then cp -n "$root"/../shared/fixtures/chat_templates/*.jinja "$corpus/" 2>/dev/null || true; fi
    echo "== fuzz_$t for ${secs}s"
    set +e
    dict=()
    [ -f "$root/tests/fuzz/$t.dict" ] && dict=(-dict="$root/tests/fuzz/$t.dict")
    "$bin" -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 -max_len=8192 -print_final_stats=1 \
        "${dict[@]}" -artifact_prefix="$crashes/" "$corpus" 2>&1 | grep -v "^\"\|^###\|Uses:" | tail -n 25
    set -e
    for f in "$crashes"/*; do
        [ -e "$f" ] || continue
        name="$(basename "$f")"
        if [ ! -e "$root/tests/data/fuzz/$t/$name" ]; then
            cp "$f" "$root/tests/data/fuzz/$t/$name"
            echo "new finding kept: tests/data/fuzz/$t/$name"
            found=1
        fi
    done
done
exit $found
