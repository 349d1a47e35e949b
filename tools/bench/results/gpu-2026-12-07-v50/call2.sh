#!/bin/bash
# Session 47's call2: the grouped expert GEMMs with plain copies where a tile does not take evict_first (call1
# on the H200: the explicit evict_normal policy of b03776d cost 3.6% at 256 rows), their tests, then against
# 14db31f (no evict_first) at AWQ 256 and 64, one round, alternated.
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
source tools/bench/cuda/device-call-lib.sh
make_model /tmp/moe-awq --shape 21b-a3b --awq-group-size 128
b="$d/bin/ernie-bench-cuda" before="$d/bin/ernie-bench-cuda-before"
for t in cuda_moe_awq_test cuda_moe_test; do
  r=$(ERNIE_TEST_DATA_DIR=$PWD/tests/data timeout 60 "$d/bin/$t" 2>&1 | grep -E "^\[  (PASSED|FAILED)|Failure" | head -4)
  echo "$t: $r ($(elapsed) s)"
done
bench "moe awq 256 none" "$before" /tmp/moe-awq 256
bench "moe awq 256 plain copies" "$b" /tmp/moe-awq 256
bench "moe awq 64 none" "$before" /tmp/moe-awq 64
bench "moe awq 64 plain copies" "$b" /tmp/moe-awq 64
echo "done at $(elapsed) s"
