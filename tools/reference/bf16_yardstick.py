#!/usr/bin/env python3
"""Issue 7's yardstick on the checkpoints of tests/data, run on the device:
Hugging Face transformers in bfloat16 against the same model in float32,
teacher-forced on each prompt of the checkpoint's expected.json followed by
its greedy continuation; per-position relative L2 of the logits.

For mixture-of-experts models this is where bf16 shows its real cost: a
token whose two candidate experts score within bf16's rounding picks
either, so a few positions move far more than the median. The CUDA parity
test bounds our error by 1.5x what this measures (max and median), per
checkpoint, from the JSON it writes (tests/data/*_reference/yardstick.json).

    python3 bf16_yardstick.py tests/data/moe_reference [--out FILE]
"""
import argparse
import json
import os

import torch
from transformers import AutoModelForCausalLM


def logits(model_dir, dtype, ids):
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, attn_implementation="eager").cuda().eval()
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids], device="cuda")).logits[0].float()
    del model
    torch.cuda.empty_cache()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--out")
    a = ap.parse_args()
    report = {"source": "transformers bf16 vs float32, eager attention, teacher-forced on expected.json",
              "torch": torch.__version__, "checkpoints": {}}
    for name in sorted(os.listdir(a.folder)):
        d = os.path.join(a.folder, name)
        if not os.path.exists(os.path.join(d, "expected.json")):
            continue
        with open(os.path.join(d, "expected.json")) as f:
            expected = json.load(f)
        errs = []
        for p in expected["prompts"]:
            ids = p["prompt_ids"] + [s["token"] for s in p["steps"]]
            ref, got = logits(d, torch.float32, ids), logits(d, torch.bfloat16, ids)
            errs += ((got - ref).norm(dim=-1) / ref.norm(dim=-1)).tolist()
        errs.sort()
        entry = {"positions": len(errs), "max_rel_l2": errs[-1], "median_rel_l2": errs[len(errs) // 2],
                 "p90_rel_l2": errs[int(0.9 * (len(errs) - 1))]}
        report["checkpoints"][name] = entry
        print(name, json.dumps(entry), flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
