#!/bin/bash
# Session 44, call 3 (the bf16 small-batch GEMM's weight tiles loaded by the TMA with an L2 evict_first policy, as
# the register loads of every other weight stream are): on an H200 first the issues' figures (v46's run6-call.sh);
# then the small-batch GEMM tests and the batching test, then greedy step ms of the 0.3b bf16 at 1, 16, 64, 256,
# three rounds alternated, the binary before (.device/before/ernie-bench-cuda, main's adf23e8) against this one.
# From the repository root, carry [".device/pack", ".device/before"].
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
start=$(date +%s)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
[[ "$gpu" == *H200* ]] && bash tools/bench/results/gpu-2026-12-07-v46/run6-call.sh
d=/tmp/ernie-gpu-pack
mkdir -p "$d" && tar -C "$d" -xzf .device/pack/pack.tar.gz || echo "no pack"
export LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for t in cuda_linear_kernels_test cuda_backend_batching_test; do
  r=$(ERNIE_TEST_DATA_DIR=$PWD/tests/data timeout 120 "$d/bin/$t" 2>&1 | grep -E "^\[  (PASSED|FAILED)|Failure" | head -4)
  echo "$t: $r"
done
echo "tests done at $(( $(date +%s) - start )) s"
"$d/bin/ernie-make-model" /tmp/d --shape 0.3b --seed 1 --config-only > /dev/null 2>&1
run() {  # run LABEL BINARY: batch:step-ms pairs
  ms=$(timeout 60 "$2" --model /tmp/d --load-format dummy --check-tokens 0 --batch-sizes 1,16,64,256 2>&1 |
    grep -E '^ +[0-9]+ |rror' | awk '{printf "%s:%s ", $1, $4}')
  echo "[$1] $ms"
}
for r in 1 2 3; do
  run "0.3b bf16 before r$r" .device/before/ernie-bench-cuda
  run "0.3b bf16 evict_first TMA r$r" "$d/bin/ernie-bench-cuda"
  [[ $(( $(date +%s) - start )) -gt 400 ]] && break
done
echo "== timeline 64 (this binary)"
timeout 60 "$d/bin/ernie-bench-cuda" --model /tmp/d --load-format dummy --check-tokens 0 --batch-sizes 64 \
  --timeline-batches 64 2>&1 | grep -A8 '^timeline:' | head -8
echo "done at $(( $(date +%s) - start )) s"
