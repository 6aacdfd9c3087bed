#!/usr/bin/env bash
# label: unit
# test_tokenize_cli.sh -- `kiln tokenize`, `kiln detokenize` and
# `kiln chat-render` end to end: JSON in, JSON / prompt out, exit codes and
# error messages. Skips (77) when ../shared/fixtures is absent.
set -u
KILN="${KILN_BIN:?KILN_BIN must point at the kiln binary}"
SRC="${KILN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
FIX="$SRC/../shared/fixtures"
if [ ! -f "$FIX/tokenizers/llama3/tokenizer.json" ]; then
    echo "SKIP: fixtures not found at $FIX"
    exit 77
fi
fails=0
check() { # name expected actual
    if [ "$2" == "$3" ]; then echo "ok   $1"; else echo "FAIL $1"; echo "  want: $2"; echo "  got:  $3"; fails=$((fails + 1)); fi
}
T3="$FIX/tokenizers/llama3/tokenizer.json"
M3="$FIX/tokenizers/llama3/tokenizer.model"
M2="$FIX/tokenizers/llama2/tokenizer.model"

out=$(printf '["Hello, world!", "<|eot_id|>", ""]' | "$KILN" tokenize --tokenizer "$T3")
check "tokenize json" '[[9906,11,1917,0],[128009],[]]' "$out"
out=$(printf '["Hello, world!", "<|eot_id|>", ""]' | "$KILN" tokenize --tokenizer "$M3")
check "tokenize tiktoken" '[[9906,11,1917,0],[128009],[]]' "$out"
out=$(printf '["<|eot_id|>"]' | "$KILN" tokenize --tokenizer "$T3" --plain)
check "tokenize --plain" '[[27,91,68,354,851,91,29]]' "$out"
out=$(printf '["Hello"]' | "$KILN" tokenize --tokenizer "$T3" --add-special)
check "tokenize --add-special" '[[128000,9906]]' "$out"
out=$(printf '["Hello world"]' | "$KILN" tokenize --tokenizer "$M2")
check "tokenize sentencepiece" '[[15043,3186]]' "$out"
out=$(printf '[[9906,11,1917,0],[128009],[]]' | "$KILN" detokenize --tokenizer "$T3")
check "detokenize" '["Hello, world!","<|eot_id|>",""]' "$out"
out=$(printf '[[128000,9906,128009]]' | "$KILN" detokenize --tokenizer "$T3" --skip-special)
check "detokenize --skip-special" '["Hello"]' "$out"
out=$(printf '[[1,15043,3186]]' | "$KILN" detokenize --tokenizer "$M2" --skip-special)
check "detokenize sentencepiece" '["Hello world"]' "$out"

# errors: usage (2), runtime (1) with a message
printf '[]' | "$KILN" tokenize >/dev/null 2>&1; check "tokenize without --tokenizer exits 2" 2 $?
err=$(printf '["a"]' | "$KILN" tokenize --tokenizer /nonexistent/tok.json 2>&1 >/dev/null); rc=$?
check "missing tokenizer exits 1" 1 $rc
case "$err" in *"does not exist"*) echo "ok   missing tokenizer message";; *) echo "FAIL message: $err"; fails=$((fails + 1));; esac
printf '["a", 3]' | "$KILN" tokenize --tokenizer "$T3" >/dev/null 2>&1; check "non-string element exits 1" 1 $?
printf '{not json' | "$KILN" detokenize --tokenizer "$T3" >/dev/null 2>&1; check "bad JSON exits 1" 1 $?
printf '[[999999999]]' | "$KILN" detokenize --tokenizer "$T3" >/dev/null 2>&1; check "out-of-range id exits 1" 1 $?

# chat-render
CT="$FIX/chat_templates"
out=$(printf '{"messages":[{"role":"user","content":"Hi!"}],"add_generation_prompt":true,"bos_token":"<|begin_of_text|>"}' |
      "$KILN" chat-render --chat-template "$CT/llama-3-instruct.jinja")
want=$(printf '\n<|begin_of_text|>\n\n    <|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>\n\n    <|start_header_id|>assistant<|end_header_id|>\n\n')
check "chat-render" "$want" "$out"
err=$(printf '{"messages":[{"role":"assistant","content":"x"}],"bos_token":"<s>"}' |
      "$KILN" chat-render --chat-template "$CT/llama-3-instruct.jinja" 2>&1 >/dev/null); rc=$?
check "chat-render template error exits 1" 1 $rc
check "chat-render error message" "kiln chat-render: Conversation roles must alternate user/assistant/user/assistant/..." "$err"
dir=$(mktemp -d)
printf '{"eos_token": "<E>", "chat_template": "{%% for m in messages %%}[{{ m.role }}] {{ m.content }}{{ eos_token }}{%% endfor %%}{{ tools|length if tools else 0 }}"}' > "$dir/tokenizer_config.json"
out=$(printf '{"messages":[{"role":"user","content":"a"}],"tools":[1,2]}' | "$KILN" chat-render --model "$dir")
check "chat-render --model" "[user] a<E>2" "$out"
out=$(printf '{"messages":[{"role":"user","content":"a"}],"eos_token":"!"}' | "$KILN" chat-render --model "$dir")
check "chat-render variable override" "[user] a!0" "$out"
printf '{"messages":[]}' | "$KILN" chat-render >/dev/null 2>&1; check "chat-render without a template exits 2" 2 $?
printf '{"messages":{}}' | "$KILN" chat-render --model "$dir" >/dev/null 2>&1; check "chat-render bad messages exits 1" 1 $?
rm -rf "$dir"

if [ "$fails" -ne 0 ]; then echo "$fails failure(s)"; exit 1; fi
echo "all passed"
