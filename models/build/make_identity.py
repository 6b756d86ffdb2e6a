#!/usr/bin/env python3
"""Build test-only identity models: tests/models/identity_<type>/1/model.onnx.

One model per KServe v2 datatype. Each has input INPUT0 of that type with
shape [batch, n] (both symbolic) and output OUTPUT0 = Identity(INPUT0).
KServe BYTES maps to ONNX STRING.

Run from the repo root: /usr/bin/python3 models/build/make_identity.py
"""
import os

import onnx
from onnx import TensorProto, helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT_DIR = os.path.join(ROOT, "tests", "models")

# KServe v2 datatype -> ONNX element type
TYPES = [
    ("BOOL", TensorProto.BOOL),
    ("UINT8", TensorProto.UINT8),
    ("UINT16", TensorProto.UINT16),
    ("UINT32", TensorProto.UINT32),
    ("UINT64", TensorProto.UINT64),
    ("INT8", TensorProto.INT8),
    ("INT16", TensorProto.INT16),
    ("INT32", TensorProto.INT32),
    ("INT64", TensorProto.INT64),
    ("FP16", TensorProto.FLOAT16),
    ("FP32", TensorProto.FLOAT),
    ("FP64", TensorProto.DOUBLE),
    ("BYTES", TensorProto.STRING),
]


def build(kserve, elem):
    shape = ["batch", "n"]
    x = helper.make_tensor_value_info("INPUT0", elem, shape)
    y = helper.make_tensor_value_info("OUTPUT0", elem, shape)
    node = helper.make_node("Identity", ["INPUT0"], ["OUTPUT0"], name="identity")
    graph = helper.make_graph([node], "identity_" + kserve.lower(), [x], [y])
    model = helper.make_model(graph, producer_name="inferd-make_identity",
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main():
    for kserve, elem in TYPES:
        out = os.path.join(OUT_DIR, "identity_" + kserve.lower(), "1", "model.onnx")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        onnx.save(build(kserve, elem), out)
        print("wrote %s" % os.path.relpath(out, ROOT))


if __name__ == "__main__":
    main()
