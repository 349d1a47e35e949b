#!/bin/bash
# Session 41, call 3: o_proj record clusters of 16 (non-portable) against 8, with and without the shared experts'
# L2 prefetch, and the down CTAs' slices asked of the L2 (moe_fold_prefetch_down): cuda_moe_awq_test (the wide-attention model runs one cluster of 16), the 21B-A3B AWQ at batch 1
# alternated (three rounds), a timeline; on an H200 also main's issue figures.
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
    --batch-sizes 1 "$@" 2>&1 | grep -E '^ +[0-9]+ |rror' | awk '{printf "%s:%s ", $1, $4}')
  echo "moe [$label] $ms"
}
for round in 1 2 3; do
  [ $(( $(date +%s) - start )) -gt 250 ] && break
  bench "clusters of 8 r$round" --moe-router-record-cluster 8 --moe-fold-prefetch-shared 0
  bench "clusters of 16 r$round" --moe-router-record-cluster 16 --moe-fold-prefetch-shared 0
  bench "8 + prefetch r$round" --moe-router-record-cluster 8 --moe-fold-prefetch-shared 1
  bench "16 + prefetch r$round" --moe-router-record-cluster 16 --moe-fold-prefetch-shared 1
  bench "8 + prefetch + down r$round" --moe-router-record-cluster 8 --moe-fold-prefetch-shared 1 \
    --moe-fold-prefetch-down 1
  bench "routing launch r$round" --moe-fold-routing 0
done
echo "A/B done at $(( $(date +%s) - start )) s"
echo "== timeline, clusters of 16 + prefetch"
timeout 40 "$d/bin/ernie-bench-cuda" --model /tmp/ernie-21b-a3b-awq --load-format dummy --check-tokens 0 \
  --batch-sizes 1 --timeline-batches 1 --moe-router-record-cluster 16 --moe-fold-prefetch-shared 1 2>&1 |
  sed -n '/^timeline/,/first kernels/p' | cut -c1-150 | head -10
if [[ "$gpu" == *H200* ]]; then
  bench "H200 batch 2, default" --batch-sizes 2
  ERNIE_AB_MODELS="bf16" ERNIE_AB_BATCHES=1,64,256 ERNIE_AB_ROUNDS=1 \
    ERNIE_AB_VARIANTS=";" timeout $(( 560 - $(date +%s) + start )) tools/gpu-test run --ab-before --no-tests \
    > /tmp/ab.out 2>&1
  echo "ab rc $? at $(( $(date +%s) - start )) s"
  grep -E "^==|^ +[0-9]+ " "$OUT/ab_before.txt" | head -20
  for shape in square_8192 wide_4096x14336; do
    [ $(( $(date +%s) - start )) -gt 575 ] && break
    timeout 12 "$d/bin/ernie-bench-gemv" --shape "$shape" --ms 1 2>&1 | grep -v '^{' | grep -v probe | tail -3
  done
fi
echo "done at $(( $(date +%s) - start )) s"
find "$OUT" -type f -delete
