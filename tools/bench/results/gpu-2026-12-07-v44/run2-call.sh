#!/bin/bash
# Session 41, call 2: the folded routing's launch options on HEAD (moe_fold_prefetch_shared: the gate/up's shared
# experts' CTAs ask the L2 for their weights before they wait; moe_router_record_cluster: the o_proj's clusters of
# 8 / 4 / 2 / 1 CTAs): cuda_moe_awq_test (FoldedRoutingsLaunchOptionsGiveItsLogits is new), then the 21B-A3B AWQ
# at batch 1 with each, alternated, three rounds; timelines; the int4 GEMV's own lines.
# From the repository root, carry [".device/pack", this script].
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
start=$(date +%s)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
ERNIE_GPU_TESTS="cuda_moe_awq_test" timeout 150 tools/gpu-test run --no-peer > /tmp/tests.out 2>&1
echo "tests rc $? at $(( $(date +%s) - start )) s"
grep -E "PASSED|FAILED|passed|failed|folded routing|Error|error:|Failure|Expected|Which is" /tmp/tests.out | tail -16
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
  [ $(( $(date +%s) - start )) -gt 330 ] && break
  bench "fold r$round"
  bench "prefetch shared r$round" --moe-fold-prefetch-shared 1
  bench "clusters of 4 r$round" --moe-router-record-cluster 4
  bench "clusters of 2 r$round" --moe-router-record-cluster 2
  bench "clusters of 1 r$round" --moe-router-record-cluster 1
  bench "routing launch r$round" --moe-fold-routing 0
done
echo "A/B done at $(( $(date +%s) - start )) s"
for args in "--moe-fold-prefetch-shared 0" "--moe-fold-prefetch-shared 1" "--moe-router-record-cluster 2"; do
  [ $(( $(date +%s) - start )) -gt 420 ] && break
  echo "== timeline, $args"
  # shellcheck disable=SC2086  # two words
  timeout 40 "$d/bin/ernie-bench-cuda" --model /tmp/ernie-21b-a3b-awq --load-format dummy --check-tokens 0 \
    --batch-sizes 1 --timeline-batches 1 $args 2>&1 | sed -n '/^timeline/,/first kernels/p' | cut -c1-150 | head -10
done
echo "timelines done at $(( $(date +%s) - start )) s"
for shape in square_8192 wide_4096x14336; do
  [ $(( $(date +%s) - start )) -gt 540 ] && break
  timeout 20 "$d/bin/ernie-bench-gemv" --shape "$shape" --ms 1,8 2>&1 | grep -v '^{' | grep -v probe | tail -8
done
echo "done at $(( $(date +%s) - start )) s"
find "$OUT" -type f -delete
