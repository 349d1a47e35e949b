#!/usr/bin/env python3
"""An independent dequantiser of AutoAWQ "gemm" checkpoints (numpy; torch too
when installed), written from the format's description, not from our C++:

    python3 tools/reference/awq_dequant_reference.py MODEL_DIR OUT.safetensors
    python3 tools/reference/awq_dequant_reference.py MODEL_DIR OUT.safetensors --compare OURS.safetensors

For every <prefix>.qweight in the model's safetensors files it writes
<prefix>.weight_t: float32 [in, out] = (q - z) * s, where
  qweight int32 [in, out/8] and qzeros int32 [in/group, out/8] hold eight
  4-bit values per word, output column 8j + order[n] in bits 4n..4n+3 with
  order = [0, 2, 4, 6, 1, 3, 5, 7] (so column 8j + c is at shift 4 * [0, 4, 1, 5, 2, 6, 3, 7][c]);
  scales float16 [in/group, out]; z and s of row i are those of group i // group.
The product is taken in float32 (q - z is a small exact integer, s an exact
widened float16), so any correct implementation gets the same bits.

With --compare, the tensors of OURS.safetensors (written by ernie-awq-dequant)
must equal these bit for bit, tensor set included; exit status 1 otherwise.
Reads safetensors by hand (8-byte header length, JSON header, raw data).
"""
import json
import os
import struct
import sys

import numpy as np

DTYPES = {"I32": np.int32, "F16": np.float16, "F32": np.float32, "BF16": np.uint16}
UNPACK_SHIFTS = np.array([0, 4, 1, 5, 2, 6, 3, 7], dtype=np.uint32) * 4


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_len])
    base = 8 + header_len
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        dtype = DTYPES.get(entry["dtype"])
        if dtype is None:
            continue  # not a dtype the AWQ tensors use
        tensors[name] = np.frombuffer(data[base + begin:base + end], dtype=dtype).reshape(entry["shape"])
    return tensors


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        blob = np.ascontiguousarray(tensors[name], dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def unpack(packed):
    """int32 [rows, out/8] -> uint8 [rows, out], columns in natural order."""
    words = packed.view(np.uint32)[:, :, None]
    return ((words >> UNPACK_SHIFTS[None, None, :]) & 0xF).astype(np.uint8).reshape(packed.shape[0], -1)


def dequantize_numpy(qweight, qzeros, scales):
    group = qweight.shape[0] // scales.shape[0]
    q = unpack(qweight).astype(np.int32)
    z = np.repeat(unpack(qzeros).astype(np.int32), group, axis=0)
    s = np.repeat(scales.astype(np.float32), group, axis=0)
    return (q - z).astype(np.float32) * s


def dequantize_torch(torch, qweight, qzeros, scales):
    group = qweight.shape[0] // scales.shape[0]
    shifts = torch.tensor(UNPACK_SHIFTS.astype(np.int32))

    def unpack_t(p):
        t = torch.from_numpy(p.astype(np.int64) & 0xFFFFFFFF)
        return ((t[:, :, None] >> shifts[None, None, :]) & 0xF).reshape(p.shape[0], -1)

    q = unpack_t(qweight)
    z = unpack_t(qzeros).repeat_interleave(group, dim=0)
    s = torch.from_numpy(scales.astype(np.float32)).repeat_interleave(group, dim=0)
    return ((q - z).to(torch.float32) * s).numpy()


def model_tensors(model_dir):
    tensors = {}
    for name in sorted(os.listdir(model_dir)):
        if name.endswith(".safetensors"):
            tensors.update(read_safetensors(os.path.join(model_dir, name)))
    return tensors


def main(argv):
    args = argv[1:]
    compare = None
    if "--compare" in args:
        i = args.index("--compare")
        compare = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    model_dir, out_path = args
    tensors = model_tensors(model_dir)
    try:
        import torch  # noqa: F401 (the accelerator machine has it; Debian here does not)
    except ImportError:
        torch = None
    out = {}
    for name in sorted(tensors):
        if not name.endswith(".qweight"):
            continue
        prefix = name[:-len(".qweight")]
        qweight, qzeros, scales = tensors[name], tensors[prefix + ".qzeros"], tensors[prefix + ".scales"]
        w = dequantize_numpy(qweight, qzeros, scales)
        if torch is not None:
            wt = dequantize_torch(torch, qweight, qzeros, scales)
            if not np.array_equal(w.view(np.uint32), wt.view(np.uint32)):
                print(f"{prefix}: numpy and torch dequantisations differ", file=sys.stderr)
                return 1
        out[prefix + ".weight_t"] = w
    if not out:
        print(f"{model_dir}: no .qweight tensors", file=sys.stderr)
        return 1
    write_safetensors(out_path, out)
    print(f"awq_dequant_reference: {len(out)} linears (torch check: {'yes' if torch else 'no'})")
    if compare is None:
        return 0
    ours = read_safetensors(compare)
    if set(ours) != set(out):
        print(f"tensor sets differ: only ours {sorted(set(ours) - set(out))[:5]}, "
              f"only reference {sorted(set(out) - set(ours))[:5]}", file=sys.stderr)
        return 1
    bad = 0
    for name, ref in out.items():
        mine = ours[name]
        if mine.shape != ref.shape or not np.array_equal(mine.view(np.uint32), ref.view(np.uint32)):
            diff = int(np.count_nonzero(mine.view(np.uint32) != ref.view(np.uint32))) if mine.shape == ref.shape else -1
            print(f"{name}: differs ({diff} of {ref.size} values; shapes {mine.shape} {ref.shape})", file=sys.stderr)
            bad += 1
    values = sum(t.size for t in out.values())
    print(f"compare: {len(out) - bad}/{len(out)} tensors bit-identical ({values} values)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
