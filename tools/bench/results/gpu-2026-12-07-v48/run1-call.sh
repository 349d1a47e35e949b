#!/bin/bash
# Session 45, call 1 (cut to ~300 s: the device time left after failed starts). Before: main at 14db31f
# (.device/before/ernie-bench-cuda). After: main with ../gpu-2026-12-07-v47/grouped-gemm-evict-first.patch applied
# (the grouped expert GEMMs' weights, int4 and bf16, copied with an L2 evict_first policy), packed with
# ERNIE_PACK_ONLY="ernie-bench-cuda ernie-bench-gemv cuda_moe_awq_test cuda_moe_test cuda_backend_batching_test".
# On an H200 the issues' figures first (v46 run6); the batching test's streamed-KV case (the decode-only
# narrowing, first run on a GPU); cuda_moe_awq_test; the 21B-A3B AWQ at 16, 64, 256, before against after, two
# rounds; then, if time is left, the 0.3b bf16 at 16 and 64 rows with --small-batch-lm-head 0 / 1 (last measured
# before the small-batch GEMM's TMA loads took evict_first) and the 21B-A3B bf16 at 64.
# From the repository root, carry [".device/pack", ".device/before"].
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
start=$(date +%s)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
[[ "$gpu" == *H200* ]] && bash tools/bench/results/gpu-2026-12-07-v46/run6-call.sh
d=/tmp/ernie-gpu-pack
mkdir -p "$d" && tar -C "$d" -xzf .device/pack/pack.tar.gz || echo "no pack"
export LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
ERNIE_TEST_DATA_DIR=$PWD/tests/data timeout 60 "$d/bin/cuda_backend_batching_test" --gtest_filter="*StreamedKv*" 2>&1 |
  grep -E "^\[  (PASSED|FAILED)" | head -2
for t in cuda_moe_awq_test; do
  r=$(ERNIE_TEST_DATA_DIR=$PWD/tests/data timeout 60 "$d/bin/$t" 2>&1 |
    grep -E "^\[  (PASSED|FAILED)|Failure" | head -4)
  echo "$t: $r ($(( $(date +%s) - start )) s)"
done
mk() { "$d/bin/ernie-make-model" "$@" --seed 1 --config-only >> /tmp/setup.out 2>&1; }
mk /tmp/moe-awq --shape 21b-a3b --awq-group-size 128; mk /tmp/moe --shape 21b-a3b; mk /tmp/dense --shape 0.3b
run() {  # run LABEL BINARY MODEL BATCHES [FLAGS...]: batch:step-ms pairs
  local label=$1 bin=$2 model=$3 batches=$4; shift 4
  ms=$(timeout 60 "$bin" --model "$model" --load-format dummy --check-tokens 0 --batch-sizes "$batches" "$@" 2>&1 |
    grep -E '^ +[0-9]+ |rror' | awk '{printf "%s:%s ", $1, $4}')
  echo "[$label] $ms ($(( $(date +%s) - start )) s)"
}
for r in 1 2; do
  run "moe awq before r$r" .device/before/ernie-bench-cuda /tmp/moe-awq 16,64,256
  run "moe awq evict_first r$r" "$d/bin/ernie-bench-cuda" /tmp/moe-awq 16,64,256
done
for r in 1; do
  [[ $(( $(date +%s) - start )) -gt 260 ]] && break
  run "0.3b lm_head cublas r$r" "$d/bin/ernie-bench-cuda" /tmp/dense 16,64 --small-batch-lm-head 0
  run "0.3b lm_head small-batch r$r" "$d/bin/ernie-bench-cuda" /tmp/dense 16,64 --small-batch-lm-head 1
done
if [[ $(( $(date +%s) - start )) -lt 250 ]]; then
  run "moe bf16 before" .device/before/ernie-bench-cuda /tmp/moe 64
  run "moe bf16 evict_first" "$d/bin/ernie-bench-cuda" /tmp/moe 64
fi
echo "done at $(( $(date +%s) - start )) s"
