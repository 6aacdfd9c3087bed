#!/usr/bin/env bash
# setup.sh -- install the Debian packages kiln builds with (idempotent).
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config liblua5.4-dev libjansson-dev libpcre2-dev libmicrohttpd-dev
      python3 python3-venv curl prometheus)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
