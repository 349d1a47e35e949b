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
    # "host logits": every logits row copied to the host (v2); "device": sampled on the GPU (greedy / top-p 0.8).
    print("%6s %18s %16s %16s %10s %14s %14s %14s %10s %14s" % (
        "batch", "host-logits tok/s", "dev-greedy tok/s", "dev-top-p tok/s", "HF tok/s", "step ms host",
        "step ms greedy", "step ms top-p", "no logits", "ratio (greedy)"))
    for b in ours["batches"]:
        peer = hf_by_batch.get(b["batch"])
        best = b.get("decode_greedy_tok_s", b["decode_tok_s"])
        ratio = "%.1fx" % (best / peer) if peer else "n/a"
        print("%6d %18.0f %16.0f %16.0f %10s %14.3f %14.3f %14.3f %10.3f %14s" % (
            b["batch"], b["decode_tok_s"], b.get("decode_greedy_tok_s", 0), b.get("decode_top_p_tok_s", 0),
            "%.1f" % peer if peer else "n/a", b["median_step_ms"], b.get("median_step_greedy_ms", 0),
            b.get("median_step_top_p_ms", 0), b.get("median_step_no_logits_ms", 0), ratio))
    # top-p with repetition_penalty 1.1: edited on the device against the host sampler (logits copied, host sampling included).
    if any("median_step_rep_penalty_ms" in b for b in ours["batches"]):
        print("%6s %22s %22s %8s" % ("batch", "rep-penalty step ms dev", "host sampler step ms", "speedup"))
        for b in ours["batches"]:
            dev, host = b.get("median_step_rep_penalty_ms"), b.get("median_step_rep_penalty_host_ms")
            if dev and host:
                print("%6d %22.3f %22.3f %7.1fx" % (b["batch"], dev, host, host / dev))


if __name__ == "__main__":
    main()
