#!/bin/bash
# Session 40, call 3: main's figures (a5243c2): the 0.3b bf16 and AWQ at batches 1 / 16 / 64 / 256, the
# 21B-A3B AWQ at 1 and 16 (fold on by default), the int4 GEMV on the large shapes.
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1  # the repository root
start=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
ERNIE_AB_MODELS="bf16 awq moe_awq" ERNIE_AB_BATCHES=1,16,64,256 ERNIE_AB_MOE_BATCHES=1,16 ERNIE_AB_ROUNDS=1 \
  ERNIE_AB_VARIANTS=";" timeout 200 tools/gpu-test run --ab-before --no-tests > /tmp/ab.out 2>&1
echo "ab rc $? at $(( $(date +%s) - start )) s"
tail -2 /tmp/ab.out
grep -E "^==|^ +[0-9]+ " "$OUT/ab_before.txt" | head -40
d=/tmp/ernie-gpu-pack
export LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for shape in square_8192 wide_4096x14336; do
  timeout 40 "$d/bin/ernie-bench-gemv" --shape "$shape" --ms 1,8 2>&1 | grep -v '^{' | tail -6
done
echo "done at $(( $(date +%s) - start )) s"
find "$OUT" -type f -delete
