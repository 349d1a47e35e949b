#!/bin/bash
# Session 43, call 1: on an H200 first the issues' figures (the 0.3b bf16 and AWQ at 1, 64, 256; the 21B-A3B
# AWQ at 1, 16, 64, 256 and bf16 at 1, 256; the int4 GEMV's two large shapes), then the kept-off options
# alternated with the default (three rounds), the grouped GEMV's launch shapes, then cuda_moe_awq_test and cuda_backend_batching_test.
# On an H100 the A/B first. From the repository root, carry [".device/pack"].
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
start=$(date +%s)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
d=/tmp/ernie-gpu-pack
mkdir -p "$d" && tar -C "$d" -xzf .device/pack/pack.tar.gz || echo "no pack"
export LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mk() { "$d/bin/ernie-make-model" "$@" --seed 1 --config-only >> /tmp/setup.out 2>&1; }
mk /tmp/moe-awq --shape 21b-a3b --awq-group-size 128; mk /tmp/moe --shape 21b-a3b
mk /tmp/d --shape 0.3b; mk /tmp/d-awq --shape 0.3b --awq-group-size 128
run() {  # run LABEL MODEL BATCHES ARGS...: batch:step-ms pairs
  local label="$1" model="$2" batches="$3"; shift 3
  ms=$(timeout 90 "$d/bin/ernie-bench-cuda" --model "$model" --load-format dummy --check-tokens 0 \
    --batch-sizes "$batches" "$@" 2>&1 | grep -E '^ +[0-9]+ |rror' | awk '{printf "%s:%s ", $1, $4}')
  echo "[$label] $ms"
}
figures() {
  run "0.3b bf16" /tmp/d 1,64,256
  run "0.3b awq" /tmp/d-awq 1,64,256
  run "moe awq" /tmp/moe-awq 1,16,64,256
  run "moe bf16" /tmp/moe 1,256
  for shape in square_8192 wide_4096x14336; do
    timeout 20 "$d/bin/ernie-bench-gemv" --shape "$shape" --ms 1 2>&1 | grep -v '^{' | grep -v probe | tail -4
  done
  echo "figures done at $(( $(date +%s) - start )) s"
}
ab() {
  for round in 1 2 3; do
    [ $(( $(date +%s) - start )) -gt 240 ] && break
    run "moe default r$round" /tmp/moe-awq 1
    run "moe early 1 r$round" /tmp/moe-awq 1 --moe-fold-prefetch-early 1
    run "moe copy x early r$round" /tmp/moe-awq 1 --moe-fold-copy-x-early 1
    run "moe cluster 8 r$round" /tmp/moe-awq 1 --moe-router-record-cluster 8
    run "moe no shared prefetch r$round" /tmp/moe-awq 1 --moe-fold-prefetch-shared 0
    run "0.3b bf16 r$round" /tmp/d 1,2
    run "0.3b bf16 no kv prefetch r$round" /tmp/d 1,2 --kv-prefetch-max-seqs 0
  done
  echo "ab done at $(( $(date +%s) - start )) s"
}
sweep() {  # the grouped int4 GEMV's launch shape at batch 1 under the fold, and the routing launch
  for kw in "1 8" "4 8" "2 4" "4 4" "2 6" "8 8"; do
    [ $(( $(date +%s) - start )) -gt 300 ] && break
    set -- $kw
    run "moe k $1 warps $2" /tmp/moe-awq 1 --moe-awq-gemv-k-slices "$1" --moe-awq-gemv-cta-warps "$2"
  done
  run "moe routing launch" /tmp/moe-awq 1 --moe-fold-routing 0
  run "moe default r4" /tmp/moe-awq 1
  echo "sweep done at $(( $(date +%s) - start )) s"
}
if [[ "$gpu" == *H200* ]]; then figures; ab; sweep; else ab; figures; fi
ERNIE_GPU_TESTS="cuda_moe_awq_test cuda_backend_batching_test" timeout 100 tools/gpu-test run --no-peer > /tmp/tests.out 2>&1
echo "tests rc $? at $(( $(date +%s) - start )) s"
grep -E "PASSED|FAILED|passed|failed|Error|error:|Failure" /tmp/tests.out | tail -8
echo "done at $(( $(date +%s) - start )) s"
find "$OUT" -type f -delete
