#!/bin/bash
# Session 48, the call for an H100 (no H200 came), packed with the variants v41 (0cbebfc),
# pre47 (adf23e8) and before (14db31f). The parts that do not need the
# H200: the 0.3b's 64-row regression bisected (v41 = 0cbebfc, pre47 = adf23e8, main, main with cda762d's
# keys turned back) with a timeline of each at 64 rows; the MoE tests; v50's grouped-GEMM form (never timed
# as one binary) against 14db31f at AWQ 64 / 256.
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
source tools/bench/cuda/device-call-lib.sh
make_model /tmp/dense --shape 0.3b; make_model /tmp/moe-awq --shape 21b-a3b --awq-group-size 128
b="$d/bin/ernie-bench-cuda" before="$d/bin/ernie-bench-cuda-before"
v41="$d/bin/ernie-bench-cuda-v41" pre47="$d/bin/ernie-bench-cuda-pre47"
echo "== B"
for r in 1 2 3; do
  bench "0.3b bf16 v41 r$r" "$v41" /tmp/dense 1,64
  bench "0.3b bf16 pre47 r$r" "$pre47" /tmp/dense 1,64
  bench "0.3b bf16 main r$r" "$b" /tmp/dense 1,64
  bench "0.3b bf16 main --stream-kv-min-items 0 r$r" "$b" /tmp/dense 64 --stream-kv-min-items 0
done
echo "== timelines at 64 rows"
for v in v41 pre47 main; do
  bin="$d/bin/ernie-bench-cuda-$v"; [[ $v == main ]] && bin=$b
  echo "-- $v"
  timeout 120 "$bin" --model /tmp/dense --load-format dummy --check-tokens 0 --batch-sizes 64 \
    --timeline-batches 64 2>&1 | sed -n '/^timeline:/,/^$/p' | head -16
done
echo "== E"
gtest cuda_moe_awq_test; gtest cuda_moe_test
echo "== F"
for r in 1 2; do
  [[ $(elapsed) -gt 380 ]] && break
  bench "moe awq 64 none r$r" "$before" /tmp/moe-awq 64
  bench "moe awq 64 v50 r$r" "$b" /tmp/moe-awq 64
  bench "moe awq 256 none r$r" "$before" /tmp/moe-awq 256
  bench "moe awq 256 v50 r$r" "$b" /tmp/moe-awq 256
done
echo "done at $(elapsed) s"
