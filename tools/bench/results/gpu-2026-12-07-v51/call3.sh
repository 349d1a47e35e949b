#!/bin/bash
# Session 48, call 3: call2.sh cut to what ~250 s of device time holds (the session's budget, after the
# attempts that found no machine): the tests of the greedy change, memcheck of the sampler test, base
# (fcac4bd) against the change (the tree) at the 0.3b bf16 1 / 64 and the 21B-A3B AWQ 1, two rounds
# alternated, then mid (ee86748) once and the engine's overlapped steps as time allows. Same pack as call2.
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
source tools/bench/cuda/device-call-lib.sh
make_model /tmp/dense --shape 0.3b; make_model /tmp/moe-awq --shape 21b-a3b --awq-group-size 128
b="$d/bin/ernie-bench-cuda" base="$d/bin/ernie-bench-cuda-base" mid="$d/bin/ernie-bench-cuda-mid"
echo "== tests"
gtest cuda_device_sampler_test; gtest cuda_overlapped_steps_test; gtest cuda_backend_batching_test
ab_round() {  # ab_round R: base then the change, the 0.3b bf16 at 1 / 64 and the 21B-A3B AWQ at 1
  alternate "0.3b bf16 r$1" /tmp/dense 1,64 base="$base" new="$b"
  alternate "moe awq r$1" /tmp/moe-awq 1 base="$base" new="$b"
}
echo "== A/B"
ab_round 1; ab_round 2
ERNIE_TEST_DATA_DIR=$PWD/tests/data timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 \
  "$d/bin/cuda_device_sampler_test" --gtest_filter='*Greedy*' > /tmp/memcheck.log 2>&1
echo "memcheck (rc $?): $(grep -E 'ERROR SUMMARY|PASSED|FAILED' /tmp/memcheck.log | tr '\n' ' ') ($(elapsed) s)"
alternate "0.3b bf16" /tmp/dense 1,64 mid="$mid"
alternate "moe awq" /tmp/moe-awq 1 mid="$mid"
ab_round 3; ab_round 4
echo "== engine, 1 stream (overlapped steps)"
for v in base new; do
  bin=$b; [[ $v == base ]] && bin=$base
  timeout 60 "$bin" --model /tmp/dense --load-format dummy --check-tokens 0 --batch-sizes 1 --engine-streams 1 \
    --engine-rounds 2 2>&1 | grep -iE "overlapped|one_at_a_time" | grep -v "^{" | tail -2 | sed "s/^/[$v] /"
done
echo "done at $(elapsed) s"
