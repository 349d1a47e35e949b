#!/bin/bash
# Session 43, call 3 (after run1 dropped the attention + o_proj launch). On an H200: the issues' figures
# (the 0.3b bf16 and AWQ at 1, 64, 256; the 21B-A3B AWQ at 1, 16, 64, 256 and bf16 at 1, 256; the int4
# GEMV's two large shapes), the kept-off MoE options alternated with the default (two rounds), the grouped
# GEMV's launch shapes and the routing launch, the 0.3b's key prefetch, then cuda_moe_awq_test and
# cuda_backend_batching_test. On an H100 only the MoE A/B and launch shapes.
# From the repository root, carry [".device/pack"].
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
start=$(date +%s)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
d=/tmp/ernie-gpu-pack
mkdir -p "$d" && tar -C "$d" -xzf .device/pack/pack.tar.gz || echo "no pack"
export LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mk() { "$d/bin/ernie-make-model" "$@" --seed 1 --config-only >> /tmp/setup.out 2>&1; }
mk /tmp/d --shape 0.3b
run() {  # run LABEL MODEL BATCHES ARGS...: batch:step-ms pairs
  local label="$1" model="$2" batches="$3"; shift 3
  ms=$(timeout 90 "$d/bin/ernie-bench-cuda" --model "$model" --load-format dummy --check-tokens 0 \
    --batch-sizes "$batches" "$@" 2>&1 | grep -E '^ +[0-9]+ |rror' | awk '{printf "%s:%s ", $1, $4}')
  echo "[$label] $ms"
}
figures() {
  mk /tmp/moe-awq --shape 21b-a3b --awq-group-size 128; mk /tmp/moe --shape 21b-a3b
  mk /tmp/d-awq --shape 0.3b --awq-group-size 128
  run "0.3b bf16" /tmp/d 1,64,256
  run "0.3b awq" /tmp/d-awq 1,64,256
  run "moe awq" /tmp/moe-awq 1,16,64,256
  run "moe bf16" /tmp/moe 1,256
  for shape in square_8192 wide_4096x14336; do
    timeout 20 "$d/bin/ernie-bench-gemv" --shape "$shape" --ms 1 2>&1 | grep -v '^{' | grep -v probe | tail -4
  done
  echo "figures done at $(( $(date +%s) - start )) s"
}
tests() {
  ERNIE_GPU_TESTS="cuda_moe_awq_test cuda_backend_batching_test" timeout 120 tools/gpu-test run --no-peer \
    > /tmp/tests.out 2>&1
  echo "tests rc $? at $(( $(date +%s) - start )) s"
  grep -E "PASSED|FAILED|passed|failed|Error|error:|Failure|Expected|Which is" /tmp/tests.out | head -20
}
dense_ab() {
  for round in 1 2; do
    run "0.3b default r$round" /tmp/d 1,2
    run "0.3b no kv prefetch r$round" /tmp/d 1,2 --kv-prefetch-max-seqs 0
  done
}
moe_ab() {
  for round in 1 2; do
    [ $(( $(date +%s) - start )) -gt 300 ] && break
    run "moe default r$round" /tmp/moe-awq 1
    run "moe early 1 r$round" /tmp/moe-awq 1 --moe-fold-prefetch-early 1
    run "moe copy x early r$round" /tmp/moe-awq 1 --moe-fold-copy-x-early 1
    run "moe cluster 8 r$round" /tmp/moe-awq 1 --moe-router-record-cluster 8
    run "moe no shared prefetch r$round" /tmp/moe-awq 1 --moe-fold-prefetch-shared 0
  done
  for kw in "1 8" "4 8" "2 4" "4 4"; do
    [ $(( $(date +%s) - start )) -gt 360 ] && break
    set -- $kw
    run "moe k $1 warps $2" /tmp/moe-awq 1 --moe-awq-gemv-k-slices "$1" --moe-awq-gemv-cta-warps "$2"
  done
  run "moe routing launch" /tmp/moe-awq 1 --moe-fold-routing 0
  echo "moe A/B done at $(( $(date +%s) - start )) s"
}
if [[ "$gpu" == *H200* ]]; then figures; moe_ab; dense_ab; tests; else mk /tmp/moe-awq --shape 21b-a3b --awq-group-size 128; moe_ab; fi
echo "done at $(( $(date +%s) - start )) s"
find "$OUT" -type f -delete
