"""`inferd bench`: the built-in load generator, run against the live server
and against a small Python HTTP server that answers in the less common ways
(chunked, close-delimited, 100 Continue, Connection: close, never).

No timing assertions beyond a loose check of the open-loop rate: the suite
runs on shared, noisy machines.
"""
import itertools
import json
import struct
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from conftest import INFERD_BIN, free_port, run_bench, run_bench_json

BENCH_FLAGS = ["--url", "--model", "--version", "--format", "--batch", "--path", "--body-file",
               "--method", "--header", "--connections", "--concurrency", "--rate", "--duration",
               "--warmup", "--threads", "--timeout-ms", "--json"]

SHORT = ["--duration", "1", "--warmup", "0.2"]


def bench_json(*args, **kw):
    doc = run_bench_json(*args, **kw)
    check_report_shape(doc)
    return doc


def check_report_shape(doc):
    for key in ("requests", "duration_s", "rps", "latency_us", "status", "errors", "bytes_sent",
                "bytes_received", "config"):
        assert key in doc, "report lacks %r: %s" % (key, doc)
    lat = doc["latency_us"]
    order = [lat[k] for k in ("p50", "p90", "p99", "p999", "max")]
    assert order == sorted(order), "percentiles out of order: %s" % lat
    if doc["requests"]:
        # Each answered request is a measured round trip: never 0.0 us.
        assert order[0] > 0 and lat["mean"] > 0, lat
        assert lat["mean"] <= lat["max"] * 1.001 + 0.1, lat
    else:
        assert order == [0] * len(order) and lat["mean"] == 0, lat
    assert set(doc["errors"]) == {"connect", "reset", "timeout", "parse"}, doc["errors"]
    assert sum(doc["status"].values()) == doc["requests"], doc
    # Admitted (2xx) and refused (429, 503) responses, apart, with the shape of latency_us.
    st = doc["status"]
    assert doc["requests_ok"] == sum(n for c, n in st.items() if 200 <= int(c) < 300), doc
    assert doc["requests_refused"] == st.get("429", 0) + st.get("503", 0), doc
    assert doc["rps_ok"] == round(doc["requests_ok"] / doc["duration_s"], 1), doc
    for key, n in (("latency_us_ok", doc["requests_ok"]),
                   ("latency_us_refused", doc["requests_refused"])):
        part = doc[key]
        assert set(part) == set(lat), (key, part)
        order = [part[k] for k in ("p50", "p90", "p99", "p999", "max")]
        assert order == sorted(order), (key, part)
        if n:
            assert order[0] > 0 and part["max"] <= lat["max"], (key, part, lat)
        else:
            assert order == [0] * len(order) and part["mean"] == 0, (key, part)
    for code in doc["status"]:
        assert 100 <= int(code) <= 599, doc["status"]


def no_errors(doc):
    assert doc["errors"] == {"connect": 0, "reset": 0, "timeout": 0, "parse": 0}, doc


# --------------------------------------------------------------------------
# Command line


def test_help_documents_every_flag():
    p = run_bench("--help")
    assert p.returncode == 0, p
    missing = [f for f in BENCH_FLAGS if f not in p.stdout]
    assert not missing, "flags missing from `inferd bench --help`: %s\n%s" % (missing, p.stdout)


def test_top_level_help_mentions_bench():
    p = subprocess.run([str(INFERD_BIN), "--help"], capture_output=True, text=True, timeout=10)
    assert p.returncode == 0 and "bench" in p.stdout, p


@pytest.mark.parametrize("args", [
    [],                                                   # nothing to load
    ["--path", "/x", "--no-such-flag"],
    ["--model", "simple", "--path", "/x"],                # both modes
    ["--model", "simple", "--format", "xml"],
    ["--path", "/x", "--format", "binary"],               # --format needs --model
    ["--path", "x"],                                      # not a path
    ["--path", "/x", "--connections", "2", "--concurrency", "3"],
    ["--path", "/x", "--rate", "10", "--concurrency", "1"],
    ["--path", "/x", "--threads", "4", "--connections", "2"],
    ["--path", "/x", "--duration", "soon"],
    ["--path", "/x", "--rate", "0"],
    ["--path", "/x", "--header", "no colon"],
    ["--path", "/x", "--header", "Content-Length: 5"],
    ["--path", "/x", "--url", "https://127.0.0.1:1"],
    ["--path", "/x", "--body-file", "/nonexistent/body"],
    ["--path", "/x", "extra"],
])
def test_usage_errors_exit_2(args):
    p = run_bench(*args)
    assert p.returncode == 2, "exit %d for %s\n%s" % (p.returncode, args, p.stderr)
    assert p.stderr.strip(), "no message on stderr for %s" % args


def test_unreachable_url_exits_1():
    port = free_port()  # nothing listens there
    p = run_bench("--url", "http://127.0.0.1:%d" % port, "--path", "/v2/health/live", *SHORT)
    assert p.returncode == 1, p
    assert "connect" in p.stderr.lower(), p.stderr
    p = run_bench("--url", "http://127.0.0.1:%d" % port, "--model", "simple", *SHORT)
    assert p.returncode == 1, p


def test_unknown_model_exits_1(server):
    p = run_bench("--url", server.url, "--model", "no_such_model", *SHORT)
    assert p.returncode == 1, p
    assert "404" in p.stderr, p.stderr


# --------------------------------------------------------------------------
# Against inferd


def test_model_json_closed_loop(server):
    doc = bench_json("--url", server.url, "--model", "simple", "--duration", "1", "--warmup",
                     "0.2", "--connections", "4")
    assert doc["requests"] > 0, doc
    assert doc["status"] == {"200": doc["requests"]}, doc
    no_errors(doc)
    assert doc["rps"] > 0 and doc["bytes_sent"] > 0 and doc["bytes_received"] > 0, doc
    cfg = doc["config"]
    assert cfg["mode"] == "closed" and cfg["connections"] == 4 and cfg["concurrency"] == 4, cfg
    assert cfg["model"] == "simple" and cfg["format"] == "json", cfg


def check_binary_extension(url):
    """The server supports Triton's binary tensor data: a request built here
    (not by bench) is answered 200 with both outputs as binary data."""
    header = json.dumps({
        "inputs": [{"name": n, "shape": [1, 16], "datatype": "INT32",
                    "parameters": {"binary_data_size": 64}} for n in ("INPUT0", "INPUT1")],
        "parameters": {"binary_data_output": True},
    }).encode()
    a, b = list(range(16)), [3 * i - 7 for i in range(16)]
    body = header + struct.pack("<16i", *a) + struct.pack("<16i", *b)
    r = requests.post(url + "/v2/models/simple/infer", data=body, timeout=30, headers={
        "Content-Type": "application/octet-stream",
        "Inference-Header-Content-Length": str(len(header))})
    assert r.status_code == 200, (r.status_code, r.text[:500])
    n = int(r.headers["Inference-Header-Content-Length"])
    doc = json.loads(r.content[:n])
    sizes = [(o["name"], o["parameters"]["binary_data_size"]) for o in doc["outputs"]]
    assert sizes == [("OUTPUT0", 64), ("OUTPUT1", 64)], doc
    assert len(r.content) == n + 128, (len(r.content), n)
    assert list(struct.unpack_from("<16i", r.content, n)) == [x + y for x, y in zip(a, b)]
    assert list(struct.unpack_from("<16i", r.content, n + 64)) == [x - y for x, y in zip(a, b)]


def test_model_binary_format(server):
    check_binary_extension(server.url)
    doc = bench_json("--url", server.url, "--model", "simple", "--format", "binary", *SHORT,
                     "--connections", "4")
    assert doc["requests"] > 0, doc
    assert doc["status"] == {"200": doc["requests"]}, doc
    no_errors(doc)
    assert doc["config"]["format"] == "binary"


def test_model_with_batch_and_threads(server):
    doc = bench_json("--url", server.url, "--model", "digits", "--batch", "4", "--threads", "2",
                     "--connections", "4", "--concurrency", "3", *SHORT)
    assert doc["requests"] > 0 and doc["status"] == {"200": doc["requests"]}, doc
    no_errors(doc)
    assert doc["config"]["threads"] == 2 and doc["config"]["concurrency"] == 3


def test_model_bytes_input(server):
    doc = bench_json("--url", server.url, "--model", "strings", "--batch", "3", *SHORT,
                     "--connections", "2")
    assert doc["requests"] > 0 and doc["status"] == {"200": doc["requests"]}, doc


def test_raw_health_live(server):
    doc = bench_json("--url", server.url, "--path", "/v2/health/live", "--method", "GET", *SHORT,
                     "--connections", "4")
    assert doc["requests"] > 0 and doc["status"] == {"200": doc["requests"]}, doc
    no_errors(doc)
    assert doc["config"]["method"] == "GET" and doc["config"]["mode"] == "closed"


def test_raw_post_body_file_with_header(server, tmp_path):
    body = tmp_path / "req.json"
    body.write_text(json.dumps({"inputs": [
        {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
        {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}]}))
    doc = bench_json("--url", server.url, "--path", "/v2/models/simple/infer", "--body-file", body,
                     "--header", "Content-Type: application/json", "--header", "X-Bench: 1",
                     *SHORT, "--connections", "2")
    assert doc["requests"] > 0 and doc["status"] == {"200": doc["requests"]}, doc
    assert doc["config"]["method"] == "POST" and doc["config"]["body_bytes"] == body.stat().st_size


def test_raw_errors_are_counted_by_status(server):
    doc = bench_json("--url", server.url, "--path", "/v2/models/no_such_model", *SHORT,
                     "--connections", "2")
    assert doc["requests"] > 0 and doc["status"] == {"404": doc["requests"]}, doc
    no_errors(doc)


def test_open_loop_rate(server):
    doc = bench_json("--url", server.url, "--path", "/v2/health/live", "--rate", "200",
                     "--duration", "1", "--warmup", "0.2", "--connections", "4")
    assert 150 <= doc["requests"] <= 250, doc
    assert doc["status"] == {"200": doc["requests"]}, doc
    assert doc["config"]["mode"] == "open" and doc["config"]["rate"] == 200
    assert doc["config"]["concurrency"] is None


def test_open_loop_model(server):
    doc = bench_json("--url", server.url, "--model", "simple", "--rate", "300", "--threads", "2",
                     "--connections", "4", "--duration", "1", "--warmup", "0")
    assert 225 <= doc["requests"] <= 375, doc
    assert doc["status"] == {"200": doc["requests"]}, doc


def test_text_report(server):
    p = run_bench("--url", server.url, "--path", "/v2/health/live", "--duration", "0.5", "--warmup",
              "0", "--connections", "2")
    assert p.returncode == 0, p
    for word in ("req/s", "p50", "p90", "p99", "p99.9", "max", "mean", "200:", "connect", "reset",
                 "timeout", "parse", "sent", "received", "admitted", "refused"):
        assert word in p.stdout, "%r missing from the text report:\n%s" % (word, p.stdout)


# --------------------------------------------------------------------------
# Against a Python server answering in unusual but valid ways


BIG_BODY = b"x" * (3 << 20)


MIXED_OK_DELAY_S = 0.05
MIXED_STATUSES = (200, 429, 503, 404)  # /mixed answers these in turn


class OddHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    mixed_turn = itertools.count()

    def log_message(self, *args):
        pass

    def _drain_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)

    def _send(self, data, close=False):
        self.wfile.write(data)
        self.wfile.flush()
        if close:
            self.close_connection = True

    def do_GET(self):
        self._drain_body()
        path = self.path
        if path == "/chunked":
            self._send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                       b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n")
        elif path == "/continue":
            self._send(b"HTTP/1.1 100 Continue\r\n\r\n"
                       b"HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\n\r\nok")
        elif path == "/close":
            self._send(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 3\r\n\r\nbye",
                       close=True)
        elif path == "/eof":
            self._send(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end", close=True)
        elif path == "/big":
            self._send(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(BIG_BODY) + BIG_BODY)
        elif path == "/garbage":
            self._send(b"NOT HTTP AT ALL\r\n\r\n", close=True)
        elif path == "/mixed":
            status = MIXED_STATUSES[next(self.mixed_turn) % len(MIXED_STATUSES)]
            if status == 200:
                time.sleep(MIXED_OK_DELAY_S)
            self._send(b"HTTP/1.1 %d X\r\nContent-Length: 0\r\n\r\n" % status)
        elif path == "/hang":
            time.sleep(1.5)
            self.close_connection = True
        else:
            self._send(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")

    do_POST = do_GET
    do_HEAD = do_GET


@pytest.fixture(scope="module")
def odd_server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), OddHandler)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield "http://127.0.0.1:%d" % srv.server_address[1]
    srv.shutdown()
    srv.server_close()


ODD = ["--duration", "0.5", "--warmup", "0", "--connections", "2"]


@pytest.mark.parametrize("path,status", [("/chunked", "200"), ("/continue", "202")])
def test_chunked_and_interim_responses(odd_server, path, status):
    doc = bench_json("--url", odd_server, "--path", path, *ODD)
    assert doc["requests"] > 0 and doc["status"] == {status: doc["requests"]}, doc
    no_errors(doc)
    assert doc["reconnects"] == 0, doc


@pytest.mark.parametrize("path", ["/close", "/eof"])
def test_connection_close_reconnects(odd_server, path):
    doc = bench_json("--url", odd_server, "--path", path, *ODD)
    assert doc["requests"] > 0 and doc["status"] == {"200": doc["requests"]}, doc
    no_errors(doc)
    assert doc["reconnects"] > 0, doc


def test_admitted_and_refused_latency_apart(odd_server):
    # 2xx answers take 50 ms, 429 and 503 come at once, 404 is neither.
    doc = bench_json("--url", odd_server, "--path", "/mixed", "--duration", "1", "--warmup", "0",
                     "--connections", "4")
    no_errors(doc)
    st = doc["status"]
    assert set(st) == {"200", "429", "503", "404"}, st
    assert doc["requests_ok"] == st["200"] and doc["requests_refused"] == st["429"] + st["503"]
    ok, refused = doc["latency_us_ok"], doc["latency_us_refused"]
    assert ok["p50"] >= MIXED_OK_DELAY_S * 1e6 * 0.99, ok
    assert refused["p50"] < MIXED_OK_DELAY_S * 1e6, refused


def test_large_bodies(odd_server):
    # Larger than the receive buffer many times over: skipped, not buffered.
    doc = bench_json("--url", odd_server, "--path", "/big", *ODD)
    assert doc["requests"] > 0 and doc["status"] == {"200": doc["requests"]}, doc
    no_errors(doc)
    assert doc["bytes_received"] >= doc["requests"] * len(BIG_BODY), doc


def test_malformed_responses_are_parse_errors(odd_server):
    doc = bench_json("--url", odd_server, "--path", "/garbage", *ODD)
    assert doc["requests"] == 0 and doc["errors"]["parse"] > 0, doc


def test_timeouts_are_counted(odd_server):
    doc = bench_json("--url", odd_server, "--path", "/hang", "--timeout-ms", "200", *ODD)
    assert doc["errors"]["timeout"] > 0, doc
    assert doc["requests"] == 0, doc


def test_url_with_path_prefix(server):
    # The base URL may carry a prefix; inferd has none, so "/v2" + "/health/live" is used here.
    doc = bench_json("--url", server.url + "/v2", "--path", "/health/live", "--duration", "0.3",
                     "--warmup", "0", "--connections", "1")
    assert doc["requests"] > 0 and doc["status"] == {"200": doc["requests"]}, doc
