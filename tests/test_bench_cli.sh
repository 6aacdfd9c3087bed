#!/usr/bin/env bash
# label: unit
# test_bench_cli.sh -- `kiln bench` on the CPU with a tiny model: the
# --dataset repeat / --span options parse, bad values are refused (exit 2),
# and the --json line carries the context limit (the decode graphs are
# planned for it) and the step-timing fields from the engine's stats
# (plain decode vs verification forwards, drafting) for the timed runs; the
# model drafting for itself (with random --load-format dummy weights too) is
# accepted every time, 5 tokens per verification at k = 4.
set -u
KILN="${KILN_BIN:?KILN_BIN must point at the kiln binary}"
SRC="${KILN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
M="$SRC/tests/data/models/llama3-gqa"
command -v python3 >/dev/null || { echo "SKIP: python3 not found"; exit 77; }
fails=0
check() { # name expected actual
    if [ "$2" == "$3" ]; then echo "ok   $1"; else echo "FAIL $1"; echo "  want: $2"; echo "  got:  $3"; fails=$((fails + 1)); fi
}
bench() { "$KILN" bench --model "$M" --device cpu --threads 2 -b 2 -s 24 -o 21 --warmup 1 --iters 2 --json "$@" 2>/dev/null | tail -1; }
# field NAME... of the JSON on stdin, space separated
field() { python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print(" ".join(str(d[k]) for k in sys.argv[1:]))' "$@"; }

out=$(bench)
check "plain: dataset, steps (2 timed runs: 20 decode steps each)" "random 0 40 0" \
    "$(echo "$out" | field dataset verify_steps decode_steps draft_calls)"
check "plain: the context limit is the longest prompt + output + 8" "53" "$(echo "$out" | field max_model_len)"
check "--max-model-len sets it" "200" "$(bench --max-model-len 200 | field max_model_len)"
check "plain: forward times" "True True" \
    "$(echo "$out" | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print(d["decode_forward_ms"] > 0, d["verify_forward_ms"] == 0)')"

out=$(bench --speculative-method draft --speculative-model "$M" --num-speculative-tokens 4)
check "self-draft: 4 verification steps per run, all accepted" "draft 4 8 0 1.0 5.0" \
    "$(echo "$out" | field spec_method spec_k verify_steps decode_steps spec_acceptance spec_tokens_per_step)"
check "self-draft: verification and drafting times" "True True" \
    "$(echo "$out" | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print(d["verify_forward_ms"] > 0, d["draft_ms_per_verify"] > 0)')"

out=$(bench --load-format dummy --speculative-method draft --speculative-model "$M" --num-speculative-tokens 4)
check "self-draft, dummy weights: all accepted" "1.0 5.0" "$(echo "$out" | field spec_acceptance spec_tokens_per_step)"

out=$(bench --dataset repeat --span 6 --speculative-method ngram --num-speculative-tokens 4)
check "repeat dataset parses" "repeat 6 ngram" "$(echo "$out" | field dataset span spec_method)"
check "repeat + ngram: every step plain or verification" "True" \
    "$(echo "$out" | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print(d["verify_steps"] + d["decode_steps"] > 0 and d["verify_steps"] > 0)')"

"$KILN" bench --model "$M" --device cpu --dataset nosuch >/dev/null 2>&1
check "unknown dataset refused" "2" "$?"
"$KILN" bench --model "$M" --device cpu --dataset repeat --span 0 >/dev/null 2>&1
check "--span 0 refused" "2" "$?"
"$KILN" bench --help 2>&1 | grep -q -- "--span"
check "--help lists --span" "0" "$?"

[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all passed"
