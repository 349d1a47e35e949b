#!/bin/bash
# Session 45, call 2 (the command as given inline; the machine still warm from call 1, ~120 s of device time
# left): run1's three-size runs of the 21B-A3B AWQ each ran past their 60 s timeout, so 64 rows alone, the
# before binary then this one. From the repository root, carry [".device/pack", ".device/before"].
d=/tmp/ernie-gpu-pack; mkdir -p $d && tar -C $d -xzf .device/pack/pack.tar.gz; export LD_LIBRARY_PATH=$d/lib
$d/bin/ernie-make-model /tmp/m --shape 21b-a3b --awq-group-size 128 --seed 1 --config-only >/dev/null 2>&1
for b in .device/before/ernie-bench-cuda $d/bin/ernie-bench-cuda; do
  s=$(date +%s)
  timeout 55 $b --model /tmp/m --load-format dummy --check-tokens 0 --batch-sizes 64 2>&1 |
    grep -E '^ +[0-9]+ |rror' | tee -a $OUT/run2.txt
  echo "$b $(( $(date +%s) - s )) s" | tee -a $OUT/run2.txt
done
