#!/usr/bin/python3
"""Writes the seed corpus of fuzz_infer_pb (tests/fuzz/corpus/infer_pb/):
serialized ModelInferRequest messages for the fuzz target's test model
(tests/support/test_model.h), made with python3-protobuf from
proto/grpc_service.proto. Valid requests (typed contents, raw contents,
requested outputs, parameters) and a few invalid ones."""
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fuzz" / "corpus" / "infer_pb"

tmp = tempfile.mkdtemp()
subprocess.run(["protoc", "--python_out=" + tmp, "-I", str(ROOT / "proto"),
                str(ROOT / "proto" / "grpc_service.proto")], check=True)
sys.path.insert(0, tmp)
import grpc_service_pb2 as pb  # noqa: E402


def base(raw):
    """Every input of the test model; with typed contents (raw=False) the
    FP16 input is left out (the target's odd-byte model has none)."""
    r = pb.ModelInferRequest(model_name="test", id="seed")
    specs = [("IN_INT32", "INT32", [2, 4]), ("IN_FP32", "FP32", [1, 3]),
             ("IN_BYTES", "BYTES", [2]), ("IN_BOOL", "BOOL", [2]),
             ("IN_FP16", "FP16", [2]), ("IN_UINT64", "UINT64", [1])]
    for name, dt, shape in specs:
        if dt == "FP16" and not raw:
            continue
        t = r.inputs.add(name=name, datatype=dt, shape=shape)
        if raw:
            continue
        c = t.contents
        if dt == "INT32":
            c.int_contents.extend([1, -2, 3, 4, 5, 6, 7, -2147483648])
        elif dt == "FP32":
            c.fp32_contents.extend([0.5, -0.0, 1e-45])
        elif dt == "BYTES":
            c.bytes_contents.extend([b"a\0b", b""])
        elif dt == "BOOL":
            c.bool_contents.extend([True, False])
        elif dt == "UINT64":
            c.uint64_contents.extend([18446744073709551615])
    if raw:
        r.raw_input_contents.extend([
            struct.pack("<8i", 1, -2, 3, 4, 5, 6, 7, 8), struct.pack("<3f", 0.5, -0.0, 2.0),
            struct.pack("<I", 1) + b"x" + struct.pack("<I", 0), b"\x01\x00",
            struct.pack("<2H", 0x3c00, 0x7bff), struct.pack("<Q", 7)])
    return r


def fp16_typed():
    # FP16 has no typed contents field.
    r = base(False)
    r.inputs.add(name="IN_FP16", datatype="FP16", shape=[2]).contents.fp32_contents.extend([1, 2])
    return r


seeds = {}
seeds["typed"] = base(False)
seeds["raw"] = base(True)
r = base(True)
r.outputs.add(name="OUT_B")
r.outputs.add(name="OUT_A").parameters["binary_data"].bool_param = True
r.parameters["timeout"].int64_param = 1000
r.parameters["priority"].int64_param = 1
seeds["raw_outputs_params"] = r
seeds["fp16_typed"] = fp16_typed()
r = base(True)
del r.raw_input_contents[-1]
seeds["raw_count_mismatch"] = r
r = base(False)
r.inputs[0].shape[:] = [2, 5]
seeds["shape_mismatch"] = r
r = base(True)
r.inputs[2].shape[:] = [3]
seeds["bytes_truncated"] = r
r = base(False)
r.inputs[1].name = "IN_INT32"
seeds["duplicate_input"] = r
r = base(False)
r.outputs.add(name="OUT_A").parameters["classification"].int64_param = 2
seeds["classification"] = r

# First byte: the model (0 = with the FP16 input, 1 = without it).
TYPED = {"typed", "duplicate_input", "shape_mismatch", "classification"}
OUT.mkdir(parents=True, exist_ok=True)
for old in OUT.iterdir():
    old.unlink()
for name, msg in seeds.items():
    (OUT / name).write_bytes(bytes([name in TYPED]) + msg.SerializeToString())
(OUT / "truncated").write_bytes(b"\x01" + seeds["typed"].SerializeToString()[:-3])
print("wrote %d seeds to %s" % (len(seeds) + 1, OUT))
