#!/usr/bin/env python3
"""Check models/kjv/1/ (written by make_kjv.py) without ONNX Runtime.

The graph is evaluated node by node in numpy float32 (an interpreter for the
few default-domain ops the graph uses), and the script checks:
  - onnx.checker, opset 14, ir_version 8, the input/output names, types and
    shapes of the spec, and generation.json against the graph;
  - tokenizer.json: the shape of the file, and that decoding the encoding of
    a few texts (including "<|endoftext|>" and non-ASCII bytes) gives them
    back;
  - (a) logits of a full 12-token sequence equal those of incremental
    KV-cache decoding (prefill 5 tokens, then 1 token at a time) within 1e-4;
  - (b) a batch of 2 rows with different real past lengths, past padded with
    zeros (padding after the real past in one row, before it in the other)
    and masked with attention_mask = 0, gives each row's logits and new keys
    and values as computed alone, within 1e-4; a fully masked padded past
    gives no NaN;
  - with the trained torch model (when called from make_kjv.py): the ONNX
    logits equal torch's within 1e-4.

Run from the repo root: /usr/bin/python3 models/build/check_kjv.py
"""
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper
from scipy.special import erf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOL = 1e-4


def _run_node(node, v):
    a = [v[n] if n else None for n in node.input]
    at = {x.name: onnx.helper.get_attribute_value(x) for x in node.attribute}
    t = node.op_type
    if t in ("Add", "Sub", "Mul", "Div"):
        f = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}[t]
        r = f(a[0], a[1])
        return r.astype(a[0].dtype) if r.dtype != a[0].dtype else r
    if t == "Sqrt":
        return np.sqrt(a[0])
    if t == "Erf":
        return erf(a[0]).astype(np.float32)
    if t == "ReduceMean":
        return np.mean(a[0], axis=tuple(at["axes"]), keepdims=bool(at.get("keepdims", 1)),
                       dtype=np.float32)
    if t == "Gather":
        return np.take(a[0], a[1], axis=at.get("axis", 0))
    if t == "Shape":
        return np.array(a[0].shape, dtype=np.int64)
    if t == "Range":
        return np.arange(a[0], a[1], a[2], dtype=np.int64)
    if t == "Unsqueeze":
        return np.expand_dims(a[0], tuple(int(x) for x in a[1]))
    if t == "LessOrEqual":
        return a[0] <= a[1]
    if t == "Equal":
        return a[0] == a[1]
    if t == "And":
        return np.logical_and(a[0], a[1])
    if t == "Where":
        return np.where(a[0], a[1], a[2])
    if t == "Reshape":
        shape = [a[0].shape[i] if d == 0 else int(d) for i, d in enumerate(a[1])]
        return a[0].reshape(shape)
    if t == "Transpose":
        return np.transpose(a[0], at["perm"])
    if t == "Concat":
        return np.concatenate(a, axis=at["axis"])
    if t == "MatMul":
        return np.matmul(a[0], a[1])
    if t == "Softmax":
        e = np.exp(a[0] - a[0].max(axis=at["axis"], keepdims=True))
        return e / e.sum(axis=at["axis"], keepdims=True)
    raise ValueError("op %s not supported by the checker" % t)


def run(model, feeds):
    """Evaluates the graph; returns {output name: array}."""
    v = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    v.update(feeds)
    for node in model.graph.node:
        v[node.output[0]] = _run_node(node, v)
    return {o.name: v[o.name] for o in model.graph.output}


class Model:
    def __init__(self, path, gen):
        self.onnx = onnx.load(path)
        self.layers, self.heads, self.head_dim = gen["num_layers"], gen["num_heads"], gen["head_dim"]

    def step(self, ids, pos, mask, past):
        """ids/pos [b, s]; mask [b, p + s]; past: list of (k, v) [b, h, p, d]."""
        feeds = {"input_ids": np.asarray(ids, np.int64), "position_ids": np.asarray(pos, np.int64),
                 "attention_mask": np.asarray(mask, np.int64)}
        for i, (k, v) in enumerate(past):
            feeds["past_key_values.%d.key" % i] = k
            feeds["past_key_values.%d.value" % i] = v
        out = run(self.onnx, feeds)
        present = [(out["present.%d.key" % i], out["present.%d.value" % i]) for i in range(self.layers)]
        return out["logits"], present

    def empty_past(self, b):
        z = np.zeros((b, self.heads, 0, self.head_dim), np.float32)
        return [(z, z) for _ in range(self.layers)]


def check_interface(model, gen):
    onnx.checker.check_model(model)
    assert model.ir_version == 8, model.ir_version
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 14)]
    assert all(n.domain == "" for n in model.graph.node)

    def sig(vi):
        t = vi.type.tensor_type
        return (t.elem_type, [d.dim_param or d.dim_value for d in t.shape.dim])

    L, H, D, V = gen["num_layers"], gen["num_heads"], gen["head_dim"], gen["vocab_size"]
    want_in = {"input_ids": (TensorProto.INT64, 2), "position_ids": (TensorProto.INT64, 2),
               "attention_mask": (TensorProto.INT64, 2)}
    want_out = {"logits": (TensorProto.FLOAT, 3)}
    for i in range(L):
        for kv in ("key", "value"):
            want_in["past_key_values.%d.%s" % (i, kv)] = (TensorProto.FLOAT, 4)
            want_out["present.%d.%s" % (i, kv)] = (TensorProto.FLOAT, 4)
    got_in = {vi.name: sig(vi) for vi in model.graph.input}
    got_out = {vi.name: sig(vi) for vi in model.graph.output}
    assert set(got_in) == set(want_in), sorted(got_in)
    assert set(got_out) == set(want_out), sorted(got_out)
    for name, (ty, rank) in list(want_in.items()) + list(want_out.items()):
        ety, dims = got_in.get(name) or got_out[name]
        assert ety == ty and len(dims) == rank, (name, ety, dims)
        assert isinstance(dims[0], str), (name, dims)  # dynamic batch
        if rank == 4:
            assert dims[1] == H and dims[3] == D and isinstance(dims[2], str), (name, dims)
    assert got_out["logits"][1][2] == V
    wpe = [i for i in model.graph.initializer if i.name == "wpe"]
    assert wpe and wpe[0].dims[0] == gen["max_context"], "position table != max_context"


def check_tokenizer(out_dir, gen):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import make_kjv
    with open(os.path.join(out_dir, gen["tokenizer"])) as f:
        tj = json.load(f)
    assert tj["type"] == "byte-bpe" and tj["eos_token"] == "<|endoftext|>"
    assert tj["vocab_size"] == 256 + len(tj["merges"]) + 1 == gen["vocab_size"]
    assert tj["eos_token_id"] == tj["vocab_size"] - 1 == gen["eos_token_id"]
    for k, (a, b) in enumerate(tj["merges"]):
        assert 0 <= a < 256 + k and 0 <= b < 256 + k, (k, a, b)
    tok = make_kjv.Tokenizer(tj["merges"])
    for text in (b"In the beginning God created the heaven and the earth.",
                 b"<|endoftext|>", b"  two  spaces\nand a newline\n\n", "caf\u00e9 \u2014 \u4e2d".encode(),
                 bytes(range(256)), b""):
        ids = tok.encode(text)
        assert tok.decode(ids) == text, text
        assert all(0 <= i < tj["eos_token_id"] for i in ids)
    return tok


def check(out_dir, torch_model=None):
    with open(os.path.join(out_dir, "generation.json")) as f:
        gen = json.load(f)
    m = Model(os.path.join(out_dir, "model.onnx"), gen)
    check_interface(m.onnx, gen)
    tok = check_tokenizer(out_dir, gen)
    ids = tok.encode(b"And God said, Let there be light: and there was light.")[:12]
    assert len(ids) == 12
    n = len(ids)

    # (a) full sequence vs prefill 5 + one token at a time
    full, full_past = m.step([ids], [list(range(n))], [[1] * n], m.empty_past(1))
    logits, past = m.step([ids[:5]], [list(range(5))], [[1] * 5], m.empty_past(1))
    worst = float(np.abs(logits[0] - full[0, :5]).max())
    for t in range(5, n):
        logits, past = m.step([[ids[t]]], [[t]], [[1] * (t + 1)], past)
        worst = max(worst, float(np.abs(logits[0, 0] - full[0, t]).max()))
    for (k, v), (fk, fv) in zip(past, full_past):
        worst = max(worst, float(np.abs(k - fk).max()), float(np.abs(v - fv).max()))
    assert worst < TOL, worst
    print("check (a): full sequence vs KV-cache decoding: max |diff| %.2e" % worst)

    # (b) two rows, real past lengths 7 and 3, padded to 7 and masked
    row_a, row_b = ids[:9], tok.encode(b"Jesus wept. And")[:5]
    assert len(row_b) == 5
    _, past_a = m.step([row_a[:7]], [list(range(7))], [[1] * 7], m.empty_past(1))
    _, past_b = m.step([row_b[:3]], [list(range(3))], [[1] * 3], m.empty_past(1))
    alone_a, pres_a = m.step([row_a[7:]], [[7, 8]], [[1] * 9], past_a)
    alone_b, pres_b = m.step([row_b[3:]], [[3, 4]], [[1] * 5], past_b)
    worst = 0.0
    for pad_after in (True, False):
        zeros = np.zeros((1, gen["num_heads"], 4, gen["head_dim"]), np.float32)
        pb = [tuple(np.concatenate([x, zeros] if pad_after else [zeros, x], axis=2) for x in kv)
              for kv in past_b]
        past = [(np.concatenate([ka, kb]), np.concatenate([va, vb])) for (ka, va), (kb, vb) in zip(past_a, pb)]
        mask_b = [1] * 3 + [0] * 4 if pad_after else [0] * 4 + [1] * 3
        logits, pres = m.step([row_a[7:], row_b[3:]], [[7, 8], [3, 4]], [[1] * 9, mask_b + [1, 1]], past)
        assert not np.isnan(logits).any()
        worst = max(worst, float(np.abs(logits[0] - alone_a[0]).max()),
                    float(np.abs(logits[1] - alone_b[0]).max()))
        for (k, v), (ka, va), (kb, vb) in zip(pres, pres_a, pres_b):
            worst = max(worst, float(np.abs(k[0] - ka[0]).max()), float(np.abs(v[0] - va[0]).max()),
                        float(np.abs(k[1, :, 7:] - kb[0, :, 3:]).max()),
                        float(np.abs(v[1, :, 7:] - vb[0, :, 3:]).max()))
    assert worst < TOL, worst
    print("check (b): padded + masked batch of 2 vs each row alone: max |diff| %.2e" % worst)

    # a row whose whole past is padding still gives finite logits
    z = np.zeros((1, gen["num_heads"], 3, gen["head_dim"]), np.float32)
    logits, _ = m.step([[ids[0]]], [[0]], [[0, 0, 0, 1]], [(z, z)] * gen["num_layers"])
    single, _ = m.step([[ids[0]]], [[0]], [[1]], m.empty_past(1))
    assert np.isfinite(logits).all() and float(np.abs(logits - single).max()) < TOL

    if torch_model is not None:
        import torch
        with torch.no_grad():
            ref = torch_model(torch.tensor([ids])).numpy()
        diff = float(np.abs(ref - full).max())
        assert diff < TOL, diff
        print("check: ONNX vs torch logits: max |diff| %.2e" % diff)
    print("checks passed")


if __name__ == "__main__":
    check(os.path.join(ROOT, "models", "kjv", "1"))
