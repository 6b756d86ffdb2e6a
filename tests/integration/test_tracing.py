"""W3C trace context and OTLP/HTTP JSON export.

A collector stand-in (http.server in a thread) receives the exporter's
POSTs; tests check the exported spans field by field: id formats, the
incoming traceparent as parent, children of the request span, the batch
span's links to every request of its batch, attribute value types, kinds
and times. Sampling (--trace-rate, the traceparent's sampled flag) and
Triton's trace-setting API are checked through the response's traceparent
header and what reaches the collector. gRPC calls (python3-grpcio) take the
traceparent from their metadata and answer it in their initial metadata.
"""
import http.server
import json
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
import requests

from conftest import MAIN_MODELS, assert_error_response
from grpc_client import Client, generate

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT_SPAN = "b7ad6b7169203331"
HEX32 = re.compile(r"^[0-9a-f]{32}$")
HEX16 = re.compile(r"^[0-9a-f]{16}$")
WAIT = 20.0  # seconds the collector waits for spans (exports every 100 ms)


class Collector:
    """Receives OTLP/HTTP JSON posts; spans() flattens them."""

    def __init__(self):
        self.posts = []
        self.headers = []
        self.cond = threading.Condition()
        collector = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with collector.cond:
                    collector.posts.append((self.path, json.loads(body)))
                    collector.headers.append(dict(self.headers))
                    collector.cond.notify_all()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self):
        return "http://127.0.0.1:%d/v1/traces" % self.port

    def spans(self):
        with self.cond:
            out = []
            for _, doc in self.posts:
                for rs in doc["resourceSpans"]:
                    for ss in rs["scopeSpans"]:
                        out.extend(ss["spans"])
            return out

    def wait_for(self, pred, timeout=WAIT):
        """Wait until pred(spans) is true; returns the spans."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                spans = self.spans_locked()
                if pred(spans):
                    return spans
                left = deadline - time.monotonic()
                if left <= 0:
                    pytest.fail("spans not received in %.0f s; got %s" % (timeout, spans))
                self.cond.wait(left)

    def spans_locked(self):
        out = []
        for _, doc in self.posts:
            for rs in doc["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    out.extend(ss["spans"])
        return out

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def collector():
    c = Collector()
    yield c
    c.close()


def start(server_factory, collector, *flags, models=None, repository=None):
    return server_factory.start("--otlp-endpoint", collector.endpoint, "--otlp-interval-ms", "100",
                                *flags, models=models, repository=repository)


def simple_body(rows=1):
    data = list(range(16 * rows))
    return json.dumps({"inputs": [
        {"name": "INPUT0", "shape": [rows, 16], "datatype": "INT32", "data": data},
        {"name": "INPUT1", "shape": [rows, 16], "datatype": "INT32", "data": data}]})


def infer(url, headers=None, body=None, model="simple"):
    return requests.post("%s/v2/models/%s/infer" % (url, model), data=body or simple_body(),
                         headers=headers or {}, timeout=30)


def attrs(span):
    return {a["key"]: a["value"] for a in span.get("attributes", [])}


def by_trace(spans, trace_id):
    return [s for s in spans if s["traceId"] == trace_id]


def check_span_shape(span):
    assert HEX32.match(span["traceId"]), span
    assert HEX16.match(span["spanId"]), span
    if "parentSpanId" in span:
        assert HEX16.match(span["parentSpanId"]), span
    assert isinstance(span["kind"], int) and span["kind"] in (1, 2)
    start, end = span["startTimeUnixNano"], span["endTimeUnixNano"]
    assert isinstance(start, str) and isinstance(end, str) and start.isdigit() and end.isdigit()
    assert int(start) <= int(end)
    assert int(start) > 1_600_000_000 * 10**9
    for a in span.get("attributes", []):
        (kind, value), = a["value"].items()
        assert kind in ("stringValue", "intValue", "doubleValue", "boolValue"), a
        if kind == "intValue":
            assert isinstance(value, str) and re.match(r"^-?\d+$", value), a
        elif kind == "stringValue":
            assert isinstance(value, str)
        elif kind == "doubleValue":
            assert isinstance(value, (int, float)) and not isinstance(value, bool)
        else:
            assert isinstance(value, bool)
    for link in span.get("links", []):
        assert HEX32.match(link["traceId"]) and HEX16.match(link["spanId"]), link


def test_incoming_traceparent_becomes_parent(server_factory, collector):
    srv = start(server_factory, collector)  # --trace-rate 0: only the flag decides
    tp = "00-%s-%s-01" % (TRACE_ID, PARENT_SPAN)
    r = infer(srv.url, {"traceparent": tp, "tracestate": "congo=t61rcWkgMzE , rojo=00f067aa0ba902b7",
                        "x-request-id": "req-parent-1"})
    assert r.status_code == 200, r.text
    back = r.headers["traceparent"]
    version, trace_id, span_id, flags = back.split("-")
    assert (version, trace_id, flags) == ("00", TRACE_ID, "01")
    assert HEX16.match(span_id) and span_id != PARENT_SPAN

    spans = collector.wait_for(lambda s: len(by_trace(s, TRACE_ID)) >= 3)
    mine = by_trace(spans, TRACE_ID)
    for s in spans:
        check_span_shape(s)
    server_span = next(s for s in mine if s["kind"] == 2)
    assert server_span["spanId"] == span_id
    assert server_span["parentSpanId"] == PARENT_SPAN
    assert server_span["name"] == "POST /v2/models/simple/infer"
    assert server_span["traceState"] == "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
    a = attrs(server_span)
    assert a["inferd.model.name"] == {"stringValue": "simple"}
    assert a["inferd.model.version"] == {"stringValue": "1"}
    assert a["inferd.batch_size"] == {"intValue": "1"}
    assert a["http.response.status_code"] == {"intValue": "200"}
    assert a["inferd.request_id"] == {"stringValue": "req-parent-1"}
    assert a["inferd.remote_parent"] == {"boolValue": True}
    assert "doubleValue" in a["inferd.sampling.rate"]
    children = {s["name"]: s for s in mine if s.get("parentSpanId") == span_id}
    assert set(children) == {"queue", "encode response"}
    for child in children.values():
        assert child["kind"] == 1
        assert int(server_span["startTimeUnixNano"]) <= int(child["startTimeUnixNano"])
        assert int(child["endTimeUnixNano"]) <= int(server_span["endTimeUnixNano"])
    assert int(children["queue"]["endTimeUnixNano"]) <= int(children["encode response"]["startTimeUnixNano"])
    # The request links to its batch's span, which links back.
    (link,) = server_span["links"]
    batch = collector.wait_for(lambda s: any(x["spanId"] == link["spanId"] for x in s))
    batch_span = next(x for x in batch if x["spanId"] == link["spanId"])
    assert batch_span["name"] == "batch execute" and batch_span["kind"] == 1
    assert {"traceId": TRACE_ID, "spanId": span_id} in batch_span["links"]
    # Resource and scope, and the request's content type.
    path, doc = collector.posts[0]
    assert path == "/v1/traces"
    res = {x["key"]: x["value"] for x in doc["resourceSpans"][0]["resource"]["attributes"]}
    assert res["service.name"] == {"stringValue": "inferd"}
    assert doc["resourceSpans"][0]["scopeSpans"][0]["scope"]["name"] == "inferd"
    assert collector.headers[0]["Content-Type"] == "application/json"


def test_sampling_flag_honoured_and_rate_zero_exports_nothing(server_factory, collector):
    srv = start(server_factory, collector)  # --trace-rate 0
    for _ in range(5):
        r = infer(srv.url)
        assert r.status_code == 200 and "traceparent" not in r.headers
    # Not sampled by the caller: not traced, whatever the rate.
    r = infer(srv.url, {"traceparent": "00-%s-%s-00" % ("1" * 32, PARENT_SPAN)})
    assert r.status_code == 200 and "traceparent" not in r.headers
    r = requests.get(srv.url + "/v2/health/ready", timeout=10)
    assert "traceparent" not in r.headers
    # A sampled one is exported; the exporter is FIFO, so by the time its
    # spans arrive anything earlier would have arrived too.
    r = infer(srv.url, {"traceparent": "00-%s-%s-01" % (TRACE_ID, PARENT_SPAN)})
    assert r.headers["traceparent"].startswith("00-%s-" % TRACE_ID)
    spans = collector.wait_for(lambda s: len(by_trace(s, TRACE_ID)) >= 3)
    for s in spans:
        assert s["traceId"] == TRACE_ID or s["name"] == "batch execute", s
        if s["name"] == "batch execute":
            assert {l["traceId"] for l in s["links"]} == {TRACE_ID}


def test_unsampled_parent_wins_over_rate(server_factory, collector):
    srv = start(server_factory, collector, "--trace-rate", "1")
    r = infer(srv.url, {"traceparent": "00-%s-%s-00" % (TRACE_ID, PARENT_SPAN)})
    assert r.status_code == 200 and "traceparent" not in r.headers
    # Without a parent, rate 1 traces every request.
    r = infer(srv.url)
    tp = r.headers["traceparent"]
    trace_id = tp.split("-")[1]
    assert trace_id != TRACE_ID
    spans = collector.wait_for(lambda s: len(by_trace(s, trace_id)) >= 3)
    assert not by_trace(spans, TRACE_ID)
    server_span = next(s for s in by_trace(spans, trace_id) if s["kind"] == 2)
    assert "parentSpanId" not in server_span
    assert attrs(server_span)["inferd.remote_parent"] == {"boolValue": False}


@pytest.mark.parametrize("bad", [
    "00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01",  # upper case
    "00-00000000000000000000000000000000-b7ad6b7169203331-01",  # zero trace id
    "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",  # zero span id
    "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",  # version ff
    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-x",  # 00 with extra field
    "garbage",
])
def test_invalid_traceparent_starts_new_trace(server_factory, collector, bad):
    srv = start(server_factory, collector, "--trace-rate", "1")
    r = infer(srv.url, {"traceparent": bad, "tracestate": "congo=t61rcWkgMzE"})
    assert r.status_code == 200
    trace_id = r.headers["traceparent"].split("-")[1]
    assert trace_id != TRACE_ID and HEX32.match(trace_id)
    spans = collector.wait_for(lambda s: any(x["kind"] == 2 for x in by_trace(s, trace_id)))
    server_span = next(s for s in by_trace(spans, trace_id) if s["kind"] == 2)
    assert "parentSpanId" not in server_span
    assert "traceState" not in server_span


def test_batch_span_links_every_request(server_factory, collector, tmp_path):
    # max_batch_size 4 and a long queue delay: four concurrent one-row
    # requests run as one batch (dispatched as soon as it is full).
    repo = server_factory.repository({"simple": {1: MAIN_MODELS["simple"] / "1" / "model.onnx"}})
    (repo / "simple" / "config.pbtxt").write_text(
        'max_batch_size: 4\ndynamic_batching { max_queue_delay_microseconds: 3000000 }\n')
    srv = start(server_factory, collector, "--trace-rate", "1", "--io-threads", "2",
                repository=repo)
    with ThreadPoolExecutor(4) as pool:
        responses = list(pool.map(lambda i: infer(srv.url, {"x-request-id": "batch-%d" % i}),
                                  range(4)))
    assert all(r.status_code == 200 for r in responses)
    request_spans = {r.headers["traceparent"].split("-")[1]: r.headers["traceparent"].split("-")[2]
                     for r in responses}
    assert len(request_spans) == 4

    def complete(spans):
        servers = [s for s in spans if s["kind"] == 2 and s["traceId"] in request_spans]
        batches = [s for s in spans if s["name"] == "batch execute"]
        linked = {l["spanId"] for b in batches for l in b["links"]}
        return len(servers) == 4 and set(request_spans.values()) <= linked

    spans = collector.wait_for(complete)
    for s in spans:
        check_span_shape(s)
    batches = {s["spanId"]: s for s in spans if s["name"] == "batch execute"}
    for trace_id, span_id in request_spans.items():
        server_span = next(s for s in spans if s["traceId"] == trace_id and s["kind"] == 2)
        assert server_span["spanId"] == span_id
        (link,) = server_span["links"]
        batch = batches[link["spanId"]]
        assert batch["traceId"] == link["traceId"]
        assert {"traceId": trace_id, "spanId": span_id} in batch["links"]
        a = attrs(batch)
        assert a["inferd.model.name"] == {"stringValue": "simple"}
        assert a["inferd.model.version"] == {"stringValue": "1"}
        # One-row requests: the batch size is the number of requests linked.
        assert a["inferd.batch_size"] == {"intValue": str(len(batch["links"]))}
        assert attrs(server_span)["inferd.batch_size"] == a["inferd.batch_size"]
    # The four met in one batch (it was dispatched full, not by the delay).
    assert any(len(b["links"]) == 4 for b in batches.values()), batches


def test_trace_setting_api(server_factory, collector):
    srv = start(server_factory, collector, models={"simple": MAIN_MODELS["simple"],
                                                   "digits": MAIN_MODELS["digits"]})
    url = srv.url
    r = requests.get(url + "/v2/trace/setting", timeout=10)
    assert r.status_code == 200
    assert r.json() == {"trace_level": ["TIMESTAMPS"], "trace_rate": "0", "trace_count": "-1",
                        "log_frequency": "0", "trace_file": "", "trace_mode": "opentelemetry"}
    assert "traceparent" not in infer(url).headers

    # trace_rate "1": one of every 1 request, at once.
    r = requests.post(url + "/v2/trace/setting", json={"trace_rate": "1"}, timeout=10)
    assert r.status_code == 200 and r.json()["trace_rate"] == "1"
    assert "traceparent" in infer(url).headers
    # trace_count: two more traces, then none.
    r = requests.post(url + "/v2/trace/setting", json={"trace_count": "2"}, timeout=10)
    assert r.json()["trace_count"] == "2"
    traced = ["traceparent" in infer(url).headers for _ in range(4)]
    assert traced == [True, True, False, False]
    assert requests.get(url + "/v2/trace/setting", timeout=10).json()["trace_count"] == "0"
    requests.post(url + "/v2/trace/setting", json={"trace_count": "-1"}, timeout=10)

    # OFF disables tracing, even for a sampled traceparent.
    r = requests.post(url + "/v2/trace/setting", json={"trace_level": ["OFF"]}, timeout=10)
    assert r.json()["trace_level"] == ["OFF"]
    tp = {"traceparent": "00-%s-%s-01" % (TRACE_ID, PARENT_SPAN)}
    assert "traceparent" not in infer(url, tp).headers

    # A model's own settings override the global ones for that model only.
    r = requests.post(url + "/v2/models/simple/trace/setting",
                      json={"trace_level": ["TIMESTAMPS"], "trace_rate": "1"}, timeout=10)
    assert r.status_code == 200
    assert r.json()["trace_level"] == ["TIMESTAMPS"] and r.json()["trace_rate"] == "1"
    assert "traceparent" in infer(url).headers
    digits = json.dumps({"inputs": [{"name": "pixels", "shape": [1, 64], "datatype": "FP32",
                                     "data": [0.0] * 64}]})
    r = infer(url, body=digits, model="digits")
    assert r.status_code == 200, r.text
    assert "traceparent" not in r.headers
    assert requests.get(url + "/v2/models/digits/trace/setting", timeout=10).json()["trace_level"] == ["OFF"]
    # null removes the model's override: the global OFF applies again.
    r = requests.post(url + "/v2/models/simple/trace/setting",
                      json={"trace_level": None, "trace_rate": None}, timeout=10)
    assert r.json()["trace_level"] == ["OFF"]
    assert "traceparent" not in infer(url).headers
    # The spans of the traced requests reached the collector.
    collector.wait_for(lambda s: sum(1 for x in s if x["kind"] == 2) >= 4)

    # Triton's 1-in-N rate and a fraction.
    r = requests.post(url + "/v2/trace/setting", json={"trace_rate": "1000", "trace_level": ["TIMESTAMPS"]},
                      timeout=10)
    assert r.json()["trace_rate"] == "1000"
    r = requests.post(url + "/v2/trace/setting", json={"trace_rate": "0.3"}, timeout=10)
    assert r.json()["trace_rate"] == "0.3"
    # Accepted and reported, not used.
    r = requests.post(url + "/v2/trace/setting", json={"log_frequency": "50", "trace_file": "/tmp/t.json"},
                      timeout=10)
    assert r.json()["log_frequency"] == "50" and r.json()["trace_file"] == "/tmp/t.json"

    for bad in ({"trace_level": ["TENSORS"]}, {"trace_level": ["LOUD"]}, {"trace_rate": "-1"},
                {"trace_rate": "2.5"}, {"trace_rate": 5}, {"trace_count": "-7"},
                {"trace_mode": "triton"}, {"no_such_setting": "1"}, [1, 2]):
        r = requests.post(url + "/v2/trace/setting", json=bad, timeout=10)
        assert_error_response(r, 400)
    r = requests.post(url + "/v2/trace/setting", data="{not json", timeout=10)
    assert_error_response(r, 400)
    r = requests.get(url + "/v2/models/nope/trace/setting", timeout=10)
    assert_error_response(r, 404)
    r = requests.delete(url + "/v2/trace/setting", timeout=10)
    assert_error_response(r, 405)
    # Nothing of the rejected requests took effect.
    assert requests.get(url + "/v2/trace/setting", timeout=10).json()["trace_rate"] == "0.3"


def test_extensions_listed(server):
    r = requests.get(server.url + "/v2", timeout=10)
    ext = r.json()["extensions"]
    assert "logging" in ext and "trace" in ext


def test_error_request_traced(server_factory, collector):
    srv = start(server_factory, collector, "--trace-rate", "1")
    r = requests.post(srv.url + "/v2/models/simple/infer", data="{bad", timeout=10)
    assert r.status_code == 400
    trace_id = r.headers["traceparent"].split("-")[1]
    spans = collector.wait_for(lambda s: by_trace(s, trace_id))
    (span,) = by_trace(spans, trace_id)
    a = attrs(span)
    assert a["http.response.status_code"] == {"intValue": "400"}
    assert a["inferd.model.name"] == {"stringValue": "simple"}
    assert "inferd.batch_size" not in a
    check_span_shape(span)


# --------------------------------------------------------------------------
# gRPC

GRPC_SVC = "/inference.GRPCInferenceService/"


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


def test_grpc_traceparent_metadata_becomes_parent(server_factory, collector, pbs):
    pb, hpb = pbs
    srv = start(server_factory, collector)  # --trace-rate 0: only the flag decides
    c = Client(pb, hpb, "127.0.0.1:%d" % srv.grpc_port)
    tp = "00-%s-%s-01" % (TRACE_ID, PARENT_SPAN)
    _, call = c.unary("ModelInfer").with_call(
        grpc_simple_request(pb), timeout=30,
        metadata=[("traceparent", tp), ("tracestate", "rojo=00f067aa0ba902b7"),
                  ("x-request-id", "grpc-parent-1")])
    md = dict(call.initial_metadata())
    assert md["x-request-id"] == "grpc-parent-1"
    version, trace_id, span_id, flags = md["traceparent"].split("-")
    assert (version, trace_id, flags) == ("00", TRACE_ID, "01")
    assert HEX16.match(span_id) and span_id != PARENT_SPAN
    # Not sampled by its caller and rate 0: not traced, no traceparent back.
    _, call = c.unary("ModelInfer").with_call(grpc_simple_request(pb), timeout=30)
    assert "traceparent" not in dict(call.initial_metadata())
    c.close()

    spans = collector.wait_for(lambda s: len(by_trace(s, TRACE_ID)) >= 3)
    mine = by_trace(spans, TRACE_ID)
    for s in mine:
        check_span_shape(s)
    server_span = next(s for s in mine if s["kind"] == 2)
    assert server_span["spanId"] == span_id
    assert server_span["parentSpanId"] == PARENT_SPAN
    assert server_span["name"] == "POST " + GRPC_SVC + "ModelInfer"
    assert server_span["traceState"] == "rojo=00f067aa0ba902b7"
    a = attrs(server_span)
    assert a["inferd.protocol"] == {"stringValue": "grpc"}
    assert a["url.path"] == {"stringValue": GRPC_SVC + "ModelInfer"}
    assert a["inferd.request_id"] == {"stringValue": "grpc-parent-1"}
    assert a["inferd.model.name"] == {"stringValue": "simple"}
    assert a["http.response.status_code"] == {"intValue": "200"}
    assert a["inferd.remote_parent"] == {"boolValue": True}
    children = {s["name"] for s in mine if s.get("parentSpanId") == span_id}
    assert children == {"queue", "encode response"}
    (link,) = server_span["links"]
    batch = collector.wait_for(lambda s: any(x["spanId"] == link["spanId"] for x in s))
    batch_span = next(x for x in batch if x["spanId"] == link["spanId"])
    assert {"traceId": TRACE_ID, "spanId": span_id} in batch_span["links"]
    # Only the sampled call was exported.
    assert {s["traceId"] for s in collector.spans() if s["kind"] == 2} == {TRACE_ID}


def test_grpc_error_traced_in_trailers_only_answer(server_factory, collector, pbs):
    pb, hpb = pbs
    srv = start(server_factory, collector, "--trace-rate", "1")
    c = Client(pb, hpb, "127.0.0.1:%d" % srv.grpc_port)
    with pytest.raises(grpc.RpcError) as e:
        c.infer(pb.ModelInferRequest(model_name="nope"))
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    c.close()
    md = dict(e.value.trailing_metadata())
    trace_id = md["traceparent"].split("-")[1]
    spans = collector.wait_for(lambda s: by_trace(s, trace_id))
    (span,) = by_trace(spans, trace_id)
    check_span_shape(span)
    a = attrs(span)
    assert a["http.response.status_code"] == {"intValue": "404"}
    assert a["inferd.request_id"] == {"stringValue": md["x-request-id"]}
    assert "inferd.model.name" not in a and "parentSpanId" not in span


def test_grpc_stream_request_spans(server_factory, collector, pbs):
    pb, hpb = pbs
    srv = start(server_factory, collector)
    c = Client(pb, hpb, "127.0.0.1:%d" % srv.grpc_port)
    tp = "00-%s-%s-01" % (TRACE_ID, PARENT_SPAN)
    sent = [grpc_simple_request(pb, id="st-1"), grpc_simple_request(pb, id="st-2")]
    responses = c.stream_infer()(iter(sent), timeout=30,
                                 metadata=[("traceparent", tp), ("x-request-id", "stream-tr")])
    assert sorted(r.infer_response.id for r in responses) == ["st-1", "st-2"]
    assert dict(responses.initial_metadata())["x-request-id"] == "stream-tr"
    c.close()
    spans = collector.wait_for(
        lambda s: len([x for x in by_trace(s, TRACE_ID) if x["kind"] == 2]) >= 2)
    servers = [s for s in by_trace(spans, TRACE_ID) if s["kind"] == 2]
    assert sorted(attrs(s)["inferd.request_id"]["stringValue"] for s in servers) == ["st-1", "st-2"]
    for s in servers:
        check_span_shape(s)
        assert s["name"] == "POST " + GRPC_SVC + "ModelStreamInfer"
        assert s["parentSpanId"] == PARENT_SPAN
        assert attrs(s)["inferd.protocol"] == {"stringValue": "grpc"}
    assert servers[0]["spanId"] != servers[1]["spanId"]


def test_preprocessing_span_and_its_steps(server_factory, collector, tmp_path):
    """A request with a raw image: a "preprocess" child of the server span
    (with its wait for a worker), one child of that per step, and the
    queue span after it."""
    import io
    import shutil
    import numpy as np
    from PIL import Image
    from conftest import REPO_ROOT
    root = tmp_path / "repo"
    (root / "img" / "1").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "tests" / "models" / "identity_fp32" / "1" / "model.onnx",
                root / "img" / "1" / "model.onnx")
    (root / "img" / "preprocess.json").write_text(json.dumps({"inputs": [
        {"name": "image", "feeds": "INPUT0",
         "image": {"color": "gray", "resize": {"width": 4, "height": 4, "method": "area"}}}]}))
    srv = start(server_factory, collector, repository=root)
    png = io.BytesIO()
    Image.fromarray(np.zeros((16, 16), np.uint8)).save(png, format="PNG")
    tp = "00-%s-%s-01" % (TRACE_ID, PARENT_SPAN)
    r = requests.post(srv.url + "/v2/models/img/infer", data=png.getvalue(), timeout=30,
                      headers={"Content-Type": "image/png", "traceparent": tp})
    assert r.status_code == 200, r.text
    span_id = r.headers["traceparent"].split("-")[2]
    spans = collector.wait_for(
        lambda s: any(x["name"] == "encode response" for x in by_trace(s, TRACE_ID)) and
        sum(1 for x in by_trace(s, TRACE_ID) if x["name"] in ("decode", "resize")) == 2)
    mine = by_trace(spans, TRACE_ID)
    for s in mine:
        check_span_shape(s)
    children = {s["name"]: s for s in mine if s.get("parentSpanId") == span_id}
    assert set(children) == {"preprocess", "queue", "encode response"}
    prep = children["preprocess"]
    assert prep["kind"] == 1
    assert int(attrs(prep)["inferd.preprocess.queue_us"]["intValue"]) >= 0
    steps = {s["name"]: s for s in mine if s.get("parentSpanId") == prep["spanId"]}
    assert {"decode", "resize"} <= set(steps)
    for s in steps.values():
        assert int(prep["startTimeUnixNano"]) <= int(s["startTimeUnixNano"])
    assert int(prep["endTimeUnixNano"]) <= int(children["queue"]["endTimeUnixNano"])
