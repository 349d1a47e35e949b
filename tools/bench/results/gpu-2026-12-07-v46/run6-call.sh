#!/bin/bash
# Session 43, call 6 (the device time nearly spent): on an H200 only, the issues' figures (the 0.3b bf16 and AWQ
# at 1, 64, 256; the 21B-A3B AWQ at 1, 16, 64, 256 and bf16 at 1, 256; the int4 GEMV's two large shapes at m = 1);
# on any other card it stops at once. From the repository root, carry [".device/pack"]. (Session 44 took out its
# last line, which emptied $OUT: later calls run this script first and tee their own log there.)
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
start=$(date +%s)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
[[ "$gpu" == *H200* ]] || exit 0
d=/tmp/ernie-gpu-pack
mkdir -p "$d" && tar -C "$d" -xzf .device/pack/pack.tar.gz || echo "no pack"
export LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mk() { "$d/bin/ernie-make-model" "$@" --seed 1 --config-only >> /tmp/setup.out 2>&1; }
run() {  # run LABEL MODEL BATCHES ARGS...: batch:step-ms pairs
  local label="$1" model="$2" batches="$3"; shift 3
  ms=$(timeout 90 "$d/bin/ernie-bench-cuda" --model "$model" --load-format dummy --check-tokens 0 \
    --batch-sizes "$batches" "$@" 2>&1 | grep -E '^ +[0-9]+ |rror' | awk '{printf "%s:%s ", $1, $4}')
  echo "[$label] $ms"
}
mk /tmp/d --shape 0.3b; mk /tmp/d-awq --shape 0.3b --awq-group-size 128
mk /tmp/moe-awq --shape 21b-a3b --awq-group-size 128; mk /tmp/moe --shape 21b-a3b
run "0.3b bf16" /tmp/d 1,64,256
run "0.3b awq" /tmp/d-awq 1,64,256
run "moe awq" /tmp/moe-awq 1,16,64,256
run "moe awq again" /tmp/moe-awq 1
run "moe bf16" /tmp/moe 1,256
for shape in square_8192 wide_4096x14336; do
  timeout 20 "$d/bin/ernie-bench-gemv" --shape "$shape" --ms 1 2>&1 | grep -v '^{' | grep -v probe | tail -2
done
echo "done at $(( $(date +%s) - start )) s"
