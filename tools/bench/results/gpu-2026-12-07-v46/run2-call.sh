#!/bin/bash
# Session 43, call 2 (for an H100 while no H200 comes): the grouped int4 GEMV's launch shape at batch 1
# under the fold (k split x CTA warps x lean loop, each forced for both the gate/up and the down launch),
# alternated with the default, two rounds; the 21B-A3B AWQ. From the repository root, carry [".device/pack"].
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
start=$(date +%s)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
d=/tmp/ernie-gpu-pack
mkdir -p "$d" && tar -C "$d" -xzf .device/pack/pack.tar.gz || echo "no pack"
export LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
"$d/bin/ernie-make-model" /tmp/moe-awq --shape 21b-a3b --awq-group-size 128 --seed 1 --config-only > /tmp/setup.out 2>&1
run() {  # run LABEL ARGS...: batch:step-ms pairs
  local label="$1"; shift
  ms=$(timeout 60 "$d/bin/ernie-bench-cuda" --model /tmp/moe-awq --load-format dummy --check-tokens 0 \
    --batch-sizes 1 "$@" 2>&1 | grep -E '^ +[0-9]+ |rror' | awk '{printf "%s:%s ", $1, $4}')
  echo "[$label] $ms"
}
for round in 1 2; do
  run "default r$round"
  for kw in "1 8" "4 8" "2 4" "4 4" "2 6" "8 8"; do
    [ $(( $(date +%s) - start )) -gt 200 ] && break
    set -- $kw
    run "k $1 warps $2 r$round" --moe-awq-gemv-k-slices "$1" --moe-awq-gemv-cta-warps "$2"
  done
  run "not lean r$round" --moe-awq-gemv-lean 0
done
run "default r3"
echo "done at $(( $(date +%s) - start )) s"
find "$OUT" -type f -delete
