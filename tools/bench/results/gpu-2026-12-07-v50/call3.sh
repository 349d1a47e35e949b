#!/bin/bash
# Session 47's call3: the policy operand in tiles of up to 16 slots (b03776d's code there), the plain copy in
# larger tiles (14db31f's code there); its tests, then against 14db31f at AWQ 64, then alone at AWQ 256.
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
source tools/bench/cuda/device-call-lib.sh
make_model /tmp/moe-awq --shape 21b-a3b --awq-group-size 128
b="$d/bin/ernie-bench-cuda" before="$d/bin/ernie-bench-cuda-before"
gtest cuda_moe_awq_test; gtest cuda_moe_test
bench "moe awq 64 tile-bound policy" "$b" /tmp/moe-awq 64
bench "moe awq 64 none" "$before" /tmp/moe-awq 64
bench "moe awq 256 tile-bound policy" "$b" /tmp/moe-awq 256
echo "done at $(elapsed) s"
