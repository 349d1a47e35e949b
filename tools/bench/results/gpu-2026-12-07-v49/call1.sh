#!/bin/bash
# Session 46, call 1: v48's next-call.sh, with the H200 block's 21B-A3B AWQ sizes split (v48 learned a
# three-size run with 256 passes 60 s before it prints). Carry [".device/pack"], packed after
# `tools/gpu-test before 14db31f` with ERNIE_PACK_ONLY="ernie-bench-cuda ernie-bench-gemv cuda_moe_test".
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
source tools/bench/cuda/device-call-lib.sh
make_model /tmp/dense --shape 0.3b; make_model /tmp/dense-awq --shape 0.3b --awq-group-size 128
make_model /tmp/moe-awq --shape 21b-a3b --awq-group-size 128; make_model /tmp/moe --shape 21b-a3b
b="$d/bin/ernie-bench-cuda"
if [[ "$gpu" == *H200* ]]; then  # the issues' figures
  bench "0.3b bf16" "$b" /tmp/dense 1,64,256
  bench "0.3b awq" "$b" /tmp/dense-awq 1,64,256
  bench "moe awq" "$b" /tmp/moe-awq 1,16,64
  bench "moe awq" "$b" /tmp/moe-awq 256
  bench "moe bf16" "$b" /tmp/moe 1
  for r in 1 2; do  # v43: the routing fold was measured on H100s only, and the cards disagreed before (v35)
    bench "moe awq routing launch r$r" "$b" /tmp/moe-awq 1 --moe-fold-routing 0
    bench "moe awq routing fold r$r" "$b" /tmp/moe-awq 1
  done
  for shape in square_8192 wide_4096x14336; do
    timeout 20 "$d/bin/ernie-bench-gemv" --shape "$shape" --ms 1 2>&1 | grep -v '^{' | grep -v probe | tail -2
  done
fi
r=$(ERNIE_TEST_DATA_DIR=$PWD/tests/data timeout 90 "$d/bin/cuda_moe_test" 2>&1 |
  grep -E "^\[  (PASSED|FAILED)|Failure" | head -4)
echo "cuda_moe_test: $r ($(elapsed) s)"
for r in 1 2; do
  bench "0.3b lm_head cublas r$r" "$b" /tmp/dense 16,32,64 --small-batch-lm-head 0
  bench "0.3b lm_head small-batch r$r" "$b" /tmp/dense 16,32,64 --small-batch-lm-head 1
done
before="$d/bin/ernie-bench-cuda-before"
for r in 1 2; do
  [[ $(elapsed) -gt 300 ]] && break
  bench "moe awq 256 before r$r" "$before" /tmp/moe-awq 256
  bench "moe awq 256 evict_first r$r" "$b" /tmp/moe-awq 256
  bench "moe bf16 64 before r$r" "$before" /tmp/moe 64
  bench "moe bf16 64 evict_first r$r" "$b" /tmp/moe 64
done
echo "done at $(elapsed) s"
