#!/bin/bash
# Session 48, call 2: the greedy kernel without the memset before it and the key copy after it (running keys
# and arrivals left zero by each row's last CTA, which writes the key into the host's page-locked staging):
# ee86748, the variant `mid`; and then (the tree) without the parameters' upload for a launch of greedy rows in
# order, the fed-back tokens read from the results, which the greedy kernel now writes too.
# Here: the tree's build as ernie-bench-cuda, fcac4bd's as the variant `base` (.device/variants), packed with
# ERNIE_PACK_ONLY="ernie-bench-cuda ernie-bench-gemv cuda_device_sampler_test cuda_overlapped_steps_test
# cuda_backend_batching_test"; carry [".device/pack"]. Runs on either card: the tests, memcheck of the sampler
# test, then base against the change at the 0.3b bf16 1 / 64 and the 21B-A3B AWQ 1, three rounds alternated,
# and the engine's overlapped steps at 1 stream; on an H200 then the GEMV's k split, timelines and a sweep of the
# knobs tuned on H100s (the 21B-A3B AWQ at 1, the 0.3b at 1 / 64), as time allows.
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
source tools/bench/cuda/device-call-lib.sh
make_model /tmp/dense --shape 0.3b; make_model /tmp/moe-awq --shape 21b-a3b --awq-group-size 128
b="$d/bin/ernie-bench-cuda" base="$d/bin/ernie-bench-cuda-base" mid="$d/bin/ernie-bench-cuda-mid"
echo "== tests"
gtest cuda_device_sampler_test; gtest cuda_overlapped_steps_test; gtest cuda_backend_batching_test
ERNIE_TEST_DATA_DIR=$PWD/tests/data timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 \
  "$d/bin/cuda_device_sampler_test" --gtest_filter='*Greedy*' > /tmp/memcheck.log 2>&1
echo "memcheck (rc $?): $(grep -E 'ERROR SUMMARY|PASSED|FAILED' /tmp/memcheck.log | tr '\n' ' ')"
echo "== A/B"
for r in 1 2 3; do
  alternate "0.3b bf16 r$r" /tmp/dense 1,64 base="$base" mid="$mid" new="$b"
  alternate "moe awq r$r" /tmp/moe-awq 1 base="$base" mid="$mid" new="$b"
done
echo "A/B done at $(elapsed) s"
[[ "$gpu" == *H200* ]] && {
  echo "== int4 GEMV at m = 1 by k split (issue 8: 0.70 of 4.3 TB/s)"
  for ks in 0 2 4 8; do
    for shape in square_8192 wide_4096x14336; do
      timeout 60 "$d/bin/ernie-bench-gemv" --shape $shape --ms 1 --k-slices $ks 2>&1 | grep -E "^(square|wide)" |
        awk -v ks=$ks '{print "[k-slices " ks "] " $0}'
    done
  done
}
echo "== engine, 1 stream (overlapped steps)"
for v in base mid new; do
  bin=$b; [[ $v == base ]] && bin=$base; [[ $v == mid ]] && bin=$mid
  timeout 120 "$bin" --model /tmp/dense --load-format dummy --check-tokens 0 --batch-sizes 1 --engine-streams 1 \
    --engine-rounds 2 2>&1 | grep -iE "overlapped|one_at_a_time|stream" | grep -v "^{" | tail -4 | sed "s/^/[$v] /"
done
[[ "$gpu" == *H200* ]] || exit 0
echo "== timelines (new, this card)"
timeout 120 "$b" --model /tmp/moe-awq --load-format dummy --check-tokens 0 --batch-sizes 1 --timeline-batches 1 2>&1 |
  sed -n '/^timeline:/,$p' | head -14
timeout 120 "$b" --model /tmp/dense --load-format dummy --check-tokens 0 --batch-sizes 1,64 --timeline-batches 1,64 \
  2>&1 | sed -n '/^timeline:/,$p' | head -34
echo "== MoE knobs at batch 1"
moe_knobs=("--moe-awq-gemv-k-slices 1" "--moe-awq-gemv-k-slices 4" "--moe-awq-gemv-lean 0"
  "--moe-fold-prefetch-down 1" "--moe-fold-prefetch-shared 0" "--kv-prefetch-max-seqs 0"
  "--moe-router-record-cluster 8" "--decode-linear-single-wave 0" "--wide-decode-attention-max-pairs 0")
for r in 1 2; do
  [[ $(elapsed) -gt 420 ]] && break
  bench "moe awq 1 default r$r" "$b" /tmp/moe-awq 1
  for k in "${moe_knobs[@]}"; do
    # shellcheck disable=SC2086  # the knob is a flag and its value
    bench "moe awq 1 $k r$r" "$b" /tmp/moe-awq 1 $k
  done
done
echo "== 0.3b knobs at 1 / 64"
dense_knobs=("--persistent-decode 1" "--decode-linear-single-wave 0" "--kv-prefetch-max-seqs 0"
  "--unsplit-attention-max-context 0" "--small-batch-gemm-max-rows 32" "--small-batch-lm-head-max-rows 64"
  "--cluster-decode-max-rows 64" "--norm-epilogues 0")
for r in 1 2; do
  [[ $(elapsed) -gt 480 ]] && break
  bench "0.3b bf16 default r$r" "$b" /tmp/dense 1,64
  for k in "${dense_knobs[@]}"; do
    # shellcheck disable=SC2086
    bench "0.3b bf16 $k r$r" "$b" /tmp/dense 1,64 $k
  done
done
echo "done at $(elapsed) s"
