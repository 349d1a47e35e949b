#!/usr/bin/env python3
"""Kernel-time breakdown of one profiled decode step from ncu's CSV
(`ncu --csv --metrics gpu__time_duration.sum`): time per kernel family,
launches, share of the step.

    python3 ncu_breakdown.py LABEL ncu.csv
"""
import collections
import csv
import re
import sys

# Microseconds per unit; ncu 2025 writes "ns" (older ones "nsecond").
UNITS = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6}


def family(name):
    # Our kernels by their own name; cuBLAS's by a short prefix of theirs.
    # ncu may print names without their namespace: our kernels all end in "Kernel".
    m = re.search(r"\b([A-Z]\w*Kernel)\b", name)
    if m:
        return m.group(1) + (re.search(r"<(\w+)>", name).group(0) if re.search(r"<(\w+)>", name) else "")
    name = name.removeprefix("void ")
    inner = name.split("<", 1)[1] if "<" in name else name  # cutlass::Kernel2<the_gemm_kernel_name>
    return "cuBLAS " + re.split(r"[<(>]", inner)[0][:60]


def main():
    label, path = sys.argv[1], sys.argv[2]
    rows = [r for r in csv.DictReader(line for line in open(path) if line.startswith('"'))
            if r.get("Metric Name") == "gpu__time_duration.sum"]
    total = collections.Counter()
    count = collections.Counter()
    for r in rows:
        unit = r["Metric Unit"]
        if unit not in UNITS:
            sys.exit(f"ncu_breakdown: unknown time unit {unit!r}")
        us = float(r["Metric Value"].replace(",", "")) * UNITS[unit]
        k = family(r["Kernel Name"])
        total[k] += us
        count[k] += 1
    step = sum(total.values())
    print(f"{label}: {len(rows)} kernels, {step:.1f} us of GPU time (kernels serialized by ncu)")
    for k, us in total.most_common():
        print(f"  {us:9.1f} us {100 * us / step:5.1f}%  x{count[k]:<4d} {k}")


if __name__ == "__main__":
    main()
