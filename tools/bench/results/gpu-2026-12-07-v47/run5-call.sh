#!/bin/bash
# Session 44, call 5, NOT RUN (no device time was left): prepared for the next session. Build main as the before
# binary (copy build/bin/ernie-bench-cuda to .device/before/), then `git apply` grouped-gemm-evict-first.patch (the
# grouped expert GEMMs' weights, int4 and bf16, copied with an L2 evict_first policy), build and pack (ERNIE_PACK_ONLY=
# "ernie-bench-cuda ernie-bench-gemv cuda_moe_awq_test cuda_moe_test cuda_backend_batching_test"). The call:
# on an H200 the issues' figures first; cuda_moe_awq_test and cuda_moe_test; then greedy step ms of the 21B-A3B
# AWQ at 16, 64, 256, two rounds, the binary before (.device/before/ernie-bench-cuda) against this one;
# the 21B-A3B bf16 at 64 once each if time is left. From the repository root, carry [".device/pack",
# ".device/before"].
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
start=$(date +%s)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
[[ "$gpu" == *H200* ]] && bash tools/bench/results/gpu-2026-12-07-v46/run6-call.sh
d=/tmp/ernie-gpu-pack
mkdir -p "$d" && tar -C "$d" -xzf .device/pack/pack.tar.gz || echo "no pack"
export LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
ERNIE_TEST_DATA_DIR=$PWD/tests/data timeout 60 "$d/bin/cuda_backend_batching_test" --gtest_filter="*StreamedKv*" 2>&1 |
  grep -E "^\[  (PASSED|FAILED)" | head -2
for t in cuda_moe_awq_test cuda_moe_test; do
  r=$(ERNIE_TEST_DATA_DIR=$PWD/tests/data timeout 100 "$d/bin/$t" 2>&1 |
    grep -E "^\[  (PASSED|FAILED)|Failure" | head -4)
  echo "$t: $r ($(( $(date +%s) - start )) s)"
done
mk() { "$d/bin/ernie-make-model" "$@" --seed 1 --config-only >> /tmp/setup.out 2>&1; }
mk /tmp/moe-awq --shape 21b-a3b --awq-group-size 128; mk /tmp/moe --shape 21b-a3b
run() {  # run LABEL BINARY MODEL BATCHES: batch:step-ms pairs
  ms=$(timeout 60 "$2" --model "$3" --load-format dummy --check-tokens 0 --batch-sizes "$4" 2>&1 |
    grep -E '^ +[0-9]+ |rror' | awk '{printf "%s:%s ", $1, $4}')
  echo "[$1] $ms"
}
for r in 1 2; do
  run "moe awq before r$r" .device/before/ernie-bench-cuda /tmp/moe-awq 16,64,256
  run "moe awq evict_first r$r" "$d/bin/ernie-bench-cuda" /tmp/moe-awq 16,64,256
  [[ $(( $(date +%s) - start )) -gt 170 ]] && break
done
if [[ $(( $(date +%s) - start )) -lt 190 ]]; then
  run "moe bf16 before" .device/before/ernie-bench-cuda /tmp/moe 64
  run "moe bf16 evict_first" "$d/bin/ernie-bench-cuda" /tmp/moe 64
fi
echo "done at $(( $(date +%s) - start )) s"
