#!/usr/bin/python3
"""Read and write safetensors files by hand, to the format's spec, from PyTorch tensors.

Debian has no python3-safetensors package, so this file is the independent implementation the
tests check minigrad's reader and writer against:

  make the fixture (a small torch MLP and its outputs):
    /usr/bin/python3 tests/golden/safetensors_io.py make-fixture tests/golden
  open a file written by minigrad in PyTorch and run the same MLP on it:
    /usr/bin/python3 tests/golden/safetensors_io.py check-mlp FILE.safetensors
"""
import json
import struct
import sys

import torch

DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64", torch.bool: "BOOL"}
BACK = {v: k for k, v in DTYPES.items()}


def save(path, tensors, metadata=None):
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name in sorted(tensors):  # the reference implementation sorts names
        t = tensors[name].detach().contiguous()
        data = t.numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    meta = header.pop("__metadata__", {})
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        t = torch.frombuffer(bytearray(data[b:end]), dtype=BACK[e["dtype"]]) if end > b else torch.zeros(0, dtype=BACK[e["dtype"]])
        out[name] = t.reshape(e["shape"])
    return out, meta


class MLP(torch.nn.Module):
    """The same architecture as TinyMLP in tests/test_serialize.cpp."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(3, 4)
        self.fc2 = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


X = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])


def make_fixture(folder):
    from gen_golden import fmt_tensor
    torch.manual_seed(7)
    m = MLP()
    save(f"{folder}/torch_mlp.safetensors", m.state_dict(), {"format": "pt"})
    with open(f"{folder}/torch_mlp.txt", "w") as f:
        print("case torch_mlp", file=f)
        print(fmt_tensor("x", X.double()), file=f)
        print(fmt_tensor("out", m(X).detach().double()), file=f)
        print("end", file=f)


def check_mlp(path):
    tensors, meta = load(path)
    m = MLP()
    m.load_state_dict(tensors)  # strict: every name and shape must match
    print("metadata:", meta)
    print("outputs:", m(X).detach().tolist())


if __name__ == "__main__":
    {"make-fixture": make_fixture, "check-mlp": check_mlp}[sys.argv[1]](sys.argv[2])
