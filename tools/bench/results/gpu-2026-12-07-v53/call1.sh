#!/bin/bash
# Session 50, call 1 (either card), on main (726efbd) with v52's lm-head-tuning.patch applied (branch
# lm-head-tuning-on-main): the tests of the greedy tail's review mend (never run on a GPU) and of the tuned
# lm_head; the lm_head tuning off / on; the issues' figures against main before the greedy tail (`base`): the
# 21B-A3B AWQ at batch 1 (issue 9), the 0.3b bf16 at 1 / 64 / 256 (issue 7), the int4 GEMV at m = 1 by k split
# (issue 8); then, while time is left, the MoE launch knobs at batch 1. Pack: ERNIE_PACK_ONLY="ernie-bench-cuda
# ernie-bench-gemv cuda_tuned_gemm_test cuda_backend_batching_test cuda_device_sampler_test
# cuda_backend_parity_test"; carry [".device/pack"].
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
source tools/bench/cuda/device-call-lib.sh
make_model /tmp/dense --shape 0.3b; make_model /tmp/moe-awq --shape 21b-a3b --awq-group-size 128
b="$d/bin/ernie-bench-cuda" base="$d/bin/ernie-bench-cuda-base"
echo "== tests"
ERNIE_TEST_DATA_DIR=$PWD/tests/data timeout 60 "$d/bin/cuda_tuned_gemm_test" 2>&1 |
  grep -E "tuned GEMM:|PASSED|FAILED|Failure" | head -8
gtest cuda_device_sampler_test
gtest cuda_backend_batching_test
# On an H100 (v52 measured the greedy tail there) only the lm_head tuning and two MoE rounds run.
h200=0; [[ "$gpu" == *H200* ]] && h200=1
echo "== 21B-A3B AWQ batch 1: base (before the greedy tail) / this tree"
for r in $(seq 1 $((h200 ? 4 : 2))); do alternate "moe awq 1 r$r" /tmp/moe-awq 1 base="$base" new="$b"; done
if ((h200)); then
  echo "== 0.3b bf16: base / this tree"
  alternate "0.3b bf16 r1" /tmp/dense 1,64,256 base="$base" new="$b"
  alternate "0.3b bf16 r2" /tmp/dense 1,64,256 base="$base" new="$b"
fi
echo "== lm_head tuning off / on ($(elapsed) s)"
for r in 1 2; do
  bench "0.3b bf16 64,256 tuning 0 r$r" "$b" /tmp/dense 64,256 --lm-head-gemm-tuning 0
  bench "0.3b bf16 64,256 tuning 1 r$r" "$b" /tmp/dense 64,256 --lm-head-gemm-tuning 1
done
timeout 60 "$b" --model /tmp/dense --load-format dummy --check-tokens 0 --batch-sizes 64,256 2>&1 | grep "lm_head tuning"
bench "moe awq 16,64 tuning 0" "$b" /tmp/moe-awq 16,64 --lm-head-gemm-tuning 0
bench "moe awq 16,64 tuning 1" "$b" /tmp/moe-awq 16,64 --lm-head-gemm-tuning 1
((h200)) || { echo "done at $(elapsed) s"; exit 0; }
echo "== int4 GEMV at m = 1 by k split ($(elapsed) s)"
gemv_k_splits
echo "== MoE knobs at batch 1 ($(elapsed) s)"
moe_knobs=("--moe-awq-gemv-k-slices 1" "--moe-awq-gemv-k-slices 4" "--moe-awq-gemv-lean 0"
  "--moe-fold-prefetch-down 1" "--moe-fold-prefetch-shared 0" "--kv-prefetch-max-seqs 0"
  "--moe-router-record-cluster 8" "--decode-linear-single-wave 0" "--wide-decode-attention-max-pairs 0")
knob_sweep "moe awq 1" "$b" /tmp/moe-awq 1 "${ERNIE_SWEEP_LIMIT:-500}" "${moe_knobs[@]}"
echo "done at $(elapsed) s"
