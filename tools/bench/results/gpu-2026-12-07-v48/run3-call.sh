#!/bin/bash
# Session 45, call 3 (inline, same warm machine, ~80 s left): 16 and 64 rows of the 21B-A3B AWQ, this binary
# first, then the before one (call 2's order reversed). From the repository root, carry [".device/pack",
# ".device/before"].
d=/tmp/ernie-gpu-pack; mkdir -p $d && tar -C $d -xzf .device/pack/pack.tar.gz; export LD_LIBRARY_PATH=$d/lib
$d/bin/ernie-make-model /tmp/m --shape 21b-a3b --awq-group-size 128 --seed 1 --config-only >/dev/null 2>&1
for b in $d/bin/ernie-bench-cuda .device/before/ernie-bench-cuda; do
  timeout 25 $b --model /tmp/m --load-format dummy --check-tokens 0 --batch-sizes 16,64 2>&1 |
    grep -E '^ +[0-9]+ |rror' | tee -a $OUT/run3.txt
  echo "$b" | tee -a $OUT/run3.txt
done
