#!/bin/bash
# Session 48, call 1. Here: `tools/gpu-test before 14db31f` (no L2 policy in the grouped expert GEMMs),
# `tools/gpu-test variant v41 0cbebfc` (v41, the 0.3b's 64-row step at 0.768 - 0.772 ms on H100s) and
# `tools/gpu-test variant pre47 adf23e8` (main just before v47's evict_first on the small-batch GEMM's TMA
# weights, 0be05ce, and on the keys of steps of 16 or more items, cda762d), then pack with
# ERNIE_PACK_ONLY="ernie-bench-cuda cuda_moe_test cuda_moe_awq_test"; carry [".device/pack"].
#  A. On an H200: the 21B-A3B AWQ batch 1, four runs (issue 9: 1.4286 ms; v50 1.431).
#  B. v41 against main at 1 / 64 rows on this card, one round (call-h100.txt: level on an H100).
#  C. The knobs tuned on H100s, at the 21B-A3B AWQ batch 1 on this card, two rounds, each beside the default.
#  D. The same for the 0.3b bf16 at batches 1 and 64.
#  E. The MoE tests; F. v50's grouped-GEMM form against 14db31f at AWQ 64 / 256 (as time allows).
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
source tools/bench/cuda/device-call-lib.sh
make_model /tmp/dense --shape 0.3b; make_model /tmp/moe-awq --shape 21b-a3b --awq-group-size 128
b="$d/bin/ernie-bench-cuda" before="$d/bin/ernie-bench-cuda-before"
v41="$d/bin/ernie-bench-cuda-v41" pre47="$d/bin/ernie-bench-cuda-pre47"
echo "== A"
for r in 1 2 3 4; do bench "moe awq batch 1 r$r" "$b" /tmp/moe-awq 1; done
echo "== B"
# (call-h100.txt found no regression between v41 and main on one H100; one round here for this card.)
bench "0.3b bf16 v41" "$v41" /tmp/dense 1,64
bench "0.3b bf16 main" "$b" /tmp/dense 1,64
echo "== C"
moe_knobs=("--moe-awq-gemv-k-slices 1" "--moe-awq-gemv-k-slices 4" "--moe-awq-gemv-lean 0"
  "--moe-fold-prefetch-down 1" "--moe-fold-prefetch-shared 0" "--kv-prefetch-max-seqs 0"
  "--moe-router-record-cluster 8" "--decode-linear-single-wave 0" "--wide-decode-attention-max-pairs 0"
  "--moe-awq-gemv-cta-warps 4")
for r in 1 2; do
  bench "moe awq 1 default r$r" "$b" /tmp/moe-awq 1
  for k in "${moe_knobs[@]}"; do
    # shellcheck disable=SC2086  # the knob is a flag and its value
    bench "moe awq 1 $k r$r" "$b" /tmp/moe-awq 1 $k
  done
done
echo "== D"
dense_knobs=("--persistent-decode 1" "--decode-linear-single-wave 0" "--kv-prefetch-max-seqs 0"
  "--unsplit-attention-max-context 0" "--small-batch-gemm-max-rows 32" "--small-batch-lm-head-max-rows 64"
  "--cluster-decode-max-rows 64" "--norm-epilogues 0" "--max-attention-splits 1")
for r in 1 2; do
  bench "0.3b bf16 default r$r" "$b" /tmp/dense 1,64
  for k in "${dense_knobs[@]}"; do
    # shellcheck disable=SC2086
    bench "0.3b bf16 $k r$r" "$b" /tmp/dense 1,64 $k
  done
done
echo "== timelines (main, this card)"
timeout 120 "$b" --model /tmp/moe-awq --load-format dummy --check-tokens 0 --batch-sizes 1 --timeline-batches 1 2>&1 |
  sed -n '/^timeline:/,$p' | head -14
timeout 120 "$b" --model /tmp/dense --load-format dummy --check-tokens 0 --batch-sizes 1,64 --timeline-batches 1,64 \
  2>&1 | sed -n '/^timeline:/,$p' | head -34
echo "== E"
gtest cuda_moe_awq_test; gtest cuda_moe_test
echo "== F"
for r in 1 2; do
  [[ $(elapsed) -gt 360 ]] && break
  bench "moe awq 64 none r$r" "$before" /tmp/moe-awq 64
  bench "moe awq 64 v50 r$r" "$b" /tmp/moe-awq 64
  bench "moe awq 256 none r$r" "$before" /tmp/moe-awq 256
  bench "moe awq 256 v50 r$r" "$b" /tmp/moe-awq 256
done
echo "done at $(elapsed) s"
