#!/usr/bin/env python3
"""Builds tiny random Ernie4_5_MoeForCausalLM checkpoints and records Hugging
Face's float32 greedy continuations, for the CPU reference engine's MoE tests.

    python3 tools/reference/make_moe_reference.py OUT_DIR

Each OUT_DIR/<case>/ holds config.json (Baidu's spelling), generation_config.json,
model.safetensors with the tensor names of Baidu's release (per-expert
mlp.experts.E.{gate,up,down}_proj.weight, mlp.gate.weight in float32,
mlp.moe_statics.e_score_correction_bias [1, E]) and expected.json in the same
format as make_dense_reference.py. The checkpoint is written first and then
loaded back with from_pretrained; the reference is computed by the reloaded
model, so the file and the record agree whatever layout transformers uses
internally. The correction bias is random and large enough to change which
experts are chosen (it is zero in HF's own init, which would test nothing).
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM
from transformers import Ernie4_5_MoeConfig, Ernie4_5_MoeForCausalLM

STEPS = 32
PROMPT_LENGTHS = [1, 9, 40, 260]

CASES = [
    dict(name="moe_e4_k2_noshared_f32", hidden=64, heads=4, kv=2, head_dim=16, layers=3, inter=128,
         experts=4, k=2, shared=0, moe_inter=48, start=1, end=2, interval=1, vocab=211, dtype="float32",
         tied=True),
    dict(name="moe_e8_k3_shared1_bf16", hidden=96, heads=6, kv=2, head_dim=16, layers=4, inter=160,
         experts=8, k=3, shared=1, moe_inter=40, start=1, end=-1, interval=1, vocab=333, dtype="bfloat16",
         tied=False),
    dict(name="moe_e6_k6_shared2_interval2_f32", hidden=48, heads=4, kv=4, head_dim=12, layers=4, inter=96,
         experts=6, k=6, shared=2, moe_inter=24, start=0, end=3, interval=2, vocab=97, dtype="float32",
         tied=True),
    dict(name="moe_e16_k4_shared1_bf16", hidden=64, heads=8, kv=1, head_dim=8, layers=3, inter=128,
         experts=16, k=4, shared=1, moe_inter=32, start=1, end=-1, interval=1, vocab=515, dtype="bfloat16",
         tied=True),
]


def make_config(c):
    kw = dict(vocab_size=c["vocab"], hidden_size=c["hidden"], intermediate_size=c["inter"],
              num_hidden_layers=c["layers"], num_attention_heads=c["heads"], num_key_value_heads=c["kv"],
              head_dim=c["head_dim"], hidden_act="silu", max_position_embeddings=512, rms_norm_eps=1e-5,
              tie_word_embeddings=c["tied"], use_bias=False, bos_token_id=1, eos_token_id=2, pad_token_id=0,
              moe_num_experts=c["experts"], moe_k=c["k"], moe_num_shared_experts=c["shared"],
              moe_intermediate_size=c["moe_inter"], moe_layer_start_index=c["start"],
              moe_layer_end_index=c["end"] if c["end"] >= 0 else c["layers"] - 1,
              moe_layer_interval=c["interval"], moe_norm_min=1e-12)
    try:
        cfg = Ernie4_5_MoeConfig(rope_parameters={"rope_type": "default", "rope_theta": 500000.0}, **kw)
    except TypeError:
        cfg = Ernie4_5_MoeConfig(rope_theta=500000.0, **kw)
    cfg._attn_implementation = "eager"
    return cfg


def is_moe_layer(c, i):
    end = c["end"] if c["end"] >= 0 else c["layers"] - 1
    return (i + 1) % c["interval"] == 0 and c["start"] <= i <= end


def baidu_state_dict(model, c, gen):
    """Draws every tensor of Baidu's layout directly (per-expert names)."""
    dtype = getattr(torch, c["dtype"])
    h, v = c["hidden"], c["vocab"]
    sd = {}

    def rnd(shape, scale):
        return (scale * torch.randn(shape, generator=gen)).to(dtype)

    sd["model.embed_tokens.weight"] = rnd((v, h), 0.25)
    sd["model.norm.weight"] = (1.0 + 0.2 * torch.randn(h, generator=gen)).to(dtype)
    if not c["tied"]:
        sd["lm_head.weight"] = rnd((v, h), 0.25)
    q, kvd = c["heads"] * c["head_dim"], c["kv"] * c["head_dim"]
    for i in range(c["layers"]):
        p = f"model.layers.{i}."
        sd[p + "input_layernorm.weight"] = (1.0 + 0.2 * torch.randn(h, generator=gen)).to(dtype)
        sd[p + "post_attention_layernorm.weight"] = (1.0 + 0.2 * torch.randn(h, generator=gen)).to(dtype)
        sd[p + "self_attn.q_proj.weight"] = rnd((q, h), h ** -0.5)
        sd[p + "self_attn.k_proj.weight"] = rnd((kvd, h), h ** -0.5)
        sd[p + "self_attn.v_proj.weight"] = rnd((kvd, h), h ** -0.5)
        sd[p + "self_attn.o_proj.weight"] = rnd((h, q), q ** -0.5)
        if is_moe_layer(c, i):
            e, mi = c["experts"], c["moe_inter"]
            sd[p + "mlp.gate.weight"] = (h ** -0.5 * torch.randn((e, h), generator=gen)).float()
            sd[p + "mlp.moe_statics.e_score_correction_bias"] = (0.05 * torch.randn((1, e), generator=gen)).float()
            for j in range(e):
                sd[p + f"mlp.experts.{j}.gate_proj.weight"] = rnd((mi, h), h ** -0.5)
                sd[p + f"mlp.experts.{j}.up_proj.weight"] = rnd((mi, h), h ** -0.5)
                sd[p + f"mlp.experts.{j}.down_proj.weight"] = rnd((h, mi), mi ** -0.5)
            if c["shared"] > 0:
                si = mi * c["shared"]
                sd[p + "mlp.shared_experts.gate_proj.weight"] = rnd((si, h), h ** -0.5)
                sd[p + "mlp.shared_experts.up_proj.weight"] = rnd((si, h), h ** -0.5)
                sd[p + "mlp.shared_experts.down_proj.weight"] = rnd((h, si), si ** -0.5)
        else:
            sd[p + "mlp.gate_proj.weight"] = rnd((c["inter"], h), h ** -0.5)
            sd[p + "mlp.up_proj.weight"] = rnd((c["inter"], h), h ** -0.5)
            sd[p + "mlp.down_proj.weight"] = rnd((h, c["inter"]), c["inter"] ** -0.5)
    return {k: t.contiguous() for k, t in sd.items()}


def write_checkpoint(cfg, c, sd, out_dir):
    save_file(sd, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    d = cfg.to_dict()
    d.pop("rope_parameters", None)
    d.pop("dtype", None)
    d["rope_theta"] = 500000.0
    d["torch_dtype"] = c["dtype"]
    d["architectures"] = ["Ernie4_5_MoeForCausalLM"]
    d["moe_layer_end_index"] = c["end"]  # Baidu's files say -1 for "the last layer"
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(d, f, indent=2, sort_keys=True)
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0, "do_sample": True, "top_p": 0.8,
                   "temperature": 0.8, "repetition_penalty": 1.0}, f, indent=2)


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
                        "top": [[int(i), float(x)] for i, x in zip(top.indices, top.values)],
                        "gap12": float(top.values[0] - top.values[1])})
        ids = torch.cat([ids, torch.tensor([[tok]])], dim=1)
    return records


def main():
    out_root = sys.argv[1]
    torch.set_num_threads(8)
    for idx, c in enumerate(CASES):
        gen = torch.Generator().manual_seed(2000 + idx)
        cfg = make_config(c)
        out_dir = os.path.join(out_root, c["name"])
        os.makedirs(out_dir, exist_ok=True)
        template = Ernie4_5_MoeForCausalLM(cfg)
        sd = baidu_state_dict(template, c, gen)
        write_checkpoint(cfg, c, sd, out_dir)
        model, info = AutoModelForCausalLM.from_pretrained(out_dir, dtype=torch.float32, attn_implementation="eager",
                                                           output_loading_info=True)
        model.eval()
        missing = [k for k in info.get("missing_keys", []) if not (c["tied"] and k == "lm_head.weight")]
        print("  loading info:", {k: list(v)[:8] for k, v in info.items() if v})
        if missing or info.get("unexpected_keys"):
            sys.exit(f"{c['name']}: the checkpoint did not load cleanly: {info}")
        # Every tensor of the file must have reached the model (no silent random init).
        loaded = {k: v for k, v in model.state_dict().items()}
        total_file = sum(t.numel() for t in sd.values())
        total_model = sum(p.numel() for p in model.parameters())
        print(c["name"], "file params", total_file, "model params", total_model, "keys", len(loaded))
        mlp_keys = sorted(k for k in loaded if ".mlp." in k and "layers.1." in k)[:6]
        print("  model mlp keys:", mlp_keys)
        prompts = []
        for n in PROMPT_LENGTHS:
            prompt = torch.randint(3, c["vocab"], (n,), generator=gen).tolist()
            prompts.append({"prompt_ids": prompt, "steps": greedy(model, prompt, STEPS)})
        with open(os.path.join(out_dir, "expected.json"), "w") as f:
            json.dump({"case": c["name"], "source": "transformers float32 eager, greedy, from_pretrained",
                       "prompts": prompts}, f)
        print("  min gap12", min(s["gap12"] for p in prompts for s in p["steps"]))


if __name__ == "__main__":
    main()
