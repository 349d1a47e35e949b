#!/bin/bash
# Session 40, call 2: main with the published tile experts merged (5c9779e, variant "merged") and the
# records read in one round trip (HEAD): the MoE GPU tests on HEAD, then the 21B-A3B AWQ at batch 1 with
# the routing launch (fold 0), merged fold 1 and HEAD fold 1, alternated; HEAD's timeline with the fold;
# on an H200 also main's issue figures first. HEAD here has moe_fold_routing on by default (uncommitted), so
# the MoE tests run one-token steps through the fold.
cd "$(dirname "$0")/.." || exit 1
start=$(date +%s)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
ERNIE_GPU_TESTS="cuda_moe_awq_test cuda_moe_test" timeout 200 tools/gpu-test run --no-peer > /tmp/tests.out 2>&1
echo "tests rc $? at $(( $(date +%s) - start )) s"
grep -E "PASSED|FAILED|passed|failed|folded routing|Error|error:" /tmp/tests.out | tail -12
d=/tmp/ernie-gpu-pack
export LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
"$d/bin/ernie-make-model" /tmp/ernie-21b-a3b-awq --shape 21b-a3b --seed 1 --config-only --awq-group-size 128 \
  > /tmp/setup.out 2>&1
bench() {  # bench BINARY LABEL ARGS...
  local bin="$1" label="$2"; shift 2
  ms=$(timeout 60 "$bin" --model /tmp/ernie-21b-a3b-awq --load-format dummy --check-tokens 0 --batch-sizes 1 "$@" \
    2>&1 | grep -E '^ +[0-9]+ ' | awk '{printf "%s:%s ", $1, $4}')
  echo "moe [$label] $ms"
}
for round in 1 2 3; do
  [ $(( $(date +%s) - start )) -gt 250 ] && break
  bench "$d/bin/ernie-bench-cuda" "routing launch r$round" --moe-fold-routing 0
  bench "$d/bin/ernie-bench-cuda-merged" "merged fold r$round" --moe-fold-routing 1
  bench "$d/bin/ernie-bench-cuda" "one-trip fold r$round" --moe-fold-routing 1
done
echo "A/B done at $(( $(date +%s) - start )) s"
if [[ "$gpu" == *H200* ]]; then
  ERNIE_AB_MODELS="bf16 awq" ERNIE_AB_BATCHES=1,16,64,256 ERNIE_AB_ROUNDS=1 \
    ERNIE_AB_VARIANTS=";" timeout 150 tools/gpu-test run --ab-before --no-tests > /tmp/ab.out 2>&1
  echo "ab rc $? at $(( $(date +%s) - start )) s"
  grep -E "^==|^ +[0-9]+ " "$OUT/ab_before.txt" | head -30
  for shape in square_8192 wide_4096x14336; do
    timeout 30 "$d/bin/ernie-bench-gemv" --shape "$shape" --ms 1,8 2>&1 | grep -v '^{' | tail -6
  done
  echo "figures done at $(( $(date +%s) - start )) s"
fi
for f in 0 1; do
  [ $(( $(date +%s) - start )) -gt 330 ] && break
  echo "== timeline, HEAD fold $f"
  timeout 40 "$d/bin/ernie-bench-cuda" --model /tmp/ernie-21b-a3b-awq --load-format dummy --check-tokens 0 \
    --batch-sizes 1 --timeline-batches 1 --moe-fold-routing $f 2>&1 | sed -n '/^timeline/,/first kernels/p' | cut -c1-150 | head -10
done
echo "done at $(( $(date +%s) - start )) s"
find "$OUT" -type f -delete
