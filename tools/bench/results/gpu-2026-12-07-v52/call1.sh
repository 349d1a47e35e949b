#!/bin/bash
# Session 49, call 1: the greedy tail (NOTES.md v51, applied on main's tree here) on a GPU for the first time:
# the sampler, overlapped-steps and batching tests, memcheck of the sampler's greedy tests, then main (the
# variant `base`, fcac4bd's code) against the tree at the 0.3b bf16 1 / 64 / 256 and the 21B-A3B AWQ 1, three
# rounds alternated; on an H200 then issue 8's GEMV k split and a sweep of the launch knobs tuned on H100s.
# Here: ERNIE_PACK_ONLY="ernie-bench-cuda ernie-bench-gemv cuda_device_sampler_test cuda_overlapped_steps_test
# cuda_backend_batching_test" tools/gpu-test pack; carry [".device/pack"].
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
source tools/bench/cuda/device-call-lib.sh
make_model /tmp/dense --shape 0.3b; make_model /tmp/moe-awq --shape 21b-a3b --awq-group-size 128
b="$d/bin/ernie-bench-cuda" base="$d/bin/ernie-bench-cuda-base"
echo "== tests"
gtest cuda_device_sampler_test; gtest cuda_overlapped_steps_test; gtest cuda_backend_batching_test
ERNIE_TEST_DATA_DIR=$PWD/tests/data timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 \
  "$d/bin/cuda_device_sampler_test" --gtest_filter='*Greedy*' > /tmp/memcheck.log 2>&1
echo "memcheck (rc $?): $(grep -E 'ERROR SUMMARY|PASSED|FAILED' /tmp/memcheck.log | tr '\n' ' ') ($(elapsed) s)"
echo "== A/B"
for r in 1 2 3; do
  alternate "0.3b bf16 r$r" /tmp/dense 1,64,256 base="$base" new="$b"
  alternate "moe awq r$r" /tmp/moe-awq 1 base="$base" new="$b"
done
echo "A/B done at $(elapsed) s"
echo "== timeline, 0.3b batch 1 (new)"
timeout 60 "$b" --model /tmp/dense --load-format dummy --check-tokens 0 --batch-sizes 1 --timeline-batches 1 2>&1 |
  sed -n '/^timeline:/,$p' | head -12
[[ "$gpu" == *H200* ]] || { echo "done at $(elapsed) s"; exit 0; }
echo "== int4 GEMV at m = 1 by k split (issue 8: 0.70 of 4.3 TB/s)"
gemv_k_splits
echo "== MoE knobs at batch 1 ($(elapsed) s)"
knob_sweep "moe awq 1" "$b" /tmp/moe-awq 1 500 "--moe-awq-gemv-k-slices 1" "--moe-awq-gemv-k-slices 4" \
  "--moe-awq-gemv-lean 0" "--moe-fold-prefetch-down 1" "--moe-fold-prefetch-shared 0" "--kv-prefetch-max-seqs 0" \
  "--moe-router-record-cluster 8" "--decode-linear-single-wave 0"
echo "done at $(elapsed) s"
