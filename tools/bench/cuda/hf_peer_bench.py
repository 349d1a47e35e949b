#!/usr/bin/env python3
"""The peer figure and the bf16 yardstick for ernie-bench-cuda, on the device.

1. Yardstick: teacher-forced logits of Hugging Face transformers in bf16
   against the same model in float32 on one prompt; per-position relative L2
   (the error bf16 inherently costs; issue 7 bounds ours by 1.5x this).
2. Peer: HF generate (greedy, bf16, static prompt of P tokens, exactly D new
   tokens) at several batch sizes; output tokens per second.

    python3 hf_peer_bench.py --model DIR [--batch-sizes 1,16,64,256] [--prompt-len 128]
                             [--decode-tokens 128] [--check-tokens 64] [--log FILE] [--budget-s 150]
Batch sizes are skipped (and said so) once the time budget is spent.
"""
import argparse
import json
import sys
import time

import torch
from transformers import AutoModelForCausalLM


def tokens_for(seq, length, vocab):
    return [3 + (seq * 7919 + p * 104729) % (vocab - 3) for p in range(length)]


def yardstick(model_dir, vocab, n):
    ids = torch.tensor([tokens_for(999, n, vocab)], device="cuda")
    out = {}
    for dtype in (torch.float32, torch.bfloat16):
        m = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).cuda().eval()
        with torch.no_grad():
            out[dtype] = m(ids).logits[0].float()
        del m
        torch.cuda.empty_cache()
    ref, got = out[torch.float32], out[torch.bfloat16]
    errs = ((got - ref).norm(dim=-1) / ref.norm(dim=-1)).sort().values
    return {"tokens": n, "max_rel_l2": errs[-1].item(), "median_rel_l2": errs[len(errs) // 2].item()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch-sizes", default="1,16,64,256")
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--decode-tokens", type=int, default=128)
    ap.add_argument("--check-tokens", type=int, default=64)
    ap.add_argument("--budget-s", type=float, default=150)
    ap.add_argument("--log")
    a = ap.parse_args()
    start = time.time()
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.bfloat16).cuda().eval()
    vocab = model.config.vocab_size
    log = {"model": a.model, "torch": torch.__version__, "device": torch.cuda.get_device_name()}
    if a.check_tokens > 0:
        log["yardstick_bf16_vs_f32"] = yardstick(a.model, vocab, a.check_tokens)
        print("hf yardstick:", json.dumps(log["yardstick_bf16_vs_f32"]), flush=True)
    gen = dict(max_new_tokens=a.decode_tokens, min_new_tokens=a.decode_tokens, do_sample=False,
               pad_token_id=0, eos_token_id=None)
    with torch.no_grad():
        warm = torch.tensor([tokens_for(0, a.prompt_len, vocab)], device="cuda")
        model.generate(warm, attention_mask=torch.ones_like(warm), **{**gen, "max_new_tokens": 4, "min_new_tokens": 4})
        log["batches"] = []
        for b in [int(x) for x in a.batch_sizes.split(",")]:
            if time.time() - start > a.budget_s:
                print(f"hf batch {b}: skipped (time budget of {a.budget_s} s spent)", flush=True)
                continue
            ids = torch.tensor([tokens_for(s, a.prompt_len, vocab) for s in range(b)], device="cuda")
            torch.cuda.synchronize()
            t0 = time.time()
            out = model.generate(ids, attention_mask=torch.ones_like(ids), **gen)
            torch.cuda.synchronize()
            dt = time.time() - t0
            new = out.shape[1] - a.prompt_len
            tps = b * new / dt
            log["batches"].append({"batch": b, "seconds": dt, "new_tokens": new, "output_tok_s": tps})
            print(f"hf batch {b}: {tps:.1f} output tok/s ({dt:.2f} s, prefill included)", flush=True)
    if a.log:
        with open(a.log, "w") as f:
            json.dump(log, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
