"""Decoupled models: many responses per request, streamed as the model makes
them. The model is the example plugin examples/backends/repeat (one response
per element of IN, after DELAY[i] ms), served

  - over gRPC ModelStreamInfer (Debian's python3-grpcio),
  - over Triton's generate_stream as Server-Sent Events, read with curl over
    HTTP/1.1 (chunked) and HTTP/2, and with the SSE reader below, written from
    the WHATWG grammar (fields, multi-line data, comments, ids),
  - over Triton's generate (one JSON response).

A client that goes away mid-stream stops the model at its next response: the
statistics show the request ending long before the model would have run
its course."""
import json
import shutil
import socket
import subprocess
import threading
import time

import grpc
import pytest
import requests

from conftest import INFERD_BIN, assert_error_response, ok_json
from grpc_client import Client, generate

PLUGIN = INFERD_BIN.parent / "libinferd_repeat.so"

REPEAT_CONFIG = """
backend: "repeat"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [
  { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] },
  { name: "DELAY" data_type: TYPE_UINT32 dims: [ -1 ] }
]
output [
  { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] },
  { name: "IDX" data_type: TYPE_UINT32 dims: [ 1 ] }
]
"""

CURL = shutil.which("curl")


def repeat_repo(tmp_path, config=REPEAT_CONFIG):
    if not PLUGIN.exists():
        pytest.fail("example plugin not built: %s" % PLUGIN)
    root = tmp_path / "models"
    mdir = root / "repeat"
    (mdir / "1").mkdir(parents=True)
    (mdir / "1" / "model.onnx").write_bytes(b"")
    (mdir / "config.pbtxt").write_text(config)
    shutil.copy(PLUGIN, mdir / PLUGIN.name)
    return root


@pytest.fixture(scope="module")
def srv(module_server_factory, tmp_path_factory):
    repo = repeat_repo(tmp_path_factory.mktemp("repeat"))
    return module_server_factory.start("--model-repository", str(repo),
                                       "--sse-keepalive-ms", "300")


@pytest.fixture(scope="module")
def pbs(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("proto_py"))


def body(values, delay_ms=0):
    return {"IN": values, "DELAY": [delay_ms] * len(values)}


# ---- an SSE reader (WHATWG HTML "server-sent events", event stream parsing) ----

class SSEReader:
    """Reads events from a byte stream as they arrive: `next_event()` returns
    (id, data, comments_seen_before) or None at the end of the stream."""

    def __init__(self, chunks):
        self.chunks = chunks
        self.buf = b""
        self.last_id = None
        self.comments = []

    def _line(self):
        while True:
            for sep in (b"\r\n", b"\n", b"\r"):
                i = self.buf.find(sep)
                if i >= 0 and not (sep == b"\r" and i + 1 == len(self.buf)):
                    line, self.buf = self.buf[:i], self.buf[i + len(sep):]
                    return line.decode("utf-8")
            chunk = next(self.chunks, None)
            if chunk is None:
                return None
            self.buf += chunk

    def next_event(self):
        data, have_data, comments = [], False, []
        while True:
            line = self._line()
            if line is None:
                return None
            if line == "":
                if have_data:
                    self.comments += comments
                    return self.last_id, "\n".join(data)
                continue
            if line.startswith(":"):
                comments.append(line[1:].strip())
                continue
            field, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if field == "data":
                data.append(value)
                have_data = True
            elif field == "id" and "\0" not in value:
                self.last_id = value


def sse_post(url, payload, **kw):
    r = requests.post(url, json=payload, stream=True, timeout=60, **kw)
    return r, SSEReader(r.iter_content(chunk_size=None))


def stats_of(srv, model="repeat"):
    doc = ok_json(requests.get(srv.url + "/v2/models/%s/stats" % model, timeout=10))
    return doc["model_stats"][0]


def wait_stats(srv, cond, timeout=15.0):
    deadline = time.monotonic() + timeout
    while True:
        s = stats_of(srv)
        if cond(s):
            return s
        if time.monotonic() > deadline:
            pytest.fail("statistics never met the condition: %s" % json.dumps(s))
        time.sleep(0.05)


def finished_requests(s):
    return s["inference_stats"]["success"]["count"] + s["inference_stats"]["fail"]["count"]


def assert_stopped_early(srv, before):
    """The cancelled 100-response request (100 ms apart: 10 s in all) ended
    well before its course: it is counted within 8 s, after under 5 s of
    model time. Returns the statistics."""
    s = wait_stats(srv, lambda s: finished_requests(s) > finished_requests(before), timeout=8.0)
    ran_ns = (s["inference_stats"]["compute_infer"]["ns"]
              - before["inference_stats"]["compute_infer"]["ns"])
    assert ran_ns < 5e9, ran_ns
    return s


# ---- SSE: generate_stream ----

def test_generate_stream_sends_one_event_per_response(srv):
    r, reader = sse_post(srv.url + "/v2/models/repeat/generate_stream", body([4, 5, 6], 20))
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "text/event-stream; charset=utf-8"
    assert r.headers["Cache-Control"] == "no-cache"
    assert r.headers["X-Accel-Buffering"] == "no"
    assert r.headers["Transfer-Encoding"] == "chunked"
    events = []
    while (ev := reader.next_event()) is not None:
        events.append(ev)
    assert [e[0] for e in events] == ["1", "2", "3"]
    docs = [json.loads(e[1]) for e in events]
    assert docs == [{"model_name": "repeat", "model_version": "1", "OUT": v, "IDX": i}
                    for i, v in enumerate([4, 5, 6])]


def test_generate_stream_events_arrive_before_the_model_finishes(srv):
    """The first event is read while the model still sleeps before the
    second (2 s): the response is streamed, not buffered."""
    before = finished_requests(stats_of(srv))
    r, reader = sse_post(srv.url + "/v2/models/repeat/generate_stream",
                         {"IN": [1, 2], "DELAY": [0, 2000]})
    first = reader.next_event()
    assert json.loads(first[1])["OUT"] == 1
    # The request is still running: the statistics have not counted it.
    assert finished_requests(stats_of(srv)) == before
    second = reader.next_event()
    assert json.loads(second[1])["OUT"] == 2
    assert reader.next_event() is None


def test_generate_stream_keepalive_comments_while_idle(srv):
    """With --sse-keepalive-ms 300, a 1.5 s wait for the model's response
    carries ': keep-alive' comments, and the event still comes through."""
    r, reader = sse_post(srv.url + "/v2/models/repeat/generate_stream",
                         {"IN": [9, 10], "DELAY": [0, 1500]})
    assert json.loads(reader.next_event()[1])["OUT"] == 9
    assert json.loads(reader.next_event()[1])["OUT"] == 10
    assert "keep-alive" in reader.comments
    assert reader.next_event() is None


@pytest.mark.skipif(CURL is None, reason="curl not installed")
@pytest.mark.parametrize("http", ["--http1.1", "--http2-prior-knowledge"])
def test_generate_stream_with_curl(srv, http):
    out = subprocess.run(
        [CURL, "-sS", "-N", "-i", http, "-H", "Content-Type: application/json",
         "-d", json.dumps(body([7, 8], 10)),
         srv.url + "/v2/models/repeat/generate_stream"],
        capture_output=True, timeout=60, check=True).stdout.decode()
    head, _, stream = out.replace("\r\n", "\n").partition("\n\n")
    assert head.split("\n")[0].split()[1] == "200", head
    if http == "--http1.1":
        assert "transfer-encoding: chunked" in head.lower()
    else:
        assert head.startswith("HTTP/2 200")
    assert "content-type: text/event-stream; charset=utf-8" in head.lower()
    events = [e for e in stream.split("\n\n") if e]
    assert events == [
        'id: 1\ndata: {"model_name":"repeat","model_version":"1","OUT":7,"IDX":0}',
        'id: 2\ndata: {"model_name":"repeat","model_version":"1","OUT":8,"IDX":1}',
    ]


def test_generate_stream_errors_before_the_stream_are_plain_json(srv):
    r = requests.post(srv.url + "/v2/models/repeat/generate_stream",
                      json={"IN": [1], "DELAY": [1], "EXTRA": 1}, timeout=30)
    assert_error_response(r, 400)
    assert "unknown field 'EXTRA'" in r.json()["error"]
    r = requests.post(srv.url + "/v2/models/repeat/generate_stream", json={"IN": [1]},
                      timeout=30)
    assert_error_response(r, 400)
    assert r.json()["error"] == "missing field 'DELAY' (an input of model 'repeat')"
    r = requests.post(srv.url + "/v2/models/nope/generate_stream", json={}, timeout=30)
    assert_error_response(r, 404)


def test_generate_stream_error_from_the_model_is_a_json_response(srv):
    """The model refuses IN and DELAY of different lengths before any
    response: a plain 400."""
    r = requests.post(srv.url + "/v2/models/repeat/generate_stream",
                      json={"IN": [1, 2], "DELAY": [1]}, timeout=30)
    assert_error_response(r, 400)
    assert r.json()["error"] == "IN has 2 elements, DELAY 1: they must match"


def test_client_leaving_a_stream_stops_the_model(srv):
    """100 responses 100 ms apart would take 10 s; the client reads two and
    closes its connection. The request ends (cancelled) within a few
    responses, and the single instance is free for the next request."""
    before = stats_of(srv)
    r, reader = sse_post(srv.url + "/v2/models/repeat/generate_stream",
                         body(list(range(100)), 100))
    assert json.loads(reader.next_event()[1])["IDX"] == 0
    assert json.loads(reader.next_event()[1])["IDX"] == 1
    r.raw._fp.fp.raw._sock.shutdown(socket.SHUT_RDWR)
    r.close()
    s = assert_stopped_early(srv, before)
    assert s["inference_stats"]["fail"]["count"] == before["inference_stats"]["fail"]["count"] + 1
    r = requests.post(srv.url + "/v2/models/repeat/generate", json=body([3]), timeout=30)
    assert ok_json(r)["OUT"] == 3


# ---- generate: one JSON response ----

def test_generate_returns_the_one_response(srv):
    r = requests.post(srv.url + "/v2/models/repeat/generate", json=body([42]), timeout=30)
    assert ok_json(r) == {"model_name": "repeat", "model_version": "1", "OUT": 42, "IDX": 0}
    assert r.headers["Content-Type"] == "application/json"


def test_generate_refuses_a_second_response(srv):
    r = requests.post(srv.url + "/v2/models/repeat/generate", json=body([1, 2]), timeout=30)
    assert_error_response(r, 400)
    assert "sent more than one response" in r.json()["error"]
    assert "generate_stream" in r.json()["error"]


def test_infer_refuses_a_decoupled_model(srv):
    r = requests.post(srv.url + "/v2/models/repeat/infer", json={"inputs": [
        {"name": "IN", "shape": [1], "datatype": "INT32", "data": [1]},
        {"name": "DELAY", "shape": [1], "datatype": "UINT32", "data": [0]}]}, timeout=30)
    assert_error_response(r, 400)
    assert "decoupled" in r.json()["error"] and "generate_stream" in r.json()["error"]


def test_generate_on_an_ordinary_model(server):
    """simple adds and subtracts; generate fills its [1,16] inputs from flat
    arrays (batch dim 1 added) and answers flat arrays."""
    a, b = list(range(16)), [2] * 16
    r = requests.post(server.url + "/v2/models/simple/generate",
                      json={"INPUT0": a, "INPUT1": b}, timeout=30)
    doc = ok_json(r)
    assert doc["OUTPUT0"] == [x + 2 for x in a] and doc["OUTPUT1"] == [x - 2 for x in a]
    r, reader = sse_post(server.url + "/v2/models/simple/generate_stream",
                         {"INPUT0": a, "INPUT1": b})
    ev = reader.next_event()
    assert ev[0] == "1" and json.loads(ev[1])["OUTPUT0"] == [x + 2 for x in a]
    assert reader.next_event() is None


def test_generate_checks_request_parameters(server):
    """generate's `parameters` are an infer request's: `priority` is a
    non-negative integer."""
    a = list(range(16))
    url = server.url + "/v2/models/simple/generate"
    r = requests.post(url, json={"INPUT0": a, "INPUT1": a, "parameters": {"priority": 1}},
                      timeout=30)
    assert ok_json(r)["OUTPUT0"] == [2 * x for x in a]
    r = requests.post(url, json={"INPUT0": a, "INPUT1": a, "parameters": {"priority": "high"}},
                      timeout=30)
    assert "parameter 'priority' must be a non-negative integer" in assert_error_response(r, 400)


# ---- gRPC ModelStreamInfer ----

def repeat_request(pb, values, delay_ms=0, id="", empty_final=None):
    req = pb.ModelInferRequest(model_name="repeat", id=id)
    t = req.inputs.add(name="IN", datatype="INT32", shape=[len(values)])
    t.contents.int_contents.extend(values)
    t = req.inputs.add(name="DELAY", datatype="UINT32", shape=[len(values)])
    t.contents.uint_contents.extend([delay_ms] * len(values))
    if empty_final is not None:
        req.parameters["triton_enable_empty_final_response"].bool_param = empty_final
    return req


def out_of(resp):
    import numpy as np
    r = resp.infer_response
    names = [o.name for o in r.outputs]
    vals = {n: np.frombuffer(raw, dtype="<i4" if n == "OUT" else "<u4").tolist()
            for n, raw in zip(names, r.raw_output_contents)}
    return vals["OUT"][0], vals["IDX"][0], r.parameters["triton_final_response"].bool_param


def test_grpc_stream_infer_streams_every_response(srv, pbs):
    pb, hpb = pbs
    c = Client(pb, hpb, "127.0.0.1:%d" % srv.grpc_port)
    try:
        responses = list(c.stream_infer()(iter([repeat_request(pb, [4, 5, 6], 10, id="r1")]),
                                          timeout=30))
    finally:
        c.close()
    assert [r.error_message for r in responses] == ["", "", ""]
    assert [r.infer_response.id for r in responses] == ["r1"] * 3
    assert [out_of(r) for r in responses] == [(4, 0, False), (5, 1, False), (6, 2, True)]


def test_grpc_empty_final_response_only_when_asked(srv, pbs):
    pb, hpb = pbs
    c = Client(pb, hpb, "127.0.0.1:%d" % srv.grpc_port)
    try:
        asked = list(c.stream_infer()(iter([repeat_request(pb, [], id="e", empty_final=True)]),
                                      timeout=30))
        silent = list(c.stream_infer()(iter([repeat_request(pb, [], id="s")]), timeout=30))
    finally:
        c.close()
    assert len(asked) == 1
    r = asked[0].infer_response
    assert r.id == "e" and len(r.outputs) == 0
    assert r.parameters["triton_final_response"].bool_param is True
    assert silent == []


def test_grpc_model_infer_refuses_a_decoupled_model(srv, pbs):
    pb, hpb = pbs
    c = Client(pb, hpb, "127.0.0.1:%d" % srv.grpc_port)
    try:
        with pytest.raises(grpc.RpcError) as e:
            c.infer(repeat_request(pb, [1]))
    finally:
        c.close()
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "ModelStreamInfer" in e.value.details()


def test_grpc_cancelled_stream_stops_the_model(srv, pbs):
    pb, hpb = pbs
    before = stats_of(srv)
    c = Client(pb, hpb, "127.0.0.1:%d" % srv.grpc_port)
    hold = threading.Event()

    def requests_then_wait():
        yield repeat_request(pb, list(range(100)), 100, id="long")
        hold.wait(30)

    call = c.stream_infer()(requests_then_wait(), timeout=60)
    got = [out_of(next(call))[1], out_of(next(call))[1]]
    call.cancel()
    hold.set()
    c.close()
    assert got == [0, 1]
    assert_stopped_early(srv, before)


# ---- the HTTP/1 framing of a streamed response ----

def post_text(path, body, version="HTTP/1.1", extra=b""):
    data = json.dumps(body).encode()
    return (b"POST %s %s\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s%s" % (path.encode(), version.encode(), len(data),
                                                  data, extra))


def test_stream_then_pipelined_request_on_the_same_connection(srv):
    """A chunked event stream ends with its last chunk and the connection
    serves the next (pipelined) request."""
    from conftest import HttpReader, connect
    s = connect(srv.port)
    try:
        s.sendall(post_text("/v2/models/repeat/generate_stream", body([1, 2], 5),
                            extra=b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"))
        reader = HttpReader(s)
        first = reader.read_response()
        assert first.status == 200
        assert first.header("transfer-encoding") == "chunked"
        assert first.body.decode().count("data: ") == 2
        second = reader.read_response()
        assert second.status == 200 and second.body == b""
    finally:
        s.close()


def test_stream_to_an_http10_client_ends_with_the_connection(srv):
    """HTTP/1.0 has no chunked coding: the events come unframed and the
    server closes the connection after the last one."""
    from conftest import raw_http
    out = raw_http(srv.port, post_text("/v2/models/repeat/generate_stream", body([5, 6], 5),
                                       version="HTTP/1.0"), timeout=30).decode()
    head, _, stream = out.partition("\r\n\r\n")
    assert head.startswith("HTTP/1.1 200")
    assert "transfer-encoding" not in head.lower()
    assert "connection: close" in head.lower()
    assert stream == ('id: 1\ndata: {"model_name":"repeat","model_version":"1","OUT":5,"IDX":0}\n\n'
                      'id: 2\ndata: {"model_name":"repeat","model_version":"1","OUT":6,"IDX":1}\n\n')


@pytest.mark.skipif(CURL is None, reason="curl not installed")
@pytest.mark.parametrize("http", ["--http1.1", "--http2-prior-knowledge"])
def test_curl_giving_up_stops_the_model(srv, http):
    """curl --max-time leaves a 10 s stream after about a second (HTTP/2:
    the whole connection goes); the model stops within a response or two."""
    before = stats_of(srv)
    out = subprocess.run(
        [CURL, "-sS", "-N", http, "--max-time", "1.5", "-H", "Content-Type: application/json",
         "-d", json.dumps(body(list(range(100)), 100)),
         srv.url + "/v2/models/repeat/generate_stream"],
        capture_output=True, timeout=60)
    assert out.returncode == 28, out  # curl: operation timed out
    assert out.stdout.decode().startswith('id: 1\ndata: {"model_name":"repeat"')
    assert_stopped_early(srv, before)


# ---- response statistics (Triton's response_stats) ----

@pytest.fixture
def fresh(server_factory, tmp_path):
    """A server of its own, so that the statistics start at zero."""
    return server_factory.start("--model-repository", str(repeat_repo(tmp_path)))


RESPONSE_KEYS = ["compute_infer", "compute_output", "success", "fail", "empty_response", "cancel"]


def counts(entry):
    return {k: entry[k]["count"] for k in RESPONSE_KEYS}


def test_response_stats_count_each_response_of_a_stream(fresh, pbs):
    """Three responses: indexes "0", "1", "2", each computed once and sent
    once, over REST and gRPC alike; no empty or cancelled response."""
    pb, hpb = pbs
    c = Client(pb, hpb, "127.0.0.1:%d" % fresh.grpc_port)
    try:
        got = list(c.stream_infer()(iter([repeat_request(pb, [7, 8, 9], 5)]), timeout=30))
        assert [out_of(r)[1] for r in got] == [0, 1, 2]
        s = wait_stats(fresh, lambda s: finished_requests(s) == 1)
        grpc_stats = c.call("ModelStatistics", name="repeat").model_stats[0]
    finally:
        c.close()
    assert sorted(s["response_stats"]) == ["0", "1", "2"]
    one_sent = {"compute_infer": 1, "compute_output": 1, "success": 1, "fail": 0,
                "empty_response": 0, "cancel": 0}
    for key in ("0", "1", "2"):
        entry = s["response_stats"][key]
        assert counts(entry) == one_sent, (key, entry)
        # success is the sum of the compute_infer and compute_output times.
        assert entry["success"]["ns"] == entry["compute_infer"]["ns"] + entry["compute_output"]["ns"]
    (mem,) = s["memory_usage"]
    assert sorted(grpc_stats.response_stats) == ["0", "1", "2"]
    for key in ("0", "1", "2"):
        g = grpc_stats.response_stats[key]
        assert {k: getattr(g, k).count for k in RESPONSE_KEYS} == one_sent
        assert g.success.ns == s["response_stats"][key]["success"]["ns"]
    (grpc_mem,) = grpc_stats.memory_usage
    assert (grpc_mem.type, grpc_mem.id, grpc_mem.byte_size) == ("CPU", 0, mem["byte_size"])


def test_response_stats_empty_final_response(fresh, pbs):
    """A request whose model sends nothing: the empty final response the
    client asked for is an empty_response at index "0"."""
    pb, hpb = pbs
    c = Client(pb, hpb, "127.0.0.1:%d" % fresh.grpc_port)
    try:
        got = list(c.stream_infer()(iter([repeat_request(pb, [], empty_final=True)]), timeout=30))
    finally:
        c.close()
    assert len(got) == 1
    s = wait_stats(fresh, lambda s: finished_requests(s) == 1)
    assert {k: counts(v) for k, v in s["response_stats"].items()} == {
        "0": {"compute_infer": 1, "compute_output": 0, "success": 0, "fail": 0,
              "empty_response": 1, "cancel": 0}}


def test_response_stats_count_a_cancelled_stream(fresh, pbs):
    """Two responses sent at once, then the client cancels while the model
    waits 5 s before the third (ample time for the cancellation to arrive): "0" and "1" succeeded, and the third ("2"),
    which the model was not allowed to send, counts a cancel."""
    pb, hpb = pbs
    c = Client(pb, hpb, "127.0.0.1:%d" % fresh.grpc_port)
    hold = threading.Event()
    req = repeat_request(pb, [10, 11, 12, 13])
    del req.inputs[1].contents.uint_contents[:]
    req.inputs[1].contents.uint_contents.extend([0, 0, 5000, 5000])

    def requests_then_wait():
        yield req
        hold.wait(30)

    call = c.stream_infer()(requests_then_wait(), timeout=60)
    got = [out_of(next(call))[1], out_of(next(call))[1]]
    call.cancel()
    hold.set()
    c.close()
    assert got == [0, 1]
    s = wait_stats(fresh, lambda s: finished_requests(s) == 1, timeout=30.0)
    assert s["inference_stats"]["fail"]["count"] == 1
    sent = {"compute_infer": 1, "compute_output": 1, "success": 1, "fail": 0,
            "empty_response": 0, "cancel": 0}
    assert {k: counts(v) for k, v in s["response_stats"].items()} == {
        "0": sent, "1": sent,
        "2": {"compute_infer": 0, "compute_output": 0, "success": 0, "fail": 0,
              "empty_response": 0, "cancel": 1}}
