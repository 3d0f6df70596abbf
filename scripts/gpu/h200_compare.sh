#!/bin/bash
# A comparison on the lent H200 that outlives one device call (10 minutes at most): started
# detached, then polled in back-to-back calls, its results packed into $OUT at the end.
# Run from the repository root on the device machine, after the two staging calls of
# scripts/gpu/prepare_project.sh (PYTHONPATH=/tmp/site holds what the device lacks):
#   bash scripts/gpu/h200_compare.sh start --bench usergym --methods ... (orchestrator compare's arguments)
#       several comparisons, one after another in the same detached shell: their argument lists
#       joined by --then (each with its own --name); a poll call then need not come the moment
#       one ends, and the machine is never idle between them (2026-12-07: PPO seed 3 waited on
#       a start after the GRPO pair, got no machine, and was never run)
#   bash scripts/gpu/h200_compare.sh poll 540      # waits up to 540 s; packs $OUT once it ended
#   bash scripts/gpu/h200_compare.sh collect       # packs $OUT now, ended or not
# What comes back (the device returns at most 8 files of 16 MiB): the log, runs/ without
# checkpoints or trajectories (results.json, RESULTS.md, report/, ledgers, workspaces, metrics),
# and every run's trajectories (fewer steps where they would pass 16 MiB; see pack).
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
# its log, queue and pid (a test points H200_STATE elsewhere)
state=${H200_STATE:-/tmp}
log=$state/h200_compare.log
# anchored at the start of the command line: unanchored, the pattern also matched the device
# call's own shell whenever its command held those words (2026-12-07: "a comparison is running
# already" with none running)
queue_pid=$state/h200_compare.queue.pid
running() {
  { [ -f "$queue_pid" ] && kill -0 "$(cat "$queue_pid")" 2>/dev/null; } ||
    pgrep -f "^python3 -m orchestrator.cli compare" > /dev/null
}
pack() {
  [ -n "${OUT:-}" ] || { echo "OUT is not set: run this through the device tool"; return 1; }
  cp "$log" "$OUT/" 2>/dev/null
  tar czf "$OUT/runs.tgz" --exclude='checkpoints' --exclude='*.safetensors' --exclude='*.pt' \
      --exclude='trajectories' runs/ 2>/dev/null
  # every step's trajectories, so that a session can be replayed on what it read (the agent's
  # fixes of 2026-12-06 were checked so, on steps 12 and 24 alone); fewer where they pass the
  # 16 MiB a file: every 4th step (the sessions of --every 4), then every 12th
  for every in 1 4 12; do
    files=()
    for f in runs/*/run-*/trajectories/step-*.jsonl; do
      [ -e "$f" ] || continue
      n=$(basename "$f" .jsonl); n=$((10#${n#step-}))
      (( n % every == 0 )) && files+=("$f")
    done
    tar czf "$OUT/trajectories.tgz" "${files[@]}" 2>/dev/null
    [ "$(stat -c %s "$OUT/trajectories.tgz" 2>/dev/null || echo 0)" -lt 15728640 ] && break
  done
  ls -la "$OUT"
}
case "${1:-}" in
  start)
    shift
    running && { echo "a comparison is running already"; exit 1; }
    # carried folders live in the working tree, which later calls replace: the evaluations after
    # training (a later call) found .gpuwork/userrl gone (2026-12-05, all 10 failed), so data for
    # --eval-data-dir goes to /tmp, which stays while the machine is warm: pass /tmp/userrl
    [ -d .gpuwork/userrl ] && { rm -rf /tmp/userrl; cp -r .gpuwork/userrl /tmp/userrl; }
    nvidia-smi --query-gpu=name,memory.used --format=csv,noheader 2>/dev/null
    # one `python3 -m orchestrator.cli compare` line per comparison, the arguments quoted
    runner=$state/h200_compare.queue.sh
    { echo "cd $(printf '%q' "$PWD")"; line="python3 -m orchestrator.cli compare --device cuda"
      for a in "$@"; do
        if [ "$a" = "--then" ]; then echo "$line"; line="python3 -m orchestrator.cli compare --device cuda"
        else line+=" $(printf '%q' "$a")"; fi
      done; echo "$line"; } > "$runner"
    grep -c "orchestrator.cli compare" "$runner" | sed 's/$/ comparison(s) queued/'
    setsid nohup bash -c 'echo $$ > '"$queue_pid"'; exec bash '"$runner" > "$log" 2>&1 < /dev/null &
    sleep "${H200_START_WAIT:-20}"; tail -5 "$log";;
  poll)
    end=$((SECONDS + ${2:-540}))
    while running && [ $SECONDS -lt $end ]; do sleep 15; done
    tail -c 2500 "$log"
    for m in runs/*/run-*/metrics.jsonl; do [ -f "$m" ] && echo "$m: $(wc -l < "$m") steps"; done
    nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader
    # each finished comparison's results.json comes back with every poll, so that a queue cut
    # short by a lost machine still returns the comparisons that ended (they are what
    # benchmarks/results/ keeps in git and compare-merge reads)
    if [ -n "${OUT:-}" ]; then
      for r in runs/*/results.json; do [ -f "$r" ] && cp "$r" "$OUT/results-$(basename "$(dirname "$r")").json"; done
    fi
    running && echo "still running" || { echo "ended"; pack; };;
  collect) pack;;
  *) echo "usage: h200_compare.sh start COMPARE-ARGS... | poll [SECONDS] | collect"; exit 2;;
esac
