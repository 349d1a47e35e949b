#!/usr/bin/env python3
"""Where a decode step's time goes inside its CUDA graph, from an nsys trace.

ncu serializes kernels, so its breakdowns (ncu_breakdown.py) cannot show
what programmatic dependent launches overlap inside a replayed graph. This
reads `nsys stats --report cuda_gpu_trace --format csv` of a run profiled
with `--cuda-graph-trace=node` and, for the kernels in stream order, charges
each one with the time from the latest end before it to its own end (its
"increment": what it added to the step, the overlap with the kernel before
it taken off). Increments sum to the traced span, so they are the step's
critical path per kernel family; durations (start to end, early-launched
dependents' waits included) are shown beside them.

  nsys_step_timeline.py TITLE TRACE.csv
"""
import csv
import re
import sys
from collections import defaultdict


def family(name: str) -> str:
    name = re.sub(r"\(anonymous namespace\)::|<unnamed>::|ernie::cuda::|^void ", "", name)
    name = re.sub(r"\(.*", "", name)              # drop argument lists
    if name.startswith(("nvjet", "cutlass", "sm90", "gemv", "gemm", "splitK")) or "cublas" in name.lower():
        return "cuBLAS " + name[:60]
    return name[:80]


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    title, path = sys.argv[1], sys.argv[2]
    rows = []
    with open(path, newline="") as f:
        lines = [line for line in f if line.strip()]
    # nsys prints notices before the CSV header on some versions.
    start = next((i for i, line in enumerate(lines) if line.startswith('"Start') or line.startswith("Start")), 0)
    for row in csv.DictReader(lines[start:]):
        name = row.get("Name", "")
        if not name or name.startswith("[CUDA mem"):
            continue
        try:
            begin = float(row["Start (ns)"])
            duration = float(row["Duration (ns)"])
        except (KeyError, ValueError):
            continue
        rows.append((begin, begin + duration, family(name)))
    if not rows:
        print(f"{title}: no kernels in {path}")
        return 1
    rows.sort()
    increments, durations, counts = defaultdict(float), defaultdict(float), defaultdict(int)
    latest_end = rows[0][0]
    for begin, end, name in rows:
        # Idle time before this kernel (nothing running) is charged to it too:
        # the step waited for it (a launch, a host step) before it could end.
        increments[name] += max(0.0, end - latest_end)
        durations[name] += end - begin
        counts[name] += 1
        latest_end = max(latest_end, end)
    span = latest_end - rows[0][0]
    # Gaps: time inside the span with no kernel running.
    busy, cursor = 0.0, rows[0][0]
    for begin, end, _ in rows:
        if end <= cursor:
            continue
        busy += end - max(begin, cursor)
        cursor = end
    gaps = span - busy
    print(f"{title}: {len(rows)} kernels, span {span / 1e3:.1f} us, GPU idle {gaps / 1e3:.1f} us "
          f"(increments: each kernel's end past the latest end before it)")
    for name in sorted(increments, key=lambda n: -increments[n]):
        print(f"  {increments[name] / 1e3:9.1f} us  {100 * increments[name] / span:5.1f}%  x{counts[name]:<4d} "
              f"{name}  [duration {durations[name] / 1e3:.1f} us, {durations[name] / 1e3 / counts[name]:.2f} each]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
