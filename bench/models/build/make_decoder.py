#!/usr/bin/env python3
"""Build bench/models/decoder/1/: a generative model of a size users serve on
CPUs, for measuring the generation engine (make bench, experiment 12),
with random weights: its text means nothing, its work is real.

Shape: 8 layers, width 512 (8 heads of 64), MLP 2048, context 2048, the
tokenizer of models/kjv (byte-level BPE, vocabulary 512): 26 M parameters,
about 100 MiB, 32 KiB of KV cache per token (4 KiB per layer). Not
bundled: make bench builds it when it is missing or older than this
script.

The ONNX graph is the one models/build/make_kjv.py writes (the KV-cache
interface of models/README.md: input_ids, position_ids, attention_mask,
past_key_values.{i}.key/value in; logits, present.{i}.key/value out), with
these dimensions, and by default with "present": "new" (export_onnx:
present.* holds only the new tokens, the past is read in place;
--present all writes the usual graph); the weights are drawn from a seeded normal distribution
as a freshly initialised GPT-2 would be (std 0.02, residual projections
scaled down), LayerNorms at identity. The end-of-text token's embedding
row is zero, so that greedy decoding never ends a generation early (its
logit is 0 where the others spread around it): a benchmark's generations
all run to max_tokens.

Run from the repo root: /usr/bin/python3 bench/models/build/make_decoder.py [OUT_DIR]
"""
import argparse
import json
import math
import os
import shutil
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "models", "build"))
import make_kjv as kjv  # noqa: E402  (the graph writer, its shape constants set below)

OUT_DIR = os.path.join(ROOT, "bench", "models", "decoder", "1")
SEED = 2048
LAYERS, HEADS, HEAD_DIM, MAX_CONTEXT = 8, 8, 64, 2048


def weights(rng):
    d, mlp, std = kjv.D_MODEL, kjv.D_MLP, 0.02
    proj = std / math.sqrt(2 * LAYERS)
    f32 = np.float32
    sd = {"wte.weight": rng.normal(0, std, (kjv.VOCAB, d)).astype(f32),
          "wpe.weight": rng.normal(0, 0.01, (MAX_CONTEXT, d)).astype(f32),
          "ln_f.weight": np.ones(d, f32), "ln_f.bias": np.zeros(d, f32)}
    sd["wte.weight"][kjv.EOS] = 0.0
    for i in range(LAYERS):
        p = "blocks.%d." % i
        for name, (n_in, n_out), s in (("q", (d, d), std), ("k", (d, d), std),
                                       ("v", (d, d), std), ("o", (d, d), proj),
                                       ("fc1", (d, mlp), std), ("fc2", (mlp, d), proj)):
            # torch's Linear stores [out, in]; export_onnx transposes.
            sd[p + name + ".weight"] = rng.normal(0, s, (n_out, n_in)).astype(f32)
            sd[p + name + ".bias"] = np.zeros(n_out, f32)
        for ln in ("ln1", "ln2"):
            sd[p + ln + ".weight"] = np.ones(d, f32)
            sd[p + ln + ".bias"] = np.zeros(d, f32)
    return sd


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default=OUT_DIR)
    ap.add_argument("--present", choices=("all", "new"), default="new",
                    help="the graph's present.* (make_kjv.export_onnx): past ++ new, or only the "
                         "new tokens (the past read in place: the default)")
    args = ap.parse_args()
    out = args.out
    kjv.LAYERS, kjv.HEADS, kjv.HEAD_DIM, kjv.MAX_CONTEXT = LAYERS, HEADS, HEAD_DIM, MAX_CONTEXT
    kjv.D_MODEL = HEADS * HEAD_DIM
    kjv.D_MLP = 4 * kjv.D_MODEL
    os.makedirs(out, exist_ok=True)
    kjv.export_onnx(weights(np.random.default_rng(SEED)), os.path.join(out, "model.onnx"),
                    args.present)
    shutil.copy(os.path.join(ROOT, "models", "kjv", "1", "tokenizer.json"),
                os.path.join(out, "tokenizer.json"))
    kjv.write_generation(os.path.join(out, "generation.json"), args.present)
    with open(os.path.join(out, "generation.json")) as f:
        gen = json.load(f)
    print("wrote %s: %d layers, width %d, context %d, %.1f MiB" % (
        os.path.relpath(out, ROOT), gen["num_layers"], gen["num_heads"] * gen["head_dim"],
        gen["max_context"], os.path.getsize(os.path.join(out, "model.onnx")) / 2**20))


if __name__ == "__main__":
    main()
