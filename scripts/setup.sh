#!/usr/bin/env bash
# setup.sh -- install the Debian packages kiln builds with (idempotent).
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config liblua5.4-dev libjansson-dev libpcre2-dev libmicrohttpd-dev
      python3 python3-venv python3-numpy curl prometheus clang libclang-rt-dev)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# Python packages for the server tests (the official `openai` client) in a
# venv at .venv: Debian's system pip refuses global installs. The marker file
# tells the tests that setup ran, so a missing package fails them instead of
# skipping them.
root="$(cd "$(dirname "$0")/.." && pwd)"
[ -x "$root/.venv/bin/python3" ] || python3 -m venv "$root/.venv"
"$root/.venv/bin/python3" -c "import openai" 2>/dev/null || "$root/.venv/bin/python3" -m pip install -q "openai>=1.0"
touch "$root/.venv/.kiln-setup-done"
