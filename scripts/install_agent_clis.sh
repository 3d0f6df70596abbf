#!/usr/bin/env bash
# Install the pinned Claude Code and Codex CLIs (scripts/agent_clis.txt) into agent-clis/ of this
# machine's cache folder ($EAU_CACHE, else $XDG_CACHE_HOME/eau, else ~/.cache/eau, as
# orchestrator/paths.py cache_dir says; or $EAU_AGENT_CLIS), with npm: nothing global, nothing in
# the source tree. The adapters look on PATH first, then in that folder's node_modules/.bin.
# Measured here (2 cores, empty npm cache): 15 s, 808 MB on disk (each CLI ships a native binary
# of about 400 MB).
# Usage: bash scripts/install_agent_clis.sh [PREFIX]
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${EAU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eau}"
prefix="${1:-${EAU_AGENT_CLIS:-$cache/agent-clis}}"
if ! command -v npm >/dev/null 2>&1; then
    echo "install_agent_clis: npm is not installed: install Node.js 18 or newer" \
         "(it brings npm), then run this again." >&2
    exit 1
fi
mapfile -t pkgs < <(grep -v '^\s*#' scripts/agent_clis.txt | grep -v '^\s*$')
mkdir -p "$prefix"
npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "${pkgs[@]}"
for exe in claude codex; do
    echo "$exe: $("$prefix/node_modules/.bin/$exe" --version) ($prefix/node_modules/.bin/$exe)"
done
