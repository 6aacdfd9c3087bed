#!/usr/bin/env bash
# label: model
# `kiln explain` on each policy family's tiny model must print exactly the
# committed listing (tests/data/explain/<model>.txt): config, tensors, plan,
# program. Regenerate with: KILN_UPDATE_GOLDEN=1 ctest -R test_explain
set -euo pipefail
src="${KILN_SOURCE_DIR:?}"; bin="${KILN_BIN:?}"
mkdir -p "$src/tests/data/explain"
fail=0
for m in llama3-gqa llama3-sharded llama2-mha qwen2-bias mistral-swa phi3 llama-tied; do
  out=$(cd "$src" && "$bin" explain --model "tests/data/models/$m" 2>&1)
  golden="$src/tests/data/explain/$m.txt"
  if [ "${KILN_UPDATE_GOLDEN:-0}" = 1 ]; then printf '%s\n' "$out" > "$golden"; continue; fi
  if ! diff -u "$golden" <(printf '%s\n' "$out"); then echo "explain listing differs for $m"; fail=1; fi
done
# a shard rule that does not divide is a clear error (three ranks, four heads)
if err=$(cd "$src" && "$bin" explain --model tests/data/models/llama3-gqa --tp 3 2>&1); then
  echo "expected --tp 3 to fail"; fail=1
else
  grep -q "policies/llama.lua:.*not divisible by the tensor-parallel size 3" <<<"$err" || { echo "bad error: $err"; fail=1; }
fi
# bad inputs exit non-zero with a message
for bad in /nonexistent "$src/tests/data"; do
  if "$bin" explain --model "$bad" >/dev/null 2>&1; then echo "explain $bad should fail"; fail=1; fi
done
exit $fail
