#!/usr/bin/env python3
"""Builds tiny random Ernie4_5ForCausalLM checkpoints and records Hugging Face's
float32 greedy continuations, for the CPU reference engine's tests.

Runs where torch and transformers are installed (the accelerator machine):

    python3 tools/reference/make_dense_reference.py OUT_DIR

For every case OUT_DIR/<case>/ gets a Hugging Face model directory
(config.json, generation_config.json, safetensors) and expected.json:

    {"case": ..., "prompts": [{"prompt_ids": [...], "steps": [
        {"token": id, "logprob": lp, "top": [[id, lp] x5], "gap12": lp1 - lp2}, ...]}]}

Weights are drawn with a larger spread than HF's default init so that greedy
choices are decisive (a near-uniform softmax would make every step a tie).
bf16 / f16 cases store rounded weights; the reference is float32 maths on
exactly those rounded values, which is what our engine computes too.
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import Ernie4_5Config, Ernie4_5ForCausalLM

STEPS = 32
PROMPT_LENGTHS = [1, 7, 33, 300]

# name, shape, dtype, tied, bias, config spelling, shards
CASES = [
    dict(name="gqa1_f32_tied_v97", hidden=64, heads=4, kv=4, head_dim=16, layers=2,
         inter=160, vocab=97, dtype="float32", tied=True, bias=False, spelling="baidu",
         theta=500000.0, shards=1),
    dict(name="gqa2_bf16_untied_v1002", hidden=96, heads=4, kv=2, head_dim=32, layers=2,
         inter=224, vocab=1002, dtype="bfloat16", tied=False, bias=False, spelling="hf5",
         theta=10000.0, shards=1),
    dict(name="gqa8_f32_bias_v333", hidden=64, heads=8, kv=1, head_dim=16, layers=2,
         inter=128, vocab=333, dtype="float32", tied=True, bias=True, spelling="hf5",
         theta=500000.0, shards=1),
    dict(name="gqa4_bf16_bias_untied_v515", hidden=128, heads=8, kv=2, head_dim=24, layers=3,
         inter=256, vocab=515, dtype="bfloat16", tied=False, bias=True, spelling="baidu",
         theta=500000.0, shards=1),
    dict(name="gqa3_f16_sharded_v211", hidden=48, heads=6, kv=2, head_dim=8, layers=2,
         inter=96, vocab=211, dtype="float16", tied=True, bias=False, spelling="baidu",
         theta=10000.0, shards=2),
]


def make_config(c):
    kw = dict(vocab_size=c["vocab"], hidden_size=c["hidden"], intermediate_size=c["inter"],
              num_hidden_layers=c["layers"], num_attention_heads=c["heads"],
              num_key_value_heads=c["kv"], head_dim=c["head_dim"], hidden_act="silu",
              max_position_embeddings=512, rms_norm_eps=1e-5, tie_word_embeddings=c["tied"],
              use_bias=c["bias"], bos_token_id=1, eos_token_id=2, pad_token_id=0)
    try:
        cfg = Ernie4_5Config(rope_parameters={"rope_type": "default", "rope_theta": c["theta"]}, **kw)
    except TypeError:
        cfg = Ernie4_5Config(rope_theta=c["theta"], **kw)
    cfg._attn_implementation = "eager"
    return cfg


def randomize(model, dtype, gen):
    """Spreads weights wide enough for decisive greedy steps, then rounds them to
    the file's dtype (so the float32 reference sees exactly what is stored)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("layernorm.weight") or name == "model.norm.weight":
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            elif "embed_tokens" in name or "lm_head" in name:
                p.copy_(0.25 * torch.randn(p.shape, generator=gen))
            else:
                fan_in = p.shape[1]
                p.copy_(torch.randn(p.shape, generator=gen) / fan_in ** 0.5)
            p.copy_(p.to(dtype).to(torch.float32))


def baidu_config(cfg_dict, c):
    """Rewrites a transformers-5 config.json the way Baidu's release spells it."""
    out = dict(cfg_dict)
    out.pop("rope_parameters", None)
    out["rope_theta"] = c["theta"]
    out["architectures"] = ["Ernie4_5_ForCausalLM"]
    out.pop("dtype", None)
    out["torch_dtype"] = c["dtype"]
    return out


def save_checkpoint(model, cfg, c, out_dir):
    dtype = getattr(torch, c["dtype"])
    state = {k: v.to(dtype).contiguous() for k, v in model.state_dict().items()}
    if c["tied"]:
        state.pop("lm_head.weight", None)
    names = sorted(state)
    if c["shards"] == 1:
        save_file(state, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    else:
        per = (len(names) + c["shards"] - 1) // c["shards"]
        weight_map = {}
        total = 0
        for i in range(c["shards"]):
            fname = f"model-{i + 1:05d}-of-{c['shards']:05d}.safetensors"
            part = {n: state[n] for n in names[i * per:(i + 1) * per]}
            save_file(part, os.path.join(out_dir, fname), metadata={"format": "pt"})
            for n, t in part.items():
                weight_map[n] = fname
                total += t.numel() * t.element_size()
        with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    cfg_dict = cfg.to_dict()
    cfg_dict["architectures"] = ["Ernie4_5ForCausalLM"]
    cfg_dict["dtype"] = c["dtype"]
    if c["spelling"] == "baidu":
        cfg_dict = baidu_config(cfg_dict, c)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg_dict, f, indent=2, sort_keys=True)
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0, "do_sample": True,
                   "top_p": 0.8, "temperature": 0.8, "repetition_penalty": 1.0}, f, indent=2)


@torch.no_grad()
def greedy(model, prompt, steps):
    ids = torch.tensor([prompt], dtype=torch.long)
    records = []
    for _ in range(steps):
        logits = model(input_ids=ids).logits[0, -1].float()
        lp = torch.log_softmax(logits, dim=-1)
        top = torch.topk(lp, 5)
        tok = int(top.indices[0])
        records.append({"token": tok, "logprob": float(lp[tok]),
                        "top": [[int(i), float(v)] for i, v in zip(top.indices, top.values)],
                        "gap12": float(top.values[0] - top.values[1])})
        ids = torch.cat([ids, torch.tensor([[tok]])], dim=1)
    return records


def main():
    out_root = sys.argv[1]
    torch.set_num_threads(8)
    for idx, c in enumerate(CASES):
        gen = torch.Generator().manual_seed(1000 + idx)
        cfg = make_config(c)
        model = Ernie4_5ForCausalLM(cfg).float().eval()
        randomize(model, getattr(torch, c["dtype"]), gen)
        if c["tied"]:
            model.tie_weights()
        out_dir = os.path.join(out_root, c["name"])
        os.makedirs(out_dir, exist_ok=True)
        save_checkpoint(model, cfg, c, out_dir)
        prompts = []
        for n in PROMPT_LENGTHS:
            prompt = torch.randint(3, c["vocab"], (n,), generator=gen).tolist()
            prompts.append({"prompt_ids": prompt, "steps": greedy(model, prompt, STEPS)})
        with open(os.path.join(out_dir, "expected.json"), "w") as f:
            json.dump({"case": c["name"], "source": "transformers float32 eager, greedy",
                       "prompts": prompts}, f)
        keys = sorted(model.state_dict().keys())
        print(c["name"], "params", sum(p.numel() for p in model.parameters()),
              "keys", [k for k in keys if "layers.0." in k or "layers" not in k])
        print("  min gap12", min(s["gap12"] for p in prompts for s in p["steps"]))


if __name__ == "__main__":
    main()
