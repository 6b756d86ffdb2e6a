#!/usr/bin/env python3
"""Build models/langid/: a language identifier for English, German, French
and Spanish words and short phrases, served from raw text (preprocess.json's
"text" input: the server tokenizes).

Writes into models/langid/: config.pbtxt, labels.txt, preprocess.json,
tokenizer.json (preprocess.json's files live in the model directory, for
every version) and 1/model.onnx.

Data: Debian's word lists /usr/share/dict/american-english (wamerican),
ngerman (wngerman), french (wfrench), spanish (wspanish). Each line is one
word; words with an apostrophe (English possessives, French elisions) are
dropped; the rest is ASCII-lowercased (A-Z only, as the server's
"lowercase": true does; accents, umlauts and ß stay as the lists have them),
deduplicated, and words found in more than one list are dropped (they carry
no language). Per language the words are shuffled (fixed seed); the first
HELD_OUT are held out for evaluation, the next TRAIN_WORDS are trained on.

Tokenizer: byte-level BPE (make_kjv.py's trainer and encoder; ids 0..255
bytes, MERGES merges, then <|endoftext|>, unused here), trained on the
training words, each once alone and once after a space (the two pieces a
word makes in a phrase). Pre-tokenization cuts before every space, so a
phrase's ids are its first word's ids followed by each next word's " word"
ids: the script builds phrases that way.

Samples: a phrase of 1 to 4 training words of one language (the count
uniform), joined by single spaces, cut to MAX_LENGTH tokens.

Model (PyTorch, CPU, one thread, fixed seed): embedding of DIM per token,
masked mean over the tokens (id 0 under mask 0 is padding and ignored),
Linear(DIM, HIDDEN) -> ReLU -> Linear(HIDDEN, 4) -> Softmax.

The ONNX graph (opset 13, ir_version 8, default domain only, fp32) is
written by hand from the weights:
  inputs  input_ids INT64 [batch, seq], attention_mask INT64 [batch, seq]
  output  probabilities FP32 [batch, 4] (labels.txt order: en, de, fr, es)
  e = Gather(embedding, input_ids); m = Cast(attention_mask, FLOAT)
  mean = ReduceSum(e * m[..., None], 1) / Max(ReduceSum(m, 1), 1)
  probabilities = Softmax(Relu(mean @ W1 + b1) @ W2 + b2, axis=-1)
After writing, the graph is evaluated in numpy from the file's initializers
and compared with torch on the held-out data.

Run from the repo root: /usr/bin/python3 models/build/make_langid.py
"""
import json
import os
import random
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_kjv  # noqa: E402  (the BPE trainer and encoder, the graph builder)

ROOT = os.path.dirname(os.path.dirname(HERE))
OUT_DIR = os.path.join(ROOT, "models", "langid")

LANGS = [("en", "/usr/share/dict/american-english"),
         ("de", "/usr/share/dict/ngerman"),
         ("fr", "/usr/share/dict/french"),
         ("es", "/usr/share/dict/spanish")]
SEED = 4
MERGES = 1500
VOCAB = 256 + MERGES + 1
MAX_LENGTH = 32          # tokens (preprocess.json's max_length)
HELD_OUT = 2000          # words per language
TRAIN_WORDS = 60000      # at most, per language
BPE_WORDS = 20000        # training words per language the BPE is trained on
DIM = 64
HIDDEN = 128
BATCH = 256
EPOCHS = 4
LR = 3e-3

ASCII_LOWER = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", b"abcdefghijklmnopqrstuvwxyz")


def ascii_lower(b):
    """A-Z to a-z, every other byte as is: the server's "lowercase": true."""
    return b.translate(ASCII_LOWER)


# ---------------------------------------------------------------- data

def load_words():
    """{lang: sorted list of words (bytes)} without the words of several lists."""
    words = {}
    for lang, path in LANGS:
        with open(path, "rb") as f:
            lines = f.read().decode("utf-8").split("\n")
        ws = set()
        for w in lines:
            w = w.strip()
            if w and "'" not in w and " " not in w:
                ws.add(ascii_lower(w.encode("utf-8")))
        words[lang] = ws
    seen = {}
    for lang, ws in words.items():
        for w in ws:
            seen[w] = seen.get(w, 0) + 1
    return {lang: sorted(w for w in ws if seen[w] == 1) for lang, ws in words.items()}


def split(words):
    """{lang: (train, held_out)}, shuffled with the seed."""
    out = {}
    rng = random.Random(SEED)
    for lang, _ in LANGS:
        ws = list(words[lang])
        rng.shuffle(ws)
        out[lang] = (ws[HELD_OUT:HELD_OUT + TRAIN_WORDS], ws[:HELD_OUT])
    return out


def load_tokenizer(path):
    """The Python reference encoder for a tokenizer.json (make_kjv.Tokenizer)."""
    with open(path) as f:
        obj = json.load(f)
    return make_kjv.Tokenizer([tuple(m) for m in obj["merges"]])


def encode_text(tok, text, max_length=MAX_LENGTH):
    """What the server feeds for a text (str or bytes): ASCII-lowercased,
    BPE-encoded, cut to max_length ids."""
    if isinstance(text, str):
        text = text.encode("utf-8")
    return tok.encode(ascii_lower(text))[:max_length]


class WordIds:
    """Token ids of a word alone and after a space, cached."""

    def __init__(self, tok):
        self.tok, self.cache = tok, {}

    def phrase(self, words):
        ids = []
        for i, w in enumerate(words):
            key = (w, i > 0)
            if key not in self.cache:
                self.cache[key] = self.tok.encode((b" " if i else b"") + w)
            ids.extend(self.cache[key])
        return ids[:MAX_LENGTH]


def phrases(rng, pool, n, count):
    """n phrases of `count` words (an int, or None: 1 to 4) from pool."""
    return [[pool[rng.randrange(len(pool))] for _ in range(count or rng.randint(1, 4))]
            for _ in range(n)]


def batch_arrays(seqs):
    """Padded ids and mask, INT64 [len(seqs), longest]."""
    width = max(len(s) for s in seqs)
    ids = np.zeros((len(seqs), width), np.int64)
    mask = np.zeros((len(seqs), width), np.int64)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = s
        mask[i, :len(s)] = 1
    return ids, mask


# ---------------------------------------------------------------- model

def build_torch():
    import torch
    from torch import nn

    class LangId(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(VOCAB, DIM)
            self.fc1 = nn.Linear(DIM, HIDDEN)
            self.fc2 = nn.Linear(HIDDEN, len(LANGS))

        def forward(self, ids, mask):
            m = mask.to(torch.float32)
            e = self.emb(ids) * m.unsqueeze(-1)
            mean = e.sum(1) / m.sum(1, keepdim=True).clamp(min=1.0)
            return self.fc2(torch.relu(self.fc1(mean)))

    return LangId()


def train(wid, data):
    import torch
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    model = build_torch()
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    rng = random.Random(SEED + 1)
    n_per_lang = min(len(data[lang][0]) for lang, _ in LANGS)
    for epoch in range(EPOCHS):
        samples = []
        for label, (lang, _) in enumerate(LANGS):
            for words in phrases(rng, data[lang][0], n_per_lang, None):
                samples.append((wid.phrase(words), label))
        rng.shuffle(samples)
        lr = LR * (1.0 - epoch / EPOCHS)
        for group in opt.param_groups:
            group["lr"] = lr
        total, t0 = 0.0, time.time()
        for b in range(0, len(samples), BATCH):
            chunk = samples[b:b + BATCH]
            ids, mask = batch_arrays([s for s, _ in chunk])
            y = torch.tensor([label for _, label in chunk])
            loss = torch.nn.functional.cross_entropy(
                model(torch.from_numpy(ids), torch.from_numpy(mask)), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(chunk)
        print("epoch %d: loss %.4f (lr %.4f, %.0f s)" % (epoch, total / len(samples), lr,
                                                        time.time() - t0))
    return model


def torch_probs(model, seqs):
    import torch
    out = []
    with torch.no_grad():
        for b in range(0, len(seqs), 1024):
            ids, mask = batch_arrays(seqs[b:b + 1024])
            out.append(torch.softmax(model(torch.from_numpy(ids), torch.from_numpy(mask)), -1)
                       .numpy())
    return np.concatenate(out)


def held_out_sets(wid, data):
    """{name: (token sequences, labels)}: single held-out words and 3-word
    phrases of held-out words."""
    rng = random.Random(SEED + 2)
    sets = {"words": ([], []), "phrases3": ([], [])}
    for label, (lang, _) in enumerate(LANGS):
        for w in data[lang][1]:
            sets["words"][0].append(wid.phrase([w]))
            sets["words"][1].append(label)
        for words in phrases(rng, data[lang][1], HELD_OUT, 3):
            sets["phrases3"][0].append(wid.phrase(words))
            sets["phrases3"][1].append(label)
    return sets


# ---------------------------------------------------------------- ONNX

def export_onnx(sd, path):
    f32 = np.float32
    g = make_kjv.GraphBuilder()
    g.init("emb", sd["emb.weight"].astype(f32))
    g.init("w1", sd["fc1.weight"].T.astype(f32))
    g.init("b1", sd["fc1.bias"].astype(f32))
    g.init("w2", sd["fc2.weight"].T.astype(f32))
    g.init("b2", sd["fc2.bias"].astype(f32))
    g.init("one_f", np.array(1.0, f32))
    g.init("ax1", np.array([1], np.int64))
    g.init("ax2", np.array([2], np.int64))
    e = g.op("Gather", ["emb", "input_ids"], axis=0)                    # [b, s, DIM]
    m = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)          # [b, s]
    summed = g.op("ReduceSum", [g.op("Mul", [e, g.op("Unsqueeze", [m, "ax2"])]), "ax1"],
                  keepdims=0)                                           # [b, DIM]
    count = g.op("Max", [g.op("ReduceSum", [m, "ax1"], keepdims=1), "one_f"])  # [b, 1]
    mean = g.op("Div", [summed, count])
    h = g.op("Relu", [g.op("Add", [g.op("MatMul", [mean, "w1"]), "b1"])])
    logits = g.op("Add", [g.op("MatMul", [h, "w2"]), "b2"])
    g.op("Softmax", [logits], out="probabilities", axis=-1)
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64,
                                            ["batch", "seq"])]
    outputs = [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT,
                                             ["batch", len(LANGS)])]
    make_kjv.save_graph(helper.make_graph(g.nodes, "langid", inputs, outputs, g.inits),
                        "inferd-make_langid", 13, path)


def numpy_probs(path, seqs):
    """The graph of path evaluated in numpy from its initializers."""
    w = {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
    ids, mask = batch_arrays(seqs)
    m = mask.astype(np.float32)
    mean = (w["emb"][ids] * m[..., None]).sum(1) / np.maximum(m.sum(1, keepdims=True), 1.0)
    logits = np.maximum(mean @ w["w1"] + w["b1"], 0.0) @ w["w2"] + w["b2"]
    z = np.exp(logits - logits.max(-1, keepdims=True))
    return z / z.sum(-1, keepdims=True)


# ---------------------------------------------------------------- files

CONFIG = """\
# The language identifier of models/README.md (models/build/make_langid.py).
# Texts of different token counts share a batch, padded with id 0 under mask
# 0 (the model averages over the mask only), within a 50 % padding budget.
max_batch_size: 32
dynamic_batching { max_queue_delay_microseconds: 2000 }
parameters { key: "padding_budget" value: { string_value: "0.5" } }
output [
  { name: "probabilities", data_type: TYPE_FP32, dims: [ 4 ], label_filename: "labels.txt" }
]
"""

PREPROCESS = {"inputs": [{"name": "text", "feeds": "input_ids",
                          "text": {"tokenizer": "bpe", "vocab": "tokenizer.json",
                                   "max_bytes": 4096, "max_length": MAX_LENGTH,
                                   "lowercase": True, "attention_mask": "attention_mask",
                                   "datatype": "INT64"}}]}


def write_files(merges):
    os.makedirs(os.path.join(OUT_DIR, "1"), exist_ok=True)
    tok = {"type": "byte-bpe", "vocab_size": VOCAB, "eos_token": make_kjv.EOS_TEXT,
           "eos_token_id": VOCAB - 1, "merges": [list(m) for m in merges]}
    with open(os.path.join(OUT_DIR, "tokenizer.json"), "w") as f:
        f.write(json.dumps(tok) + "\n")
    with open(os.path.join(OUT_DIR, "config.pbtxt"), "w") as f:
        f.write(CONFIG)
    with open(os.path.join(OUT_DIR, "labels.txt"), "w") as f:
        f.write("".join(lang + "\n" for lang, _ in LANGS))
    with open(os.path.join(OUT_DIR, "preprocess.json"), "w") as f:
        f.write(json.dumps(PREPROCESS, indent=2) + "\n")


def main():
    t0 = time.time()
    words = load_words()
    data = split(words)
    for lang, _ in LANGS:
        print("%s: %d words (%d train, %d held out)" % (lang, len(words[lang]),
                                                        len(data[lang][0]), len(data[lang][1])))
    bpe_texts = []
    for lang, _ in LANGS:
        for w in data[lang][0][:BPE_WORDS]:
            bpe_texts += [w, b" " + w]
    merges = make_kjv.train_bpe(bpe_texts, MERGES)
    assert len(merges) == MERGES
    tok = make_kjv.Tokenizer(merges)
    write_files(merges)
    print("tokenizer: %d merges (%.0f s)" % (len(merges), time.time() - t0))
    wid = WordIds(tok)
    for lang, _ in LANGS:
        for w in data[lang][1][:200]:
            assert tok.decode(wid.phrase([w])) == w

    model = train(wid, data)
    sets = held_out_sets(wid, data)
    path = os.path.join(OUT_DIR, "1", "model.onnx")
    export_onnx({k: v.detach().numpy() for k, v in model.state_dict().items()}, path)
    print("wrote %s (%d bytes)" % (os.path.relpath(path, ROOT), os.path.getsize(path)))
    for name, (seqs, labels) in sets.items():
        p = torch_probs(model, seqs)
        q = numpy_probs(path, seqs)
        diff = float(np.abs(p - q).max())
        assert diff < 1e-5, diff
        acc = float((q.argmax(1) == np.array(labels)).mean())
        print("held out %s: accuracy %.4f over %d (torch vs ONNX in numpy: max |diff| %.1e)"
              % (name, acc, len(seqs), diff))
    print("total %.0f s" % (time.time() - t0))


if __name__ == "__main__":
    main()
