#!/usr/bin/env bash
# spec_bench.sh KILN_BIN -- the speculative-decoding measurements of issue 8 on
# one GPU (H200), Llama-3-8B shape with random weights (--load-format dummy),
# greedy, EOS ignored, 1 warm-up + 2 timed runs each (kiln bench --iters 2):
#   b1   / b16   : -b 1 / -b 16, -s 128 -o 256, plain and with the model
#                  drafting for itself (--speculative-method draft
#                  --speculative-model llama3-8b, K = 4): the drafter has the
#                  target's dummy weights, so it always agrees and every
#                  verification step should emit K + 1 = 5 tokens; its
#                  verification forward (5 tokens per sequence) against the
#                  plain decode forward (1 token) should cost <= 1.3x. Its
#                  tok/s is not the point (it runs an 8B drafter 4 times a step).
#   rep1 / rep16 : --dataset repeat --span 32 (each prompt one random span of
#                  32 tokens repeated), -b 1 / -b 16, -s 512 -o 256, plain and
#                  --speculative-method ngram (K = 4): target >= 1.8x tok/s.
#                  With random weights the model does not continue the span,
#                  so nothing is accepted; hence
#   copy1 / copy16: the same on a Llama-3-8B-shaped checkpoint whose greedy
#                  output does continue the span (scripts/make_copy_model.py,
#                  written to $SPEC_BENCH_COPY_DIR, default /tmp/kiln-copy8b;
#                  needs numpy): the copy-heavy task at the real shape's cost;
#                  and the copy model drafting for itself (copy*-self4): a
#                  drafter that always agrees, with no random-weight near ties.
# The step times come from the engine's stats (kiln_stats: target forward time
# per prefill / plain decode / verification step, drafting time) over the
# timed runs. Writes the JSON lines to $OUT/spec_bench.jsonl (stderr to
# $OUT/spec_bench.err) and prints a table. For a dry run elsewhere:
# SPEC_BENCH_MODEL=tests/data/models/llama3-gqa SPEC_BENCH_ARGS="--device cpu".
# SPEC_BENCH_ONLY="b1-plain b1-self4" runs only the named configurations.
set -uo pipefail
kiln="${1:?kiln binary}"
out="${OUT:-/tmp/out}"; mkdir -p "$out"; log="$out/spec_bench.jsonl"; err="$out/spec_bench.err"; : > "$log"; : > "$err"
export NCCL_NVLS_ENABLE=0
model="${SPEC_BENCH_MODEL:-llama3-8b}"; read -r -a extra <<< "${SPEC_BENCH_ARGS:-}"
SELF=(--speculative-method draft --speculative-model "$model" --num-speculative-tokens 4)
NGRAM=(--speculative-method ngram --num-speculative-tokens 4)
REP=(--dataset repeat --span 32)
# wanted TAG: the configuration is in $SPEC_BENCH_ONLY (or that is unset)
wanted() { [ -z "${SPEC_BENCH_ONLY:-}" ] || case " $SPEC_BENCH_ONLY " in *" $1 "*) return 0;; *) return 1;; esac; }
# bench_on TAG MODEL LOAD_FORMAT args...: one kiln bench, its JSON line
# tagged into $log ("failed" when it printed none)
bench_on() {
  local tag="$1" m="$2" lf="$3"; shift 3
  wanted "$tag" || return 0
  local margs=(--model "$m")
  [ -n "$lf" ] && margs+=(--load-format "$lf")
  echo "== $tag: kiln bench ${margs[*]} --iters 2 --json ${extra[*]} $*" >> "$err"
  local line
  line=$(timeout 150 "$kiln" bench "${margs[@]}" --iters 2 --json "${extra[@]}" "$@" 2>>"$err" | tail -1)
  case "$line" in
    "{"*) echo "{\"tag\":\"$tag\",${line#\{}" | tee -a "$log" ;;
    *) echo "{\"tag\":\"$tag\",\"failed\":true}" | tee -a "$log"; echo "   $tag failed (see $err)" >&2 ;;
  esac
}
run() { local tag="$1"; shift; bench_on "$tag" "$model" dummy "$@"; }   # random weights
t0=$(date +%s)
run b1-plain     -b 1  -s 128 -o 256
run b1-self4     -b 1  -s 128 -o 256 "${SELF[@]}"
run b16-plain    -b 16 -s 128 -o 256
run b16-self4    -b 16 -s 128 -o 256 "${SELF[@]}"
run rep1-plain   -b 1  -s 512 -o 256 "${REP[@]}"
run rep1-ngram4  -b 1  -s 512 -o 256 "${REP[@]}" "${NGRAM[@]}"
run rep16-plain  -b 16 -s 512 -o 256 "${REP[@]}"
run rep16-ngram4 -b 16 -s 512 -o 256 "${REP[@]}" "${NGRAM[@]}"
copy="${SPEC_BENCH_COPY_DIR:-/tmp/kiln-copy8b}"
want_copy=0
for t in copy1-plain copy1-ngram4 copy1-self4 copy16-plain copy16-ngram4 copy16-self4; do wanted "$t" && want_copy=1; done
if [ $want_copy = 1 ] && [ ! -f "$copy/model.safetensors" ]; then
  here_="$(cd "$(dirname "$0")" && pwd)"
  mk="$here_/../scripts/make_copy_model.py"; [ -f "$mk" ] || mk="$here_/make_copy_model.py"
  python3 "$mk" "${SPEC_BENCH_COPY_CONFIG:-$model}" "$copy" --period 32 2>>"$err" || echo "   copy model not written (see $err)" >&2
fi
crun() { local tag="$1"; shift; bench_on "$tag" "$copy" "" "$@"; }      # the copy model's weights
CSELF=(--speculative-method draft --speculative-model "$copy" --num-speculative-tokens 4)
crun copy1-plain   -b 1  -s 512 -o 256 "${REP[@]}"
crun copy1-ngram4  -b 1  -s 512 -o 256 "${REP[@]}" "${NGRAM[@]}"
crun copy1-self4   -b 1  -s 512 -o 256 "${REP[@]}" "${CSELF[@]}"
crun copy16-plain  -b 16 -s 512 -o 256 "${REP[@]}"
crun copy16-ngram4 -b 16 -s 512 -o 256 "${REP[@]}" "${NGRAM[@]}"
crun copy16-self4  -b 16 -s 512 -o 256 "${REP[@]}" "${CSELF[@]}"
echo "total $(( $(date +%s) - t0 )) s"
python3 - "$log" <<'PY'
import json, sys
rows = {}
for l in open(sys.argv[1]):
    l = l.strip()
    if l:
        d = json.loads(l); rows[d["tag"]] = d
def f(x, fmt):
    return format(x, fmt) if isinstance(x, (int, float)) else format("-", ">" + fmt.split(".")[0])
print("verify/plain: verification forward ms / the plain run's decode forward ms (target <= 1.3); tok/verify: tokens")
print("per sequence per verification step (self-draft target 5); speedup: tok/s over the plain run (ngram target >= 1.8)")
hdr = f"{'config':<14}{'tok/s':>9}{'plain ms':>10}{'verify ms':>11}{'verify/plain':>14}{'tok/verify':>12}{'accept':>8}{'draft ms':>10}{'speedup':>9}  check"
print(hdr)
for tag in ["b1-plain", "b1-self4", "b16-plain", "b16-self4", "rep1-plain", "rep1-ngram4", "rep16-plain", "rep16-ngram4",
            "copy1-plain", "copy1-ngram4", "copy1-self4", "copy16-plain", "copy16-ngram4", "copy16-self4"]:
    d = rows.get(tag)
    if not d or d.get("failed"):
        print(f"{tag:<14}  failed or missing"); continue
    base = rows.get(tag.rsplit("-", 1)[0] + "-plain", {})
    plain_ms = base.get("decode_forward_ms")
    spec = d.get("spec_k", 0) > 0
    ratio = d["verify_forward_ms"] / plain_ms if spec and plain_ms and d.get("verify_steps") else None
    speed = d["output_tok_s"] / base["output_tok_s"] if spec and base.get("output_tok_s") else None
    check = ""
    if spec and "self" in tag:
        check = "ratio %s, tok/verify %s" % ("ok" if ratio is not None and ratio <= 1.3 else "MISS",
                                              "ok" if d["spec_tokens_per_step"] >= 4.99 else "MISS")
    elif spec and "ngram" in tag:
        check = "speedup %s" % ("ok" if speed is not None and speed >= 1.8 else "MISS")
    print(f"{tag:<14}{f(d['output_tok_s'], '9.1f')}{f(plain_ms, '10.3f')}"
          f"{f(d['verify_forward_ms'] if spec else None, '11.3f')}{f(ratio, '14.2f')}"
          f"{f(d['spec_tokens_per_step'] if spec else None, '12.2f')}{f(d['spec_acceptance'] if spec else None, '8.3f')}"
          f"{f(d['draft_ms_per_verify'] if spec else None, '10.3f')}{f(speed, '9.2f')}  {check}")
for tag in ["b1-self4", "b16-self4", "rep1-ngram4", "rep16-ngram4", "copy1-ngram4", "copy1-self4", "copy16-ngram4",
            "copy16-self4"]:
    d = rows.get(tag)
    if d and not d.get("failed"):
        print(f"{tag}: {d['verify_steps']} verification + {d['decode_steps']} plain decode steps "
              f"(in-run plain {d['decode_forward_ms']:.3f} ms), prefill {d['prefill_forward_ms']:.2f} ms x {d['prefill_steps']}, "
              f"drafted {d['spec_drafted']} accepted {d['spec_accepted']}, load {d['load_s']:.1f} s")
PY
