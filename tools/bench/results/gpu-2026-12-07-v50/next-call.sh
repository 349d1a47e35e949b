#!/bin/bash
# Prepared for session 48, NOT RUN. Here: `tools/gpu-test before 14db31f` (no L2 policy in the grouped expert
# GEMMs) and `tools/gpu-test variant v41 0cbebfc` (main at v41, when the 0.3b's 64-row step measured 0.768 -
# 0.772 ms on an H100), then pack with ERNIE_PACK_ONLY="ernie-bench-cuda cuda_moe_test cuda_moe_awq_test";
# carry [".device/pack"]. On an H200 first the 21B-A3B AWQ batch 1 in three runs (issue 9: 1.4286 ms; v50 1.431).
# Then v41 against main at 64 rows (v50: 0.768 on an H200 where v35 had 0.729), with main's one flag that
# turns back a change since v41 at 64 rows (v47's evict_first keys); the MoE tests, and v50's
# grouped-GEMM form (the policy operand in tiles of up to 16 slots, plain copies in larger ones) against
# 14db31f at AWQ 64 / 256, two rounds.
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
source tools/bench/cuda/device-call-lib.sh
make_model /tmp/dense --shape 0.3b; make_model /tmp/moe-awq --shape 21b-a3b --awq-group-size 128
b="$d/bin/ernie-bench-cuda" before="$d/bin/ernie-bench-cuda-before" v41="$d/bin/ernie-bench-cuda-v41"
if [[ "$gpu" == *H200* ]]; then
  for r in 1 2 3; do bench "moe awq batch 1 r$r" "$b" /tmp/moe-awq 1; done
fi
for r in 1 2; do
  bench "0.3b bf16 v41 r$r" "$v41" /tmp/dense 1,64
  bench "0.3b bf16 main r$r" "$b" /tmp/dense 1,64
  bench "0.3b bf16 main, keys without evict_first r$r" "$b" /tmp/dense 64 --stream-kv-min-items 0
done
gtest cuda_moe_awq_test; gtest cuda_moe_test
for r in 1 2; do
  [[ $(elapsed) -gt 300 ]] && break
  bench "moe awq 64 none r$r" "$before" /tmp/moe-awq 64
  bench "moe awq 64 v50 r$r" "$b" /tmp/moe-awq 64
  bench "moe awq 256 none r$r" "$before" /tmp/moe-awq 256
  bench "moe awq 256 v50 r$r" "$b" /tmp/moe-awq 256
done
echo "done at $(elapsed) s"
