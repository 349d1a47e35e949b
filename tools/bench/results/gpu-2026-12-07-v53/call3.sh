#!/bin/bash
# Session 50, call 3 (prepared, never ran; either card): main with lm-head-between-buckets.patch applied (branch
# lm-head-between-buckets): logit passes between the lm_head's tuning buckets run as their bucket's rows
# (TunedGemm::RowsToRun). Its test, the batching and parity tests, then --lm-head-gemm-tuning 0 / 1
# alternated: the 0.3b bf16 at 40 (runs as 48) / 64 two rounds, at 200 (as 256), the 21B-A3B AWQ at 40 (as 48);
# on an H200 then issue 9's and issue 7's figures, main before the greedy tail (`base`) against this tree.
# Pack: ERNIE_PACK_ONLY="ernie-bench-cuda cuda_tuned_gemm_test cuda_backend_batching_test
# cuda_backend_parity_test" (with .device/variants/ernie-bench-cuda-base); carry [".device/pack"].
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
source tools/bench/cuda/device-call-lib.sh
make_model /tmp/dense --shape 0.3b; make_model /tmp/moe-awq --shape 21b-a3b --awq-group-size 128
b="$d/bin/ernie-bench-cuda"
echo "== tests"
ERNIE_TEST_DATA_DIR=$PWD/tests/data timeout 60 "$d/bin/cuda_tuned_gemm_test" 2>&1 |
  grep -E "tuned GEMM:|PASSED|FAILED|Failure" | head -8
gtest cuda_backend_batching_test
gtest cuda_backend_parity_test
echo "== lm_head tuning off / on"
tuning_ab "0.3b 40,64 r1" "$b" /tmp/dense 40,64
tuning_ab "0.3b 40,64 r2" "$b" /tmp/dense 40,64
tuning_ab "0.3b 200" "$b" /tmp/dense 200
tuning_ab "moe awq 40" "$b" /tmp/moe-awq 40
if [[ "$gpu" == *H200* ]]; then
  base="$d/bin/ernie-bench-cuda-base"
  echo "== 21B-A3B AWQ batch 1: base (before the greedy tail) / this tree ($(elapsed) s)"
  for r in 1 2 3; do alternate "moe awq 1 r$r" /tmp/moe-awq 1 base="$base" new="$b"; done
  echo "== 0.3b bf16: base / this tree ($(elapsed) s)"
  alternate "0.3b bf16 r1" /tmp/dense 1,64,256 base="$base" new="$b"
fi
echo "done at $(elapsed) s"
