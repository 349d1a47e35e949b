#!/bin/bash
# Session 49, call 4 (either card; never ran: the budget was spent), on main with lm-head-tuning.patch applied
# (branch lm-head-tuning): the lm_head's tuned cuBLASLt algorithm (tuned_gemm.h,
# CudaBackendOptions::lm_head_gemm_tuning). Its test and the batching test with tuning on (the
# default), then the same binary with --lm-head-gemm-tuning 0 / 1 alternated: the 0.3b bf16 at 64 (two rounds),
# the 21B-A3B AWQ at 16 / 64; last, main before the greedy tail (`base`) against this tree at
# the 21B-A3B AWQ batch 1 (issue 9's figure on whichever card this is). Pack: ERNIE_PACK_ONLY="ernie-bench-cuda
# cuda_tuned_gemm_test cuda_backend_parity_test cuda_backend_batching_test"; carry [".device/pack"].
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
source tools/bench/cuda/device-call-lib.sh
make_model /tmp/dense --shape 0.3b; make_model /tmp/moe-awq --shape 21b-a3b --awq-group-size 128
b="$d/bin/ernie-bench-cuda"
echo "== tests"
ERNIE_TEST_DATA_DIR=$PWD/tests/data timeout 60 "$d/bin/cuda_tuned_gemm_test" 2>&1 | grep -E "tuned GEMM:|PASSED|FAILED|Failure" | head -6
gtest cuda_backend_batching_test
echo "== lm_head tuning off / on"
for r in 1 2; do
  bench "0.3b bf16 64 tuning 0 r$r" "$b" /tmp/dense 64 --lm-head-gemm-tuning 0
  bench "0.3b bf16 64 tuning 1 r$r" "$b" /tmp/dense 64 --lm-head-gemm-tuning 1
done
timeout 60 "$b" --model /tmp/dense --load-format dummy --check-tokens 0 --batch-sizes 64 2>&1 | grep "lm_head tuning"
bench "moe awq 16,64 tuning 0" "$b" /tmp/moe-awq 16,64 --lm-head-gemm-tuning 0
bench "moe awq 16,64 tuning 1" "$b" /tmp/moe-awq 16,64 --lm-head-gemm-tuning 1
echo "== 21B-A3B AWQ batch 1: base (before the greedy tail) / this tree"
for r in 1 2 3; do alternate "moe awq 1 r$r" /tmp/moe-awq 1 base="$d/bin/ernie-bench-cuda-base" new="$b"; done
echo "done at $(elapsed) s"
