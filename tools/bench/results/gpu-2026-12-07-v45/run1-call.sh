#!/bin/bash
# Session 42, call 1: the record clusters' new default (-1: 16 where the device runs it) under
# cuda_moe_awq_test and cuda_backend_batching_test; then the grouped int4 GEMV's launch shape at batch 1
# under the fold (k split x CTA warps x lean loop, each forced for both the gate/up and the down launch),
# one round; the o_proj's early L2 ranges (--moe-fold-prefetch-early 1|2) and the gate/up's early residual copy
# (--moe-fold-copy-x-early 1), and the q|k|v launch's L2 prefetch of the attention's keys (--kv-prefetch-max-seqs 8,
# also on the 0.3b bf16 and AWQ at batches 1 - 2) alternated with the default, three rounds; on an H200 also main's issue figures.
# From the repository root, carry [".device/pack"].
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
start=$(date +%s)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
ERNIE_GPU_TESTS="cuda_moe_awq_test cuda_backend_batching_test" timeout 100 tools/gpu-test run --no-peer > /tmp/tests.out 2>&1
echo "tests rc $? at $(( $(date +%s) - start )) s"
grep -E "PASSED|FAILED|passed|failed|Error|error:|Failure|Expected|Which is" /tmp/tests.out | tail -16
d=/tmp/ernie-gpu-pack
export LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
"$d/bin/ernie-make-model" /tmp/ernie-21b-a3b-awq --shape 21b-a3b --seed 1 --config-only --awq-group-size 128 \
  > /tmp/setup.out 2>&1
"$d/bin/ernie-make-model" /tmp/ernie-0.3b --shape 0.3b --seed 1 --config-only >> /tmp/setup.out 2>&1
"$d/bin/ernie-make-model" /tmp/ernie-0.3b-awq --shape 0.3b --seed 1 --config-only --awq-group-size 128 \
  >> /tmp/setup.out 2>&1
dense() {  # dense LABEL MODEL ARGS...: batch 1 and 2
  local label="$1" model="$2"; shift 2
  ms=$(timeout 60 "$d/bin/ernie-bench-cuda" --model "$model" --load-format dummy --check-tokens 0 \
    --batch-sizes 1,2 "$@" 2>&1 | grep -E '^ +[0-9]+ |rror' | awk '{printf "%s:%s ", $1, $4}')
  echo "dense [$label] $ms"
}
bench() {  # bench LABEL ARGS...
  local label="$1"; shift
  ms=$(timeout 60 "$d/bin/ernie-bench-cuda" --model /tmp/ernie-21b-a3b-awq --load-format dummy --check-tokens 0 \
    --batch-sizes 1 "$@" 2>&1 | grep -E '^ +[0-9]+ |rror' | awk '{printf "%s:%s ", $1, $4}')
  echo "moe [$label] $ms"
}
for round in 1 2 3; do
  [ $(( $(date +%s) - start )) -gt 120 ] && break
  bench "default r$round"
  bench "cluster 8 r$round" --moe-router-record-cluster 8
  bench "early 1 r$round" --moe-fold-prefetch-early 1
  bench "copy x early r$round" --moe-fold-copy-x-early 1
  bench "copy x early + early 1 r$round" --moe-fold-copy-x-early 1 --moe-fold-prefetch-early 1
  bench "kv prefetch r$round" --kv-prefetch-max-seqs 8
  dense "0.3b bf16 r$round" /tmp/ernie-0.3b
  dense "0.3b bf16 kv prefetch r$round" /tmp/ernie-0.3b --kv-prefetch-max-seqs 8
  dense "0.3b awq r$round" /tmp/ernie-0.3b-awq
  dense "0.3b awq kv prefetch r$round" /tmp/ernie-0.3b-awq --kv-prefetch-max-seqs 8
done
for kw in "1 8" "4 8" "2 4" "4 4" "2 6" "1 6" "8 8"; do
  [ $(( $(date +%s) - start )) -gt 165 ] && break
  set -- $kw
  bench "k $1 warps $2" --moe-awq-gemv-k-slices "$1" --moe-awq-gemv-cta-warps "$2"
done
bench "not lean" --moe-awq-gemv-lean 0
bench "not lean k 4 warps 8" --moe-awq-gemv-lean 0 --moe-awq-gemv-k-slices 4 --moe-awq-gemv-cta-warps 8
bench "default r4"
for args in "" "--moe-fold-copy-x-early 1 --moe-fold-prefetch-early 1"; do
  [ $(( $(date +%s) - start )) -gt 185 ] && break
  echo "== timeline [$args]"
  timeout 40 "$d/bin/ernie-bench-cuda" --model /tmp/ernie-21b-a3b-awq --load-format dummy --check-tokens 0 \
    --batch-sizes 1 --timeline-batches 1 $args 2>&1 | sed -n '/^timeline/,/first kernels/p' | cut -c1-150 | head -10
done
echo "A/B done at $(( $(date +%s) - start )) s"
if [[ "$gpu" == *H200* ]]; then
  bench "H200 batch 2, default" --batch-sizes 2
  bench "H200 routing launch" --moe-fold-routing 0
  ERNIE_AB_MODELS="bf16" ERNIE_AB_BATCHES=1,64,256 ERNIE_AB_ROUNDS=1 \
    ERNIE_AB_VARIANTS=";" timeout $(( 230 - $(date +%s) + start )) tools/gpu-test run --ab-before --no-tests \
    > /tmp/ab.out 2>&1
  echo "ab rc $? at $(( $(date +%s) - start )) s"
  grep -E "^==|^ +[0-9]+ " "$OUT/ab_before.txt" | head -20
  for shape in square_8192 wide_4096x14336; do
    [ $(( $(date +%s) - start )) -gt 235 ] && break
    timeout 12 "$d/bin/ernie-bench-gemv" --shape "$shape" --ms 1 2>&1 | grep -v '^{' | grep -v probe | tail -3
  done
fi
echo "done at $(( $(date +%s) - start )) s"
find "$OUT" -type f -delete
