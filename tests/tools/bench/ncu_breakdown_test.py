#!/usr/bin/env python3
"""ncu_breakdown.py on two CSVs in ncu's layout: time only (the profiles
before the DRAM metrics), and time plus DRAM read/write bytes in base units
and in scaled ones. Checks the per-family sums, the launch counts and the
fraction of the 4.3 TB/s floor; exits non-zero on the first mismatch."""
import os
import subprocess
import sys
import tempfile

HEADER = '"ID","Process ID","Kernel Name","Section Name","Metric Name","Metric Unit","Metric Value"\n'


def row(launch, kernel, metric, unit, value):
    return f'"{launch}","1","{kernel}","Command line profiler metrics","{metric}","{unit}","{value}"\n'


def run(script, text):
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
        f.write("==PROF== Connected to process 1\n" + HEADER + text)
    try:
        return subprocess.run([sys.executable, script, "step", f.name], check=True, capture_output=True,
                              text=True).stdout
    finally:
        os.unlink(f.name)


def expect(condition, what, output):
    if not condition:
        sys.exit(f"ncu_breakdown_test: {what}\n{output}")


def main():
    script = sys.argv[1]
    linear = "void ernie::cuda::(anonymous namespace)::DecodeLinearKernel<1>(ernie::cuda::DecodeLinearParams)"
    merge = "void ernie::cuda::(anonymous namespace)::MmaMergeSplitsKernel<128>(PagedAttentionParams)"

    # Time only: two linears (3 + 5 us), one merge (2,000 ns).
    out = run(script, row(0, linear, "gpu__time_duration.sum", "us", "3") +
              row(1, linear, "gpu__time_duration.sum", "us", "5") +
              row(2, merge, "gpu__time_duration.sum", "ns", "2,000"))
    expect("3 kernels, 10.0 us" in out, "total of a time-only profile", out)
    expect("8.0 us  80.0%  x2    DecodeLinearKernel<1>" in out, "the linears' family", out)
    expect("2.0 us  20.0%  x1    MmaMergeSplitsKernel<128>" in out, "the merge's family", out)
    expect("HBM" not in out, "no bandwidth without DRAM metrics", out)

    # With DRAM bytes: linear 0 reads 21.5 MB in 10 us (50% of 4.3 TB/s), linear 1 reads
    # 4.3 MB and writes 4.3 MB in 10 us (20%); the merge moves 0.43 MB (as Kbyte) in 1 us (10%).
    out = run(script, row(0, linear, "gpu__time_duration.sum", "nsecond", "10000") +
              row(0, linear, "dram__bytes_read.sum", "byte", "21500000") +
              row(0, linear, "dram__bytes_write.sum", "byte", "0") +
              row(1, linear, "gpu__time_duration.sum", "usecond", "10") +
              row(1, linear, "dram__bytes_read.sum", "Mbyte", "4.3") +
              row(1, linear, "dram__bytes_write.sum", "Mbyte", "4.3") +
              row(2, merge, "gpu__time_duration.sum", "usecond", "1") +
              row(2, merge, "dram__bytes_read.sum", "Kbyte", "430") +
              row(2, merge, "dram__bytes_write.sum", "byte", "0"))
    expect("3 kernels, 21.0 us" in out, "total with DRAM metrics", out)
    expect("DecodeLinearKernel<1>  [    30.1 MB,   35% of HBM]" in out, "the linears' bytes and fraction", out)
    expect("MmaMergeSplitsKernel<128>  [     0.4 MB,   10% of HBM]" in out, "the merge's bytes and fraction", out)
    expect("DRAM bytes 30.5 MB: floor 7.1 us at 4.3 TB/s, 34% of it reached" in out, "the step's floor", out)
    print("ncu_breakdown_test: ok")


if __name__ == "__main__":
    main()
