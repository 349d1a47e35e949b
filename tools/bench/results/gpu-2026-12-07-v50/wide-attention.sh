#!/bin/bash
# Session 47: on an H200 only, the wide decode attention kernel on the dense 0.3b at batch 1, two rounds
# alternated. Never measured on an H200; on H100s it was slower for the 0.3b (0.502 against 0.482 ms, NOTES.md
# v35), so dense models default to 0. Run after v49's next-call.sh in the same call, with the same pack.
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
source tools/bench/cuda/device-call-lib.sh
[[ "$gpu" == *H200* ]] || exit 0
[[ -d /tmp/dense ]] || make_model /tmp/dense --shape 0.3b
for r in 1 2; do
  bench "0.3b bf16 default r$r" "$d/bin/ernie-bench-cuda" /tmp/dense 1
  bench "0.3b bf16 wide attention r$r" "$d/bin/ernie-bench-cuda" /tmp/dense 1 --wide-decode-attention-max-pairs 2
done
