#!/bin/bash
# Session 46, call 2: evict_first only where a tile alone reads its expert's weights (the grouped expert
# GEMMs), against 14db31f (no evict_first; packed as ernie-bench-cuda-before), after call1 found evict_first
# on every tile slower at 21B-A3B AWQ 256 rows and bf16 64 rows. Carry [".device/pack"], packed with
# ERNIE_PACK_ONLY="ernie-bench-cuda cuda_moe_test cuda_moe_awq_test
# cuda_backend_parity_test".
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
source tools/bench/cuda/device-call-lib.sh
for t in cuda_moe_test cuda_moe_awq_test; do
  r=$(ERNIE_TEST_DATA_DIR=$PWD/tests/data timeout 60 "$d/bin/$t" 2>&1 | grep -E "^\[  (PASSED|FAILED)|Failure" | head -4)
  echo "$t: $r ($(elapsed) s)"
done
make_model /tmp/moe-awq --shape 21b-a3b --awq-group-size 128; make_model /tmp/moe --shape 21b-a3b
b="$d/bin/ernie-bench-cuda" before="$d/bin/ernie-bench-cuda-before"
bench "moe awq 64 none" "$before" /tmp/moe-awq 64
bench "moe awq 64 per-tile" "$b" /tmp/moe-awq 64
bench "moe bf16 64 none" "$before" /tmp/moe 64
bench "moe bf16 64 per-tile" "$b" /tmp/moe 64
bench "moe awq 256 none" "$before" /tmp/moe-awq 256
bench "moe awq 256 per-tile" "$b" /tmp/moe-awq 256
if [[ $(elapsed) -lt 190 ]]; then  # the lm_head's new default (17-row chunks) against the CPU, if time is left
  r=$(ERNIE_TEST_DATA_DIR=$PWD/tests/data timeout 40 "$d/bin/cuda_backend_parity_test" 2>&1 |
    grep -E "^\[  (PASSED|FAILED)|Failure" | head -4)
  echo "cuda_backend_parity_test: $r ($(elapsed) s)"
fi
echo "done at $(elapsed) s"
