#!/usr/bin/python3
"""Chaos soak for inferd (`make soak`; SOAK_SECS, default 600).

Serves a temporary repository (explicit control mode) with `addv` (ONNX,
OUTPUT0 = INPUT0 + version), `simple` and `flaky` (the identity_stall example
plugin failing every 7th execute), then runs for SOAK_SECS:
  4 REST JSON + 2 REST binary clients (addv, simple), 1 flaky client,
  a disconnector, a malformer, 2 gRPC ModelInfer clients, a gRPC
  ModelStreamInfer client, a gRPC canceller (on `stall`, 20 ms per execution,
  and flaky), a gRPC channel closer, a gRPC malformer, a reloader and a
  signaller,
checking that every well-formed request gets exactly one correct response,
the process survives, RSS and fds do not grow, and SIGTERM exits 0.
Writes bench/SOAK.md; exits non-zero on FAIL.
Debian python3-requests / numpy / onnx / grpcio / protobuf and protoc only
(the gRPC message classes are generated from proto/ at start).
"""
import json
import os
import queue
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import grpc
import numpy as np
import requests

ROOT = Path(__file__).resolve().parent.parent
INFERD = Path(os.environ.get("INFERD_BIN", ROOT / "build" / "inferd"))
PLUGIN = INFERD.parent / "libinferd_identity_stall.so"
SOAK_SECS = float(os.environ.get("SOAK_SECS", "600"))
WARMUP_SECS = min(60.0, SOAK_SECS / 4)   # "a warm-up minute" (shorter for short runs)
EXIT_TIMEOUT = 30

lock = threading.Lock()
stop = threading.Event()
pause = threading.Event()          # workers idle while set (fd sampling)
idle_count = [0]
WORKERS = []                       # names of pausable workers
failures = []                      # (kind, description)
stats = {}                         # kind -> dict(sent, received, lat=[])
reloads = [0]
addv_latest = [1]                  # newest addv version directory written
addv_seen = set()                  # addv versions named by correct responses
signals_sent = {"SIGHUP": 0, "SIGUSR1": 0}


def fail(kind, msg):
    with lock:
        failures.append((kind, msg))
        if len(failures) <= 30:
            print("FAILURE [%s] %s" % (kind, msg), flush=True)


def stat(kind):
    with lock:
        return stats.setdefault(kind, {"sent": 0, "received": 0, "lat": []})


def count(kind, field, n=1):
    s = stat(kind)
    with lock:
        s[field] += n


def latency(kind, secs):
    s = stat(kind)
    with lock:
        s["lat"].append(secs)


def maybe_pause():
    """Called by workers between requests: blocks while pause is set."""
    if pause.is_set():
        with lock:
            idle_count[0] += 1
        while pause.is_set() and not stop.is_set():
            time.sleep(0.02)
        with lock:
            idle_count[0] -= 1


_issued_ports = set()


def free_port():
    """A free port not handed out before (two bind(0) calls in a row can
    return the same port)."""
    while True:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        p = s.getsockname()[1]
        s.close()
        if p not in _issued_ports:
            _issued_ports.add(p)
            return p


# ---------------------------------------------------------------- repository

def write_addv(path, version, note=""):
    import onnx
    from onnx import TensorProto, helper
    c = helper.make_tensor("C", TensorProto.INT32, [1], [version])
    graph = helper.make_graph(
        [helper.make_node("Add", ["INPUT0", "C"], ["OUTPUT0"])], "addv",
        [helper.make_tensor_value_info("INPUT0", TensorProto.INT32, ["batch", 16])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.INT32, ["batch", 16])], [c],
        doc_string=note)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    onnx.save(model, str(tmp))
    os.replace(tmp, path)   # never a half-written model file


PLUGIN_CONFIG = """backend: "identity_stall"
max_batch_size: 8
input  [ { name: "IN"  data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""
FLAKY_CONFIG = PLUGIN_CONFIG + """parameters { key: "fail_every_n" value: { string_value: "7" } }
parameters { key: "delay_us" value: { string_value: "2000" } }
parameters { key: "fail_skip" value: { string_value: "1" } }
"""
# stall: 20 ms per execution, so gRPC calls can be cancelled while queued or running
STALL_CONFIG = PLUGIN_CONFIG + """parameters { key: "delay_us" value: { string_value: "20000" } }
"""


def build_repo(root):
    write_addv(root / "addv" / "1" / "model.onnx", 1)
    shutil.copytree(ROOT / "models" / "simple", root / "simple")
    for name, config in (("flaky", FLAKY_CONFIG), ("stall", STALL_CONFIG)):
        d = root / name
        (d / "1").mkdir(parents=True)
        shutil.copy(PLUGIN, d / PLUGIN.name)
        (d / "1" / "model.onnx").write_bytes(b"")
        (d / "config.pbtxt").write_text(config)


# ---------------------------------------------------------------- clients

def addv_body(a):
    return {"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "INT32",
                        "data": a.tolist()}]}


def simple_body(a, b):
    return {"inputs": [
        {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": a.tolist()},
        {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": b.tolist()}]}


def check_json_response(model, r, a, b):
    if r.status_code != 200:
        return "status %d: %s" % (r.status_code, r.text[:200])
    out = r.json()
    outs = {o["name"]: o["data"] for o in out.get("outputs", [])}
    return check_outputs(model, out.get("model_name"), out.get("model_version"), outs, a, b)


def check_outputs(model, name, version, outs, a, b):
    """The expected-output rule every client kind shares: outs maps output
    names to lists of values; addv's data must be input + the version the
    response names. Returns None or what is wrong."""
    if name != model:
        return "model_name %r" % name
    if model == "addv":
        v = int(version)
        if outs.get("OUTPUT0") != (a + v).tolist():
            return "addv data != input + version %d: %s" % (v, (outs.get("OUTPUT0") or [])[:4])
        with lock:
            addv_seen.add(v)
    else:
        if outs.get("OUTPUT0") != (a + b).tolist() or outs.get("OUTPUT1") != (a - b).tolist():
            return "simple data wrong"
    return None


def exchange(kind, model, send, check):
    """One well-formed request of a client `kind` to `model`: counts it sent
    and received, records its latency, and records a failure when send()
    raises or check(response) returns an error message."""
    count(kind, "sent")
    t0 = time.monotonic()
    try:
        r = send()
        latency(kind, time.monotonic() - t0)
        count(kind, "received")
        err = check(r)
        if err:
            fail(kind, "%s: %s" % (model, err))
    except grpc.RpcError as e:
        count(kind, "received")
        fail(kind, "%s: %s %s" % (model, e.code().name, e.details()))
    except Exception as e:
        fail(kind, "%s: exception %r" % (model, e))


def json_client(k, base, kind="json"):
    sess = requests.Session()
    rng = random.Random(k)
    i = 0
    while not stop.is_set():
        maybe_pause()
        if stop.is_set():
            break
        model = "addv" if i % 2 == 0 else "simple"
        a = np.arange(16, dtype=np.int32) * rng.randint(-50, 50) + rng.randint(-10**6, 10**6)
        b = np.full(16, rng.randint(-1000, 1000), dtype=np.int32)
        body = addv_body(a) if model == "addv" else simple_body(a, b)
        exchange(kind, model,
                 lambda: sess.post(base + "/v2/models/%s/infer" % model, data=json.dumps(body),
                                   headers={"Content-Type": "application/json"}, timeout=60),
                 lambda r: check_json_response(model, r, a, b))
        i += 1


def binary_client(k, base, kind="binary"):
    sess = requests.Session()
    rng = random.Random(1000 + k)
    i = 0
    while not stop.is_set():
        maybe_pause()
        if stop.is_set():
            break
        model = "addv" if i % 2 == 0 else "simple"
        a = (np.arange(16, dtype=np.int32) * rng.randint(-50, 50)
             + rng.randint(-10**6, 10**6)).astype("<i4")
        b = np.full(16, rng.randint(-1000, 1000), dtype="<i4")
        names = ["INPUT0"] if model == "addv" else ["INPUT0", "INPUT1"]
        header = {"inputs": [{"name": n, "shape": [1, 16], "datatype": "INT32",
                              "parameters": {"binary_data_size": 64}} for n in names],
                  "parameters": {"binary_data_output": True}}
        hj = json.dumps(header).encode()
        payload = hj + a.tobytes() + (b.tobytes() if model == "simple" else b"")
        headers = {"Inference-Header-Content-Length": str(len(hj)),
                   "Content-Type": "application/octet-stream"}
        exchange(kind, model,
                 lambda: sess.post(base + "/v2/models/%s/infer" % model, data=payload,
                                   headers=headers, timeout=60),
                 lambda r: check_binary_response(model, r, a, b))
        i += 1


def check_binary_response(model, r, a, b):
    if r.status_code != 200:
        return "status %d: %s" % (r.status_code, r.text[:200])
    hl = r.headers.get("Inference-Header-Content-Length")
    if hl is None:
        return "no Inference-Header-Content-Length in response"
    hl = int(hl)
    meta = json.loads(r.content[:hl])
    pos = hl
    outs = {}
    for o in meta["outputs"]:
        size = o.get("parameters", {}).get("binary_data_size")
        if size is None:
            return "output %s not binary" % o["name"]
        outs[o["name"]] = np.frombuffer(r.content[pos:pos + size], dtype="<i4").tolist()
        pos += size
    if pos != len(r.content):
        return "body length %d != %d" % (len(r.content), pos)
    return check_outputs(model, meta.get("model_name"), meta.get("model_version"), outs, a, b)


def flaky_client(base, kind="flaky"):
    sess = requests.Session()
    rng = random.Random(7)
    ok = [0, 0]
    while not stop.is_set():
        maybe_pause()
        if stop.is_set():
            break
        x = [float(rng.randint(-1000, 1000)) / 4 for _ in range(4)]
        body = {"inputs": [{"name": "IN", "shape": [1, 4], "datatype": "FP32", "data": x}]}
        count(kind, "sent")
        t0 = time.monotonic()
        try:
            r = sess.post(base + "/v2/models/flaky/infer", data=json.dumps(body), timeout=60)
            latency(kind, time.monotonic() - t0)
            count(kind, "received")
            if r.status_code == 200:
                out = r.json()["outputs"][0]
                if out["name"] != "OUT" or out["data"] != x:
                    fail(kind, "200 with wrong data %r (sent %r)" % (out, x))
                ok[0] += 1
            elif r.status_code == 500 and "injected failure" in r.json().get("error", ""):
                ok[1] += 1
            else:
                fail(kind, "status %d: %s" % (r.status_code, r.text[:200]))
        except Exception as e:
            fail(kind, "exception %r" % (e,))
    with lock:
        stats["flaky"]["ok200"] = ok[0]
        stats["flaky"]["injected500"] = ok[1]


# ---------------------------------------------------------------- raw sockets

def infer_request(model="simple", close=False):
    a = np.arange(16, dtype=np.int32)
    body = json.dumps(simple_body(a, a) if model == "simple" else addv_body(a)).encode()
    head = ("POST /v2/models/%s/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n%s\r\n" % (model, len(body),
                                               "Connection: close\r\n" if close else ""))
    return head.encode() + body


def disconnector(port, kind="disconnect"):
    rng = random.Random(3)
    while not stop.is_set():
        maybe_pause()
        if stop.is_set():
            break
        req = infer_request(rng.choice(["simple", "addv", "flaky"]))
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            mode = rng.randrange(4)
            if mode == 0:            # part of the head
                s.sendall(req[:rng.randint(1, req.index(b"\r\n\r\n"))])
            elif mode == 1:          # head and part of the body
                s.sendall(req[:rng.randint(req.index(b"\r\n\r\n") + 4, len(req) - 1)])
            else:                    # the whole request, never read
                s.sendall(req)
            if mode == 3:            # abortive close (RST)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
            count(kind, "sent")
        except OSError as e:
            fail(kind, "connect/send: %r" % (e,))
        time.sleep(0.005)


class Closed(Exception):
    pass


def read_response(s):
    """Reads one HTTP/1.1 response (Content-Length framing). Raises Closed on
    EOF before any byte."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            if not buf:
                raise Closed()
            raise ValueError("EOF inside response head: %r" % buf[:200])
        buf += d
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for ln in lines[1:]:
        k, v = ln.split(":", 1)
        headers[k.strip().lower()] = v.strip()
    n = int(headers.get("content-length", "0"))
    while len(rest) < n:
        d = s.recv(65536)
        if not d:
            raise ValueError("EOF inside response body")
        rest += d
    return status, headers, rest[:n]


def malformed_cases():
    good = infer_request()
    body_simple = lambda b: (("POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n"
                              "Content-Length: %d\r\n\r\n" % len(b)).encode() + b)
    return [
        # (name, bytes, framing error: a close without answer is acceptable)
        ("bad json", body_simple(b'{"inputs": [ {"name": '), False),
        ("not an object", body_simple(b'[1,2,3]'), False),
        ("no inputs", body_simple(b'{}'), False),
        ("unknown input", body_simple(json.dumps({"inputs": [
            {"name": "NOPE", "shape": [1, 16], "datatype": "INT32", "data": [0] * 16}]}).encode()),
         False),
        ("wrong datatype", body_simple(json.dumps({"inputs": [
            {"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "data": [0.5] * 16},
            {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [0] * 16}]})
            .encode()), False),
        ("count != shape", body_simple(json.dumps({"inputs": [
            {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": [0] * 15},
            {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [0] * 16}]})
            .encode()), False),
        ("unknown model", good.replace(b"/models/simple/", b"/models/nosuch/"), False),
        ("bad binary header", good.replace(b"Host: x\r\n",
                                           b"Host: x\r\nInference-Header-Content-Length: 99999\r\n"),
         False),
        ("GET on infer", b"GET /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n\r\n", False),
        ("garbage request line", b"HELLO\x01\x02 WORLD\r\n\r\n", True),
        ("bad content-length", b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n"
                               b"Content-Length: 12abc\r\n\r\n", True),
        ("two content-lengths", b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n"
                                b"Content-Length: 3\r\nContent-Length: 4\r\n\r\n{}", True),
        ("bad chunk size", b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n"
                           b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", True),
        ("huge content-length", b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n"
                                b"Content-Length: 99999999999\r\n\r\n", True),
        ("header without colon", b"GET /v2/health/live HTTP/1.1\r\nHost x\r\n\r\n", True),
        ("HTTP/2.7", b"GET /v2/health/live HTTP/2.7\r\nHost: x\r\n\r\n", True),
        ("long request line", b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", True),
    ]


def malformer(port, kind="malformed"):
    cases = malformed_cases()
    i = 0
    while not stop.is_set():
        maybe_pause()
        if stop.is_set():
            break
        name, data, framing = cases[i % len(cases)]
        i += 1
        count(kind, "sent")
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            try:
                s.sendall(data)
                try:
                    status, headers, body = read_response(s)
                except Closed:
                    if not framing:
                        fail(kind, "%s: closed without a response" % name)
                    else:
                        count(kind, "received")
                    continue
                count(kind, "received")
                # 505 is the right answer to an unknown HTTP version
                if not (400 <= status < 500 or (name == "HTTP/2.7" and status == 505)):
                    fail(kind, "%s: status %d %r" % (name, status, body[:200]))
                    continue
                try:
                    err = json.loads(body)["error"]
                    assert isinstance(err, str) and err
                except Exception:
                    fail(kind, "%s: %d without a JSON error body: %r" % (name, status, body[:200]))
                    continue
                if not framing and headers.get("connection", "").lower() != "close":
                    # the connection must still serve a good request
                    s.sendall(infer_request())
                    st2, _, _ = read_response(s)
                    if st2 != 200:
                        fail(kind, "%s: follow-up request got %d" % (name, st2))
            finally:
                s.close()
        except (OSError, ValueError) as e:
            if framing and isinstance(e, ConnectionResetError):
                count(kind, "received")   # a reset is a close
            else:
                fail(kind, "%s: %r" % (name, e))
        time.sleep(0.005)


# ---------------------------------------------------------------- gRPC

GRPC_SERVICE = "/inference.GRPCInferenceService/"
# A local subchannel pool gives every channel its own connection (grpcio
# otherwise shares one between channels with the same target and options).
GRPC_OPTIONS = [("grpc.use_local_subchannel_pool", 1)]
STREAM_WINDOW = 8                  # requests in flight per stream round
pb = None                          # grpc_service_pb2, generated by protoc in main()


def grpc_load_messages(out_dir):
    """protoc --python_out proto/*.proto into out_dir; sets pb."""
    global pb
    protos = sorted(str(p) for p in (ROOT / "proto").glob("*.proto"))
    subprocess.run(["protoc", "--python_out=%s" % out_dir, "-I", str(ROOT / "proto")] + protos,
                   check=True)
    sys.path.insert(0, str(out_dir))
    import grpc_service_pb2
    pb = grpc_service_pb2


def grpc_channel(target):
    return grpc.insecure_channel(target, options=GRPC_OPTIONS)


def grpc_infer(ch):
    return ch.unary_unary(GRPC_SERVICE + "ModelInfer",
                          request_serializer=pb.ModelInferRequest.SerializeToString,
                          response_deserializer=pb.ModelInferResponse.FromString)


def grpc_stream(ch):
    return ch.stream_stream(GRPC_SERVICE + "ModelStreamInfer",
                            request_serializer=pb.ModelInferRequest.SerializeToString,
                            response_deserializer=pb.ModelStreamInferResponse.FromString)


def grpc_request(model, a, b, rid, raw):
    """ModelInferRequest for addv or simple, data in raw_input_contents or
    in typed int_contents."""
    req = pb.ModelInferRequest(model_name=model, id=rid)
    for name, data in [("INPUT0", a)] + ([("INPUT1", b)] if model == "simple" else []):
        t = req.inputs.add(name=name, datatype="INT32", shape=[1, 16])
        if raw:
            req.raw_input_contents.append(data.astype("<i4").tobytes())
        else:
            t.contents.int_contents.extend(data.tolist())
    return req


def check_grpc_response(model, r, a, b, rid):
    if r.id != rid:
        return "id %r, sent %r" % (r.id, rid)
    if len(r.raw_output_contents) != len(r.outputs):
        return "%d outputs, %d raw_output_contents" % (len(r.outputs), len(r.raw_output_contents))
    outs = {}
    for o, raw in zip(r.outputs, r.raw_output_contents):
        if o.datatype != "INT32" or list(o.shape) != [1, 16] or len(raw) != 64:
            return "output %s: %s %s, %d bytes" % (o.name, o.datatype, list(o.shape), len(raw))
        outs[o.name] = np.frombuffer(raw, dtype="<i4").tolist()
    return check_outputs(model, r.model_name, r.model_version, outs, a, b)


def grpc_echo_request(model, x, rid):
    """ModelInferRequest for flaky or stall (IN FP32 [1,4])."""
    req = pb.ModelInferRequest(model_name=model, id=rid)
    req.inputs.add(name="IN", datatype="FP32", shape=[1, 4]).contents.fp32_contents.extend(x)
    return req


def check_grpc_echo(model, r, x, rid):
    if r.model_name != model or r.id != rid:
        return "model_name %r id %r, sent %s %r" % (r.model_name, r.id, model, rid)
    if [o.name for o in r.outputs] != ["OUT"] or len(r.raw_output_contents) != 1:
        return "outputs %s" % [o.name for o in r.outputs]
    got = np.frombuffer(r.raw_output_contents[0], dtype="<f4").tolist()
    if got != x:
        return "echo %r, sent %r" % (got, x)
    return None


def random_inputs(rng):
    a = np.arange(16, dtype=np.int32) * rng.randint(-50, 50) + rng.randint(-10**6, 10**6)
    b = np.full(16, rng.randint(-1000, 1000), dtype=np.int32)
    return a, b


def grpc_client(k, target, kind="grpc"):
    """ModelInfer on addv and simple, raw and typed inputs in turn; any
    status but OK is a failure (as any REST status but 200)."""
    ch = grpc_channel(target)
    infer = grpc_infer(ch)
    rng = random.Random(2000 + k)
    i = 0
    while not stop.is_set():
        maybe_pause()
        if stop.is_set():
            break
        model = "addv" if i % 2 == 0 else "simple"
        a, b = random_inputs(rng)
        rid = "u%d-%d" % (k, i)
        req = grpc_request(model, a, b, rid, raw=(i // 2 + k) % 2 == 0)
        exchange(kind, model, lambda: infer(req, timeout=60),
                 lambda r: check_grpc_response(model, r, a, b, rid))
        i += 1
    ch.close()


def grpc_stream_client(target, kind="grpc_stream"):
    """ModelStreamInfer: rounds of STREAM_WINDOW requests in flight on one
    stream (addv and simple mixed), every response matched to its request
    id exactly once; the stream is half-closed after 10-60 rounds and must
    then end with OK and nothing more, and a new one is opened."""
    ch = grpc_channel(target)
    open_stream = grpc_stream(ch)
    rng = random.Random(5)
    n = 0
    streams = 0
    while not stop.is_set():
        maybe_pause()
        if stop.is_set():
            break
        q = queue.Queue()

        def outgoing():
            while True:
                item = q.get()
                if item is None:
                    return
                yield item

        call = open_stream(outgoing(), timeout=600)
        streams += 1
        answered = set()
        pending = {}
        try:
            for _ in range(rng.randint(10, 60)):
                if stop.is_set() or pause.is_set():
                    break
                t0 = time.monotonic()
                for _ in range(STREAM_WINDOW):
                    model = rng.choice(("addv", "simple"))
                    a, b = random_inputs(rng)
                    rid = "s%d" % n
                    n += 1
                    pending[rid] = (model, a, b)
                    count(kind, "sent")
                    q.put(grpc_request(model, a, b, rid, raw=rng.random() < 0.5))
                while pending:
                    r = next(call)
                    rid = r.infer_response.id
                    if rid in answered:
                        fail(kind, "second response to %s" % rid)
                        continue
                    if rid not in pending:
                        fail(kind, "response to unknown id %r" % rid)
                        continue
                    model, a, b = pending.pop(rid)
                    answered.add(rid)
                    latency(kind, time.monotonic() - t0)
                    count(kind, "received")
                    if r.error_message:
                        fail(kind, "%s %s: error %s" % (model, rid, r.error_message))
                        continue
                    err = check_grpc_response(model, r.infer_response, a, b, rid)
                    if err:
                        fail(kind, "%s %s: %s" % (model, rid, err))
            q.put(None)
            extra = list(call)
            if extra:
                fail(kind, "%d responses after every request was answered (%s)"
                     % (len(extra), [x.infer_response.id for x in extra][:5]))
            if call.code() != grpc.StatusCode.OK:
                fail(kind, "stream ended with %s %s" % (call.code().name, call.details()))
        except StopIteration:
            fail(kind, "stream ended with %d requests unanswered (%s %s)"
                 % (len(pending), call.code().name, call.details()))
        except grpc.RpcError as e:
            fail(kind, "stream failed with %d requests unanswered: %s %s"
                 % (len(pending), e.code().name, e.details()))
        finally:
            q.put(None)
            call.cancel()
    ch.close()
    s = stat(kind)
    with lock:
        s["streams"] = streams


def grpc_canceller(target, kind="grpc_cancel"):
    """ModelInfer on stall (20 ms per execution) and flaky, cancelled
    mid-flight (one call, or some of a batch of 2-6 in flight) or with a
    short deadline. A call ends exactly once: correct data, CANCELLED (only
    if cancelled), DEADLINE_EXCEEDED (only with the short deadline) or the
    injected INTERNAL failure (flaky only); anything else is a failure.
    Every 10th round a plain call on the same channel must succeed."""
    ch = grpc_channel(target)
    infer = grpc_infer(ch)
    rng = random.Random(13)
    out = {"ok": 0, "cancelled": 0, "deadline": 0, "injected": 0}
    i = n = 0
    while not stop.is_set():
        maybe_pause()
        if stop.is_set():
            break
        mode = i % 3          # 0: cancel one, 1: short deadline, 2: cancel some of a batch
        i += 1
        calls = []
        for _ in range(1 if mode != 2 else rng.randint(2, 6)):
            model = rng.choice(("stall", "flaky"))
            x = [float(rng.randint(-1000, 1000)) / 4 for _ in range(4)]
            rid = "c%d" % n
            n += 1
            short = mode == 1
            count(kind, "sent")
            f = infer.future(grpc_echo_request(model, x, rid),
                             timeout=rng.uniform(0.002, 0.06) if short else 60)
            calls.append([f, model, x, rid, short, False])
        if mode != 1:
            time.sleep(rng.uniform(0, 0.04))
            for c in calls:
                if mode == 0 or rng.random() < 0.5:
                    c[0].cancel()
                    c[5] = True
        for f, model, x, rid, short, cancelled in calls:
            outcome = None
            try:
                err = check_grpc_echo(model, f.result(timeout=120), x, rid)
                if err:
                    fail(kind, "%s %s: %s" % (model, rid, err))
                else:
                    outcome = "ok"
            except grpc.FutureCancelledError:
                outcome = "cancelled"
            except grpc.FutureTimeoutError:
                fail(kind, "%s %s: no outcome after 120 s" % (model, rid))
            except grpc.RpcError as e:
                code = e.code()
                if code == grpc.StatusCode.CANCELLED:
                    outcome = "cancelled"
                elif code == grpc.StatusCode.DEADLINE_EXCEEDED:
                    outcome = "deadline"
                elif code == grpc.StatusCode.INTERNAL and model == "flaky" and \
                        "injected failure" in (e.details() or ""):
                    outcome = "injected"
                if outcome == "cancelled" and not cancelled or outcome == "deadline" and not short:
                    outcome = None
                if outcome is None:
                    fail(kind, "%s %s: %s %s" % (model, rid, code.name, e.details()))
            count(kind, "received")
            if outcome:
                out[outcome] += 1
        if i % 10 == 0:
            x = [1.0, 2.0, 3.0, float(i)]
            rid = "c%d" % n
            n += 1
            count(kind, "sent")
            t0 = time.monotonic()
            try:
                err = check_grpc_echo("stall", infer(grpc_echo_request("stall", x, rid),
                                                     timeout=60), x, rid)
                latency(kind, time.monotonic() - t0)
                if err:
                    fail(kind, "after cancellations: %s" % err)
                else:
                    out["ok"] += 1
            except grpc.RpcError as e:
                fail(kind, "after cancellations: %s %s" % (e.code().name, e.details()))
            count(kind, "received")
    ch.close()
    s = stat(kind)
    with lock:
        s.update(out)


H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
H2_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def grpc_closer(target, grpc_port, kind="grpc_close"):
    """Opens a channel, starts 1-6 unary calls (stall, addv, simple) or a
    stream with 1-8 requests and closes the channel abruptly; every third
    round is a raw TCP connection cut inside the HTTP/2 preface or after
    SETTINGS (sometimes with RST). Calls end with correct data or
    CANCELLED."""
    rng = random.Random(17)
    out = {"ok": 0, "cancelled": 0, "h2_aborts": 0}
    i = n = 0
    while not stop.is_set():
        maybe_pause()
        if stop.is_set():
            break
        mode = i % 3
        i += 1
        if mode == 2:
            data = H2_PREFACE + H2_SETTINGS + bytes(rng.randrange(256) for _ in range(20))
            try:
                s = socket.create_connection(("127.0.0.1", grpc_port), timeout=5)
                s.sendall(data[:rng.randint(1, len(data))])
                if rng.random() < 0.5:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()
                out["h2_aborts"] += 1
            except OSError as e:
                fail(kind, "raw h2 connect/send: %r" % (e,))
            time.sleep(0.005)
            continue
        ch = grpc_channel(target)
        # Connected first: grpcio 1.51 closing a channel that is still
        # connecting sometimes keeps the new connection open (client-side,
        # seen with ss as held by python), which would read as a server fd
        # leak. The raw h2 rounds cut connections early instead.
        try:
            grpc.channel_ready_future(ch).result(timeout=30)
        except grpc.FutureTimeoutError:
            fail(kind, "channel not connected after 30 s")
            ch.close()
            continue
        calls = []
        if mode == 0:
            infer = grpc_infer(ch)
            for _ in range(rng.randint(1, 6)):
                model = rng.choice(("stall", "addv", "simple"))
                rid = "k%d" % n
                n += 1
                if model == "stall":
                    x = [float(rng.randint(-1000, 1000)) / 4 for _ in range(4)]
                    req = grpc_echo_request(model, x, rid)
                    check = (lambda r, x=x, rid=rid: check_grpc_echo("stall", r, x, rid))
                else:
                    a, b = random_inputs(rng)
                    req = grpc_request(model, a, b, rid, raw=rng.random() < 0.5)
                    check = (lambda r, m=model, a=a, b=b, rid=rid:
                             check_grpc_response(m, r, a, b, rid))
                count(kind, "sent")
                calls.append((infer.future(req, timeout=60), check))
            time.sleep(rng.uniform(0, 0.03))
            ch.close()
            for f, check in calls:
                try:
                    err = check(f.result(timeout=120))
                    if err:
                        fail(kind, err)
                    else:
                        out["ok"] += 1
                except (grpc.FutureCancelledError, grpc.FutureTimeoutError) as e:
                    if isinstance(e, grpc.FutureTimeoutError):
                        fail(kind, "unary call: no outcome after 120 s")
                    else:
                        out["cancelled"] += 1
                except grpc.RpcError as e:
                    if e.code() == grpc.StatusCode.CANCELLED:
                        out["cancelled"] += 1
                    else:
                        fail(kind, "unary call: %s %s" % (e.code().name, e.details()))
                count(kind, "received")
        else:
            q = queue.Queue()

            def outgoing():
                while True:
                    item = q.get()
                    if item is None:
                        return
                    yield item

            call = grpc_stream(ch)(outgoing(), timeout=60)
            pending = {}
            for _ in range(rng.randint(1, 8)):
                model = rng.choice(("addv", "simple"))
                a, b = random_inputs(rng)
                rid = "k%d" % n
                n += 1
                pending[rid] = (model, a, b)
                count(kind, "sent")
                q.put(grpc_request(model, a, b, rid, raw=rng.random() < 0.5))
            to_read = rng.randint(0, len(pending))
            closed = False
            try:
                while pending:
                    if to_read == 0 and not closed:
                        ch.close()
                        closed = True
                    r = next(call)
                    to_read -= 1
                    rid = r.infer_response.id
                    if rid not in pending:
                        fail(kind, "stream: response to unknown or answered id %r" % rid)
                        continue
                    model, a, b = pending.pop(rid)
                    count(kind, "received")
                    err = r.error_message or check_grpc_response(model, r.infer_response, a, b, rid)
                    if err:
                        fail(kind, "stream %s %s: %s" % (model, rid, err))
                    else:
                        out["ok"] += 1
                if not closed:
                    ch.close()
            except StopIteration:
                fail(kind, "stream ended with OK and %d requests unanswered" % len(pending))
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.CANCELLED or not closed:
                    fail(kind, "stream: %s %s" % (e.code().name, e.details()))
                else:
                    out["cancelled"] += len(pending)
            count(kind, "received", len(pending))   # each unanswered one ended by the close
            q.put(None)
            if not closed:
                ch.close()
    s = stat(kind)
    with lock:
        s.update(out)


def grpc_malformed_cases():
    """(name, method path, request bytes, call options, expected status,
    text the message must contain)."""
    a = np.arange(16, dtype=np.int32)
    good = grpc_request("simple", a, a, "m", raw=True)
    g = good.SerializeToString()
    INVALID, NOT_FOUND = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND
    UNIMPL = grpc.StatusCode.UNIMPLEMENTED
    infer = GRPC_SERVICE + "ModelInfer"

    def variant(edit):
        r = pb.ModelInferRequest()
        r.CopyFrom(good)
        edit(r)
        return r.SerializeToString()

    def add_typed(r):
        r.inputs[0].contents.int_contents.extend([0] * 16)

    def add_output(r):
        r.outputs.add(name="NOPE")

    return [
        ("not protobuf", infer, b"\x0a\x05ab", {}, INVALID, "malformed"),
        ("truncated message", infer, g[:-3], {}, INVALID, "malformed"),
        ("wrong wire type", infer, b"\x08\x01", {}, INVALID, "malformed"),
        ("truncated varint", infer, b"\x0a\xff", {}, INVALID, "malformed"),
        ("unknown input", infer, variant(lambda r: setattr(r.inputs[0], "name", "NOPE")), {},
         INVALID, "unknown input"),
        ("wrong datatype", infer, variant(lambda r: setattr(r.inputs[0], "datatype", "FP32")),
         {}, INVALID, ""),
        ("shape != size", infer, variant(lambda r: r.inputs[0].shape.__setitem__(1, 15)), {},
         INVALID, ""),
        ("raw and typed", infer, variant(add_typed), {}, INVALID, ""),
        ("raw entry missing", infer, variant(lambda r: r.raw_input_contents.pop()), {},
         INVALID, ""),
        ("unknown output", infer, variant(add_output), {}, INVALID, "unknown output"),
        ("unknown model", infer, variant(lambda r: setattr(r, "model_name", "nosuch")), {},
         NOT_FOUND, "unknown model"),
        ("unknown version", infer, variant(lambda r: setattr(r, "model_version", "99")), {},
         NOT_FOUND, ""),
        ("compressed", infer, g, {"compression": grpc.Compression.Gzip}, UNIMPL, "compression"),
        ("unknown method", GRPC_SERVICE + "SystemSharedMemoryStatus", b"", {}, UNIMPL,
         "unknown method"),
        ("unknown service", "/x.Y/Z", b"", {}, UNIMPL, "unknown method"),
    ]


def grpc_malformer(target, kind="grpc_malformed"):
    """Sends each malformed case as raw bytes on one channel: the status and
    message must be the documented ones, and the next well-formed call on the
    channel must succeed. Every fourth round is a stream with a malformed and
    an unknown-model request among good ones: those get error_message, the
    good ones data, the stream ends OK."""
    ch = grpc_channel(target)
    infer = grpc_infer(ch)
    cases = grpc_malformed_cases()
    rng = random.Random(19)
    i = 0
    while not stop.is_set():
        maybe_pause()
        if stop.is_set():
            break
        i += 1
        if i % 4 == 0:
            grpc_malformed_stream(ch, rng, i, kind)
            continue
        name, path, data, opts, code, text = cases[rng.randrange(len(cases))]
        count(kind, "sent")
        try:
            ch.unary_unary(path)(data, timeout=30, **opts)
            count(kind, "received")
            fail(kind, "%s: OK, expected %s" % (name, code.name))
            continue
        except grpc.RpcError as e:
            count(kind, "received")
            if e.code() != code or not e.details() or text not in e.details():
                fail(kind, "%s: %s %r, expected %s %r" % (name, e.code().name, e.details(),
                                                          code.name, text))
                continue
        a, b = random_inputs(rng)
        rid = "f%d" % i
        count(kind, "sent")
        try:
            err = check_grpc_response("simple", infer(grpc_request("simple", a, b, rid, True),
                                                      timeout=30), a, b, rid)
            count(kind, "received")
            if err:
                fail(kind, "%s: follow-up call: %s" % (name, err))
        except grpc.RpcError as e:
            count(kind, "received")
            fail(kind, "%s: follow-up call: %s %s" % (name, e.code().name, e.details()))
        time.sleep(0.005)
    ch.close()


def grpc_malformed_stream(ch, rng, i, kind):
    reqs, good = [], {}
    for j in range(6):
        a, b = random_inputs(rng)
        rid = "g%d-%d" % (i, j)
        good[rid] = (a, b)
        reqs.append(grpc_request("simple", a, b, rid, raw=j % 2 == 0))
    bad = grpc_request("simple", *random_inputs(rng), "bad%d" % i, raw=True)
    bad.inputs[0].name = "NOPE"
    lost = grpc_request("nosuch", *random_inputs(rng), "lost%d" % i, raw=True)
    reqs[2:2] = [bad]
    reqs.append(lost)
    expect_err = {bad.id: "unknown input 'NOPE'", lost.id: "unknown model 'nosuch'"}
    count(kind, "sent", len(reqs))
    seen = set()
    try:
        call = grpc_stream(ch)(iter(reqs), timeout=60)
        for r in call:
            rid = r.infer_response.id
            if rid in seen or (rid not in good and rid not in expect_err):
                fail(kind, "stream: unexpected or second response %r" % rid)
                continue
            seen.add(rid)
            count(kind, "received")
            if rid in expect_err:
                if expect_err[rid] not in r.error_message:
                    fail(kind, "stream %s: error_message %r" % (rid, r.error_message))
            elif r.error_message:
                fail(kind, "stream %s: %s" % (rid, r.error_message))
            else:
                err = check_grpc_response("simple", r.infer_response, *good[rid], rid)
                if err:
                    fail(kind, "stream %s: %s" % (rid, err))
        if len(seen) != len(reqs):
            fail(kind, "stream: %d of %d requests answered" % (len(seen), len(reqs)))
            count(kind, "received", len(reqs) - len(seen))
    except grpc.RpcError as e:
        fail(kind, "stream: %s %s" % (e.code().name, e.details()))
        count(kind, "received", len(reqs) - len(seen))


# ---------------------------------------------------------------- chaos

def reloader(base, repo, kind="reload"):
    rng = random.Random(11)
    version = 1
    n = 0
    while not stop.is_set():
        t_end = time.monotonic() + rng.uniform(2.0, 3.0)
        while time.monotonic() < t_end and not stop.is_set():
            time.sleep(0.05)
        maybe_pause()
        if stop.is_set():
            break
        n += 1
        choice = n % 3
        if choice == 0:
            version += 1
            write_addv(repo / "addv" / str(version) / "model.onnx", version)
            addv_latest[0] = version
            model = "addv"
        elif choice == 1:
            write_addv(repo / "addv" / str(version) / "model.onnx", version, "rewrite %d" % n)
            model = "addv"
        else:
            model = "simple"
        count(kind, "sent")
        t0 = time.monotonic()
        try:
            r = requests.post(base + "/v2/repository/models/%s/load" % model, timeout=120)
            latency(kind, time.monotonic() - t0)
            count(kind, "received")
            if r.status_code != 200:
                fail(kind, "load %s: %d %s" % (model, r.status_code, r.text[:200]))
            else:
                with lock:
                    reloads[0] += 1
        except Exception as e:
            fail(kind, "load %s: %r" % (model, e))
    return version


def signaller(proc):
    i = 0
    while not stop.is_set():
        time.sleep(1.5)
        if stop.is_set() or pause.is_set():
            continue
        sig = signal.SIGHUP if i % 2 == 0 else signal.SIGUSR1
        i += 1
        try:
            proc.send_signal(sig)
            with lock:
                signals_sent[sig.name] += 1
        except OSError as e:
            fail("signal", repr(e))


# ---------------------------------------------------------------- process stats

HEAP_RE = re.compile(r" stats: .*heap_in_use_bytes=(\d+) heap_free_bytes=(\d+)")


def heap_samples(err_path):
    """(in use, free) bytes of every SIGUSR1 stats line logged so far."""
    text = err_path.read_text(errors="replace")
    return [(int(m.group(1)), int(m.group(2))) for m in HEAP_RE.finditer(text)]


def rss_bytes(pid):
    with open("/proc/%d/statm" % pid) as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def fd_kinds(pid):
    """What the process's fds are: files by path, TCP sockets by local port,
    peer port and state (to name a leak's kind)."""
    tcp = {}
    for name in ("tcp", "tcp6"):
        try:
            with open("/proc/%d/net/%s" % (pid, name)) as f:
                for ln in f.readlines()[1:]:
                    col = ln.split()
                    tcp[col[9]] = "tcp :%d <-> :%d state %s" % (
                        int(col[1].rsplit(":", 1)[1], 16), int(col[2].rsplit(":", 1)[1], 16),
                        col[3])
        except OSError:
            pass
    kinds = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if target.startswith("socket:["):
            target = tcp.get(target[8:-1], target.split("[")[0])
        kinds.append(target)
    return sorted(kinds)


def quiet_fd_count(pid, n_workers):
    """Pauses every worker, lets the server settle, counts its fds. Returns
    (min, max, what the fds were at the last count)."""
    pause.set()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with lock:
            if idle_count[0] >= n_workers:
                break
        time.sleep(0.05)
    else:
        fail("fd", "workers did not pause")
    time.sleep(1.0)   # let closed connections and unloads finish
    counts = []
    for _ in range(5):
        counts.append(fd_count(pid))
        time.sleep(0.2)
    kinds = fd_kinds(pid)
    pause.clear()
    return min(counts), max(counts), kinds


def pct(values, p):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


# ---------------------------------------------------------------- main

def main():
    if not INFERD.exists() or not PLUGIN.exists():
        print("build first: %s / %s missing" % (INFERD, PLUGIN))
        return 2
    work = Path(tempfile.mkdtemp(prefix="inferd-soak-"))
    repo = work / "models"
    build_repo(repo)
    grpc_load_messages(work)
    port = free_port()
    grpc_port = free_port()
    base = "http://127.0.0.1:%d" % port
    target = "127.0.0.1:%d" % grpc_port
    err_path = work / "stderr.log"
    errf = open(err_path, "wb")
    cmd = [str(INFERD), "serve", "--host", "127.0.0.1", "--http-port", str(port),
           "--grpc-port", str(grpc_port), "--metrics-port", str(free_port()),
           "--model-repository", str(repo), "--model-control-mode", "explicit",
           "--load-model", "*", "--exit-timeout-secs", str(EXIT_TIMEOUT)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=errf, stdin=subprocess.DEVNULL)
    started = time.time()
    while True:
        if proc.poll() is not None:
            print("inferd exited at start (%s):\n%s" % (proc.returncode, err_path.read_text()))
            return 1
        try:
            if requests.get(base + "/v2/health/ready", timeout=2).status_code == 200:
                break
        except requests.RequestException:
            pass
        if time.time() - started > 60:
            print("inferd not ready after 60 s:\n%s" % err_path.read_text())
            proc.kill()
            return 1
        time.sleep(0.1)
    ch = grpc_channel(target)
    try:
        ready = ch.unary_unary(GRPC_SERVICE + "ServerReady",
                               request_serializer=pb.ServerReadyRequest.SerializeToString,
                               response_deserializer=pb.ServerReadyResponse.FromString)
        if not ready(pb.ServerReadyRequest(), timeout=30, wait_for_ready=True).ready:
            raise RuntimeError("ServerReady: not ready")
    except (grpc.RpcError, RuntimeError) as e:
        print("inferd gRPC port %d not ready: %s\n%s" % (grpc_port, e, err_path.read_text()))
        proc.kill()
        return 1
    finally:
        ch.close()
    pid = proc.pid
    print("inferd pid %d on port %d (gRPC %d), repository %s; soak %.0f s (warm-up %.0f s)"
          % (pid, port, grpc_port, repo, SOAK_SECS, WARMUP_SECS), flush=True)

    threads = []
    for k in range(4):
        threads.append(threading.Thread(target=json_client, args=(k, base), daemon=True))
    for k in range(2):
        threads.append(threading.Thread(target=binary_client, args=(k, base), daemon=True))
    threads.append(threading.Thread(target=flaky_client, args=(base,), daemon=True))
    for k in range(2):
        threads.append(threading.Thread(target=grpc_client, args=(k, target), daemon=True))
    threads.append(threading.Thread(target=grpc_stream_client, args=(target,), daemon=True))
    threads.append(threading.Thread(target=grpc_canceller, args=(target,), daemon=True))
    threads.append(threading.Thread(target=grpc_closer, args=(target, grpc_port), daemon=True))
    threads.append(threading.Thread(target=grpc_malformer, args=(target,), daemon=True))
    threads.append(threading.Thread(target=disconnector, args=(port,), daemon=True))
    threads.append(threading.Thread(target=malformer, args=(port,), daemon=True))
    threads.append(threading.Thread(target=reloader, args=(base, repo), daemon=True))
    n_workers = len(threads)
    threads.append(threading.Thread(target=signaller, args=(proc,), daemon=True))
    t_start = time.monotonic()
    for t in threads:
        t.start()

    died = None
    rss_samples = []
    rss_warm = fd_warm = None
    heap_warm_at = heap_end_at = None  # index of the first stats line after warm-up / end
    t_end = t_start + SOAK_SECS
    next_report = t_start + 30
    while time.monotonic() < t_end:
        time.sleep(0.5)
        if proc.poll() is not None:
            died = proc.returncode
            fail("process", "inferd died with status %s" % died)
            break
        now = time.monotonic()
        rss_samples.append((now - t_start, rss_bytes(pid)))
        if rss_warm is None and now - t_start >= WARMUP_SECS:
            fd_warm = quiet_fd_count(pid, n_workers)
            rss_warm = rss_bytes(pid)
            heap_warm_at = len(heap_samples(err_path))
            print("warm-up done: rss %.1f MiB, fds %s" % (rss_warm / 2**20, fd_warm[:2]),
                  flush=True)
        if now >= next_report:
            next_report += 30
            with lock:
                summ = ", ".join("%s %d" % (k, v["sent"]) for k, v in sorted(stats.items()))
            heap = heap_samples(err_path)
            print("[%4.0f s] %s; reloads %d; failures %d; rss %.1f MiB, heap in use %s MiB"
                  % (now - t_start, summ, reloads[0], len(failures), rss_samples[-1][1] / 2**20,
                     "%.1f" % (heap[-1][0] / 2**20) if heap else "?"), flush=True)

    fd_end = rss_end = None
    if died is None:
        fd_end = quiet_fd_count(pid, n_workers)
        rss_end = rss_bytes(pid)
        heap_end_at = len(heap_samples(err_path)) - 1
    stop.set()
    for t in threads:
        t.join(timeout=90)
        if t.is_alive():
            fail("harness", "thread %s did not stop" % t.name)
    elapsed = time.monotonic() - t_start

    if died is None and proc.poll() is None:
        # the newest version serves, alone; clients saw the versions change
        try:
            meta = requests.get(base + "/v2/models/addv", timeout=10).json()
            if meta.get("versions") != [str(addv_latest[0])]:
                fail("reload", "addv serves versions %s, newest is %d"
                     % (meta.get("versions"), addv_latest[0]))
        except Exception as e:
            fail("reload", "GET /v2/models/addv: %r" % (e,))
        if addv_latest[0] > 2 and len(addv_seen) < 2:
            fail("reload", "clients saw only addv versions %s" % sorted(addv_seen))
        # after the gRPC chaos, a new channel is served by the newest version
        ch = grpc_channel(target)
        try:
            a = np.arange(16, dtype=np.int32)
            r = grpc_infer(ch)(grpc_request("addv", a, a, "final", raw=True), timeout=30)
            err = check_grpc_response("addv", r, a, a, "final")
            if err or r.model_version != str(addv_latest[0]):
                fail("grpc", "final call: %s, version %s (newest %d)"
                     % (err, r.model_version, addv_latest[0]))
        except grpc.RpcError as e:
            fail("grpc", "final call: %s %s" % (e.code().name, e.details()))
        finally:
            ch.close()

    exit_status = None
    exit_secs = None
    if died is None and proc.poll() is None:
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            exit_status = proc.wait(timeout=EXIT_TIMEOUT + 10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            exit_status = "timeout"
        exit_secs = time.monotonic() - t0
        if exit_status != 0:
            fail("shutdown", "SIGTERM: exit status %s after %.1f s" % (exit_status, exit_secs))
    errf.close()
    log = err_path.read_text(errors="replace")

    # per-client request accounting
    for kind, s in stats.items():
        if s["sent"] != s["received"] and kind not in ("disconnect",):
            fail(kind, "sent %d requests, received %d responses" % (s["sent"], s["received"]))
    stats_lines = log.count(" stats: ")
    if stats_lines < signals_sent["SIGUSR1"]:
        fail("signal", "%d SIGUSR1 sent, %d stats lines logged"
             % (signals_sent["SIGUSR1"], stats_lines))
    for needle in ("AddressSanitizer", "runtime error", "fatal", "assert"):
        if needle in log:
            fail("log", "server log contains %r" % needle)

    growth = None
    if rss_warm and rss_end:
        growth = (rss_end - rss_warm) * 100.0 / rss_warm
        if growth >= 5.0:
            fail("rss", "RSS grew %.1f%% (%d -> %d)" % (growth, rss_warm, rss_end))
    elif died is None:
        fail("rss", "no RSS sample after warm-up")
    if fd_warm and fd_end and fd_end[0] > fd_warm[1]:
        new, old = list(fd_end[2]), list(fd_warm[2])
        for k in fd_warm[2]:
            if k in new:
                new.remove(k)
                old.remove(k)
        fail("fd", "open fds grew: %s -> %s; gone %s, new %s"
             % (fd_warm[:2], fd_end[:2], old, new))

    # where the growth happened: RSS halfway between warm-up and end
    rss_mid = None
    after = [(t, r) for t, r in rss_samples if t >= WARMUP_SECS]
    if after:
        mid_t = (WARMUP_SECS + after[-1][0]) / 2
        rss_mid = min(after, key=lambda x: abs(x[0] - mid_t))[1]
    # the C heap (mallinfo2, every arena, ONNX Runtime included) at the same
    # points: a flat heap under a growing RSS is fragmentation, not a leak
    heap = HEAP_RE.findall(log)
    heap_row = "—"
    if heap_warm_at is not None and heap_end_at is not None and \
            heap_warm_at < heap_end_at < len(heap):
        hw, he = int(heap[heap_warm_at][0]), int(heap[heap_end_at][0])
        heap_row = "%.1f → %.1f MiB (%+.2f%%)" % (hw / 2**20, he / 2**20, (he - hw) * 100.0 / hw)
    ok = not failures
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "src"],
                               capture_output=True, text=True).stdout.strip()
        if dirty:
            commit += " (src/ modified)"
    except OSError:
        commit = "?"
    kinds = ["json", "binary", "flaky", "disconnect", "malformed", "grpc", "grpc_stream",
             "grpc_cancel", "grpc_close", "grpc_malformed", "reload"]
    desc = {"json": "4 REST JSON clients (addv, simple)",
            "binary": "2 REST binary clients (addv, simple)",
            "flaky": "1 client on flaky (identity_stall, fail_every_n 7)",
            "disconnect": "disconnector (partial/whole request, close unread)",
            "malformed": "malformer (malformed HTTP/JSON on raw sockets)",
            "grpc": "2 gRPC ModelInfer clients (addv, simple; raw and typed inputs)",
            "grpc_stream": "gRPC ModelStreamInfer client (%d in flight, stream reopened)"
                           % STREAM_WINDOW,
            "grpc_cancel": "gRPC canceller (stall, flaky: cancel mid-flight, short deadlines)",
            "grpc_close": "gRPC closer (channels closed mid-call, raw h2 connections cut)",
            "grpc_malformed": "gRPC malformer (corrupt protobuf, invalid requests, bad streams)",
            "reload": "reloader (repository load API)"}
    rows = []
    for k in kinds:
        s = stats.get(k, {"sent": 0, "received": 0, "lat": []})
        nfail = sum(1 for f in failures if f[0] == k)
        lat = s["lat"]
        rows.append("| %s | %d | %s | %d | %s | %s |" % (
            desc[k], s["sent"], s["received"] if k != "disconnect" else "—", nfail,
            "%.2f" % (pct(lat, 50) * 1e3) if lat else "—",
            "%.2f" % (pct(lat, 99) * 1e3) if lat else "—"))
    total_req = sum(stats.get(k, {}).get("sent", 0) for k in kinds)
    fl = stats.get("flaky", {})
    gs = stats.get("grpc_stream", {})
    gc = stats.get("grpc_cancel", {})
    gx = stats.get("grpc_close", {})
    lines = [
        "# Soak test (`make soak`)",
        "",
        "`scripts/soak.py` serves a temporary repository in explicit control mode (`addv`,",
        "whose output proves its version; `simple`; `flaky`, the `identity_stall` example",
        "plugin failing every 7th execute after a 2 ms stall; `stall`, the same plugin taking",
        "20 ms per execution) over REST and gRPC and runs every client kind below at once,",
        "while a reloader loads a new `addv` version, rewrites the current one or reloads",
        "`simple` every 2–3 s, and a signaller sends SIGHUP and SIGUSR1 in turn every 1.5 s.",
        "Every response is verified exactly (an `addv` answer must carry the data of the",
        "version it names); a well-formed request that gets anything but 200 (REST) or OK",
        "(gRPC, streamed responses included) counts as a failure, except the injected failures",
        "of `flaky` (500 / INTERNAL) and, for calls the client cancels or gives a short",
        "deadline, CANCELLED / DEADLINE_EXCEEDED. Every streamed request must be answered",
        "exactly once, and every call must end exactly once.",
        "",
        "| | |",
        "|---|---|",
        "| date | %s |" % time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "| git commit | %s |" % commit,
        "| duration | %.0f s (SOAK_SECS=%g; warm-up %.0f s) |" % (elapsed, SOAK_SECS, WARMUP_SECS),
        "| requests (all kinds) | %d |" % total_req,
        "| failures | %d |" % len(failures),
        "| reloads (200) | %d (addv versions 1–%d; %d of them named by responses) |"
        % (reloads[0], addv_latest[0], len(addv_seen)),
        "| signals | %d SIGHUP, %d SIGUSR1 (%d stats lines) |"
        % (signals_sent["SIGHUP"], signals_sent["SIGUSR1"], stats_lines),
        "| flaky outcomes | %s × 200 echo, %s × 500 injected failure |"
        % (fl.get("ok200", "?"), fl.get("injected500", "?")),
        "| gRPC streams | %s streams opened and half-closed |" % gs.get("streams", "?"),
        "| gRPC cancel outcomes | %s OK, %s CANCELLED, %s DEADLINE_EXCEEDED, %s injected INTERNAL |"
        % tuple(gc.get(k, "?") for k in ("ok", "cancelled", "deadline", "injected")),
        "| gRPC close outcomes | %s OK, %s CANCELLED by the close; %s raw h2 connections cut |"
        % tuple(gx.get(k, "?") for k in ("ok", "cancelled", "h2_aborts")),
        "| RSS after warm-up → halfway → end | %s → %s → %s MiB (%s) |" % (
            "%.1f" % (rss_warm / 2**20) if rss_warm else "—",
            "%.1f" % (rss_mid / 2**20) if rss_mid else "—",
            "%.1f" % (rss_end / 2**20) if rss_end else "—",
            "%+.2f%%" % growth if growth is not None else "—"),
        "| C heap in use (SIGUSR1 `heap_in_use_bytes`) after warm-up → end | %s |" % heap_row,
        "| open fds (quiet) after warm-up → end | %s → %s |" % (
            "%d" % fd_warm[1] if fd_warm else "—", "%d" % fd_end[0] if fd_end else "—"),
        "| SIGTERM | exit %s in %s s |" % (exit_status,
                                          "%.1f" % exit_secs if exit_secs is not None else "—"),
        "| result | **%s** |" % ("PASS" if ok else "FAIL"),
        "",
        "| client kind | requests | responses | failures | p50 ms | p99 ms |",
        "|---|---|---|---|---|---|",
    ] + rows
    if failures:
        lines += ["", "First failures:", ""]
        lines += ["- [%s] %s" % f for f in failures[:20]]
    text = "\n".join(lines) + "\n"
    (ROOT / "bench").mkdir(exist_ok=True)
    (ROOT / "bench" / "SOAK.md").write_text(text)
    print()
    print(text)
    if ok:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print("server log kept in %s" % err_path)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
