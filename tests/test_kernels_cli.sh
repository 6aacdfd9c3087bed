#!/usr/bin/env bash
# label: model
# test_kernels_cli.sh -- `kiln kernels --model`: a built-in config name works
# as kiln bench takes it, the set holds what a batch-1 decode step launches
# (the rope-epilogue qkv GEMV, the SiLU-epilogue gate/up GEMV, decode
# attention for GQA 4 at head dim 128), a second run is all cache hits, and
# an unknown name is a clear error; --specs compiles a recorded list
# ($KILN_JIT_RECORD's lines) once a specialization. Skips (77) without NVRTC.
set -u
KILN="${KILN_BIN:?KILN_BIN must point at the kiln binary}"
cache="$(mktemp -d)"
trap 'rm -rf "$cache"' EXIT
fail=0
out=$(KILN_CACHE_DIR="$cache" "$KILN" kernels --arch sm_90 --model llama3-8b 2>&1); rc=$?
if [ $rc -ne 0 ] && grep -qi "nvrtc" <<<"$out"; then echo "SKIP: no NVRTC: $out"; exit 77; fi
[ $rc -eq 0 ] || { echo "kiln kernels --model llama3-8b failed ($rc): $out"; exit 1; }
for want in "^gemv_rope .*ROPE=1 RR=[12] HD=128 KV=bf16" "^gemv .*GLU=1" "^attn_decode .*GROUP=4 HEAD_DIM=128 KV=bf16" \
            "^attn_prefill " "^add_rmsnorm "; do
  grep -qE "$want" <<<"$out" || { echo "missing from the llama3-8b set: $want"; fail=1; }
done
n=$(sed -nE 's/^([0-9]+) units.*/\1/p' <<<"$out")
again=$(KILN_CACHE_DIR="$cache" "$KILN" kernels --arch sm_90 --model llama3-8b 2>&1)
grep -qE "^$n units \($n from cache\)" <<<"$again" || { echo "second run not all cache hits: $(tail -1 <<<"$again")"; fail=1; }
# --specs: the lines $KILN_JIT_RECORD writes (repeats, a comment, a blank line), compiled once each
printf 'rmsnorm\tACT=bf16 W=bf16\n# a comment\n\nrmsnorm\tACT=bf16 W=bf16\nsilu_mul\tACT=fp16\n' > "$cache/specs.txt"
sp=$(KILN_CACHE_DIR="$cache/sp" "$KILN" kernels --arch sm_90 --specs "$cache/specs.txt" 2>&1) ||
  { echo "kiln kernels --specs failed: $sp"; fail=1; }
grep -qE "^2 units \(0 from cache\)" <<<"$sp" || { echo "--specs: not 2 fresh units: $(tail -1 <<<"$sp")"; fail=1; }
grep -qE "^silu_mul +ACT=fp16 " <<<"$sp" || { echo "--specs: silu_mul ACT=fp16 missing: $sp"; fail=1; }
sp=$(KILN_CACHE_DIR="$cache/sp" "$KILN" kernels --arch sm_90 --specs "$cache/specs.txt" 2>&1)
grep -qE "^2 units \(2 from cache\)" <<<"$sp" || { echo "--specs again: not all cache hits: $(tail -1 <<<"$sp")"; fail=1; }
printf 'no_such_kernel\tX=1\n' > "$cache/bad.txt"
if err=$("$KILN" kernels --arch sm_90 --specs "$cache/bad.txt" 2>&1); then
  echo "--specs with an unknown kernel succeeded"; fail=1
else
  grep -q "bad.txt line 1: no such registry kernel" <<<"$err" || { echo "bad --specs error: $err"; fail=1; }
fi
if err=$("$KILN" kernels --arch sm_90 --model no-such-model 2>&1); then
  echo "an unknown model name succeeded"; fail=1
else
  grep -q "neither a model directory nor a built-in config" <<<"$err" || { echo "bad error: $err"; fail=1; }
fi
exit $fail
