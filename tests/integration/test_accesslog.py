"""Request ids, the access log (--access-log, --log-format,
--access-log-sample), SIGHUP reopen, a log reader that stalls, JSON server
log lines, and Triton's logging API (GET/POST /v2/logging). REST over
HTTP/1.1 and HTTP/2 (curl --http2-prior-knowledge), and gRPC calls
(python3-grpcio).

The writer is a background thread: tests wait for lines to appear, or stop
the server (which flushes the log) before reading.
"""
import json
import os
import re
import signal
import subprocess
import time

import grpc
import pytest
import requests

from conftest import MAIN_MODELS, assert_error_response
from grpc_client import Client, generate

TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
HEX32 = re.compile(r"^[0-9a-f]{32}$")
FIELDS = ["ts", "request_id", "trace_id", "protocol", "method", "endpoint", "model", "version",
          "route", "model_sha256", "inputs", "batch_size", "queue_us", "compute_us", "total_us", "status",
          "bytes_in", "bytes_out", "client", "error"]
WAIT = 20.0


def simple_body(rows=1):
    data = list(range(16 * rows))
    return json.dumps({"inputs": [
        {"name": "INPUT0", "shape": [rows, 16], "datatype": "INT32", "data": data},
        {"name": "INPUT1", "shape": [rows, 16], "datatype": "INT32", "data": data}]})


def not_readiness(line):
    """Lines other than the fixture's readiness polls (GET /v2/health/ready)."""
    return '"endpoint":"/v2/health/ready"' not in line


def wait_lines(path, n, timeout=WAIT):
    """The JSON lines of `path` except readiness polls, once there are n."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            lines = [l for l in open(path).read().splitlines() if l and not_readiness(l)]
        except FileNotFoundError:
            lines = []
        if len(lines) >= n:
            return lines
        if time.monotonic() > deadline:
            pytest.fail("expected %d access log lines in %s, got %d: %s" % (n, path, len(lines), lines))
        time.sleep(0.05)


def stop(srv):
    problems = srv.stop()
    assert not problems, "\n".join(problems)


def test_fields_success_and_errors(server_factory, tmp_path):
    log = tmp_path / "access.log"
    srv = server_factory.start("--access-log", str(log))
    meta_resp = requests.get(srv.url + "/v2/models/simple", timeout=10)
    sha = meta_resp.json()["parameters"]["sha256"]
    body = simple_body(2)
    ok = requests.post(srv.url + "/v2/models/simple/infer", data=body,
                       headers={"x-request-id": "client-id-1"}, timeout=10)
    assert ok.status_code == 200
    bad = requests.post(srv.url + "/v2/models/simple/infer", data='{"inputs": 1}', timeout=10)
    assert bad.status_code == 400
    missing = requests.post(srv.url + "/v2/models/nope/infer", data="{}", timeout=10)
    assert missing.status_code == 404
    lines = [json.loads(l) for l in wait_lines(log, 4)]
    for line in lines:
        assert list(line) == FIELDS
        assert TS.match(line["ts"]), line
        assert HEX32.match(line["trace_id"])
        assert line["protocol"] == "h1"
        assert re.match(r"^127\.0\.0\.1:\d+$", line["client"]), line
        for k in ("queue_us", "compute_us", "total_us", "bytes_in", "bytes_out", "batch_size"):
            assert isinstance(line[k], int), (k, line)
    # Lines of different I/O threads are not in request order.
    by_id = {l["request_id"]: l for l in lines}
    meta = next(l for l in lines if l["endpoint"] == "/v2/models/simple")
    success = by_id["client-id-1"]
    error = by_id[bad.headers["x-request-id"]]
    unknown = by_id[missing.headers["x-request-id"]]
    assert meta["endpoint"] == "/v2/models/simple" and meta["method"] == "GET"
    assert meta["model"] is None and meta["inputs"] == [] and meta["status"] == 200
    assert meta["bytes_in"] == 0 and meta["bytes_out"] == len(meta_resp.content)
    # Only the infer request that ran has queue and compute time and a batch.
    for line in (meta, error, unknown):
        assert (line["queue_us"], line["compute_us"], line["batch_size"]) == (0, 0, 0), line

    assert success["request_id"] == "client-id-1" == ok.headers["x-request-id"]
    assert success["method"] == "POST"
    assert success["endpoint"] == "/v2/models/simple/infer"
    assert success["model"] == "simple" and success["version"] == "1"
    assert success["model_sha256"] == sha[:12]
    assert success["route"] == "default"  # no version in the URL, no routing table
    assert meta["route"] is None and unknown["route"] is None  # not routed
    assert success["inputs"] == [{"name": "INPUT0", "datatype": "INT32", "shape": [2, 16]},
                                 {"name": "INPUT1", "datatype": "INT32", "shape": [2, 16]}]
    assert success["batch_size"] == 2  # it ran alone: no other request was in flight
    assert success["status"] == 200
    assert success["bytes_in"] == len(body)
    assert success["bytes_out"] == len(ok.content)
    assert success["total_us"] >= success["queue_us"] + success["compute_us"]
    assert success["error"] is None and meta["error"] is None

    assert error["status"] == 400 and error["model"] == "simple"
    assert error["error"] == bad.json()["error"] == "request needs an 'inputs' array"
    assert error["request_id"] == bad.headers["x-request-id"]
    assert error["inputs"] == [] and error["batch_size"] == 0 and error["compute_us"] == 0
    assert error["bytes_in"] == len('{"inputs": 1}') and error["bytes_out"] == len(bad.content)
    assert unknown["status"] == 404 and unknown["model"] is None
    assert unknown["bytes_in"] == 2 and unknown["bytes_out"] == len(missing.content)
    assert unknown["endpoint"] == "/v2/models/nope/infer"
    assert unknown["error"] == missing.json()["error"] and "nope" in unknown["error"]


def test_request_id_echo_and_generation(server_factory):
    srv = server_factory.start()
    url = srv.url + "/v2/health/live"
    r = requests.get(url, headers={"x-request-id": "abc-123_XYZ"}, timeout=10)
    assert r.headers["x-request-id"] == "abc-123_XYZ"
    longest = "r" * 128
    assert requests.get(url, headers={"x-request-id": longest}, timeout=10).headers["x-request-id"] == longest
    generated = set()
    for bad in ("has space", "x" * 129, "caf\u00e9".encode("utf-8"), None):
        headers = {} if bad is None else {"x-request-id": bad}
        got = requests.get(url, headers=headers, timeout=10).headers["x-request-id"]
        assert HEX32.match(got), (bad, got)
        generated.add(got)
    assert len(generated) == 4
    # Errors carry it too, including 404 and 405.
    assert HEX32.match(requests.get(srv.url + "/nope", timeout=10).headers["x-request-id"])
    assert HEX32.match(requests.delete(srv.url + "/v2", timeout=10).headers["x-request-id"])


def test_sampling_ratio(server_factory, tmp_path):
    log = tmp_path / "access.log"
    srv = server_factory.start("--access-log", str(log), "--access-log-sample", "0.5")
    with requests.Session() as s:
        for _ in range(400):
            assert s.get(srv.url + "/v2/health/live", timeout=10).status_code == 200
    stop(srv)  # flushes
    n = len([l for l in log.read_text().splitlines() if not_readiness(l)])
    assert 100 < n < 300, n  # about 200; loose bounds, not a statistics test


def test_sampling_zero_logs_nothing(server_factory, tmp_path):
    log = tmp_path / "access.log"
    srv = server_factory.start("--access-log", str(log), "--access-log-sample", "0")
    for _ in range(20):
        requests.get(srv.url + "/v2/health/live", timeout=10)
    stop(srv)
    assert log.read_text() == ""


def test_stdout_and_text_format(server_factory):
    srv = server_factory.start("--access-log", "-", "--log-format", "text")
    r = requests.post(srv.url + "/v2/models/simple/infer", data=simple_body(),
                      headers={"x-request-id": "text-1"}, timeout=10)
    assert r.status_code == 200
    stop(srv)
    out = srv.stdout_path.read_text()
    line = next(l for l in out.splitlines() if "request_id=text-1" in l)
    tokens = dict(t.split("=", 1) for t in line.split(" ")[1:])
    assert TS.match(line.split(" ")[0])
    assert tokens["endpoint"] == "/v2/models/simple/infer"
    assert tokens["model"] == "simple" and tokens["version"] == "1"
    assert tokens["inputs"] == "INPUT0:INT32:[1,16];INPUT1:INT32:[1,16]"
    assert tokens["status"] == "200" and tokens["protocol"] == "h1"
    assert tokens["error"] == "-"
    # --log-format text given: server lines are text (not JSON)
    assert not srv.stderr().lstrip().startswith("{")


def test_json_server_log_lines(server_factory, tmp_path):
    srv = server_factory.start("--access-log", str(tmp_path / "a.log"), "--log-format", "json")
    stop(srv)
    lines = [l for l in srv.stderr().splitlines() if l]
    assert lines
    for l in lines:
        doc = json.loads(l)
        assert set(doc) == {"ts", "level", "msg"} and TS.match(doc["ts"])
        assert doc["level"] in ("error", "warn", "info", "debug")
    assert any("shutdown complete" == json.loads(l)["msg"] for l in lines)


def test_sighup_reopens(server_factory, tmp_path):
    log = tmp_path / "access.log"
    srv = server_factory.start("--access-log", str(log))
    requests.get(srv.url + "/v2/health/live", headers={"x-request-id": "before"}, timeout=10)
    wait_lines(log, 1)
    rotated = tmp_path / "access.log.1"
    os.rename(log, rotated)
    srv.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + WAIT
    while not log.exists():  # the writer creates the new file
        assert time.monotonic() < deadline, srv.stderr()
        time.sleep(0.05)
    requests.get(srv.url + "/v2/health/live", headers={"x-request-id": "after"}, timeout=10)
    (after,) = wait_lines(log, 1)
    assert json.loads(after)["request_id"] == "after"
    (before,) = [l for l in rotated.read_text().splitlines() if not_readiness(l)]
    assert json.loads(before)["request_id"] == "before"
    assert "access log reopened" in srv.stderr()


def test_stalled_reader_drops_instead_of_blocking(server_factory, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    # A reader that never reads: the pipe fills up after ~64 KiB.
    rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        srv = server_factory.start("--access-log", str(fifo), "--io-threads", "1")
        rid = "q" * 128  # long lines fill the buffers sooner
        with requests.Session() as s:
            for i in range(3000):
                r = s.get(srv.url + "/v2/health/live", headers={"x-request-id": rid}, timeout=10)
                assert r.status_code == 200
        stop(srv)  # gives up on the stalled pipe after its grace period
        m = re.search(r"access log closed: (\d+) lines written, (\d+) dropped", srv.stderr())
        assert m, srv.stderr()
        written, dropped = int(m.group(1)), int(m.group(2))
        assert dropped > 0
        assert written + dropped >= 3000  # and the readiness polls
    finally:
        os.close(rfd)


def test_fifo_without_reader_refused(server_factory, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    srv = server_factory.start("--access-log", str(fifo), wait=False)
    assert srv.proc.wait(timeout=30) == 1
    srv.returncode = 1
    assert "a FIFO with no reader" in srv.stderr()


@pytest.mark.parametrize("flags", [("--access-log-sample", "1.5"), ("--access-log-sample", "x"),
                                   ("--log-format", "xml"), ("--trace-rate", "-0.1"),
                                   ("--otlp-endpoint", "https://h/v1/traces")])
def test_bad_flags(server_factory, flags):
    srv = server_factory.start(*flags, wait=False)
    rc = srv.proc.wait(timeout=30)
    srv.returncode = rc
    assert rc in (1, 2), srv.stderr()


# ---- Triton's logging API --------------------------------------------------


def test_logging_api(server_factory):
    srv = server_factory.start()
    url = srv.url + "/v2/logging"
    r = requests.get(url, timeout=10)
    assert r.status_code == 200
    assert r.json() == {"log_file": "", "log_info": True, "log_warning": True, "log_error": True,
                        "log_verbose_level": 0, "log_format": "default"}
    # Verbose on: the scheduler's debug lines appear.
    r = requests.post(url, json={"log_verbose_level": 1}, timeout=10)
    assert r.status_code == 200 and r.json()["log_verbose_level"] == 1
    assert r.json()["log_info"] is True  # unchanged fields are reported too
    requests.post(srv.url + "/v2/models/simple/infer", data=simple_body(), timeout=10)
    deadline = time.monotonic() + WAIT
    while " debug model simple: ran " not in srv.stderr():
        assert time.monotonic() < deadline, srv.stderr()
        time.sleep(0.05)
    # Triton's plural spellings are accepted too.
    r = requests.post(url, json={"log_info": False, "log_warnings": False, "log_errors": True,
                                 "log_verbose_level": 0, "log_format": "ISO8601"}, timeout=10)
    assert r.json() == {"log_file": "", "log_info": False, "log_warning": False, "log_error": True,
                        "log_verbose_level": 0, "log_format": "ISO8601"}
    before = srv.stderr()
    requests.post(srv.url + "/v2/repository/index", timeout=10)
    # JSON server lines from now on.
    r = requests.post(url, json={"log_info": True, "log_format": "json"}, timeout=10)
    assert r.json()["log_format"] == "json"
    stop(srv)
    tail = srv.stderr()[len(before):].splitlines()
    assert tail and all(json.loads(l)["level"] for l in tail if l)


@pytest.mark.parametrize("body", [
    {"log_info": "yes"}, {"log_verbose_level": -1}, {"log_verbose_level": 1.5},
    {"log_verbose_level": "1"}, {"log_format": "xml"}, {"log_format": 1},
    {"log_file": "/tmp/inferd.log"}, {"log_file": 3}, {"unknown": True}, [1],
])
def test_logging_api_rejects(server, body):
    url = server.url + "/v2/logging"
    before = requests.get(url, timeout=10).json()
    r = requests.post(url, json=body, timeout=10)
    assert_error_response(r, 400)
    assert requests.get(url, timeout=10).json() == before


def test_logging_api_malformed_and_method(server):
    r = requests.post(server.url + "/v2/logging", data="{", timeout=10)
    assert_error_response(r, 400)
    r = requests.put(server.url + "/v2/logging", data="{}", timeout=10)
    assert_error_response(r, 405)


# --------------------------------------------------------------------------
# HTTP/2 and gRPC

CLIENT = re.compile(r"^127\.0\.0\.1:\d+$")
GRPC_INFER = "/inference.GRPCInferenceService/ModelInfer"
GRPC_STREAM = "/inference.GRPCInferenceService/ModelStreamInfer"
SIMPLE_INPUTS = [{"name": "INPUT0", "datatype": "INT32", "shape": [1, 16]},
                 {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16]}]


@pytest.fixture(scope="module")
def pbs(tmp_path_factory):
    """(grpc_service_pb2, health_pb2)."""
    return generate(tmp_path_factory.mktemp("proto_py"))


def grpc_simple_request(pb, id=""):
    req = pb.ModelInferRequest(model_name="simple", id=id)
    for name in ("INPUT0", "INPUT1"):
        t = req.inputs.add(name=name, datatype="INT32", shape=[1, 16])
        t.contents.int_contents.extend(range(16))
    return req


def test_rest_over_h2(server_factory, tmp_path):
    log = tmp_path / "access.log"
    srv = server_factory.start("--access-log", str(log))
    body = simple_body()
    out = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "-o", "/dev/null",
                          "-w", "%{http_version} %{http_code} %{size_download}",
                          "-H", "x-request-id: h2-req-1", "-H", "content-type: application/json",
                          "--data-binary", body, srv.url + "/v2/models/simple/infer"],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    version, code, size = out.split()
    assert (version, code) == ("2", "200")
    (line,) = [json.loads(l) for l in wait_lines(log, 1)]
    assert list(line) == FIELDS
    assert line["request_id"] == "h2-req-1"
    assert line["protocol"] == "h2" and line["method"] == "POST"
    assert line["endpoint"] == "/v2/models/simple/infer"
    assert line["model"] == "simple" and line["inputs"] == SIMPLE_INPUTS
    assert line["status"] == 200
    assert line["bytes_in"] == len(body) and line["bytes_out"] == int(size)
    assert CLIENT.match(line["client"]), line
    assert line["error"] is None


def test_grpc_fields_success_and_errors(server_factory, tmp_path, pbs):
    pb, hpb = pbs
    log = tmp_path / "access.log"
    srv = server_factory.start("--access-log", str(log))
    meta_resp = requests.get(srv.url + "/v2/models/simple", timeout=10)
    sha = meta_resp.json()["parameters"]["sha256"]
    c = Client(pb, hpb, "127.0.0.1:%d" % srv.grpc_port)
    req = grpc_simple_request(pb, id="message-id")
    resp, call = c.unary("ModelInfer").with_call(req, metadata=[("x-request-id", "grpc-ok-1")],
                                                   timeout=30)
    assert dict(call.initial_metadata())["x-request-id"] == "grpc-ok-1"
    bad = pb.ModelInferRequest(model_name="simple")  # no inputs
    with pytest.raises(grpc.RpcError) as e:
        c.unary("ModelInfer").with_call(bad, timeout=30)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    bad_message = e.value.details()
    # An error is a trailers-only response: the id is in that one header block.
    bad_id = dict(e.value.trailing_metadata())["x-request-id"]
    assert HEX32.match(bad_id)
    with pytest.raises(grpc.RpcError) as e:
        c.infer(pb.ModelInferRequest(model_name="nope"), metadata=[("x-request-id", "grpc-404")])
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    meta = c.call("ModelMetadata", name="simple")
    assert c.health_check() == 1
    c.close()

    lines = [json.loads(l) for l in wait_lines(log, 6)]
    (rest,) = [l for l in lines if l["endpoint"] == "/v2/models/simple"]  # the sha lookup
    lines = [l for l in lines if l is not rest]
    for line in lines:
        assert list(line) == FIELDS
        assert line["protocol"] == "grpc" and line["method"] == "POST"
        assert CLIENT.match(line["client"]), line
        assert HEX32.match(line["trace_id"])
    by_id = {l["request_id"]: l for l in lines}
    ok = by_id["grpc-ok-1"]
    assert ok["endpoint"] == GRPC_INFER
    assert ok["model"] == "simple" and ok["version"] == "1" and ok["model_sha256"] == sha[:12]
    assert ok["inputs"] == SIMPLE_INPUTS
    assert ok["batch_size"] == 1 and ok["status"] == 200  # one sample, nothing else in flight
    assert ok["bytes_in"] == req.ByteSize() and ok["bytes_out"] == resp.ByteSize()
    assert ok["total_us"] >= ok["queue_us"] + ok["compute_us"]
    assert ok["error"] is None

    err = by_id[bad_id]
    assert err["error"] == bad_message == "missing input 'INPUT0' for model 'simple'"
    assert err["endpoint"] == GRPC_INFER and err["status"] == 400
    assert err["model"] == "simple" and err["version"] == "1"
    assert err["inputs"] == [] and err["batch_size"] == 0
    assert err["bytes_in"] == bad.ByteSize() and err["bytes_out"] == 0
    unknown = by_id["grpc-404"]
    assert unknown["status"] == 404 and unknown["model"] is None
    assert "nope" in unknown["error"]

    (meta_line,) = [l for l in lines if l["endpoint"].endswith("/ModelMetadata")]
    assert meta_line["model"] == "simple" and meta_line["version"] == "1"
    assert meta_line["status"] == 200 and meta_line["bytes_out"] == meta.ByteSize()
    (health,) = [l for l in lines if l["endpoint"] == "/grpc.health.v1.Health/Check"]
    assert health["status"] == 200 and health["model"] is None and health["bytes_out"] == 2


def test_grpc_stream_one_line_per_request(server_factory, tmp_path, pbs):
    pb, hpb = pbs
    log = tmp_path / "access.log"
    srv = server_factory.start("--access-log", str(log), "--grpc-max-message-bytes", "4096")
    c = Client(pb, hpb, "127.0.0.1:%d" % srv.grpc_port)
    sent = [grpc_simple_request(pb, id="s-1"), grpc_simple_request(pb, id="s-2"),
            grpc_simple_request(pb), pb.ModelInferRequest(model_name="simple", id="s-bad")]
    responses = c.stream_infer()(iter(sent), metadata=[("x-request-id", "stream-7")], timeout=30)
    got = list(responses)
    assert dict(responses.initial_metadata())["x-request-id"] == "stream-7"
    # Responses come in completion order (the error one at once).
    answers = {r.infer_response.id: r for r in got}
    assert sorted(answers) == ["", "s-1", "s-2", "s-bad"]
    assert [k for k, r in answers.items() if r.error_message] == ["s-bad"]
    # A stream that fails as a whole (a message over the limit) has a line
    # of its own, with the stream's id.
    big = grpc_simple_request(pb, id="s-big")
    big.raw_input_contents.append(b"x" * 5000)
    with pytest.raises(grpc.RpcError) as e:
        list(c.stream_infer()(iter([big]), metadata=[("x-request-id", "stream-8")], timeout=30))
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    c.close()
    stop(srv)

    lines = [json.loads(l) for l in wait_lines(log, 5)]
    assert len(lines) == 5  # the first stream ended cleanly: no line of its own
    (failed,) = [l for l in lines if l["request_id"] == "stream-8"]
    assert failed["status"] == 413 and failed["endpoint"] == GRPC_STREAM
    assert failed["model"] is None and failed["bytes_out"] == 0
    assert failed["error"] == e.value.details() and "--grpc-max-message-bytes" in failed["error"]
    lines.remove(failed)
    assert all(l["endpoint"] == GRPC_STREAM and l["protocol"] == "grpc" for l in lines)
    by_id = {l["request_id"]: l for l in lines}
    assert {"s-1", "s-2", "s-bad"} <= set(by_id)
    (generated,) = set(by_id) - {"s-1", "s-2", "s-bad"}
    assert HEX32.match(generated) and generated != "stream-7"
    for rid in ("s-1", "s-2", generated):
        line = by_id[rid]
        assert line["status"] == 200 and line["inputs"] == SIMPLE_INPUTS
        assert line["model"] == "simple" and line["batch_size"] >= 1
        assert CLIENT.match(line["client"])
    assert by_id["s-1"]["bytes_in"] == sent[0].ByteSize()
    assert by_id["s-1"]["bytes_out"] == answers["s-1"].ByteSize()
    assert by_id["s-bad"]["status"] == 400 and by_id["s-bad"]["inputs"] == []
    assert by_id["s-bad"]["bytes_out"] == answers["s-bad"].ByteSize()
    assert by_id["s-bad"]["error"] == answers["s-bad"].error_message
    assert all(by_id[rid]["error"] is None for rid in ("s-1", "s-2", generated))
