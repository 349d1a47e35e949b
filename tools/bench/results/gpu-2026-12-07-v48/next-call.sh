#!/bin/bash
# Prepared for session 46, NOT RUN. Here: `tools/gpu-test before 14db31f` (the binary before v48's
# evict_first for the grouped expert GEMMs, into .device/variants/ernie-bench-cuda-before), then pack with
# ERNIE_PACK_ONLY="ernie-bench-cuda ernie-bench-gemv cuda_moe_test"; carry [".device/pack"]. The call: on an H200 the
# issues' figures first (v46 run6, ~60 s); cuda_moe_test (the bf16 grouped GEMM with evict_first, not yet run on
# a GPU); the 0.3b bf16 at 16 / 32 / 64 rows with --small-batch-lm-head 0 / 1, two rounds (v48 run1, one round:
# 16 rows 0.526 against 0.536, 64 rows 0.806 against 0.795); then the 21B-A3B AWQ at 256 and bf16 at 64, the
# before binary against this one (each size on its own run: a 256-row run sets up for longer than 60 s).
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
start=$(date +%s)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
[[ "$gpu" == *H200* ]] && bash tools/bench/results/gpu-2026-12-07-v46/run6-call.sh
d=/tmp/ernie-gpu-pack
mkdir -p "$d" && tar -C "$d" -xzf .device/pack/pack.tar.gz || echo "no pack"
export LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
r=$(ERNIE_TEST_DATA_DIR=$PWD/tests/data timeout 90 "$d/bin/cuda_moe_test" 2>&1 |
  grep -E "^\[  (PASSED|FAILED)|Failure" | head -4)
echo "cuda_moe_test: $r ($(( $(date +%s) - start )) s)"
mk() { "$d/bin/ernie-make-model" "$@" --seed 1 --config-only >> /tmp/setup.out 2>&1; }
mk /tmp/dense --shape 0.3b; mk /tmp/moe-awq --shape 21b-a3b --awq-group-size 128; mk /tmp/moe --shape 21b-a3b
run() {  # run LABEL BINARY MODEL BATCHES [FLAGS...]: batch:step-ms pairs
  local label=$1 bin=$2 model=$3 batches=$4; shift 4
  ms=$(timeout 120 "$bin" --model "$model" --load-format dummy --check-tokens 0 --batch-sizes "$batches" "$@" 2>&1 |
    grep -E '^ +[0-9]+ |rror' | awk '{printf "%s:%s ", $1, $4}')
  echo "[$label] $ms ($(( $(date +%s) - start )) s)"
}
for r in 1 2; do
  run "0.3b lm_head cublas r$r" "$d/bin/ernie-bench-cuda" /tmp/dense 16,32,64 --small-batch-lm-head 0
  run "0.3b lm_head small-batch r$r" "$d/bin/ernie-bench-cuda" /tmp/dense 16,32,64 --small-batch-lm-head 1
done
before="$d/bin/ernie-bench-cuda-before"
for r in 1 2; do
  run "moe awq 256 before r$r" "$before" /tmp/moe-awq 256
  run "moe awq 256 evict_first r$r" "$d/bin/ernie-bench-cuda" /tmp/moe-awq 256
  run "moe bf16 64 before r$r" "$before" /tmp/moe 64
  run "moe bf16 64 evict_first r$r" "$d/bin/ernie-bench-cuda" /tmp/moe 64
  [[ $(( $(date +%s) - start )) -gt 420 ]] && break
done
echo "done at $(( $(date +%s) - start )) s"
