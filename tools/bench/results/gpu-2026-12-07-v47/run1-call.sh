#!/bin/bash
# Session 44, call 1 (the wide decode attention kernel at 8 warps, `--wide-decode-attention-warps 8`): on an H200
# first the issues' figures (v46's run6-call.sh, ~60 s); then the attention and batching tests (the 8-warp kernel
# against the double reference and the other kernels), then greedy step ms, three rounds alternated: the 0.3b bf16
# at batch 1 and 2 with the four-warp kernel (default), the wide kernel of 16 and of 8 warps; the 21B-A3B AWQ at
# batch 1 and 2 with 16 (default) and 8; timelines of the 0.3b at batch 1 for each. From the repository root, carry
# [".device/pack"].
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
start=$(date +%s)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
[[ "$gpu" == *H200* ]] && bash tools/bench/results/gpu-2026-12-07-v46/run6-call.sh
d=/tmp/ernie-gpu-pack
mkdir -p "$d" && tar -C "$d" -xzf .device/pack/pack.tar.gz || echo "no pack"
export LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for t in cuda_attention_test cuda_backend_batching_test; do
  echo "== $t"
  ERNIE_TEST_DATA_DIR=$PWD/tests/data timeout 120 "$d/bin/$t" 2>&1 | grep -E "^\[  (PASSED|FAILED)|Failure|mmw8" | head -12
done
echo "tests done at $(( $(date +%s) - start )) s"
mk() { "$d/bin/ernie-make-model" "$@" --seed 1 --config-only >> /tmp/setup.out 2>&1; }
mk /tmp/d --shape 0.3b; mk /tmp/moe-awq --shape 21b-a3b --awq-group-size 128
run() {  # run LABEL MODEL BATCHES ARGS...: batch:step-ms pairs
  local label="$1" model="$2" batches="$3"; shift 3
  ms=$(timeout 60 "$d/bin/ernie-bench-cuda" --model "$model" --load-format dummy --check-tokens 0 \
    --batch-sizes "$batches" "$@" 2>&1 | grep -E '^ +[0-9]+ |rror' | awk '{printf "%s:%s ", $1, $4}')
  echo "[$label] $ms"
}
for r in 1 2 3; do
  run "0.3b bf16 four-warp r$r" /tmp/d 1,2
  run "0.3b bf16 wide 16 r$r" /tmp/d 1,2 --wide-decode-attention-max-pairs 4
  run "0.3b bf16 wide 8 r$r" /tmp/d 1,2 --wide-decode-attention-max-pairs 4 --wide-decode-attention-warps 8
  run "moe awq wide 16 r$r" /tmp/moe-awq 1,2
  run "moe awq wide 8 r$r" /tmp/moe-awq 1,2 --wide-decode-attention-warps 8
  [[ $(( $(date +%s) - start )) -gt 400 ]] && break
done
for a in "" "--wide-decode-attention-max-pairs 4 --wide-decode-attention-warps 8"; do
  echo "== timeline 1 [$a]"
  timeout 60 "$d/bin/ernie-bench-cuda" --model /tmp/d --load-format dummy --check-tokens 0 --batch-sizes 1 \
    --timeline-batches 1 $a 2>&1 | grep -A10 '^timeline:' | head -10
done
echo "done at $(( $(date +%s) - start )) s"
find "$OUT" -type f -delete
