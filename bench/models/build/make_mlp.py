#!/usr/bin/env python3
"""Build bench/models/mlp/1/model.onnx: the compute-floor model of `make bench`.

A multi-layer perceptron whose arithmetic dominates the cost of serving it,
even when batched: 3.7 MFLOP per sample (tens of microseconds on one core),
so a server that adds little overhead should get close to raw ONNX Runtime.

  input         FP32 [batch, 784]
    -> MatMul W1 [784, 1024]  + b1 -> Relu
    -> MatMul W2 [1024, 1024] + b2 -> Relu
    -> MatMul W3 [1024, 10]   + b3 -> logits
    -> Softmax(axis=1)   => probabilities FP32 [batch, 10]

Weights are deterministic pseudo-random numbers (numpy, fixed seed, He
scaling so the activations stay in range); the model computes nothing
meaningful. Opset 13, ir_version 8, checked with onnx.checker. Re-running
produces a byte-identical file. The file (~7.5 MB) is not committed:
scripts/bench.sh generates it.

Run from the repo root: /usr/bin/python3 bench/models/build/make_mlp.py [OUT]
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
OUT = os.path.join(ROOT, "bench", "models", "mlp", "1", "model.onnx")

SEED = 20261130
LAYERS = [784, 1024, 1024, 10]


def build():
    rng = np.random.default_rng(SEED)
    inits, nodes = [], []
    x = "input"
    for i, (n_in, n_out) in enumerate(zip(LAYERS[:-1], LAYERS[1:]), start=1):
        W = (rng.standard_normal((n_in, n_out)) * np.sqrt(2.0 / n_in)).astype(np.float32)
        b = (rng.standard_normal(n_out) * 0.01).astype(np.float32)
        inits += [numpy_helper.from_array(W, "W%d" % i), numpy_helper.from_array(b, "b%d" % i)]
        nodes.append(helper.make_node("MatMul", [x, "W%d" % i], ["mm%d" % i], name="fc%d" % i))
        last = i == len(LAYERS) - 1
        pre = "logits" if last else "pre%d" % i
        nodes.append(helper.make_node("Add", ["mm%d" % i, "b%d" % i], [pre],
                                      name="fc%d_bias" % i))
        if not last:
            nodes.append(helper.make_node("Relu", [pre], ["h%d" % i], name="relu%d" % i))
            x = "h%d" % i
    nodes.append(helper.make_node("Softmax", ["logits"], ["probabilities"], name="softmax",
                                  axis=1))
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", LAYERS[0]])]
    outputs = [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT,
                                             ["batch", LAYERS[-1]])]
    graph = helper.make_graph(nodes, "mlp", inputs, outputs, initializer=inits)
    model = helper.make_model(graph, producer_name="inferd-make_mlp",
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    model.doc_string = "bench MLP 784-1024-1024-10, random weights (seed %d)" % SEED
    onnx.checker.check_model(model)
    return model


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else OUT
    model = build()
    os.makedirs(os.path.dirname(out), exist_ok=True)
    tmp = out + ".tmp"
    onnx.save(model, tmp)
    os.replace(tmp, out)
    flops = sum(2 * a * b for a, b in zip(LAYERS[:-1], LAYERS[1:]))
    print("wrote %s (%.1f MFLOP per sample)" % (os.path.relpath(out, ROOT), flops / 1e6))


if __name__ == "__main__":
    main()
