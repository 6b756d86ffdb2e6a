#!/usr/bin/python3
"""Writes tests/models/first3/1/model.onnx: an output whose first dimension is
the batch for small batches only.

Input X INT32 [batch, 4] -> output Y INT32 [first, 4] = X[0:3] (Slice): the
first dimension is min(batch, 3), declared variable. The ONNX Runtime
backend preallocates outputs whose shape it can tell before the run
(src/backend/onnxruntime.c, enum out_plan): after batches of at most 3 it
takes Y's first dimension for the batch; a batch of 5 shows it is not, and
the run must still succeed (tests/unit/test_onnxruntime.c).
"""
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[3]
OUT = ROOT / "tests" / "models" / "first3" / "1" / "model.onnx"

consts = [numpy_helper.from_array(np.array([v], dtype=np.int64), name)
          for name, v in (("starts", 0), ("ends", 3), ("axes", 0))]
graph = helper.make_graph(
    [helper.make_node("Slice", ["X", "starts", "ends", "axes"], ["Y"])], "first3",
    [helper.make_tensor_value_info("X", TensorProto.INT32, ["batch", 4])],
    [helper.make_tensor_value_info("Y", TensorProto.INT32, ["first", 4])],
    consts)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.checker.check_model(model)
OUT.parent.mkdir(parents=True, exist_ok=True)
onnx.save(model, str(OUT))
print("wrote", OUT)
