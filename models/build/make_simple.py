#!/usr/bin/env python3
"""Build models/simple/1/model.onnx: Triton's classic "simple" example.

INPUT0, INPUT1: INT32 [batch, 16]
OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 (INT32 [batch, 16])

Run from the repo root: /usr/bin/python3 models/build/make_simple.py
"""
import os

import onnx
from onnx import TensorProto, helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "models", "simple", "1", "model.onnx")


def main():
    shape = ["batch", 16]
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT32, shape)
              for n in ("INPUT0", "INPUT1")]
    outputs = [helper.make_tensor_value_info(n, TensorProto.INT32, shape)
               for n in ("OUTPUT0", "OUTPUT1")]
    nodes = [
        helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"], name="add"),
        helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"], name="sub"),
    ]
    graph = helper.make_graph(nodes, "simple", inputs, outputs)
    model = helper.make_model(graph, producer_name="inferd-make_simple",
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    onnx.save(model, OUT)
    print("wrote %s" % os.path.relpath(OUT, ROOT))


if __name__ == "__main__":
    main()
