#!/bin/bash
# Session 47's call1: v49's next-call.sh plus, on an H200, the wide decode attention kernel on the dense 0.3b at
# batch 1 (never measured on an H200; the H100s had it slower, NOTES.md v35).
# Prepared in session 46: Here: `tools/gpu-test before 14db31f` (no evict_first in the grouped expert
# GEMMs), then pack with ERNIE_PACK_ONLY="ernie-bench-cuda ernie-bench-gemv cuda_moe_test cuda_moe_awq_test";
# carry [".device/pack"]. On an H200 the issues' figures and the routing fold at batch 1 first (call1.sh's
# block); then the tests; then v49's bounded rule (evict_first only in tiles of up to 16 slots that alone read
# their expert's weights: b03776d) against 14db31f, two rounds, at the sizes v48 - v49 measured.
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
source tools/bench/cuda/device-call-lib.sh
make_model /tmp/dense --shape 0.3b; make_model /tmp/dense-awq --shape 0.3b --awq-group-size 128
make_model /tmp/moe-awq --shape 21b-a3b --awq-group-size 128; make_model /tmp/moe --shape 21b-a3b
b="$d/bin/ernie-bench-cuda" before="$d/bin/ernie-bench-cuda-before"
if [[ "$gpu" == *H200* ]]; then
  bench "0.3b bf16" "$b" /tmp/dense 1,64,256
  bench "0.3b awq" "$b" /tmp/dense-awq 1,64,256
  bench "moe awq" "$b" /tmp/moe-awq 1,16,64
  bench "moe awq" "$b" /tmp/moe-awq 256
  bench "moe bf16" "$b" /tmp/moe 1
  bench "moe awq routing launch" "$b" /tmp/moe-awq 1 --moe-fold-routing 0
  bench "moe awq routing fold" "$b" /tmp/moe-awq 1
  for r in 1 2; do
    bench "0.3b bf16 default r$r" "$b" /tmp/dense 1
    bench "0.3b bf16 wide attention r$r" "$b" /tmp/dense 1 --wide-decode-attention-max-pairs 2
  done
  for shape in square_8192 wide_4096x14336; do
    timeout 20 "$d/bin/ernie-bench-gemv" --shape "$shape" --ms 1 2>&1 | grep -v '^{' | grep -v probe | tail -2
  done
fi
for t in cuda_moe_test cuda_moe_awq_test; do
  r=$(ERNIE_TEST_DATA_DIR=$PWD/tests/data timeout 60 "$d/bin/$t" 2>&1 | grep -E "^\[  (PASSED|FAILED)|Failure" | head -4)
  echo "$t: $r ($(elapsed) s)"
done
for r in 1 2; do
  [[ $(elapsed) -gt 380 ]] && break
  bench "moe awq 64 none r$r" "$before" /tmp/moe-awq 64
  bench "moe awq 64 bounded r$r" "$b" /tmp/moe-awq 64
  bench "moe bf16 64 none r$r" "$before" /tmp/moe 64
  bench "moe bf16 64 bounded r$r" "$b" /tmp/moe 64
  bench "moe awq 256 none r$r" "$before" /tmp/moe-awq 256
  bench "moe awq 256 bounded r$r" "$b" /tmp/moe-awq 256
done
echo "done at $(elapsed) s"
