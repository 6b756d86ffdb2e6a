"""gRPC-Web on the HTTP port (api/grpc/web.h, docs/protocols.md), checked
with a client written here from the protocol description (grpc/grpc
PROTOCOL-WEB.md: length-prefixed frames, the trailers as a frame with flag
0x80, the text form as base64 of each frame) over requests (HTTP/1.1) and
curl --http2-prior-knowledge (HTTP/2), against what native gRPC (Debian's
python3-grpcio) answers for the same requests. Node.js with Connect's
gRPC-Web transport and headless Chromium are in test_grpc_web_clients.py.

Also: CORS (--cors-allow-origin), the protocol in the access log and in
inferd_requests_total, API keys, limits, deadlines and cancellation."""
import base64
import json
import socket
import subprocess
import threading
import time

import pytest
import requests

from conftest import (MAIN_MODELS, REPO_ROOT, connect, stall_repo, stall_started, wait_queued,
                      wait_stall_started)
from grpc_client import SERVICE, Client, generate
from prom import parse as prom_parse
from test_auth import auth_yaml, new_key
from test_tls import pki, tls_server  # noqa: F401 (pki is a fixture)

KJV = REPO_ROOT / "models" / "kjv"
WAIT = 30
BINARY = "application/grpc-web+proto"
TEXT = "application/grpc-web-text"
ORIGIN = "http://page.example:8080"


@pytest.fixture(scope="module")
def pbs(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("proto_py_web"))


@pytest.fixture(scope="module")
def srv(module_server_factory, tmp_path_factory):
    log = tmp_path_factory.mktemp("web") / "access.log"
    s = module_server_factory.start(
        "--access-log", str(log), "--cors-allow-origin", ORIGIN,
        "--cors-allow-origin", "https://other.example",
        models={"simple": MAIN_MODELS["simple"], "digits": MAIN_MODELS["digits"], "kjv": KJV})
    s.access_log = log
    return s


# ---- the protocol, written here ------------------------------------------------


def frame(payload, flag=0):
    return bytes([flag]) + len(payload).to_bytes(4, "big") + payload


def frames_of(body):
    """[(flag, payload)] of a binary gRPC-Web body; the frames must fill it."""
    out, i = [], 0
    while i < len(body):
        assert len(body) - i >= 5, body[i:]
        n = int.from_bytes(body[i + 1:i + 5], "big")
        assert len(body) - i - 5 >= n, (n, body[i:])
        out.append((body[i], body[i + 5:i + 5 + n]))
        i += 5 + n
    return out


def text_decode(body):
    """The text form: base64 of each frame, each padded: decoded quantum by
    quantum (padding may appear in the middle)."""
    assert len(body) % 4 == 0, body
    return b"".join(base64.b64decode(body[i:i + 4]) for i in range(0, len(body), 4))


def trailer_map(payload):
    lines = payload.decode().split("\r\n")
    assert lines[-1] == "", payload
    return dict(l.split(": ", 1) for l in lines[:-1])


class WebAnswer:
    def __init__(self, status, headers, body, text):
        self.status, self.headers = status, {k.lower(): v for k, v in headers.items()}
        self.raw = body
        body = text_decode(body) if text else body
        fr = frames_of(body)
        self.messages = [p for f, p in fr if f == 0]
        tr = [p for f, p in fr if f == 0x80]
        assert [f for f, _ in fr] == [0] * len(self.messages) + [0x80] * len(tr), fr
        assert len(tr) <= 1
        if tr:
            self.trailers = trailer_map(tr[0])
            self.trailers_only = False
        else:  # trailers-only: the status is in the headers, the body empty
            assert body == b"" and "grpc-status" in self.headers, (self.headers, body)
            self.trailers = {k: v for k, v in self.headers.items() if k.startswith("grpc-")}
            self.trailers_only = True

    @property
    def code(self):
        return int(self.trailers["grpc-status"])


def web_call(srv, method, message, text=False, headers=None, body=None, service=SERVICE):
    """One gRPC-Web call over HTTP/1.1 (requests); message: a protobuf
    message (serialized here) or None when body is given."""
    if body is None:
        body = frame(message.SerializeToString())
        if text:
            body = base64.b64encode(body)
    h = {"content-type": TEXT if text else BINARY, "x-grpc-web": "1"}
    h.update(headers or {})
    r = requests.post(srv.url + service + method, data=body, headers=h, timeout=WAIT)
    ans = WebAnswer(r.status_code, r.headers, r.content, text)
    assert r.status_code == 200
    assert r.headers["content-type"] == ("application/grpc-web-text+proto" if text else BINARY)
    return ans


def simple_request(pb, a, b, model="simple"):
    req = pb.ModelInferRequest(model_name=model, id="web-1")
    for name, data in (("INPUT0", a), ("INPUT1", b)):
        t = req.inputs.add(name=name, datatype="INT32", shape=[1, 16])
        t.contents.int_contents.extend(data)
    return req


A, B = list(range(16)), [3] * 16


def native(srv, pbs, method, req):
    c = Client(*pbs, "127.0.0.1:%d" % srv.grpc_port)
    try:
        return c.unary(method)(req, timeout=WAIT)
    finally:
        c.close()


# ---- unary calls ------------------------------------------------------------------


def test_model_infer_binary_equals_native_grpc(srv, pbs):
    pb, _ = pbs
    req = simple_request(pb, A, B)
    ans = web_call(srv, "ModelInfer", req, headers={"x-request-id": "web-req-1"})
    assert ans.trailers == {"grpc-status": "0"} and len(ans.messages) == 1
    got = pb.ModelInferResponse.FromString(ans.messages[0])
    assert got == native(srv, pbs, "ModelInfer", req)
    assert ans.headers["x-request-id"] == "web-req-1"
    assert ans.headers["x-inferd-model-version"] == "1"
    assert ans.headers["x-inferd-route"] == "default"


def test_model_infer_text_in_padded_chunks(srv, pbs):
    """The text form, the request sent as two base64 chunks each padded
    (a client that encodes each write on its own); the answer is base64 of
    each frame, padded."""
    pb, _ = pbs
    req = simple_request(pb, A, B)
    raw = frame(req.SerializeToString())
    cut = 7  # 7 and len-7 bytes: both chunks end in padding
    body = base64.b64encode(raw[:cut]) + base64.b64encode(raw[cut:])
    assert body.count(b"=") >= 2 and body.index(b"=") < len(body) - 4
    ans = web_call(srv, "ModelInfer", None, text=True, body=body)
    assert ans.code == 0
    assert pb.ModelInferResponse.FromString(ans.messages[0]) == native(srv, pbs, "ModelInfer", req)
    assert b"=" in ans.raw[:-4]  # the message frame is padded on its own


def test_digits_and_metadata_equal_native(srv, pbs):
    pb, _ = pbs
    req = pb.ModelInferRequest(model_name="digits")
    t = req.inputs.add(name="pixels", datatype="FP32", shape=[1, 64])
    t.contents.fp32_contents.extend([float(i % 16) for i in range(64)])
    meta = pb.ModelMetadataRequest(name="digits")
    if not any(i.name == "pixels" for i in native(srv, pbs, "ModelMetadata", meta).inputs):
        m = native(srv, pbs, "ModelMetadata", meta)
        pytest.fail("digits inputs: %s" % [i.name for i in m.inputs])
    for method, r, cls in (("ModelInfer", req, pb.ModelInferResponse),
                           ("ModelMetadata", meta, pb.ModelMetadataResponse),
                           ("ServerLive", pb.ServerLiveRequest(), pb.ServerLiveResponse)):
        for text in (False, True):
            ans = web_call(srv, method, r, text=text)
            assert ans.code == 0, (method, ans.trailers)
            assert cls.FromString(ans.messages[0]) == native(srv, pbs, method, r), method


def test_errors_are_trailers_only_with_grpc_codes(srv, pbs):
    pb, _ = pbs
    ans = web_call(srv, "ModelInfer", simple_request(pb, A, B, model="nope"))
    assert ans.trailers_only and ans.code == 5  # NOT_FOUND
    assert "nope" in requests.utils.unquote(ans.trailers["grpc-message"])
    ans = web_call(srv, "NoSuchMethod", pb.ServerLiveRequest())
    assert ans.trailers_only and ans.code == 12
    bad = pb.ModelInferRequest(model_name="simple")
    bad.inputs.add(name="INPUT0", datatype="INT32", shape=[1, 16])
    ans = web_call(srv, "ModelInfer", bad)
    assert ans.code == 3  # INVALID_ARGUMENT
    for body, code in ((b"\x00\x00\x00", 3),                     # ends inside a prefix
                       (b"\x01\x00\x00\x00\x01x", 13),           # compressed, no grpc-encoding
                       (b"", 3)):                                # no message
        assert web_call(srv, "ServerLive", None, body=body).code == code, body
    ans = web_call(srv, "ServerLive", None, text=True, body=b"AAAA*AAA")
    assert ans.code == 3 and "base64" in ans.trailers["grpc-message"]


def test_http2_and_get_method(srv, pbs):
    """The same call over HTTP/2 (curl, prior knowledge): trailers in the
    body too. A GET is refused as native gRPC refuses it."""
    pb, _ = pbs
    req = simple_request(pb, A, B)
    body = frame(req.SerializeToString())
    r = subprocess.run(["curl", "-s", "-S", "--http2-prior-knowledge", "--max-time", "20",
                        "-D", "-", "-o", "/dev/stdout", "-H", "content-type: " + BINARY,
                        "--data-binary", "@-", srv.url + SERVICE + "ModelInfer"],
                       input=body, capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    head, _, payload = r.stdout.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/2 200"), head
    fr = frames_of(payload)
    assert [f for f, _ in fr] == [0, 0x80]
    assert pb.ModelInferResponse.FromString(fr[0][1]) == native(srv, pbs, "ModelInfer", req)
    assert trailer_map(fr[1][1]) == {"grpc-status": "0"}
    r = requests.get(srv.url + SERVICE + "ServerLive", headers={"content-type": BINARY},
                     timeout=WAIT)
    assert r.status_code == 200 and r.headers["grpc-status"] == "12"


# ---- server streaming ---------------------------------------------------------------


def kjv_request(pb, prompt, n, rid):
    req = pb.ModelInferRequest(model_name="kjv", id=rid)
    t = req.inputs.add(name="text_input", datatype="BYTES", shape=[1])
    t.contents.bytes_contents.append(prompt.encode())
    t = req.inputs.add(name="max_tokens", datatype="INT32", shape=[1])
    t.contents.int_contents.append(n)
    t = req.inputs.add(name="temperature", datatype="FP32", shape=[1])
    t.contents.fp32_contents.append(0.0)
    return req


def text_of(pb, messages):
    out = []
    for m in messages:
        r = pb.ModelStreamInferResponse.FromString(m)
        assert r.error_message == ""
        ir = r.infer_response
        i = [o.name for o in ir.outputs].index("text_output")
        raw = ir.raw_output_contents[i] if ir.raw_output_contents else None
        out.append(raw[4:] if raw is not None else ir.outputs[i].contents.bytes_contents[0])
    return b"".join(out).decode()


def test_model_stream_infer_token_by_token(srv, pbs):
    """kjv answers token by token: each response its own data frame, read
    as they come (stream=True), the same text as native gRPC's stream."""
    pb, hpb = pbs
    reqs = [kjv_request(pb, "In the beginning", 12, "s1"), simple_request(pb, A, B)]
    body = b"".join(frame(r.SerializeToString()) for r in reqs)
    r = requests.post(srv.url + SERVICE + "ModelStreamInfer", data=body, stream=True,
                      headers={"content-type": BINARY}, timeout=WAIT)
    chunks = [c for c in r.iter_content(chunk_size=None)]
    assert len(chunks) > 2  # written as they were produced
    ans = WebAnswer(r.status_code, r.headers, b"".join(chunks), False)
    assert ans.code == 0 and len(ans.messages) >= 12
    simple = [m for m in ans.messages
              if pb.ModelStreamInferResponse.FromString(m).infer_response.model_name == "simple"]
    assert len(simple) == 1
    kjv = [m for m in ans.messages if m not in simple]
    c = Client(pb, hpb, "127.0.0.1:%d" % srv.grpc_port)
    try:
        ref = [x.SerializeToString() for x in c.stream_infer()(iter(reqs[:1]), timeout=WAIT)]
    finally:
        c.close()
    assert text_of(pb, kjv) == text_of(pb, ref) and len(kjv) == len(ref)


# ---- CORS ------------------------------------------------------------------------------


def test_cors_preflight_and_answers(srv, pbs):
    pb, _ = pbs
    pre = {"origin": ORIGIN, "access-control-request-method": "POST",
           "access-control-request-headers": "content-type,x-grpc-web,grpc-timeout"}
    r = requests.options(srv.url + SERVICE + "ModelInfer", headers=pre, timeout=WAIT)
    assert r.status_code == 204, r.text
    assert r.headers["access-control-allow-origin"] == ORIGIN
    assert "POST" in r.headers["access-control-allow-methods"]
    allowed = {h.strip() for h in r.headers["access-control-allow-headers"].split(",")}
    assert {"content-type", "x-grpc-web", "x-user-agent", "grpc-timeout", "authorization",
            "traceparent", "x-request-id"} <= allowed
    assert int(r.headers["access-control-max-age"]) > 0
    r = requests.options(srv.url + SERVICE + "ModelInfer",
                         headers={**pre, "origin": "http://evil.example"}, timeout=WAIT)
    assert r.status_code == 403 and "access-control-allow-origin" not in r.headers
    ans = web_call(srv, "ModelInfer", simple_request(pb, A, B), headers={"origin": ORIGIN})
    assert ans.headers["access-control-allow-origin"] == ORIGIN
    exposed = {h.strip() for h in ans.headers["access-control-expose-headers"].split(",")}
    assert {"grpc-status", "grpc-message", "x-request-id", "x-inferd-model-version"} <= exposed
    r = requests.get(srv.url + "/v2/models/simple", headers={"origin": "https://other.example"},
                     timeout=WAIT)
    assert r.headers["access-control-allow-origin"] == "https://other.example"
    r = requests.get(srv.url + "/v2/models/simple", headers={"origin": "http://evil.example"},
                     timeout=WAIT)
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers


def test_cors_off_without_the_flag_and_star(server_factory):
    srv = server_factory.start(models={"simple": MAIN_MODELS["simple"]})
    pre = {"origin": ORIGIN, "access-control-request-method": "POST"}
    r = requests.options(srv.url + "/v2/models/simple/infer", headers=pre, timeout=WAIT)
    assert r.status_code == 405 and "access-control-allow-origin" not in r.headers
    srv.stop()
    srv = server_factory.start("--cors-allow-origin", "*", models={"simple": MAIN_MODELS["simple"]})
    r = requests.options(srv.url + "/v2/models/simple/infer", headers=pre, timeout=WAIT)
    assert r.status_code == 204 and r.headers["access-control-allow-origin"] == "*"
    bad = server_factory.start("--cors-allow-origin", "not-an-origin", wait=False)
    bad.returncode = bad.proc.wait(timeout=WAIT)
    assert bad.returncode != 0
    assert "--cors-allow-origin" in bad.stderr()


# ---- observability, limits, deadlines, cancellation, auth ------------------------------


def log_lines(srv, pred, n=1):
    deadline = time.monotonic() + WAIT
    while True:
        lines = [json.loads(l) for l in open(srv.access_log).read().splitlines() if l]
        got = [l for l in lines if pred(l)]
        if len(got) >= n or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def test_access_log_and_metrics_say_grpc_web(srv, pbs):
    pb, _ = pbs
    web_call(srv, "ModelInfer", simple_request(pb, A, B), headers={"x-request-id": "web-log-1"})
    requests.get(srv.url + "/v2/models/simple", headers={"x-request-id": "h1-log-1"}, timeout=WAIT)
    native(srv, pbs, "ServerLive", pb.ServerLiveRequest())
    line = log_lines(srv, lambda l: l["request_id"] == "web-log-1")[0]
    assert line["protocol"] == "grpc-web" and line["status"] == 200
    assert line["endpoint"] == SERVICE + "ModelInfer" and line["model"] == "simple"
    assert log_lines(srv, lambda l: l["request_id"] == "h1-log-1")[0]["protocol"] == "h1"
    metrics = prom_parse(requests.get(srv.metrics_url, timeout=WAIT).text)
    by = {l["protocol"]: v for l, v in metrics.series("inferd_requests_total")}
    assert by["grpc-web"] >= 1 and by["h1"] >= 1 and by["grpc"] >= 1
    assert set(by) == {"h1", "h1.0", "h2", "h3", "grpc", "grpc-web"}


def test_message_limit_and_deadline(server_factory, tmp_path, pbs):
    pb, _ = pbs
    srv = server_factory.start("--grpc-max-message-bytes", "1024",
                               repository=stall_repo(tmp_path, 1500000))
    big = frame(b"\x0a" + b"\x7f" + b"x" * 2000)
    ans = web_call(srv, "ServerLive", None, body=big)
    assert ans.code == 8 and "--grpc-max-message-bytes" in ans.trailers["grpc-message"]
    req = pb.ModelInferRequest(model_name="echo")
    t = req.inputs.add(name="IN", datatype="INT32", shape=[1, 4])
    t.contents.int_contents.extend([1, 2, 3, 4])
    # The first fills the model for 1.5 s; the second's deadline passes in the queue.
    started = stall_started(tmp_path)
    th = threading.Thread(target=lambda: web_call(srv, "ModelInfer", req))
    th.start()
    wait_stall_started(tmp_path, started + 1)
    ans = web_call(srv, "ModelInfer", req, headers={"grpc-timeout": "200m"})
    th.join()
    assert ans.code == 4, ans.trailers  # DEADLINE_EXCEEDED


def test_client_that_leaves_cancels_the_call(server_factory, tmp_path, pbs):
    pb, _ = pbs
    log = tmp_path / "access.log"
    srv = server_factory.start("--access-log", str(log), repository=stall_repo(tmp_path, 1000000))
    srv.access_log = log
    req = pb.ModelInferRequest(model_name="echo")
    t = req.inputs.add(name="IN", datatype="INT32", shape=[1, 4])
    t.contents.int_contents.extend([1, 2, 3, 4])
    body = frame(req.SerializeToString())
    head = ("POST %sModelInfer HTTP/1.1\r\nHost: x\r\ncontent-type: %s\r\n"
            "x-request-id: %%s\r\ncontent-length: %d\r\n\r\n" % (SERVICE, BINARY, len(body)))
    started = stall_started(tmp_path)
    first = connect(srv.port)
    first.sendall((head % "stay").encode() + body)   # runs for 1 s
    wait_stall_started(tmp_path, started + 1)
    second = connect(srv.port)
    second.sendall((head % "leave").encode() + body)  # waits behind it
    wait_queued(srv, "echo", 1)
    second.shutdown(socket.SHUT_RDWR)
    second.close()
    first.settimeout(WAIT)
    assert first.recv(4096).startswith(b"HTTP/1.1 200")
    first.close()
    line = log_lines(srv, lambda l: l["request_id"] == "leave")[0]
    assert line["protocol"] == "grpc-web" and line["status"] == 0
    stats = requests.get(srv.url + "/v2/models/echo/stats", timeout=WAIT).json()
    assert stats["model_stats"][0]["execution_count"] == 1  # the second never ran
    ans = web_call(srv, "ServerLive", pb.ServerLiveRequest())  # the server is fine
    assert ans.code == 0


def test_api_keys_in_metadata(module_server_factory, tmp_path, pbs):
    pb, _ = pbs
    reader, infer = new_key(), new_key()
    cfg = tmp_path / "inferd.yaml"
    cfg.write_text(auth_yaml([("reader", [reader[1]], ["read"]),
                              ("infer", [infer[1]], ["infer"])]))
    srv = module_server_factory.start("--config", str(cfg),
                                      models={"simple": MAIN_MODELS["simple"]})
    req = simple_request(pb, A, B)
    assert web_call(srv, "ModelInfer", req).code == 16  # UNAUTHENTICATED
    assert web_call(srv, "ModelInfer", req, headers={"x-api-key": reader[0]}).code == 7
    ans = web_call(srv, "ModelInfer", req, headers={"authorization": "Bearer " + infer[0]})
    assert ans.code == 0 and len(ans.messages) == 1
    assert web_call(srv, "ModelMetadata", pb.ModelMetadataRequest(name="simple"),
                    headers={"x-api-key": reader[0]}).code == 0


def test_over_tls_http1_and_h2(server_factory, pki, tmp_path, pbs):
    """TLS on the HTTP port: ALPN http/1.1 and h2 (curl), the same frames."""
    pb, _ = pbs
    srv = tls_server(server_factory, pki, tmp_path)
    req = simple_request(pb, A, B)
    body = tmp_path / "req.bin"
    body.write_bytes(frame(req.SerializeToString()))
    for flag, version in (("--http1.1", b"HTTP/1.1 200"), ("--http2", b"HTTP/2 200")):
        r = subprocess.run(["curl", "-s", "-S", flag, "--cacert", str(pki / "ca.pem"),
                            "--max-time", "20", "-D", "-", "-H", "content-type: " + BINARY,
                            "--data-binary", "@" + str(body),
                            "https://127.0.0.1:%d%sModelInfer" % (srv.port, SERVICE)],
                           capture_output=True, timeout=30)
        assert r.returncode == 0, r.stderr
        head, _, payload = r.stdout.partition(b"\r\n\r\n")
        assert head.startswith(version), head
        fr = frames_of(payload)
        assert [f for f, _ in fr] == [0, 0x80] and trailer_map(fr[1][1]) == {"grpc-status": "0"}
        got = pb.ModelInferResponse.FromString(fr[0][1])
        assert got.raw_output_contents[0] == native_raw(pb, A, B)


def native_raw(pb, a, b):
    """simple's OUTPUT0 (a + b) as raw little-endian INT32 bytes."""
    return b"".join((x + y).to_bytes(4, "little", signed=True) for x, y in zip(a, b))
