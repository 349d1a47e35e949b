#!/usr/bin/python3
"""Reference tokenization for the C++ tests, from Debian's python3-sentencepiece.

Encodes and decodes the way transformers' slow LlamaTokenizer does with
legacy=True (ERNIE-4.5's Ernie4_5_Tokenizer): split the text on added-token
strings (earliest match, longest first), encode each stretch between them
with sentencepiece; decode runs of sentencepiece ids with sentencepiece and
added tokens as their content, after dropping special ids when skipping.

  hf_reference.py expect MODEL_DIR CASES.json OUT.json
      CASES: {"texts": [...], "id_lists": [[...], ...]}
      OUT:   {"encode": [[ids]], "encode_special": [[ids]],
              "decode": [str], "decode_skip": [str]}
  hf_reference.py variant SRC_DIR DST_DIR ADD_DUMMY_PREFIX REMOVE_EXTRA_WHITESPACES
      copies the tokenizer files with the normalizer flags (0/1) changed.
"""
import json
import os
import re
import shutil
import sys

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2


def load_added_tokens(model_dir):
    with open(os.path.join(model_dir, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    added = {int(k): v["content"] for k, v in config.get("added_tokens_decoder", {}).items()}
    special = {int(k) for k, v in config.get("added_tokens_decoder", {}).items() if v.get("special")}
    names = dict(config)
    path = os.path.join(model_dir, "special_tokens_map.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            names.update(json.load(f))
    return added, special, names


def main():
    if sys.argv[1] == "variant":
        src, dst, adp, rew = sys.argv[2], sys.argv[3], sys.argv[4] == "1", sys.argv[5] == "1"
        os.makedirs(dst, exist_ok=True)
        for name in ("tokenizer_config.json", "special_tokens_map.json", "generation_config.json"):
            shutil.copy(os.path.join(src, name), os.path.join(dst, name))
        model = sentencepiece_model_pb2.ModelProto()
        with open(os.path.join(src, "tokenizer.model"), "rb") as f:
            model.ParseFromString(f.read())
        model.normalizer_spec.add_dummy_prefix = adp
        model.normalizer_spec.remove_extra_whitespaces = rew
        with open(os.path.join(dst, "tokenizer.model"), "wb") as f:
            f.write(model.SerializeToString())
        return

    model_dir, cases_path, out_path = sys.argv[2], sys.argv[3], sys.argv[4]
    sp = spm.SentencePieceProcessor(model_file=os.path.join(model_dir, "tokenizer.model"))
    added, special, names = load_added_tokens(model_dir)
    content_to_id = {content: i for i, content in added.items()}
    named = [names[k] for k in ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                                "mask_token") if isinstance(names.get(k), str)]
    for content in named + list(names.get("additional_special_tokens", [])):
        i = content_to_id.get(content, sp.piece_to_id(content))
        content_to_id[content] = i
        added[i] = content
        special.add(i)
    alternatives = sorted(content_to_id, key=len, reverse=True)
    splitter = re.compile("(" + "|".join(re.escape(t) for t in alternatives) + ")")

    def encode_special(text):
        ids = []
        for part in splitter.split(text):
            if not part:
                continue
            ids.extend([content_to_id[part]] if part in content_to_id else sp.encode(part))
        return ids

    def decode(ids, skip):
        text, run = "", []
        for i in ids:
            if skip and i in special:
                continue
            if i in added:
                text += sp.decode(run) + added[i]
                run = []
            else:
                run.append(i)
        return text + sp.decode(run)

    with open(cases_path, encoding="utf-8") as f:
        cases = json.load(f)
    out = {
        "encode": [sp.encode(t) for t in cases["texts"]],
        "encode_special": [encode_special(t) for t in cases["texts"]],
        "decode": [decode(ids, False) for ids in cases["id_lists"]],
        "decode_skip": [decode(ids, True) for ids in cases["id_lists"]],
    }
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
