#!/bin/bash
# Session 49, call 3 (either card): the lm_head at 16 - 256 rows, cuBLAS's default algorithm against every
# cuBLASLt candidate (the 0.3b's and the 21B-A3B's; at 33 - 64 rows the 0.3b's lm_head is cuBLAS's at 0.70 of
# its bytes' floor, NOTES.md v51) and the small-batch GEMM beside cuBLAS on the 0.3b's; then, on an H200 only,
# call2.sh (the issues' figures with the greedy tail). Between them, the int4 GEMV at m = 1 on issue 8's shapes,
# main against branch try/gemv-3-ctas (`tools/gpu-test before try/gemv-3-ctas`: its ernie-bench-gemv packed as
# ernie-bench-gemv-before), two rounds. Pack: ERNIE_PACK_ONLY="ernie-bench-cuda ernie-bench-gemv
# ernie-bench-gemm-algos"; carry [".device/pack"].
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
source tools/bench/cuda/device-call-lib.sh
echo "== lm_head: cuBLAS default against cuBLASLt's candidates"
timeout 150 "$d/bin/ernie-bench-gemm-algos" --shapes lm_head_0.3b,lm_head_21b --ms 16,32,48,64,128,256 \
  --candidates 16 --log /tmp/algos.jsonl > /dev/null 2> /tmp/algos.err
echo "rc $? ($(elapsed) s)"; tail -2 /tmp/algos.err
grep '"summary"' /tmp/algos.jsonl
cp /tmp/algos.jsonl "${OUT:-/tmp}/gemm-algos-lm-head.jsonl" 2>/dev/null
echo "== lm_head 0.3b: small-batch GEMM beside cuBLAS ($(elapsed) s)"
timeout 60 "$d/bin/ernie-bench-gemv" --shape lm_head_0.3b --ms 16,32,48,64 2>&1 | grep -E '^lm_head'
echo "== int4 GEMV at m = 1: main against three CTAs an SM (branch try/gemv-3-ctas, 80 registers) ($(elapsed) s)"
for r in 1 2; do
  for v in main 3ctas; do
    bin="$d/bin/ernie-bench-gemv"; [[ $v == 3ctas ]] && bin="$d/bin/ernie-bench-gemv-before"
    for shape in square_8192 wide_4096x14336; do
      timeout 40 "$bin" --shape $shape --ms 1 2>&1 | grep -E "^(square|wide)" | grep -v probe | sed "s/^/[$v r$r] /"
    done
  done
done
echo "lm_head and GEMV part done at $(elapsed) s"
[[ "$gpu" == *H200* ]] && ERNIE_SWEEP_LIMIT=$((480 - $(elapsed))) bash tools/bench/results/gpu-2026-12-07-v52/call2.sh
