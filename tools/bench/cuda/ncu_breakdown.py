#!/usr/bin/env python3
"""Kernel-time breakdown of one profiled decode step from ncu's CSV
(`ncu --csv --print-units base --metrics gpu__time_duration.sum,
dram__bytes_read.sum,dram__bytes_write.sum`): time per kernel family,
launches, share of the step and, when the DRAM metrics are there, the bytes
each family moved and the fraction of its bandwidth floor it reached
(bytes / 4.3 TB/s over its time: issue 7's "what fraction of its floor").
ncu flushes the caches before each kernel by default, so every byte a kernel
reads comes from DRAM and its DRAM bytes are what it must move.

    python3 ncu_breakdown.py LABEL ncu.csv
"""
import collections
import csv
import re
import sys

HBM_BYTES_PER_US = 4.3e6  # 4.3 TB/s, the H200's measured device-copy ceiling (ARCHITECTURE.md)

# Microseconds per unit; ncu 2025 writes "ns" (older ones "nsecond").
TIME_UNITS = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6,
              "second": 1e6}
# Bytes per unit: ncu scales bytes by decimal prefixes (--print-units base keeps "byte").
BYTE_UNITS = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}
TIME = "gpu__time_duration.sum"
BYTES = ("dram__bytes_read.sum", "dram__bytes_write.sum")


def family(name):
    # Our kernels by their own name; cuBLAS's by a short prefix of theirs.
    # ncu may print names without their namespace: our kernels all end in "Kernel".
    m = re.search(r"\b([A-Z]\w*Kernel)\b", name)
    if m:
        return m.group(1) + (re.search(r"<(\w+)>", name).group(0) if re.search(r"<(\w+)>", name) else "")
    name = name.removeprefix("void ")
    inner = name.split("<", 1)[1] if "<" in name else name  # cutlass::Kernel2<the_gemm_kernel_name>
    return "cuBLAS " + re.split(r"[<(>]", inner)[0][:60]


def value(row, units):
    unit = row["Metric Unit"]
    if unit not in units:
        sys.exit(f"ncu_breakdown: unknown unit {unit!r} for {row['Metric Name']}")
    return float(row["Metric Value"].replace(",", "")) * units[unit]


def launches(path):
    """{launch ID: (kernel name, us, DRAM bytes or None)} in launch order."""
    times, names, moved = {}, {}, collections.defaultdict(float)
    rows = csv.DictReader(line for line in open(path) if line.startswith('"'))
    for index, r in enumerate(rows):
        metric, launch = r.get("Metric Name"), r.get("ID") or f"row {index}"  # an ID pairs a launch's metrics
        if metric == TIME:
            times[launch] = value(r, TIME_UNITS)
            names[launch] = r["Kernel Name"]
        elif metric in BYTES:
            moved[launch] += value(r, BYTE_UNITS)
    return {k: (names[k], times[k], moved[k] if k in moved else None) for k in times}


def main():
    label, path = sys.argv[1], sys.argv[2]
    per_launch = launches(path)
    total, count, moved = collections.Counter(), collections.Counter(), collections.Counter()
    have_bytes = bool(per_launch) and all(b is not None for _, _, b in per_launch.values())
    for name, us, nbytes in per_launch.values():
        k = family(name)
        total[k] += us
        count[k] += 1
        if have_bytes:
            moved[k] += nbytes
    step = sum(total.values())
    print(f"{label}: {len(per_launch)} kernels, {step:.1f} us of GPU time (kernels serialized by ncu)")
    if have_bytes:
        floor = sum(moved.values()) / HBM_BYTES_PER_US
        print(f"  DRAM bytes {sum(moved.values()) / 1e6:.1f} MB: floor {floor:.1f} us at 4.3 TB/s, "
              f"{100 * floor / step:.0f}% of it reached")
    for k, us in total.most_common():
        line = f"  {us:9.1f} us {100 * us / step:5.1f}%  x{count[k]:<4d} {k}"
        if have_bytes:
            line += f"  [{moved[k] / 1e6:8.1f} MB, {100 * moved[k] / HBM_BYTES_PER_US / us:4.0f}% of HBM]"
        print(line)


if __name__ == "__main__":
    main()
