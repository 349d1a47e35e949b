#!/usr/bin/env bash
# Session 31 (default now 2): the MoE tests, then why this tree's 21B-A3B AWQ batch-1 step is ~2% slower than e947a74's at
# --moe-early-shared 0 (run 4: 1.838 against 1.800 ms): e947a74, this tree, and this tree without
# the one-token top-k's `#pragma unroll 8`, each at early-shared 0 and 2, alternating, 3 rounds.
set -u
start=$SECONDS
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
ERNIE_GPU_TESTS="cuda_moe_awq_test cuda_moe_test cuda_backend_batching_test cuda_overlapped_steps_test" \
  timeout 120 tools/gpu-test run --no-peer > "$OUT/gpu-test.log" 2>&1
echo "gpu-test rc=$? at $((SECONDS - start)) s"
grep -E '^=== |PASSED|FAILED|passed|failed' "$OUT/gpu-test.log" | tail -12
ERNIE_AB_MODELS="moe_awq" ERNIE_AB_MOE_BATCHES="1" ERNIE_AB_ROUNDS=1 timeout 100 tools/gpu-test run --ab-before --no-tests > "$OUT/ab1.log" 2>&1
echo "ab1 rc=$? at $((SECONDS - start)) s"; grep -A2 "^== " "$OUT/ab1.log" | grep -v "^--"
export LD_LIBRARY_PATH=/tmp/ernie-gpu-pack/lib:${LD_LIBRARY_PATH:-}
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do [ -d "$d" ] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"; done
pack=/tmp/ernie-gpu-pack/bin
cp .device/variant/ernie-bench-cuda-nounroll $pack/ && chmod +x $pack/ernie-bench-cuda-nounroll
for round in 1 2 3; do
  for v in before:0 head:0 head:2 head:3 nounroll:0 nounroll:2; do
    [ $((SECONDS - start)) -gt 330 ] && break 2
    name=${v%%:*}; mode=${v##*:}
    case $name in before) bin=$pack/ernie-bench-cuda-before; extra="" ;; head) bin=$pack/ernie-bench-cuda; extra="--moe-early-shared $mode" ;;
      nounroll) bin=$pack/ernie-bench-cuda-nounroll; extra="--moe-early-shared $mode" ;; esac
    echo "== $name early-shared $mode round $round"
    timeout 45 $bin --model /tmp/ernie-21b-a3b-awq --load-format dummy $extra --check-tokens 0 --batch-sizes 1 2>&1 | grep -E '^ +[0-9]+ '
  done
done > "$OUT/variants.txt" 2>&1
echo "done at $((SECONDS - start)) s"; cat "$OUT/variants.txt"
