#!/usr/bin/env python3
"""Build the stateful stand-ins for Triton's sequence examples:
tests/models/<name>/{config.pbtxt,1/model.onnx} for

  simple_sequence              OUTPUT = INPUT + START; direct strategy, control
                               inputs START and READY (INT32 0/1)
  simple_dyna_sequence         OUTPUT = INPUT + START + END * CORRID; oldest
                               strategy, CORRID a UINT64 control
  simple_string_dyna_sequence  OUTPUT = the sum of the sequence's INPUTs
                               (implicit state) + END * CORRID, with a string
                               CORRID (TYPE_STRING, parsed as a number)

They answer as Triton's example models do, so its clients
simple_{grpc,http}_sequence_*_client.py get the values they check. Every
model also keeps the running sum of INPUT as implicit state (state
ACC_IN -> ACC_OUT, reset by START) and returns it as output ACC: what the
server's sequence state holds, visible to the tests.

Control and state tensors are ordinary ONNX inputs and outputs with a
batch dimension ([batch, 1]); config.pbtxt names them in
sequence_batching, so clients neither send nor see them.

Run from the repo root: /usr/bin/python3 tests/models/build/make_sequence.py
"""
import os
import struct

import onnx
from onnx import TensorProto, helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
OUT_DIR = os.path.join(ROOT, "tests", "models")
I32 = TensorProto.INT32


def vi(name, elem=I32):
    return helper.make_tensor_value_info(name, elem, ["batch", 1])


def node(op, ins, outs, **kw):
    return helper.make_node(op, ins, outs, name=outs[0] + "_" + op.lower(), **kw)


def accumulate():
    """ACC_OUT = ACC_IN * (1 - START) + INPUT; ACC = ACC_OUT."""
    one = helper.make_tensor("one", I32, [], [1])
    return [one], [
        node("Sub", ["one", "START"], ["not_start"]),
        node("Mul", ["ACC_IN", "not_start"], ["kept"]),
        node("Add", ["kept", "INPUT"], ["ACC_OUT"]),
        node("Identity", ["ACC_OUT"], ["ACC"]),
    ]


def corrid_int(kind):
    """The correlation id as INT32: CORRID_I."""
    if kind == "string":
        return [node("Cast", ["CORRID"], ["corrid_i64"], to=TensorProto.INT64),
                node("Cast", ["corrid_i64"], ["CORRID_I"], to=I32)]
    return [node("Cast", ["CORRID"], ["CORRID_I"], to=I32)]


def build(name):
    inits, nodes = accumulate()
    inputs = [vi("INPUT"), vi("START"), vi("READY"), vi("ACC_IN")]
    if name == "simple_sequence":
        nodes += [node("Add", ["INPUT", "START"], ["sum"]),
                  node("Mul", ["sum", "READY"], ["OUTPUT"])]
    else:
        string = name == "simple_string_dyna_sequence"
        inputs += [vi("END"), vi("CORRID", TensorProto.STRING if string else TensorProto.UINT64)]
        nodes += corrid_int("string" if string else "uint64")
        nodes += [node("Mul", ["END", "CORRID_I"], ["end_id"])]
        base = "ACC_OUT" if string else "in_start"
        if not string:
            nodes += [node("Add", ["INPUT", "START"], ["in_start"])]
        nodes += [node("Add", [base, "end_id"], ["with_id"]),
                  node("Mul", ["with_id", "READY"], ["OUTPUT"])]
    outputs = [vi("OUTPUT"), vi("ACC"), vi("ACC_OUT")]
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    model = helper.make_model(graph, producer_name="inferd-make_sequence",
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def control(name, kind):
    return ('    { name: "%s" control [ { kind: %s int32_false_true: [ 0, 1 ] } ] }'
            % (name, kind))


# The string-CORRID model cannot run on the default warm-up's empty
# strings (an empty id is no number): its warm-up gives every input the
# model runs on, control inputs included, the id "0" from a file (Triton's
# BYTES layout: a 4-byte little-endian length, then the bytes).
STRING_WARMUP = """model_warmup [
  {
    name: "corrid_zero"
    batch_size: 1
    inputs { key: "INPUT" value: { data_type: TYPE_INT32 dims: [ 1 ] zero_data: true } }
    inputs { key: "START" value: { data_type: TYPE_INT32 dims: [ 1 ] zero_data: true } }
    inputs { key: "READY" value: { data_type: TYPE_INT32 dims: [ 1 ] zero_data: true } }
    inputs { key: "END" value: { data_type: TYPE_INT32 dims: [ 1 ] zero_data: true } }
    inputs { key: "ACC_IN" value: { data_type: TYPE_INT32 dims: [ 1 ] zero_data: true } }
    inputs { key: "CORRID" value: { data_type: TYPE_STRING dims: [ 1 ] input_data_file: "corrid" } }
  }
]
"""


def config(name):
    controls = [control("START", "CONTROL_SEQUENCE_START"),
                control("READY", "CONTROL_SEQUENCE_READY")]
    strategy = "  direct { }"
    if name != "simple_sequence":
        controls.append(control("END", "CONTROL_SEQUENCE_END"))
        dtype = "TYPE_STRING" if name == "simple_string_dyna_sequence" else "TYPE_UINT64"
        controls.append('    { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID '
                        'data_type: %s } ] }' % dtype)
        strategy = "  oldest { max_candidate_sequences: 4 max_queue_delay_microseconds: 100 }"
    return """# Built by tests/models/build/make_sequence.py: a stand-in for Triton's
# example model of the same name.
name: "%s"
max_batch_size: 8
sequence_batching {
  max_sequence_idle_microseconds: 5000000
%s
  control_input [
%s
  ]
  state [
    {
      input_name: "ACC_IN"
      output_name: "ACC_OUT"
      data_type: TYPE_INT32
      dims: [ 1 ]
      initial_state { data_type: TYPE_INT32 dims: [ 1 ] zero_data: true name: "zero" }
    }
  ]
}
input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [
  { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] },
  { name: "ACC" data_type: TYPE_INT32 dims: [ 1 ] }
]
""" % (name, strategy, ",\n".join(controls)) + (
        STRING_WARMUP if name == "simple_string_dyna_sequence" else "")


def main():
    for name in ("simple_sequence", "simple_dyna_sequence", "simple_string_dyna_sequence"):
        d = os.path.join(OUT_DIR, name)
        os.makedirs(os.path.join(d, "1"), exist_ok=True)
        onnx.save(build(name), os.path.join(d, "1", "model.onnx"))
        with open(os.path.join(d, "config.pbtxt"), "w") as f:
            f.write(config(name))
        if name == "simple_string_dyna_sequence":
            os.makedirs(os.path.join(d, "warmup"), exist_ok=True)
            with open(os.path.join(d, "warmup", "corrid"), "wb") as f:
                f.write(struct.pack("<I", 1) + b"0")
        print("wrote %s" % os.path.relpath(d, ROOT))


if __name__ == "__main__":
    main()
