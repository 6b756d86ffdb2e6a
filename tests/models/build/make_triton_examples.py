#!/usr/bin/env python3
"""Build the stand-ins for the models of Triton's client examples that the
bundled models do not cover: tests/models/<name>/{config.pbtxt,1/model.onnx}
for

  simple_string    INPUT0, INPUT1: BYTES [batch, 16], decimal numbers as
                   text; OUTPUT0 = INPUT0 + INPUT1 and OUTPUT1 = INPUT0 -
                   INPUT1, as text (ONNX Cast string <-> INT32): Triton's
                   simple_string (its string, shm-string and explicit-byte
                   examples)
  simple_int8      INPUT0, INPUT1: INT8 [batch, 16]; OUTPUT0 = INPUT0 +
                   INPUT1, OUTPUT1 = INPUT0 - INPUT1 (computed in INT32,
                   wrapped to INT8): Triton's simple_int8
  simple_identity  INPUT0 -> OUTPUT0, BYTES [batch, -1]: Triton's
                   simple_identity (the string examples' identity part)

with max_batch_size 8, as Triton's example models. Their answers are the
values the examples check (tests/integration/test_triton_examples.py runs
the examples against them when Triton's client library is present).

Run from the repo root: /usr/bin/python3 tests/models/build/make_triton_examples.py
"""
import os

import onnx
from onnx import TensorProto, helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
OUT_DIR = os.path.join(ROOT, "tests", "models")

CONFIG = """name: "{name}"
max_batch_size: 8
input [
{inputs}
]
output [
{outputs}
]
{warmup}"""

# Zeros would be empty strings, which simple_string cannot read as numbers:
# its warm-up sends "0" (warmup/zeros: 16 length-prefixed elements).
STRING_WARMUP = """model_warmup [
  {{
    name: "zeros"
    batch_size: 1
{inputs}
  }}
]
"""


def io_lines(names, dtype, dims):
    return ",\n".join('  {{ name: "{}" data_type: {} dims: [ {} ] }}'.format(n, dtype, dims)
                      for n in names)


def save(name, nodes, elem, ins, outs, dims, cfg_type, warmup=False):
    shape = ["batch", 16 if dims == "16" else "n"]
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, elem, shape) for n in ins],
        [helper.make_tensor_value_info(n, elem, shape) for n in outs])
    model = helper.make_model(graph, producer_name="inferd-make_triton_examples",
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    d = os.path.join(OUT_DIR, name)
    os.makedirs(os.path.join(d, "1"), exist_ok=True)
    onnx.save(model, os.path.join(d, "1", "model.onnx"))
    text = ""
    if warmup:
        os.makedirs(os.path.join(d, "warmup"), exist_ok=True)
        with open(os.path.join(d, "warmup", "zeros"), "wb") as f:
            f.write(b"\x01\x00\x00\x000" * 16)
        text = STRING_WARMUP.format(inputs="\n".join(
            '    inputs {{ key: "{}" value: {{ data_type: {} dims: [ 16 ] '
            'input_data_file: "zeros" }} }}'.format(n, cfg_type) for n in ins))
    with open(os.path.join(d, "config.pbtxt"), "w") as f:
        f.write(CONFIG.format(name=name, inputs=io_lines(ins, cfg_type, dims),
                              outputs=io_lines(outs, cfg_type, dims), warmup=text))
    print("wrote tests/models/%s" % name)


def node(op, ins, out, **kw):
    return helper.make_node(op, ins, [out], name=out + "_" + op.lower(), **kw)


def add_sub(elem):
    """OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1, in INT32."""
    i32 = TensorProto.INT32
    return [node("Cast", ["INPUT0"], "a", to=i32), node("Cast", ["INPUT1"], "b", to=i32),
            node("Add", ["a", "b"], "sum"), node("Sub", ["a", "b"], "diff"),
            node("Cast", ["sum"], "OUTPUT0", to=elem), node("Cast", ["diff"], "OUTPUT1", to=elem)]


def main():
    two = (["INPUT0", "INPUT1"], ["OUTPUT0", "OUTPUT1"])
    save("simple_string", add_sub(TensorProto.STRING), TensorProto.STRING, *two, "16",
         "TYPE_STRING", warmup=True)
    save("simple_int8", add_sub(TensorProto.INT8), TensorProto.INT8, *two, "16", "TYPE_INT8")
    save("simple_identity", [node("Identity", ["INPUT0"], "OUTPUT0")], TensorProto.STRING,
         ["INPUT0"], ["OUTPUT0"], "-1", "TYPE_STRING")


if __name__ == "__main__":
    main()
