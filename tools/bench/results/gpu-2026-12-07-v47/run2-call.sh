#!/bin/bash
# Session 44, call 2 (the lm_head's first rows kept in the L2, `--l2-pinned-lm-head-bytes -1`): on an H200 first the
# issues' figures (v46's run6-call.sh, ~60 s); then the batching test's pinning case and the start options' refusals,
# then greedy step ms, three rounds alternated, pinning off (0, the default) against as much as the device sets aside
# (-1): the 0.3b bf16 at 1, 64, 256, the 0.3b AWQ at 1, 64, the 21B-A3B AWQ at 1, 64; timelines of the 0.3b bf16 at
# batch 1 for each. From the repository root, carry [".device/pack"].
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
start=$(date +%s)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
[[ "$gpu" == *H200* ]] && bash tools/bench/results/gpu-2026-12-07-v46/run6-call.sh
d=/tmp/ernie-gpu-pack
mkdir -p "$d" && tar -C "$d" -xzf .device/pack/pack.tar.gz || echo "no pack"
export LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
ERNIE_TEST_DATA_DIR=$PWD/tests/data timeout 120 "$d/bin/cuda_backend_batching_test" \
  --gtest_filter='*L2Pinned*:*BadOptions*:*KeyPrefetch*' 2>&1 | grep -E "^\[  (PASSED|FAILED)|Failure|Expected|Which is|actual" | head -12
echo "tests done at $(( $(date +%s) - start )) s"
mk() { "$d/bin/ernie-make-model" "$@" --seed 1 --config-only >> /tmp/setup.out 2>&1; }
mk /tmp/d --shape 0.3b; mk /tmp/d-awq --shape 0.3b --awq-group-size 128; mk /tmp/moe-awq --shape 21b-a3b --awq-group-size 128
run() {  # run LABEL MODEL BATCHES ARGS...: batch:step-ms pairs
  local label="$1" model="$2" batches="$3"; shift 3
  ms=$(timeout 60 "$d/bin/ernie-bench-cuda" --model "$model" --load-format dummy --check-tokens 0 \
    --batch-sizes "$batches" "$@" 2>&1 | grep -E '^ +[0-9]+ |rror|pinned' | awk '/pinned/ {printf "(%s) ", $NF; next} {printf "%s:%s ", $1, $4}')
  echo "[$label] $ms"
}
for r in 1 2 3; do
  for pin in 0 -1; do
    run "0.3b bf16 pin $pin r$r" /tmp/d 1,64,256 --l2-pinned-lm-head-bytes $pin
    run "0.3b awq pin $pin r$r" /tmp/d-awq 1,64 --l2-pinned-lm-head-bytes $pin
    run "moe awq pin $pin r$r" /tmp/moe-awq 1,64 --l2-pinned-lm-head-bytes $pin
  done
  [[ $(( $(date +%s) - start )) -gt 420 ]] && break
done
for pin in 0 -1; do
  echo "== timeline 1 [pin $pin]"
  timeout 60 "$d/bin/ernie-bench-cuda" --model /tmp/d --load-format dummy --check-tokens 0 --batch-sizes 1 \
    --timeline-batches 1 --l2-pinned-lm-head-bytes $pin 2>&1 | grep -A10 '^timeline:' | head -10
done
echo "done at $(( $(date +%s) - start )) s"
find "$OUT" -type f -delete
