#!/bin/bash
# Session 39, call 5: the folded routing with the down launch reading the published tile experts, A/B first
# (two rounds), then cuda_moe_awq_test, then the timelines.
# Run from the repository root (the device tool starts there).
start=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 60 tools/gpu-test run --no-tests > /tmp/setup.out 2>&1  # unpacks the pack
d=/tmp/ernie-gpu-pack
export LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
"$d/bin/ernie-make-model" /tmp/ernie-21b-a3b-awq --shape 21b-a3b --seed 1 --config-only --awq-group-size 128 \
  >> /tmp/setup.out 2>&1
bench() {
  ms=$(timeout 60 "$d/bin/ernie-bench-cuda" --model /tmp/ernie-21b-a3b-awq --load-format dummy --check-tokens 0 \
    --batch-sizes 1 --moe-fold-routing "$1" 2>&1 | grep -E '^ +[0-9]+ ' | awk '{printf "%s:%s ", $1, $4}')
  echo "moe [fold $1 r$2] $ms"
}
for round in 1 2; do bench 0 $round; bench 1 $round; done
ERNIE_GPU_TESTS="cuda_moe_awq_test" timeout 120 tools/gpu-test run --no-peer > /tmp/tests.out 2>&1
echo "tests rc $? at $(( $(date +%s) - start )) s"
grep -E "PASSED|FAILED|folded routing" /tmp/tests.out | head -8
for f in 0 1; do
  echo "== timeline, fold $f"
  timeout 60 "$d/bin/ernie-bench-cuda" --model /tmp/ernie-21b-a3b-awq --load-format dummy --check-tokens 0 \
    --batch-sizes 1 --timeline-batches 1 --moe-fold-routing $f 2>&1 | sed -n '/^timeline/,/first kernels/p' | cut -c1-150 | head -9
done
echo "done at $(( $(date +%s) - start )) s"
find "$OUT" -type f -delete
