#!/usr/bin/env python3
"""Build models/kjv/1/: a tiny generative language model trained on the King
James Bible, with the KV-cache ONNX interface of issue 15.

Writes model.onnx, tokenizer.json and generation.json into models/kjv/1/.

Corpus: `bible -f gen1:1-rev22:21` (Debian packages bible-kjv and
bible-kjv-text), one verse a line; the reference ("Ge1:1 ") is stripped and
every verse is one document followed by the end-of-text token. Verses are
split into 200-verse blocks; every 20th block is held out for validation.

Tokenizer: byte-level BPE (ids 0..255 are bytes, 255 merges make ids
256..510, id 511 is <|endoftext|>), trained on the training verses. A new
pre-tokenization piece starts at offset 0 and before every space or newline.

Model: decoder-only transformer, pre-LayerNorm, learned position embedding
of MAX_CONTEXT rows, tied input/output embedding, exact (Erf) GELU.
Training (PyTorch, CPU, 2 threads): AdamW, fixed seed, fixed step count and
a deterministic data order, on windows of CONTEXT tokens that each start at
a verse boundary.

The ONNX graph (opset 14, ir_version 8, default domain only, fp32) is written
by hand from the trained weights. Inputs: input_ids, position_ids [batch,
seq] INT64; attention_mask [batch, past_seq + seq] INT64; and per layer
past_key_values.{i}.key/value [batch, heads, past_seq, head_dim]. Outputs:
logits [batch, seq, vocab] and present.{i}.key/value (past ++ new on axis 2).
Query q attends key k iff attention_mask[b, k] == 1 and k <= past_seq + q;
masked scores get -1e9 added.

Run from the repo root: /usr/bin/python3 models/build/make_kjv.py
(--steps N overrides the number of training steps; --check-only re-checks
the files already written; --present new --out DIR writes the trained
weights again with the graph that returns only the new keys and values,
export_onnx's present "new", without training.)
"""
import argparse
import collections
import json
import math
import os
import re
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT_DIR = os.path.join(ROOT, "models", "kjv", "1")

SEED = 1611  # the year the King James Version was published
NUM_MERGES = 255
VOCAB = 256 + NUM_MERGES + 1
EOS = VOCAB - 1
EOS_TEXT = "<|endoftext|>"
MAX_CONTEXT = 256
LAYERS = 4
HEADS = 4
HEAD_DIM = 32
D_MODEL = HEADS * HEAD_DIM
D_MLP = 4 * D_MODEL
LN_EPS = 1e-5
MASK_BIAS = -1e9

BLOCK_VERSES = 200     # validation split: every VAL_EVERY-th block of verses
VAL_EVERY = 20
CONTEXT = MAX_CONTEXT  # training window (tokens)
BATCH = 8
STEPS = 1200
LR = 3e-3
WARMUP = 100
WEIGHT_DECAY = 0.1
VAL_WINDOWS = 64

# One thread: on the shared 2-core build machine (load 5-10 from compilers),
# 2 intra-op threads measured 5x slower per step than 1 (threads spinning on a
# busy core). Debian's torch calls the system libblas.so.3, which is the slow
# reference BLAS unless OpenBLAS is selected: when libopenblas0-pthread is
# installed, main() re-executes the script with OpenBLAS's libblas first on the
# library path (single-threaded); matrix products are then ~15x faster.
THREADS = 1
OPENBLAS_DIR = "/usr/lib/x86_64-linux-gnu/openblas-pthread"

REF_RE = re.compile(r"^[1-3]?[A-Za-z]+[0-9]+:[0-9]+ ")


# ---------------------------------------------------------------- corpus

def load_verses():
    out = subprocess.run(["bible", "-f", "gen1:1-rev22:21"], check=True,
                         stdout=subprocess.PIPE).stdout
    verses = []
    for line in out.decode("ascii").split("\n"):
        if not line:
            continue
        m = REF_RE.match(line)
        if not m:
            raise SystemExit("unexpected line from bible: %r" % line[:80])
        verses.append(line[m.end():].encode("ascii"))
    if len(verses) != 31102:
        raise SystemExit("expected 31102 verses, got %d" % len(verses))
    return verses


def split_verses(verses):
    train, val = [], []
    for i, v in enumerate(verses):
        (val if (i // BLOCK_VERSES) % VAL_EVERY == VAL_EVERY - 1 else train).append(v)
    return train, val


# ---------------------------------------------------------------- tokenizer

def pieces(text):
    """Pre-tokenization: a piece starts at 0 and before every space/newline."""
    out, start = [], 0
    for i in range(1, len(text)):
        if text[i] in (0x20, 0x0A):
            out.append(text[start:i])
            start = i
    if text:
        out.append(text[start:])
    return out


def merge_word(word, pair, new_id):
    out, i, n = [], 0, len(word)
    while i < n:
        if i + 1 < n and word[i] == pair[0] and word[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def train_bpe(verses, num_merges=NUM_MERGES):
    """num_merges merges (255 here; make_langid.py asks for more); each step
    merges the most frequent adjacent pair (ties: the lowest pair), counted
    over the distinct pieces weighted by frequency."""
    freq = collections.Counter()
    for v in verses:
        freq.update(pieces(v))
    words = [tuple(p) for p in sorted(freq)]
    counts = [freq[bytes(w)] for w in words]
    pair_count = collections.Counter()
    where = collections.defaultdict(set)
    for wi, w in enumerate(words):
        for a, b in zip(w, w[1:]):
            pair_count[(a, b)] += counts[wi]
            where[(a, b)].add(wi)
    merges = []
    for k in range(num_merges):
        if not pair_count:
            break
        best = min(pair_count.items(), key=lambda kv: (-kv[1], kv[0]))
        pair = best[0]
        new_id = 256 + k
        merges.append(pair)
        for wi in sorted(where[pair]):
            old = words[wi]
            new = merge_word(old, pair, new_id)
            if new == old:
                continue
            c = counts[wi]
            for a, b in zip(old, old[1:]):
                pair_count[(a, b)] -= c
                if pair_count[(a, b)] == 0:
                    del pair_count[(a, b)]
            for a, b in zip(new, new[1:]):
                pair_count[(a, b)] += c
                where[(a, b)].add(wi)
            words[wi] = new
        where.pop(pair, None)
        pair_count.pop(pair, None)
    return merges


class Tokenizer:
    def __init__(self, merges):
        self.merges = [tuple(m) for m in merges]
        self.rank = {m: k for k, m in enumerate(self.merges)}
        self.bytes = [bytes([i]) for i in range(256)]
        for a, b in self.merges:
            self.bytes.append(self.bytes[a] + self.bytes[b])
        self.bytes.append(b"")  # eos
        self.none = len(self.merges)  # the rank of "not a merge"
        self.cache = {}

    def encode_piece(self, piece):
        ids = self.cache.get(piece)
        if ids is not None:
            return ids
        word = tuple(piece)
        while len(word) > 1:
            best = min((self.rank.get(p, self.none), p) for p in zip(word, word[1:]))
            if best[0] == self.none:
                break
            word = merge_word(word, best[1], 256 + best[0])
        self.cache[piece] = word
        return word

    def encode(self, text):
        out = []
        for p in pieces(text):
            out.extend(self.encode_piece(p))
        return out

    def decode(self, ids):
        return b"".join(self.bytes[i] for i in ids)


def write_tokenizer(path, merges):
    obj = {"type": "byte-bpe", "vocab_size": VOCAB, "eos_token": EOS_TEXT,
           "eos_token_id": EOS, "merges": [list(m) for m in merges]}
    with open(path, "w") as f:
        f.write(json.dumps(obj) + "\n")


def write_generation(path, present="all"):
    obj = {"tokenizer": "tokenizer.json", "max_context": MAX_CONTEXT, "eos_token_id": EOS,
           "num_layers": LAYERS, "num_heads": HEADS, "head_dim": HEAD_DIM, "vocab_size": VOCAB}
    if present != "all":
        obj["present"] = present
    with open(path, "w") as f:
        f.write(json.dumps(obj, indent=2) + "\n")


# ---------------------------------------------------------------- data

def token_stream(tok, verses):
    """All verses as one stream (verse, eos, verse, eos, ...) and the offsets
    at which a verse starts (only those leaving room for a full window)."""
    stream, starts = [], []
    for v in verses:
        starts.append(len(stream))
        stream.extend(tok.encode(v))
        stream.append(EOS)
    arr = np.array(stream, dtype=np.int64)
    starts = np.array([s for s in starts if s + CONTEXT + 1 <= len(arr)], dtype=np.int64)
    return arr, starts


def val_windows(starts):
    """Up to VAL_WINDOWS windows at verse starts, non-overlapping, spread out."""
    chosen, last = [], -CONTEXT
    for s in starts:
        if s >= last + CONTEXT:
            chosen.append(int(s))
            last = s
    step = max(1, len(chosen) // VAL_WINDOWS)
    return chosen[::step][:VAL_WINDOWS]


# ---------------------------------------------------------------- model (torch)

def build_torch():
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(D_MODEL, eps=LN_EPS)
            self.q = nn.Linear(D_MODEL, D_MODEL)
            self.k = nn.Linear(D_MODEL, D_MODEL)
            self.v = nn.Linear(D_MODEL, D_MODEL)
            self.o = nn.Linear(D_MODEL, D_MODEL)
            self.ln2 = nn.LayerNorm(D_MODEL, eps=LN_EPS)
            self.fc1 = nn.Linear(D_MODEL, D_MLP)
            self.fc2 = nn.Linear(D_MLP, D_MODEL)

        def forward(self, x, bias):
            b, s, _ = x.shape
            h = self.ln1(x)
            q = self.q(h).view(b, s, HEADS, HEAD_DIM).transpose(1, 2)
            k = self.k(h).view(b, s, HEADS, HEAD_DIM).transpose(1, 2)
            v = self.v(h).view(b, s, HEADS, HEAD_DIM).transpose(1, 2)
            att = (q @ k.transpose(2, 3)) * (1.0 / math.sqrt(HEAD_DIM)) + bias
            y = torch.softmax(att, dim=-1) @ v
            x = x + self.o(y.transpose(1, 2).reshape(b, s, D_MODEL))
            return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(VOCAB, D_MODEL)
            self.wpe = nn.Embedding(MAX_CONTEXT, D_MODEL)
            self.blocks = nn.ModuleList([Block() for _ in range(LAYERS)])
            self.ln_f = nn.LayerNorm(D_MODEL, eps=LN_EPS)
            for name, p in self.named_parameters():
                if name.endswith("bias"):
                    nn.init.zeros_(p)
                elif "ln" in name:
                    nn.init.ones_(p)
                elif name.endswith(("o.weight", "fc2.weight")):
                    nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * LAYERS))
                else:
                    nn.init.normal_(p, 0.0, 0.02)

        def forward(self, ids):
            s = ids.shape[1]
            pos = torch.arange(s)
            x = self.wte(ids) + self.wpe(pos)[None]
            causal = torch.ones(s, s, dtype=torch.bool).tril()
            bias = torch.zeros(s, s).masked_fill(~causal, MASK_BIAS)
            for blk in self.blocks:
                x = blk(x, bias)
            return self.ln_f(x) @ self.wte.weight.t()

    return LM()


def lr_at(step, steps):
    if step < WARMUP:
        return LR * (step + 1) / WARMUP
    t = (step - WARMUP) / max(1, steps - WARMUP)
    return LR * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * t)))


def evaluate(model, stream, windows, tok):
    """Mean loss (nats/token) and bits per byte (eos counted as one byte)."""
    import torch
    nats, ntok, nbytes = 0.0, 0, 0
    with torch.no_grad():
        for i in range(0, len(windows), BATCH):
            idx = windows[i:i + BATCH]
            x = torch.from_numpy(np.stack([stream[s:s + CONTEXT] for s in idx]))
            y = torch.from_numpy(np.stack([stream[s + 1:s + CONTEXT + 1] for s in idx]))
            logits = model(x)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1),
                                                     reduction="sum")
            nats += float(loss)
            ntok += y.numel()
            nbytes += sum(len(tok.bytes[t]) if t != EOS else 1 for t in y.reshape(-1).tolist())
    return nats / ntok, nats / math.log(2) / nbytes


def train(tok, train_verses, val_verses, steps):
    import torch
    torch.manual_seed(SEED)
    torch.set_num_threads(THREADS)
    torch.use_deterministic_algorithms(True)
    stream, starts = token_stream(tok, train_verses)
    vstream, vstarts = token_stream(tok, val_verses)
    vwin = val_windows(vstarts)
    print("train: %d verses, %d tokens (%.2f bytes/token); validation: %d verses, %d tokens, "
          "%d windows" % (len(train_verses), len(stream),
                          sum(len(v) + 1 for v in train_verses) / len(stream),
                          len(val_verses), len(vstream), len(vwin)))
    model = build_torch()
    nparams = sum(p.numel() for p in model.parameters())
    print("model: %d parameters" % nparams)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=LR, betas=(0.9, 0.95))
    rng = np.random.default_rng(SEED)
    t0 = time.time()
    running = None
    for step in range(steps):
        idx = rng.integers(0, len(starts), size=BATCH)
        x = torch.from_numpy(np.stack([stream[starts[i]:starts[i] + CONTEXT] for i in idx]))
        y = torch.from_numpy(np.stack([stream[starts[i] + 1:starts[i] + CONTEXT + 1] for i in idx]))
        for g in opt.param_groups:
            g["lr"] = lr_at(step, steps)
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        running = float(loss) if running is None else 0.98 * running + 0.02 * float(loss)
        if step % 100 == 0 or step == steps - 1:
            print("step %5d  loss %.4f  (%.0f s)" % (step, running, time.time() - t0), flush=True)
    train_time = time.time() - t0
    model.eval()
    twin = [int(s) for s in starts[::max(1, len(starts) // VAL_WINDOWS)][:VAL_WINDOWS]]
    tr = evaluate(model, stream, twin, tok)
    va = evaluate(model, vstream, vwin, tok)
    print("training: %d steps in %.0f s" % (steps, train_time))
    print("final train loss %.4f nats/token (%.4f bits/byte); validation %.4f nats/token "
          "(%.4f bits/byte)" % (tr[0], tr[1], va[0], va[1]))
    return model, nparams


def greedy(model, tok, prompt, n):
    import torch
    ids = tok.encode(prompt)
    with torch.no_grad():
        for _ in range(n):
            nxt = int(model(torch.tensor([ids[-MAX_CONTEXT:]]))[0, -1].argmax())
            if nxt == EOS:
                break
            ids.append(nxt)
    return tok.decode(ids).decode("utf-8", "replace")


# ---------------------------------------------------------------- ONNX export

class GraphBuilder:
    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0

    def init(self, name, arr):
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def op(self, op_type, inputs, out=None, **attrs):
        self.n += 1
        out = out or "t%d" % self.n
        self.nodes.append(helper.make_node(op_type, inputs, [out], name="n%d_%s" % (self.n, op_type),
                                           **attrs))
        return out


def layer_norm(g, x, w, b):
    mean = g.op("ReduceMean", [x], axes=[-1], keepdims=1)
    d = g.op("Sub", [x, mean])
    var = g.op("ReduceMean", [g.op("Mul", [d, d])], axes=[-1], keepdims=1)
    std = g.op("Sqrt", [g.op("Add", [var, "ln_eps"])])
    return g.op("Add", [g.op("Mul", [g.op("Div", [d, std]), w]), b])


def export_onnx(sd, path, present="all"):
    """sd: name -> float32 numpy array (the torch state dict).

    present "all": present.{i} = past ++ new on axis 2 (the usual export).
    present "new": present.{i} holds only the new tokens' keys and values
    [batch, heads, seq, head_dim], and the past is read where it lies:
    scores against the past and against the new keys are computed apart and
    joined (a [seq, past + seq] tensor per head), so the graph never copies
    the past. A server can then keep the past in a buffer of its own with
    room to grow, writing only the new tokens into it (generation.json's
    "present": "new")."""
    assert present in ("all", "new")
    g = GraphBuilder()
    f32 = np.float32
    g.init("ln_eps", np.array(LN_EPS, f32))
    g.init("scale", np.array(1.0 / math.sqrt(HEAD_DIM), f32))
    g.init("zero_f", np.array(0.0, f32))
    g.init("mask_bias", np.array(MASK_BIAS, f32))
    g.init("half", np.array(0.5, f32))
    g.init("one_f", np.array(1.0, f32))
    g.init("inv_sqrt2", np.array(1.0 / math.sqrt(2.0), f32))
    g.init("one_i", np.array(1, np.int64))
    g.init("zero_i", np.array(0, np.int64))
    g.init("ax0", np.array([0], np.int64))
    g.init("ax1", np.array([1], np.int64))
    g.init("shape_bshd", np.array([0, 0, HEADS, HEAD_DIM], np.int64))
    g.init("shape_bsc", np.array([0, 0, D_MODEL], np.int64))
    g.init("wte", sd["wte.weight"].astype(f32))
    g.init("wpe", sd["wpe.weight"].astype(f32))

    # attention bias [batch, 1, seq, past+seq]: 0 where attended, -1e9 elsewhere
    seq = g.op("Gather", [g.op("Shape", ["input_ids"]), "one_i"], axis=0)
    total = g.op("Gather", [g.op("Shape", ["attention_mask"]), "one_i"], axis=0)
    past = g.op("Sub", [total, seq])
    qpos = g.op("Add", [g.op("Range", ["zero_i", seq, "one_i"]), past])       # [seq]
    kpos = g.op("Range", ["zero_i", total, "one_i"])                          # [total]
    causal = g.op("LessOrEqual", [g.op("Unsqueeze", [kpos, "ax0"]),
                                  g.op("Unsqueeze", [qpos, "ax1"])])            # [seq, total]
    keep = g.op("Equal", [g.op("Unsqueeze", ["attention_mask", "ax1"]), "one_i"])
    keep = g.op("Unsqueeze", [keep, "ax1"])                                    # [b, 1, 1, total]
    allowed = g.op("And", [causal, keep])                                      # [b, 1, seq, total]
    bias = g.op("Where", [allowed, "zero_f", "mask_bias"])

    if present == "new":
        # the softmax's columns split into the past's and the new tokens'
        g.init("seq_1", np.array([1], np.int64))
        split = g.op("Concat", [g.op("Reshape", [past, "seq_1"]), g.op("Reshape", [seq, "seq_1"])],
                     axis=0)
    x = g.op("Add", [g.op("Gather", ["wte", "input_ids"], axis=0),
                     g.op("Gather", ["wpe", "position_ids"], axis=0)])
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
              helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch", "seq"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64,
                                            ["batch", "past_seq_plus_seq"])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", VOCAB])]
    for i in range(LAYERS):
        p = "blocks.%d." % i

        def lin(h, name, p=p, i=i):
            w = g.init("l%d.%s.w" % (i, name), sd[p + name + ".weight"].T.astype(f32))
            b = g.init("l%d.%s.b" % (i, name), sd[p + name + ".bias"].astype(f32))
            return g.op("Add", [g.op("MatMul", [h, w]), b])

        def heads(t, out=None):
            return g.op("Transpose", [g.op("Reshape", [t, "shape_bshd"])], out=out, perm=[0, 2, 1, 3])

        ln = [g.init("l%d.%s" % (i, n), sd[p + n].astype(f32))
              for n in ("ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias")]
        h = layer_norm(g, x, ln[0], ln[1])
        q = heads(lin(h, "q"))
        pk, pv = "past_key_values.%d.key" % i, "past_key_values.%d.value" % i
        for name in (pk, pv):
            inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                                        ["batch", HEADS, "past_seq", HEAD_DIM]))
        if present == "all":
            k = g.op("Concat", [pk, heads(lin(h, "k"))], out="present.%d.key" % i, axis=2)
            v = g.op("Concat", [pv, heads(lin(h, "v"))], out="present.%d.value" % i, axis=2)
            scores = g.op("Mul", [g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])]),
                                  "scale"])
            att = g.op("Softmax", [g.op("Add", [scores, bias])], axis=-1)
            ctx = g.op("MatMul", [att, v])
            kv_dim = "past_seq_plus_seq"
        else:
            k = heads(lin(h, "k"), out="present.%d.key" % i)
            v = heads(lin(h, "v"), out="present.%d.value" % i)
            sp = g.op("MatMul", [q, g.op("Transpose", [pk], perm=[0, 1, 3, 2])])
            sn = g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])])
            scores = g.op("Mul", [g.op("Concat", [sp, sn], axis=3), "scale"])
            att = g.op("Softmax", [g.op("Add", [scores, bias])], axis=-1)
            att_p, att_n = "att_p%d" % i, "att_n%d" % i
            g.n += 1
            g.nodes.append(helper.make_node("Split", [att, split], [att_p, att_n],
                                            name="n%d_Split" % g.n, axis=3))
            ctx = g.op("Add", [g.op("MatMul", [att_p, pv]), g.op("MatMul", [att_n, v])])
            kv_dim = "seq"
        for name in (k, v):
            outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                                         ["batch", HEADS, kv_dim, HEAD_DIM]))
        y = g.op("Reshape", [g.op("Transpose", [ctx], perm=[0, 2, 1, 3]), "shape_bsc"])
        x = g.op("Add", [x, lin(y, "o")])
        h = layer_norm(g, x, ln[2], ln[3])
        a = lin(h, "fc1")
        erf = g.op("Erf", [g.op("Mul", [a, "inv_sqrt2"])])
        gelu = g.op("Mul", [g.op("Mul", [a, "half"]), g.op("Add", [erf, "one_f"])])
        x = g.op("Add", [x, lin(gelu, "fc2")])
    x = layer_norm(g, x, g.init("ln_f.w", sd["ln_f.weight"].astype(f32)),
                   g.init("ln_f.b", sd["ln_f.bias"].astype(f32)))
    g.op("MatMul", [x, g.op("Transpose", ["wte"], perm=[1, 0])], out="logits")

    save_graph(helper.make_graph(g.nodes, "kjv", inputs, outputs, g.inits), "inferd-make_kjv",
               14, path)


def save_graph(graph, producer, opset, path):
    """graph as a checked ONNX model (IR version 8, the default domain at
    opset) written to path. (make_langid.py's too.)"""
    model = helper.make_model(graph, producer_name=producer,
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


def state_dict_from_onnx(path):
    """The state dict export_onnx wrote into the graph at path (its
    initializers, mapped back to the torch names)."""
    inits = {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
    sd = {"wte.weight": inits["wte"], "wpe.weight": inits["wpe"],
          "ln_f.weight": inits["ln_f.w"], "ln_f.bias": inits["ln_f.b"]}
    i = 0
    while "l%d.q.w" % i in inits:
        p = "blocks.%d." % i
        for name in ("q", "k", "v", "o", "fc1", "fc2"):
            sd[p + name + ".weight"] = inits["l%d.%s.w" % (i, name)].T
            sd[p + name + ".bias"] = inits["l%d.%s.b" % (i, name)]
        for n in ("ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias"):
            sd[p + n] = inits["l%d.%s" % (i, n)]
        i += 1
    return sd


def write_variant(src_dir, out_dir, present):
    """src_dir's model (written by export_onnx) again, with the present
    interface `present`, into out_dir (with its tokenizer)."""
    global LAYERS, HEADS, HEAD_DIM, D_MODEL, MAX_CONTEXT
    with open(os.path.join(src_dir, "generation.json")) as f:
        gen = json.load(f)
    LAYERS, HEADS, HEAD_DIM = gen["num_layers"], gen["num_heads"], gen["head_dim"]
    D_MODEL, MAX_CONTEXT = HEADS * HEAD_DIM, gen["max_context"]
    os.makedirs(out_dir, exist_ok=True)
    export_onnx(state_dict_from_onnx(os.path.join(src_dir, "model.onnx")),
                os.path.join(out_dir, "model.onnx"), present)
    with open(os.path.join(src_dir, gen["tokenizer"]), "rb") as f:
        tokenizer = f.read()
    with open(os.path.join(out_dir, gen["tokenizer"]), "wb") as f:
        f.write(tokenizer)
    gen.pop("present", None)
    if present != "all":
        gen["present"] = present
    with open(os.path.join(out_dir, "generation.json"), "w") as f:
        f.write(json.dumps(gen, indent=2) + "\n")


# ---------------------------------------------------------------- main

def use_openblas():
    if os.environ.get("KJV_BLAS") or not os.path.exists(os.path.join(OPENBLAS_DIR, "libblas.so.3")):
        return
    env = dict(os.environ, KJV_BLAS="openblas", OPENBLAS_NUM_THREADS=str(THREADS),
               LD_LIBRARY_PATH=OPENBLAS_DIR + (":" + os.environ["LD_LIBRARY_PATH"]
                                               if os.environ.get("LD_LIBRARY_PATH") else ""))
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def main():
    use_openblas()
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=STEPS)
    ap.add_argument("--check-only", action="store_true")
    ap.add_argument("--present", choices=("all", "new"),
                    help="no training: write models/kjv/1's weights with this present "
                         "interface (export_onnx) into --out")
    ap.add_argument("--out", help="the directory --present writes")
    args = ap.parse_args()
    if args.present:
        if not args.out:
            ap.error("--present needs --out DIR")
        write_variant(OUT_DIR, args.out, args.present)
        return
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import check_kjv
    if args.check_only:
        check_kjv.check(OUT_DIR)
        return
    t0 = time.time()
    os.makedirs(OUT_DIR, exist_ok=True)
    verses = load_verses()
    train_verses, val_verses = split_verses(verses)
    merges = train_bpe(train_verses)
    tok = Tokenizer(merges)
    for v in verses[:2000]:
        assert tok.decode(tok.encode(v)) == v
    write_tokenizer(os.path.join(OUT_DIR, "tokenizer.json"), merges)
    write_generation(os.path.join(OUT_DIR, "generation.json"))
    print("BLAS: %s, %d thread(s)" % (os.environ.get("KJV_BLAS", "system libblas"), THREADS))
    print("tokenizer: %d merges (%.0f s)" % (len(merges), time.time() - t0))

    model, _ = train(tok, train_verses, val_verses, args.steps)
    for prompt in (b"In the beginning", b"And Jesus said"):
        print("greedy: %s" % greedy(model, tok, prompt, 60))
    sd = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    path = os.path.join(OUT_DIR, "model.onnx")
    export_onnx(sd, path)
    print("wrote %s (%d bytes)" % (os.path.relpath(path, ROOT), os.path.getsize(path)))
    check_kjv.check(OUT_DIR, torch_model=model)
    print("total %.0f s" % (time.time() - t0))


if __name__ == "__main__":
    main()
