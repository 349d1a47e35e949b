#!/bin/bash
# Session 43, call 7 (review fix: the bf16 decode linear asks for the attention's keys after its own first weight
# requests, not before them): the batching test's key-prefetch and decode-step cases, then the 0.3b bf16 at
# batch 1 and 2 with the key prefetch off (0) and on (the default, 1), three rounds alternated.
# From the repository root, carry [".device/pack"].
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
start=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
d=/tmp/ernie-gpu-pack
mkdir -p "$d" && tar -C "$d" -xzf .device/pack/pack.tar.gz || echo "no pack"
export LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
ERNIE_TEST_DATA_DIR=$PWD/tests/data timeout 60 "$d/bin/cuda_backend_batching_test" \
  --gtest_filter='*KeyPrefetch*:*DecodeStep*:*SplitKv*' 2>&1 | grep -E "^\[  (PASSED|FAILED)|Failure" | head -8
"$d/bin/ernie-make-model" /tmp/d --shape 0.3b --seed 1 --config-only > /dev/null 2>&1
for round in 1 2 3; do
  for prefetch in 0 1; do
    ms=$(timeout 40 "$d/bin/ernie-bench-cuda" --model /tmp/d --load-format dummy --check-tokens 0 --batch-sizes 1,2 \
      --kv-prefetch-max-seqs $prefetch 2>&1 | grep -E '^ +[0-9]+ |rror' | awk '{printf "%s:%s ", $1, $4}')
    echo "[0.3b bf16, key prefetch $prefetch, r$round] $ms"
  done
done
echo "done at $(( $(date +%s) - start )) s"
find "$OUT" -type f -delete
