#!/bin/bash
# The paper's policy size (Qwen3-4B shape, random weights) through the whole PPO step on the lent
# H200, one memory plan after another (training/shapes/README.md says why these four), and where
# vLLM has been carried there (scripts/gpu/device_vllm.py), the KV engine against vLLM on the
# same step for SmolLM2-135M and for the 4B shape first: each plan
# is benchmarks/step_profile.py's real step, 3 steps of the step-throughput workload (16 tasks x 4
# samples, at most 10 turns x 128 tokens), its perf/* lines and peak memory kept. Started
# detached, polled in back-to-back device calls (10 minutes at most each), packed into $OUT.
# Run from the repository root on the device machine, after the two staging calls of
# scripts/gpu/prepare_project.sh (PYTHONPATH=/tmp/site holds what the device lacks):
#   bash scripts/gpu/h200_4b.sh start          # all plans, in the background
#   bash scripts/gpu/h200_4b.sh poll 540       # waits up to 540 s; packs $OUT once all ended
#   bash scripts/gpu/h200_4b.sh collect        # packs $OUT now
# A plan that runs out of memory is recorded as such (its log's last lines) and the next starts.
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
top=/tmp/h200_4b
# H200_4B_STEPS: steps of the SmolLM2 plans (3 by default; 5 for the 5-step vLLM run); the 4B
# plans run 3 whatever it says (a later --steps wins), as a 4B step takes minutes
WORKLOAD=(--bench usergym --steps "${H200_4B_STEPS:-3}" --set model.device=cuda
          --set data.train_batch_size=16 --set rollout.n=4 --set rollout.max_turns=10
          --set rollout.response_length=128 --set rollout.user_llm=none)
B4="--preset qwen3-4b --steps 3"
declare -A PLANS=(
  [lora-gc]="$B4"                                                        # the preset as it is
  [lora-nogc]="$B4 --set model.gradient_checkpointing=false"
  [full-policy-lora-critic]="$B4 --set model.lora_rank=0"
  [full-both]="$B4 --set model.lora_rank=0 --set critic.lora_rank=0"    # expected not to fit
  # the rollout backends side by side, where scripts/gpu/device_vllm.py has installed vLLM
  # (PYTHONPATH /tmp/site-vllm): SmolLM2-135M's real weights, then the 4B shape
  [smollm2-kv]=""
  [smollm2-vllm]="--set rollout.backend=vllm --set rollout.max_episode_tokens=8064"
  # vLLM's share at 0.3: at start the trainer's LoRA 4B already holds ~42 GiB
  # (training/shapes/README.md), and vLLM asks for its share of the whole card free, which an
  # 80 GiB H100 has at 0.3 (24 GiB: 8 GiB of bf16 weights, the rest KV cache) and not at 0.5
  [lora-gc-vllm]="$B4 --set rollout.backend=vllm --set rollout.gpu_memory_utilization=0.3"
)
ORDER=(lora-gc lora-nogc full-policy-lora-critic full-both)
if [ -d /tmp/site-vllm ]; then
  export PYTHONPATH=/tmp/site-vllm:$PYTHONPATH
  python3 -c "import vllm" 2>/dev/null && ORDER=(smollm2-kv smollm2-vllm lora-gc lora-gc-vllm "${ORDER[@]:1}")
fi
# a session short of device time runs fewer plans: H200_4B_PLANS="lora-gc full-policy-lora-critic"
# (give it to poll too, or poll's summary lists the plans not run as "no step")
[ -n "${H200_4B_PLANS:-}" ] && read -r -a ORDER <<< "$H200_4B_PLANS"
running() { pgrep -f "h200_4b.sh run-all" > /dev/null; }
summary() {
  for plan in "${ORDER[@]}"; do
    f=$top/$plan/perf.jsonl
    if [ -s "$f" ]; then
      python3 - "$plan" "$f" "$top/$plan/smi.txt" <<'EOF'
import json, sys
rows = [json.loads(x) for x in open(sys.argv[2])]
last = rows[-1]
try:
    smi = max(int(x) for x in open(sys.argv[3]).read().split() if x.isdigit()) / 1024
except (OSError, ValueError):
    smi = 0.0
print(f"{sys.argv[1]:26s} steps {len(rows)}  step {last.get('perf/step_s', 0):.1f} s  rollout "
      f"{last.get('perf/rollout_tokens_per_s', 0):.0f} tok/s  update {last.get('perf/update_tokens_per_s', 0):.0f} "
      f"tok/s  peak {max(r.get('perf/peak_mem_mb', 0) for r in rows) / 1024:.1f} GiB torch, "
      f"{smi:.1f} GiB card  valid {1 - last.get('episode/invalid_rate', 1):.2f}  "
      f"sync {last.get('perf/weight_sync_s', 0):.2f} s")
EOF
    else
      printf '%-26s no step: %s\n' "$plan" "$(grep -m1 -o 'OutOfMemoryError[^.]*\|CUDA out of memory[^.]*' "$top/$plan/log" 2>/dev/null || tail -1 "$top/$plan/log" 2>/dev/null)"
    fi
  done
}
pack() {
  [ -n "${OUT:-}" ] || { echo "OUT is not set: run this through the device tool"; return 1; }
  summary > "$OUT/summary.txt"; cat "$OUT/summary.txt"
  tar czf "$OUT/h200_4b.tgz" -C /tmp h200_4b 2>/dev/null
  ls -la "$OUT"
}
case "${1:-}" in
  run-all)
    for plan in "${ORDER[@]}"; do
      mkdir -p "$top/$plan"
      # the card's used memory each second: torch's peak counter (perf/peak_mem_mb) does not
      # see vLLM's own memory pool, which nvidia-smi does
      nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -l 1 > "$top/$plan/smi.txt" 2>/dev/null &
      smi=$!
      # shellcheck disable=SC2086
      python3 benchmarks/step_profile.py "${WORKLOAD[@]}" ${PLANS[$plan]} --out "$top/$plan" \
          > "$top/$plan/log" 2>&1
      echo "$plan exit $?" >> "$top/done"
      kill $smi 2>/dev/null
    done;;
  start)
    running && { echo "the plans are running already"; exit 1; }
    rm -rf "$top"; mkdir -p "$top"
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
    setsid nohup bash "$0" run-all > "$top/driver.log" 2>&1 < /dev/null &
    sleep 30; tail -3 "$top"/*/log;;
  poll)
    end=$((SECONDS + ${2:-540}))
    while running && [ $SECONDS -lt $end ]; do sleep 15; done
    cat "$top/done" 2>/dev/null; summary
    running && echo "still running" || { echo "ended"; pack; };;
  collect) pack;;
  *) echo "usage: h200_4b.sh start | poll [SECONDS] | collect"; exit 2;;
esac
