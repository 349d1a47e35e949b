#!/usr/bin/env python3
"""Prints ernie-bench-cuda beside HF generate (from their JSON logs) as ratios.

    python3 summarize.py bench_cuda.json bench_hf.json
"""
import json
import sys


def main():
    ours = json.load(open(sys.argv[1]))
    try:
        hf = json.load(open(sys.argv[2]))
    except (OSError, ValueError):
        hf = {"batches": []}
    hf_by_batch = {b["batch"]: b["output_tok_s"] for b in hf.get("batches", [])}
    print("0.3b shape, prompt %d / output %d" % (ours["prompt_len"], ours["decode_tokens"]))
    if "check_vs_cpu" in ours:
        print("ernie CUDA vs CPU f32 logits:", json.dumps(ours["check_vs_cpu"]))
    if "yardstick_bf16_vs_f32" in hf:
        print("HF bf16 vs HF f32 logits:    ", json.dumps(hf["yardstick_bf16_vs_f32"]))
    print("memory bytes:", json.dumps(ours["memory_bytes"]), " captured graphs:", ours.get("captured_graphs"))
    print("%6s %14s %14s %16s %22s %8s" % ("batch", "ernie tok/s", "HF tok/s", "ernie step ms",
                                          "step ms, no logits", "ratio"))
    for b in ours["batches"]:
        peer = hf_by_batch.get(b["batch"])
        ratio = "%.1fx" % (b["decode_tok_s"] / peer) if peer else "n/a"
        print("%6d %14.0f %14s %16.3f %22.3f %8s" % (b["batch"], b["decode_tok_s"], "%.1f" % peer if peer else "n/a",
                                                   b["median_step_ms"], b.get("median_step_no_logits_ms", 0), ratio))


if __name__ == "__main__":
    main()
