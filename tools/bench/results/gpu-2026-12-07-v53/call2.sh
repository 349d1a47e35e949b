#!/bin/bash
# Session 50, call 2 (either card): the lm_head tuning redone after call 1 (where a row count was timed at its
# first eager run, inside the bench's prefill figure at 64 rows): now a dozen bucket row counts are timed at the
# backend's start and each pass takes the smallest bucket at or above its rows (gemm_tuning.h). Its tests, then
# --lm-head-gemm-tuning 0 / 1 alternated: the 0.3b bf16 at 40 (between buckets) / 64, at 256, the 21B-A3B AWQ
# at 64; on an H200 also main before the greedy tail (`base`) against this tree at the 21B-A3B AWQ batch 1
# (issue 9). Pack: ERNIE_PACK_ONLY="ernie-bench-cuda cuda_tuned_gemm_test cuda_backend_batching_test
# cuda_backend_parity_test"; carry [".device/pack"].
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
tuning_ab "0.3b 256" "$b" /tmp/dense 256
tuning_ab "moe awq 64" "$b" /tmp/moe-awq 64
if [[ "$gpu" == *H200* ]]; then
  echo "== 21B-A3B AWQ batch 1: base (before the greedy tail) / this tree ($(elapsed) s)"
  for r in 1 2 3; do alternate "moe awq 1 r$r" /tmp/moe-awq 1 base="$d/bin/ernie-bench-cuda-base" new="$b"; done
  alternate "0.3b 1 r1" /tmp/dense 1 base="$d/bin/ernie-bench-cuda-base" new="$b"
fi
echo "done at $(elapsed) s"
