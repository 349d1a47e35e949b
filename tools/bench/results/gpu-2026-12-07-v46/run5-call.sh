#!/bin/bash
# Session 43, call 5: the key prefetch on the small-batch GEMM's q|k|v launch (the warp form, an item a CTA):
# cuda_backend_batching_test (its key-prefetch test now also runs 16-token chunks and a 12-sequence decode step
# there) and cuda_moe_awq_test; the 0.3b bf16 and AWQ at 1, 16, 64 with --kv-prefetch-max-seqs 64 against the
# default (1), three rounds alternated; a 64-row timeline each way. On an H200 also the issues' figures.
# From the repository root, carry [".device/pack"].
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
start=$(date +%s)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
d=/tmp/ernie-gpu-pack
mkdir -p "$d" && tar -C "$d" -xzf .device/pack/pack.tar.gz || echo "no pack"
export LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mk() { "$d/bin/ernie-make-model" "$@" --seed 1 --config-only >> /tmp/setup.out 2>&1; }
run() {  # run LABEL MODEL BATCHES ARGS...: batch:step-ms pairs
  local label="$1" model="$2" batches="$3"; shift 3
  ms=$(timeout 90 "$d/bin/ernie-bench-cuda" --model "$model" --load-format dummy --check-tokens 0 \
    --batch-sizes "$batches" "$@" 2>&1 | grep -E '^ +[0-9]+ |rror' | awk '{printf "%s:%s ", $1, $4}')
  echo "[$label] $ms"
}
ERNIE_GPU_TESTS="cuda_backend_batching_test cuda_moe_awq_test" timeout 150 tools/gpu-test run --no-peer \
  > /tmp/tests.out 2>&1
echo "tests rc $? at $(( $(date +%s) - start )) s"
grep -E "PASSED|FAILED|passed|failed|Error|error:|Failure|Expected|Which is" /tmp/tests.out | head -20
mk /tmp/d --shape 0.3b; mk /tmp/d-awq --shape 0.3b --awq-group-size 128
for round in 1 2 3; do
  run "0.3b bf16 r$round" /tmp/d 1,16,64
  run "0.3b bf16 kv prefetch 64 r$round" /tmp/d 1,16,64 --kv-prefetch-max-seqs 64
  run "0.3b awq r$round" /tmp/d-awq 1,16,64
  run "0.3b awq kv prefetch 64 r$round" /tmp/d-awq 1,16,64 --kv-prefetch-max-seqs 64
done
for args in "" "--kv-prefetch-max-seqs 64"; do
  echo "== timeline 64 [$args]"
  timeout 40 "$d/bin/ernie-bench-cuda" --model /tmp/d --load-format dummy --check-tokens 0 \
    --batch-sizes 64 --timeline-batches 64 $args 2>&1 | sed -n '/^timeline/,/first kernels/p' | cut -c1-150 | head -12
done
echo "A/B done at $(( $(date +%s) - start )) s"
if [[ "$gpu" == *H200* ]]; then
  mk /tmp/moe-awq --shape 21b-a3b --awq-group-size 128; mk /tmp/moe --shape 21b-a3b
  run "0.3b bf16" /tmp/d 1,64,256
  run "0.3b awq" /tmp/d-awq 1,64,256
  run "moe awq" /tmp/moe-awq 1,16,64,256
  run "moe bf16" /tmp/moe 1,256
  for shape in square_8192 wide_4096x14336; do
    timeout 20 "$d/bin/ernie-bench-gemv" --shape "$shape" --ms 1 2>&1 | grep -v '^{' | grep -v probe | tail -2
  done
fi
echo "done at $(( $(date +%s) - start )) s"
find "$OUT" -type f -delete
