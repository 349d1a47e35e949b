#!/bin/sh
# Our dequantisation of ernie-quantize's checkpoints (ernie-awq-dequant, the
# engine's DequantizeAwqRows) against the independent numpy reference
# (tools/reference/awq_dequant_reference.py), bit for bit, at group sizes 32,
# 64 and 128, RTN and AWQ, on the demo shape and a biased test checkpoint.
# usage: awq_dequant_bitexact_test.sh BIN_DIR SOURCE_DIR WORK_DIR
# $PYTHON (default Debian's /usr/bin/python3) runs the reference; where it
# has torch (the accelerator machine: tools/gpu-test), the reference also
# checks its numpy dequantisation against a torch one.
set -eu
bin=$1 src=$2 work=$3
python=${PYTHON:-/usr/bin/python3}
rm -rf "$work" && mkdir -p "$work"
"$bin/ernie-make-model" "$work/demo" --shape demo --seed 11 >/dev/null
check() {  # MODEL_DIR NAME ARGS...
  in=$1 name=$2
  shift 2
  "$bin/ernie-quantize" "$in" "$work/$name" --threads 2 "$@" 2>"$work/$name.log" || { cat "$work/$name.log"; exit 1; }
  "$bin/ernie-awq-dequant" "$work/$name" "$work/$name.ours.safetensors" >/dev/null
  "$python" "$src/tools/reference/awq_dequant_reference.py" "$work/$name" "$work/$name.ref.safetensors" \
      --compare "$work/$name.ours.safetensors"
}
check "$work/demo" rtn32 --method rtn --group-size 32
check "$work/demo" rtn64 --method rtn --group-size 64
check "$work/demo" rtn128 --method rtn --group-size 128
check "$work/demo" awq128 --method awq --group-size 128 --calib-tokens 96
check "$src/tests/data/dense_reference/gqa4_bf16_bias_untied_v515" bias_awq64 --method awq --group-size 64 --calib-tokens 64
check "$src/tests/data/dense_reference/gqa1_f32_tied_v97" f32_awq32 --method awq --group-size 32 --calib-tokens 64
echo "awq_dequant_bitexact_test: all bit-identical"
