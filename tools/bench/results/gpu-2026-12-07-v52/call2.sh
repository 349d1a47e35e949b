#!/bin/bash
# Session 49, call 2 (H200 only: on any other card it stops at once, so an H100 costs only its start): the
# issues' figures with the greedy tail on main (base: main before it, the variant `base`): the 21B-A3B AWQ at
# batch 1 (issue 9: 1.4286 ms) four rounds alternated, the 0.3b bf16 at 1 / 64 / 256 (issue 7), the int4 GEMV
# at m = 1 by k split (issue 8: 0.70 of 4.3 TB/s), then a sweep of the MoE launch knobs tuned on H100s.
# Same pack as call1.sh (main's tree at 7650e1a); carry [".device/pack"].
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null)
[[ "$gpu" == *H200* ]] || { echo "${gpu:-no GPU}: not an H200, nothing run"; exit 0; }
source tools/bench/cuda/device-call-lib.sh
make_model /tmp/dense --shape 0.3b; make_model /tmp/moe-awq --shape 21b-a3b --awq-group-size 128
b="$d/bin/ernie-bench-cuda" base="$d/bin/ernie-bench-cuda-base"
echo "== 21B-A3B AWQ batch 1"
for r in 1 2 3 4; do alternate "moe awq r$r" /tmp/moe-awq 1 base="$base" new="$b"; done
echo "== 0.3b bf16"
alternate "0.3b bf16 r1" /tmp/dense 1,64,256 base="$base" new="$b"
alternate "0.3b bf16 r2" /tmp/dense 1,64 base="$base" new="$b"
echo "== int4 GEMV at m = 1 by k split ($(elapsed) s)"
gemv_k_splits
echo "== MoE knobs at batch 1 ($(elapsed) s)"
moe_knobs=("--moe-awq-gemv-k-slices 1" "--moe-awq-gemv-k-slices 4" "--moe-awq-gemv-lean 0"
  "--moe-fold-prefetch-down 1" "--moe-fold-prefetch-shared 0" "--kv-prefetch-max-seqs 0"
  "--moe-router-record-cluster 8" "--decode-linear-single-wave 0" "--wide-decode-attention-max-pairs 0")
knob_sweep "moe awq 1 r1" "$b" /tmp/moe-awq 1 "${ERNIE_SWEEP_LIMIT:-520}" "${moe_knobs[@]}"
knob_sweep "moe awq 1 r2" "$b" /tmp/moe-awq 1 "${ERNIE_SWEEP_LIMIT:-520}" "${moe_knobs[@]}"
echo "== timeline, 21B-A3B AWQ batch 1 ($(elapsed) s)"
timeout 60 "$b" --model /tmp/moe-awq --load-format dummy --check-tokens 0 --batch-sizes 1 --timeline-batches 1 2>&1 |
  sed -n '/^timeline:/,$p' | head -16
echo "done at $(elapsed) s"
