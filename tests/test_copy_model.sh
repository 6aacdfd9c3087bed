#!/usr/bin/env bash
# label: model
# test_copy_model.sh -- scripts/make_copy_model.py writes a Llama checkpoint
# whose greedy output continues a repeated span (the copy-heavy task of the
# n-gram drafter, bench/spec_bench.sh): on the CPU, kiln's greedy tokens
# continue the span exactly, the n-gram drafter's drafts are all accepted
# (close to k + 1 tokens per verification), and speculative greedy output
# equals plain greedy output. Needs numpy (Debian python3-numpy).
set -u
KILN="${KILN_BIN:?KILN_BIN must point at the kiln binary}"
SRC="${KILN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
command -v python3 >/dev/null || { echo "SKIP: python3 not found"; exit 77; }
python3 -c "import numpy" 2>/dev/null || { echo "SKIP: numpy not found (apt install python3-numpy)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { # name expected actual
    if [ "$2" == "$3" ]; then echo "ok   $1"; else echo "FAIL $1"; echo "  want: $2"; echo "  got:  $3"; fails=$((fails + 1)); fi
}
cat > "$tmp/cfg.json" <<'JSON'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 512, "intermediate_size": 1024,
 "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 2000,
 "max_position_embeddings": 2048, "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "rope_scaling": null,
 "tie_word_embeddings": false, "hidden_act": "silu", "torch_dtype": "bfloat16", "bos_token_id": 1, "eos_token_id": 2}
JSON
python3 "$SRC/scripts/make_copy_model.py" "$tmp/cfg.json" "$tmp/m" --period 24 2>"$tmp/make.err" \
    || { cat "$tmp/make.err"; echo "FAIL make_copy_model.py"; exit 1; }
M="$tmp/m"

# greedy: a span of 24 ids repeated (190 tokens) continues with the span
read -r ids want < <(python3 -c '
import random
random.seed(7)
span = [random.randrange(3, 2000) for _ in range(24)]
seq = span * 20
print(",".join(map(str, seq[:190])), ",".join(map(str, seq[190:230])))')
gen() { "$KILN" generate --model "$M" --device cpu --threads 2 --prompt-ids "$ids" --max-tokens 40 --json "$@" 2>/dev/null \
    | tail -1 | python3 -c 'import json,sys; print(",".join(map(str, json.loads(sys.stdin.read())["ids"])))'; }
check "greedy output continues the span" "$want" "$(gen)"
check "n-gram speculation: same greedy output" "$want" \
    "$(gen --speculative-method ngram --num-speculative-tokens 4)"

# kiln bench --dataset repeat: every n-gram draft accepted
out=$("$KILN" bench --model "$M" --device cpu --threads 2 -b 2 -s 192 -o 41 --dataset repeat --span 24 \
      --speculative-method ngram --num-speculative-tokens 4 --warmup 0 --iters 1 --json 2>/dev/null | tail -1)
check "n-gram on the repeat dataset: all drafts accepted, >= 4.5 tokens per verification" "ngram 1.0 True" \
    "$(echo "$out" | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print(d["spec_method"], d["spec_acceptance"], d["spec_tokens_per_step"] >= 4.5)')"
[ $fails -eq 0 ] || exit 1
