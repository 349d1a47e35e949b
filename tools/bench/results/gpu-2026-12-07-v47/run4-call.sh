#!/bin/bash
# Session 44, call 4 (keys and values read with an L2 evict_first policy at steps of 16 or more items,
# `--stream-kv-min-items`, default 16, against 0 = never): the batching test's new bit-for-bit case, the key
# prefetch case and the start options' refusals; then greedy step ms, two rounds alternated: the 0.3b bf16 at 16,
# 64, 256, the 21B-A3B AWQ at 16, 64. On an H200 the issues' figures first. From the repository root, carry
# [".device/pack"].
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
start=$(date +%s)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
[[ "$gpu" == *H200* ]] && bash tools/bench/results/gpu-2026-12-07-v46/run6-call.sh
d=/tmp/ernie-gpu-pack
mkdir -p "$d" && tar -C "$d" -xzf .device/pack/pack.tar.gz || echo "no pack"
export LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
ERNIE_TEST_DATA_DIR=$PWD/tests/data timeout 120 "$d/bin/cuda_backend_batching_test" \
  --gtest_filter='*StreamedKv*:*BadOptions*:*KeyPrefetch*' 2>&1 | grep -E "^\[  (PASSED|FAILED)|Failure" | head -6
echo "tests done at $(( $(date +%s) - start )) s"
mk() { "$d/bin/ernie-make-model" "$@" --seed 1 --config-only >> /tmp/setup.out 2>&1; }
mk /tmp/d --shape 0.3b; mk /tmp/moe-awq --shape 21b-a3b --awq-group-size 128
run() {  # run LABEL MODEL BATCHES ARGS...: batch:step-ms pairs
  local label="$1" model="$2" batches="$3"; shift 3
  ms=$(timeout 60 "$d/bin/ernie-bench-cuda" --model "$model" --load-format dummy --check-tokens 0 \
    --batch-sizes "$batches" "$@" 2>&1 | grep -E '^ +[0-9]+ |rror' | awk '{printf "%s:%s ", $1, $4}')
  echo "[$label] $ms"
}
for r in 1 2; do
  for s in 0 16; do
    run "0.3b bf16 stream-kv $s r$r" /tmp/d 16,64,256 --stream-kv-min-items $s
    run "moe awq stream-kv $s r$r" /tmp/moe-awq 16,64 --stream-kv-min-items $s
  done
  [[ $(( $(date +%s) - start )) -gt 250 ]] && break
done
echo "done at $(( $(date +%s) - start )) s"
