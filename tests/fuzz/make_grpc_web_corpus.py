#!/usr/bin/python3
"""Writes the seed corpus of fuzz_grpc_web (tests/fuzz/corpus/grpc_web/):
gRPC-Web request bodies as browsers send them, in both encodings (the
first byte of a seed: bit 0 = text, bits 1-7 = the piece size the target
feeds the reader with; see tests/fuzz/fuzz_grpc_web.c). Messages are
ModelInferRequest and ServerLiveRequest bytes made with python3-protobuf
from proto/grpc_service.proto; text bodies whole, in chunks each padded,
and a few refusals (a compressed flag, a bad flag, a message over the
target's 4096-byte limit, a body cut inside a prefix, bad base64).

Run from the repo root: /usr/bin/python3 tests/fuzz/make_grpc_web_corpus.py
"""
import base64
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fuzz" / "corpus" / "grpc_web"

tmp = tempfile.mkdtemp()
subprocess.run(["protoc", "--python_out=" + tmp, "-I", str(ROOT / "proto"),
                str(ROOT / "proto" / "grpc_service.proto")], check=True)
sys.path.insert(0, tmp)
import grpc_service_pb2 as pb  # noqa: E402


def frame(payload, flag=0):
    return bytes([flag]) + len(payload).to_bytes(4, "big") + payload


def simple():
    r = pb.ModelInferRequest(model_name="simple", id="seed")
    for name in ("INPUT0", "INPUT1"):
        t = r.inputs.add(name=name, datatype="INT32", shape=[1, 16])
        t.contents.int_contents.extend(range(16))
    return r.SerializeToString()


def seed(text, piece, body):
    return bytes([(piece - 1) << 1 | int(text)]) + body


def chunked_b64(raw, cuts):
    out, prev = b"", 0
    for c in list(cuts) + [len(raw)]:
        out += base64.b64encode(raw[prev:c])
        prev = c
    return out


def main():
    live = pb.ServerLiveRequest().SerializeToString()
    infer = simple()
    stream = frame(infer) + frame(live) + frame(infer)
    seeds = {
        "binary_infer": seed(False, 128, frame(infer)),
        "binary_infer_bytewise": seed(False, 1, frame(infer)),
        "binary_empty_message": seed(False, 3, frame(live)),
        "binary_stream": seed(False, 7, stream),
        "binary_compressed": seed(False, 5, frame(infer, 1)),
        "binary_bad_flag": seed(False, 5, frame(infer, 0x80)),
        "binary_too_large": seed(False, 64, frame(b"x" * 5000)),
        "binary_cut_prefix": seed(False, 2, frame(infer) + b"\x00\x00\x01"),
        "text_infer": seed(True, 128, base64.b64encode(frame(infer))),
        "text_chunks_padded": seed(True, 9, chunked_b64(frame(infer), [7, 20, 22])),
        "text_stream_per_message": seed(True, 16, b"".join(
            base64.b64encode(frame(m)) for m in (infer, live, infer))),
        "text_bad_char": seed(True, 4, b"AAAA*AAA"),
        "text_cut_quantum": seed(True, 4, base64.b64encode(frame(live))[:-1]),
        # An empty text body: re-encoding nothing once did pointer arithmetic on NULL.
        "regress_text_empty_body": seed(True, 33, b""),
    }
    OUT.mkdir(parents=True, exist_ok=True)
    for name, data in seeds.items():
        (OUT / name).write_bytes(data)


if __name__ == "__main__":
    main()
