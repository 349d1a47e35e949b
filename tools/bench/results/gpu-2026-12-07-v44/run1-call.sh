#!/bin/bash
# Session 41, call 1: HEAD with the folded down launch that combines in clusters (moe_fold_combine, off by
# default): the MoE GPU tests (FoldedDownLaunchCombinesAsTheCombineLaunch is new), then the 21B-A3B AWQ at
# batch 1 with the routing launch (fold 0), the fold and the fold + cluster combine, alternated; timelines of
# the fold with the combine off / on; then main's issue figures (0.3b bf16 / AWQ, int4 GEMV) as time allows.
# From the repository root, carry [".device/pack", this script].
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
start=$(date +%s)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
ERNIE_GPU_TESTS="cuda_moe_awq_test cuda_moe_test" timeout 200 tools/gpu-test run --no-peer > /tmp/tests.out 2>&1
echo "tests rc $? at $(( $(date +%s) - start )) s"
grep -E "PASSED|FAILED|passed|failed|folded routing|Error|error:|Failure|Expected" /tmp/tests.out | tail -16
d=/tmp/ernie-gpu-pack
export LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
"$d/bin/ernie-make-model" /tmp/ernie-21b-a3b-awq --shape 21b-a3b --seed 1 --config-only --awq-group-size 128 \
  > /tmp/setup.out 2>&1
bench() {  # bench LABEL ARGS...
  local label="$1"; shift
  ms=$(timeout 60 "$d/bin/ernie-bench-cuda" --model /tmp/ernie-21b-a3b-awq --load-format dummy --check-tokens 0 \
    --batch-sizes 1 "$@" 2>&1 | grep -E '^ +[0-9]+ ' | awk '{printf "%s:%s ", $1, $4}')
  echo "moe [$label] $ms"
}
for round in 1 2 3; do
  [ $(( $(date +%s) - start )) -gt 300 ] && break
  bench "routing launch r$round" --moe-fold-routing 0
  bench "fold r$round" --moe-fold-routing 1 --moe-fold-combine 0
  bench "fold + cluster combine r$round" --moe-fold-routing 1 --moe-fold-combine 1
done
echo "A/B done at $(( $(date +%s) - start )) s"
for c in 0 1; do
  [ $(( $(date +%s) - start )) -gt 380 ] && break
  echo "== timeline, fold 1, combine $c"
  timeout 40 "$d/bin/ernie-bench-cuda" --model /tmp/ernie-21b-a3b-awq --load-format dummy --check-tokens 0 \
    --batch-sizes 1 --timeline-batches 1 --moe-fold-routing 1 --moe-fold-combine $c 2>&1 |
    sed -n '/^timeline/,/first kernels/p' | cut -c1-150 | head -12
done
echo "timelines done at $(( $(date +%s) - start )) s"
if [ $(( $(date +%s) - start )) -lt 400 ]; then
  ERNIE_AB_MODELS="bf16 awq" ERNIE_AB_BATCHES=1,64,256 ERNIE_AB_ROUNDS=1 \
    ERNIE_AB_VARIANTS=";" timeout $(( 540 - $(date +%s) + start )) tools/gpu-test run --ab-before --no-tests \
    > /tmp/ab.out 2>&1
  echo "ab rc $? at $(( $(date +%s) - start )) s"
  grep -E "^==|^ +[0-9]+ " "$OUT/ab_before.txt" | head -20
fi
for shape in square_8192 wide_4096x14336; do
  [ $(( $(date +%s) - start )) -gt 560 ] && break
  timeout 15 "$d/bin/ernie-bench-gemv" --shape "$shape" --ms 1 2>&1 | grep -v '^{' | tail -4
done
echo "done at $(( $(date +%s) - start )) s"
find "$OUT" -type f -delete
