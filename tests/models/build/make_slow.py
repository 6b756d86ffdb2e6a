#!/usr/bin/python3
"""Writes tests/models/slow/1/model.onnx: a model that is slow on purpose.

Input X FP32 [batch, 256] -> output Y FP32 [batch, 256], Y = relu(X @ W) applied
16 times with one shared 256x256 weight (W = 0.0625 * I + small noise): about
2 MFLOP per sample, so a batch of 64 takes tens of milliseconds on one core.
Tests use it to build a queue (timeouts, queue limits) without sleeping.
"""
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[3]
OUT = ROOT / "tests" / "models" / "slow" / "1" / "model.onnx"

rng = np.random.default_rng(0)
w = (np.eye(256) + rng.normal(0, 0.01, (256, 256))).astype(np.float32)
nodes, prev = [], "X"
for i in range(16):
    nodes.append(helper.make_node("MatMul", [prev, "W"], ["m%d" % i]))
    out = "Y" if i == 15 else "r%d" % i
    nodes.append(helper.make_node("Relu", ["m%d" % i], [out]))
    prev = out
graph = helper.make_graph(
    nodes, "slow",
    [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", 256])],
    [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["batch", 256])],
    [numpy_helper.from_array(w, "W")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.checker.check_model(model)
OUT.parent.mkdir(parents=True, exist_ok=True)
onnx.save(model, str(OUT))
print("wrote", OUT)
