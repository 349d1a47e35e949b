#!/bin/bash
# Session 40, call 1: main's GPU tests for session 39's review mends (MoE, MoE AWQ, linear kernels), then
# the folded routing with published tile experts (variant "fold", branch next/fold-published-tiles)
# against main at batch 1, alternated three rounds; on an H200 also main's issue figures.
cd "$(dirname "$0")/.." || exit 1
start=$(date +%s)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
ERNIE_GPU_TESTS="cuda_moe_test cuda_moe_awq_test cuda_linear_kernels_test" timeout 280 tools/gpu-test run --no-peer \
  > /tmp/tests.out 2>&1
echo "tests rc $? at $(( $(date +%s) - start )) s"
grep -E "PASSED|FAILED|passed|failed|tests ran|Error|error:" /tmp/tests.out | tail -25
cp /tmp/tests.out "$OUT/tests.out" 2>/dev/null
d=/tmp/ernie-gpu-pack
export LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [ -x "$d/bin/cuda_moe_awq_test_fold" ]; then  # the branch's own test of the folded routing
  timeout 120 "$d/bin/cuda_moe_awq_test_fold" --gtest_filter='*Fold*' > /tmp/foldtest.out 2>&1
  echo "fold test rc $? at $(( $(date +%s) - start )) s"
  grep -E "^\[ +(OK|FAILED|PASSED) +\]|relative|Failure" /tmp/foldtest.out | tail -8
fi
"$d/bin/ernie-make-model" /tmp/ernie-21b-a3b-awq --shape 21b-a3b --seed 1 --config-only --awq-group-size 128 \
  > /tmp/setup.out 2>&1
bench() {  # bench BINARY LABEL ARGS...
  local bin="$1" label="$2"; shift 2
  ms=$(timeout 60 "$bin" --model /tmp/ernie-21b-a3b-awq --load-format dummy --check-tokens 0 --batch-sizes 1 "$@" \
    2>&1 | grep -E '^ +[0-9]+ ' | awk '{printf "%s:%s ", $1, $4}')
  echo "moe [$label] $ms"
}
if [[ "$gpu" == *H200* ]] && [ $(( $(date +%s) - start )) -lt 300 ]; then
  ERNIE_AB_MODELS="bf16 awq moe_awq" ERNIE_AB_BATCHES=1,16,64,256 ERNIE_AB_MOE_BATCHES=1 ERNIE_AB_ROUNDS=1 \
    ERNIE_AB_VARIANTS=";" timeout 200 tools/gpu-test run --ab-before --no-tests > /tmp/ab.out 2>&1
  echo "ab rc $? at $(( $(date +%s) - start )) s"
  grep -E "^==|^ +[0-9]+ " "$OUT/ab_before.txt" | head -30
  for shape in square_8192 wide_4096x14336; do
    [ $(( $(date +%s) - start )) -gt 420 ] && break
    timeout 30 "$d/bin/ernie-bench-gemv" --shape "$shape" --ms 1,8 2>&1 | grep -v '^{' | tail -6
  done
fi
for round in 1 2 3; do
  [ $(( $(date +%s) - start )) -gt 540 ] && break
  bench "$d/bin/ernie-bench-cuda" "main r$round"
  bench "$d/bin/ernie-bench-cuda-fold" "fold1 r$round" --moe-fold-routing 1
  bench "$d/bin/ernie-bench-cuda-fold" "fold0 r$round" --moe-fold-routing 0
done
echo "fold A/B done at $(( $(date +%s) - start )) s"
echo "done at $(( $(date +%s) - start )) s"
find "$OUT" -type f ! -name tests.out -delete
