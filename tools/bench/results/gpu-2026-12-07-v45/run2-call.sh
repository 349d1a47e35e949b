#!/bin/bash
# Session 42, the last call (the device time nearly spent: run1-call.sh never found a machine): the new
# record-cluster default and the three new options under cuda_moe_awq_test and cuda_backend_batching_test,
# then the options alternated with the default, two rounds, within ~150 s.
# From the repository root, carry [".device/pack"].
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
start=$(date +%s)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
ERNIE_GPU_TESTS="cuda_moe_awq_test cuda_backend_batching_test" timeout 90 tools/gpu-test run --no-peer > /tmp/tests.out 2>&1
echo "tests rc $? at $(( $(date +%s) - start )) s"
grep -E "PASSED|FAILED|passed|failed|Error|error:|Failure|Expected|Which is" /tmp/tests.out | tail -12
d=/tmp/ernie-gpu-pack
export LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
"$d/bin/ernie-make-model" /tmp/ernie-21b-a3b-awq --shape 21b-a3b --seed 1 --config-only --awq-group-size 128 \
  > /tmp/setup.out 2>&1
"$d/bin/ernie-make-model" /tmp/ernie-0.3b --shape 0.3b --seed 1 --config-only >> /tmp/setup.out 2>&1
run() {  # run LABEL MODEL BATCHES ARGS...
  local label="$1" model="$2" batches="$3"; shift 3
  ms=$(timeout 40 "$d/bin/ernie-bench-cuda" --model "$model" --load-format dummy --check-tokens 0 \
    --batch-sizes "$batches" "$@" 2>&1 | grep -E '^ +[0-9]+ |rror' | awk '{printf "%s:%s ", $1, $4}')
  echo "[$label] $ms"
}
m=/tmp/ernie-21b-a3b-awq
for round in 1 2 3; do
  [ $(( $(date +%s) - start )) -gt 150 ] && break
  run "moe default r$round" $m 1
  run "moe early 1 r$round" $m 1 --moe-fold-prefetch-early 1
  run "moe copy x early r$round" $m 1 --moe-fold-copy-x-early 1
  run "moe kv prefetch r$round" $m 1 --kv-prefetch-max-seqs 8
  run "0.3b bf16 r$round" /tmp/ernie-0.3b 1,2
  run "0.3b bf16 kv prefetch r$round" /tmp/ernie-0.3b 1,2 --kv-prefetch-max-seqs 8
done
echo "done at $(( $(date +%s) - start )) s"
find "$OUT" -type f -delete
