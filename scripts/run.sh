#!/usr/bin/env bash
# run.sh [kiln generate options...] -- the main job on a fresh machine: install
# what kiln builds with, build it, and generate text. With no --model, kiln
# writes and uses a small random-weight demo model (its output is gibberish by
# design). On a machine with a GPU it runs there, else on the CPU.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh" "$root/build" >/dev/null
exec "$root/build/kiln" generate --max-tokens 32 "$@"
