#!/bin/bash
# Session 47: run after v49's next-call.sh in the same call, with the same pack.
# 1. The 21B-A3B's lm_head (hidden 2,560) at 16 rows on cuBLAS against the small-batch GEMM, the default since
#    v49 (measured there on the 0.3b only, hidden 1,024), any card, two rounds alternated.
# 2. On an H200 only, the wide decode attention kernel on the dense 0.3b at batch 1, two rounds alternated.
#    Never measured on an H200; on H100s it was slower for the 0.3b (0.502 against 0.482 ms, NOTES.md v35),
#    so dense models default to 0.
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
source tools/bench/cuda/device-call-lib.sh
b="$d/bin/ernie-bench-cuda"
[[ -d /tmp/moe-awq ]] || make_model /tmp/moe-awq --shape 21b-a3b --awq-group-size 128
for r in 1 2; do
  bench "moe awq 16 lm_head cublas r$r" "$b" /tmp/moe-awq 16 --small-batch-lm-head-max-rows 0
  bench "moe awq 16 lm_head small-batch r$r" "$b" /tmp/moe-awq 16
done
[[ "$gpu" == *H200* ]] || exit 0
[[ -d /tmp/dense ]] || make_model /tmp/dense --shape 0.3b
for r in 1 2; do
  bench "0.3b bf16 default r$r" "$b" /tmp/dense 1
  bench "0.3b bf16 wide attention r$r" "$b" /tmp/dense 1 --wide-decode-attention-max-pairs 2
done
echo "done at $(elapsed) s"
