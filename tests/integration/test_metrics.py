"""Prometheus metrics on the metrics port: format, Triton's nv_* names, the
inferd_* histograms and counters, promtool, and a real Prometheus server
scraping inferd. Every counter and histogram is driven and checked here."""
import json
import shutil
import socket
import struct
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import requests

from conftest import (INFERD_BIN, MAIN_MODELS, REPO_ROOT, connect, free_port, infer_request,
                      make_repository, ok_json, stall_started, wait_stall_started)
from prom import parse, scrape, wait_for

SLOW = REPO_ROOT / "tests" / "models" / "slow"
PLUGIN = INFERD_BIN.parent / "libinferd_identity_stall.so"
ALERTS = REPO_ROOT / "deploy" / "prometheus" / "alerts.yml"
PROMETHEUS = Path("/usr/bin/prometheus")
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"

# Triton's metric names break two of promtool's naming conventions (counters
# without _total, units abbreviated as _us/_secs, a gauge called *_count);
# inferd keeps them for compatibility. Every other lint problem fails.
TRITON_NAMES = {
    "nv_inference_request_success", "nv_inference_request_failure", "nv_inference_count",
    "nv_inference_exec_count", "nv_inference_request_duration_us",
    "nv_inference_queue_duration_us", "nv_inference_compute_input_duration_us",
    "nv_inference_compute_infer_duration_us", "nv_inference_compute_output_duration_us",
    "nv_inference_pending_request_count", "nv_model_load_duration_secs",
}
TRITON_LINT = ('counter metrics should have "_total" suffix',
               'non-histogram and non-summary metrics should not have "_count" suffix',
               "metric names should not contain abbreviated units")

HISTOGRAMS = ("inferd_request_duration_seconds", "inferd_queue_duration_seconds",
              "inferd_compute_duration_seconds", "inferd_batch_size")


def simple_inputs(rows, seed=0):
    a = [(seed + i) % 100 for i in range(rows * 16)]
    return [{"name": "INPUT0", "shape": [rows, 16], "datatype": "INT32", "data": a},
            {"name": "INPUT1", "shape": [rows, 16], "datatype": "INT32", "data": a}]


def plugin_repo(tmp_path, params, name="echo", batching=""):
    if not PLUGIN.exists():
        pytest.fail("example plugin not built: %s" % PLUGIN)
    root = tmp_path / "models"
    mdir = root / name
    (mdir / "1").mkdir(parents=True)
    (mdir / "1" / "model.onnx").write_bytes(b"")
    config = ('backend: "identity_stall"\nmax_batch_size: 8\n%s'
              'input [ { name: "IN" data_type: TYPE_INT32 dims: [ 4 ] } ]\n'
              'output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 4 ] } ]\n' % batching)
    for k, v in params.items():
        config += 'parameters { key: "%s" value: { string_value: "%s" } }\n' % (k, v)
    (mdir / "config.pbtxt").write_text(config)
    shutil.copy(PLUGIN, mdir / PLUGIN.name)
    return root


def echo(url, rows=1, timeout=60):
    return infer_request(url, "echo", [{"name": "IN", "shape": [rows, 4], "datatype": "INT32",
                                        "data": list(range(rows * 4))}], timeout=timeout)


def check_histograms(s, model, version="1", canceled_samples=0):
    """The invariants between the histograms and the counters of one version.
    canceled_samples: samples that ran but whose client had left (they count
    in the executions, not in nv_inference_count)."""
    labels = {"model": model, "version": version}
    success = s.get("nv_inference_request_success", **labels)
    failed = s.get("nv_inference_request_failure", **labels)
    expected = {"inferd_request_duration_seconds": success + failed,
                "inferd_queue_duration_seconds": success,
                "inferd_compute_duration_seconds": success,
                "inferd_batch_size": s.get("nv_inference_exec_count", **labels)}
    for name in HISTOGRAMS:
        assert s.types[name] == "histogram"
        buckets = s.buckets(name, **labels)
        assert buckets and buckets[-1][0] == "+Inf", name
        counts = [c for _, c in buckets]
        assert counts == sorted(counts), (name, counts)
        les = [float(le) for le, _ in buckets]
        assert les == sorted(les), les
        assert buckets[-1][1] == s.get(name + "_count", **labels) == expected[name], name
    # Every successful sample went through one execution's batch.
    assert (s.get("inferd_batch_size_sum", **labels) ==
            s.get("nv_inference_count", **labels) + canceled_samples)


@pytest.fixture(scope="module")
def msrv(module_server_factory):
    return module_server_factory.start(
        "--io-threads", "2",
        models={"simple": MAIN_MODELS["simple"], "digits": MAIN_MODELS["digits"]})


def test_metrics_endpoint_format_and_help(msrv):
    r = requests.get(msrv.metrics_url, timeout=10)
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    s = parse(r.text)
    for family in s.types:
        assert s.helps[family], family
    for name in TRITON_NAMES | set(HISTOGRAMS) | {
            "nv_cpu_utilization", "nv_cpu_memory_total_bytes", "nv_cpu_memory_used_bytes",
            "inferd_open_connections", "inferd_process_resident_memory_bytes",
            "inferd_http_responses_total", "inferd_rejected_requests_total",
            "inferd_model_ready", "inferd_queue_depth", "inferd_queue_capacity"}:
        assert name in s.types, name
    assert s.types["nv_inference_request_success"] == "counter"
    assert s.types["nv_inference_pending_request_count"] == "gauge"
    # Loaded versions appear with zeros before their first request.
    assert s.has("nv_inference_request_success", model="digits", version="1")
    assert 0 < s.get("nv_cpu_memory_used_bytes") <= s.get("nv_cpu_memory_total_bytes")
    assert 0 <= s.get("nv_cpu_utilization") <= 1
    assert s.get("inferd_process_resident_memory_bytes") > 1 << 20
    # Only GET/HEAD /metrics.
    assert requests.get(msrv.metrics_url.replace("/metrics", "/other")).status_code == 404
    r = requests.post(msrv.metrics_url, data=b"x")
    assert r.status_code == 405 and r.headers["Allow"] == "GET, HEAD"
    head = requests.head(msrv.metrics_url)
    assert head.status_code == 200 and head.content == b""


def inference_stats(srv, model="simple", version="1"):
    doc = ok_json(requests.get("%s/v2/models/%s/versions/%s/stats" % (srv.url, model, version),
                               timeout=10))
    return doc["model_stats"][0]["inference_stats"]


# The duration counters in microseconds and the statistics extension's
# nanoseconds come from the same sums: metric == ns // 1000.
DURATION_METRICS = {
    "nv_inference_queue_duration_us": ("queue",),
    "nv_inference_compute_input_duration_us": ("compute_input",),
    "nv_inference_compute_infer_duration_us": ("compute_infer",),
    "nv_inference_compute_output_duration_us": ("compute_output",),
    "nv_inference_request_duration_us": ("success", "fail"),
}


def test_success_counts_durations_and_histograms(msrv):
    before = scrape(msrv)
    stats_before = inference_stats(msrv)
    rows = [1, 2, 1, 3, 1, 1, 4]
    for i, n in enumerate(rows):
        ok_json(infer_request(msrv.url, "simple", simple_inputs(n, i)))
    # Nothing runs between these two reads, so they see the same sums.
    stats = inference_stats(msrv)
    s = scrape(msrv)
    lab = {"model": "simple", "version": "1"}

    def delta(name, **extra):
        return s.get(name, **lab, **extra) - before.get(name, **lab, **extra)

    assert delta("nv_inference_request_success") == len(rows)
    assert delta("nv_inference_count") == sum(rows)
    # One request at a time: each ran alone.
    assert delta("nv_inference_exec_count") == len(rows)
    for name in ("nv_inference_request_duration_us", "nv_inference_compute_infer_duration_us"):
        assert delta(name) > 0, name
    # Every phase of every request took some nanoseconds; a fast phase may
    # sum to less than a microsecond, so the metric is checked against the
    # nanoseconds it is derived from.
    for key in ("queue", "compute_input", "compute_infer", "compute_output", "success"):
        assert stats[key]["count"] - stats_before[key]["count"] == len(rows), key
        assert stats[key]["ns"] > stats_before[key]["ns"], key
    for name, keys in DURATION_METRICS.items():
        assert s.get(name, **lab) == sum(stats[k]["ns"] for k in keys) // 1000, (name, stats)
    # The request duration covers queue and compute.
    assert (s.get("nv_inference_request_duration_us", **lab) >=
            s.get("nv_inference_queue_duration_us", **lab) +
            s.get("nv_inference_compute_infer_duration_us", **lab))
    assert delta("inferd_request_duration_seconds_count") == len(rows)
    assert delta("inferd_request_duration_seconds_sum") > 0
    assert s.get("nv_inference_pending_request_count", **lab) == 0
    assert s.get("inferd_queue_depth", **lab) == 0
    check_histograms(s, "simple")


def test_http_counters_and_body_bytes(msrv):
    a_resp = requests.get(msrv.metrics_url, timeout=10)
    a = parse(a_resp.text)
    bodies_in, bodies_out = 0, 0
    for _ in range(3):
        r = requests.get(msrv.url + "/v2/health/live")
        assert r.status_code == 200
        bodies_out += len(r.content)
    r = requests.get(msrv.url + "/v2/models/nope")
    assert r.status_code == 404
    bodies_out += len(r.content)
    body = json.dumps({"inputs": simple_inputs(1)}).encode()
    r = requests.post(msrv.url + "/v2/models/simple/infer", data=body)
    assert r.status_code == 200
    bodies_in += len(body)
    bodies_out += len(r.content)
    r = requests.post(msrv.url + "/v2/models/nope/infer", data=b"{}")
    assert r.status_code == 404
    bodies_in += 2
    bodies_out += len(r.content)
    # An error the server answers itself (the request line does not parse).
    s = connect(msrv.port)
    s.sendall(b"BROKEN\r\n\r\n")
    reply = s.recv(65536)
    s.close()
    assert reply.startswith(b"HTTP/1.1 400")
    bodies_out += len(reply.split(b"\r\n\r\n", 1)[1])
    b = scrape(msrv)

    def delta(name, **labels):
        return b.get(name, **labels) - a.get(name, **labels)

    assert delta("inferd_http_responses_total", endpoint="health", code="200") == 3
    assert delta("inferd_http_responses_total", endpoint="model", code="404") == 1
    assert delta("inferd_http_responses_total", endpoint="infer", code="200") == 1
    assert delta("inferd_http_responses_total", endpoint="infer", code="404") == 1
    assert delta("inferd_http_responses_total", endpoint="other", code="400") == 1
    assert delta("inferd_http_responses_total", endpoint="metrics", code="200") == 1
    assert delta("inferd_rejected_requests_total", reason="not_found") == 1
    assert delta("inferd_http_request_body_bytes_total") == bodies_in
    # Scrape a's own body is counted once it has been answered.
    assert delta("inferd_http_response_body_bytes_total") == bodies_out + len(a_resp.content)


def test_open_connections_gauge(msrv):
    conns = [connect(msrv.port) for _ in range(3)]
    try:
        s = wait_for(msrv, lambda s: s.get("inferd_open_connections") >= 3)
        assert s.get("inferd_open_connections") >= 3
    finally:
        for c in conns:
            c.close()
    s = wait_for(msrv, lambda s: s.get("inferd_open_connections") == 0)
    assert s.get("inferd_open_connections") == 0


def test_invalid_request_counts_as_other(msrv):
    before = scrape(msrv)
    r = infer_request(msrv.url, "digits", [{"name": "nope", "shape": [1], "datatype": "FP32",
                                             "data": [1]}])
    assert r.status_code == 400
    s = scrape(msrv)
    lab = {"model": "digits", "version": "1"}
    assert (s.get("nv_inference_request_failure", reason="OTHER", **lab) -
            before.get("nv_inference_request_failure", reason="OTHER", **lab)) == 1
    assert (s.get("inferd_rejected_requests_total", reason="invalid") -
            before.get("inferd_rejected_requests_total", reason="invalid")) == 1
    assert (s.get("inferd_http_responses_total", endpoint="infer", code="400") -
            before.get("inferd_http_responses_total", endpoint="infer", code="400")) == 1
    for reason in ("REJECTED", "CANCELED", "BACKEND"):
        assert s.get("nv_inference_request_failure", reason=reason, **lab) == 0
    check_histograms(s, "digits")


def test_rejected_unknown_model_counts_as_not_found(msrv):
    before = scrape(msrv)
    r = infer_request(msrv.url, "no_such_model", simple_inputs(1))
    assert r.status_code == 404
    s = scrape(msrv)
    assert (s.get("inferd_rejected_requests_total", reason="not_found") -
            before.get("inferd_rejected_requests_total", reason="not_found")) == 1
    assert (s.get("inferd_http_responses_total", endpoint="infer", code="404") -
            before.get("inferd_http_responses_total", endpoint="infer", code="404")) == 1


def test_rejected_queue_full(server_factory):
    srv = server_factory.start("--queue-limit", "1", models={"slow": SLOW})
    x = np.ones((512, 256), dtype=np.float32).tobytes()
    header = json.dumps({"inputs": [{"name": "X", "shape": [512, 256], "datatype": "FP32",
                                     "parameters": {"binary_data_size": len(x)}}]}).encode()
    barrier = threading.Barrier(12)

    def one(_):
        barrier.wait()
        return requests.post(srv.url + "/v2/models/slow/infer", data=header + x,
                             headers={"Inference-Header-Content-Length": str(len(header))},
                             timeout=120)

    with ThreadPoolExecutor(max_workers=12) as pool:
        codes = [r.status_code for r in pool.map(one, range(12))]
    assert set(codes) <= {200, 429} and 429 in codes, codes
    s = scrape(srv)
    lab = {"model": "slow", "version": "1"}
    assert s.get("nv_inference_request_failure", reason="REJECTED", **lab) == codes.count(429)
    assert s.get("nv_inference_request_success", **lab) == codes.count(200)
    assert s.get("inferd_rejected_requests_total", reason="queue_full") == codes.count(429)
    assert s.get("inferd_queue_capacity", **lab) == 1
    check_histograms(s, "slow")


def test_rejected_queue_timeout(server_factory):
    """Requests whose timeout passes while they wait behind a long one: 504,
    REJECTED; or, once the server knows the long run's time, refused at once
    with 503 because their deadline cannot be met (also REJECTED). One that
    lands before the long one simply runs."""
    srv = server_factory.start(models={"slow": SLOW})
    lab = {"model": "slow", "version": "1"}
    statuses, longs = [], 0
    # A short request may still land before the long one (the server is
    # parsing its large body) and the long one may end before the next
    # short one is sent: then the long one goes again, up to 3 times.
    while longs < 3 and (not statuses or statuses[-1] not in (503, 504)):
        results = {}
        started = threading.Event()

        def long_one():
            results["long"] = one_long(srv, sent=started)

        long_req = threading.Thread(target=long_one)
        long_req.start()
        started.wait()
        longs += 1
        sent = 0
        # Until one is refused, or the long one is over.
        while long_req.is_alive() or not sent:
            r = infer_request(srv.url, "slow", [{"name": "X", "shape": [1, 256],
                                                 "datatype": "FP32", "data": [1.0] * 256}],
                              parameters={"timeout": 1000})
            statuses.append(r.status_code)
            sent += 1
            if r.status_code in (503, 504):
                if r.status_code == 503:
                    assert "cannot be met" in r.json()["error"], r.text
                break
        long_req.join()
        assert results["long"] == 200
    refused = statuses[-1]
    assert refused in (503, 504) and set(statuses) <= {200, refused}, statuses
    s = scrape(srv)
    assert s.get("nv_inference_request_failure", reason="REJECTED", **lab) == 1
    assert s.get("nv_inference_request_success", **lab) == longs + statuses.count(200)
    reason = "queue_timeout" if refused == 504 else "unavailable"
    assert s.get("inferd_rejected_requests_total", reason=reason) == 1
    check_histograms(s, "slow")


def one_long(srv, sent):
    """Runs 512 rows of the slow model; sets `sent` once the whole request
    is written (so that the requests the caller sends then queue behind it:
    timing the loop on the request's thread instead lost that race under
    load, when the large body was still being encoded). Returns the status."""
    x = np.ones((64 * 8, 256), dtype=np.float32)
    body = json.dumps({"inputs": [{"name": "X", "shape": list(x.shape), "datatype": "FP32",
                                   "data": x.ravel().tolist()}]}).encode()
    with connect(srv.port, timeout=120) as s:
        s.sendall(b"POST /v2/models/slow/infer HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
                  + body)
        sent.set()
        head = b""
        while b"\r\n" not in head:
            chunk = s.recv(4096)
            assert chunk, "connection closed before the status line"
            head += chunk
        return int(head.split(b" ", 2)[1])


def test_backend_failures_and_batch_counts(server_factory, tmp_path):
    repo = plugin_repo(tmp_path, {"fail_every_n": "2", "fail_skip": "1"})
    srv = server_factory.start(repository=repo)
    codes = [echo(srv.url).status_code for _ in range(6)]
    assert sorted(codes) == [200] * 3 + [500] * 3, codes
    s = scrape(srv)
    lab = {"model": "echo", "version": "1"}
    assert s.get("nv_inference_request_failure", reason="BACKEND", **lab) == 3
    assert s.get("nv_inference_request_success", **lab) == 3
    # Failed executions are not executions (Triton counts successful ones).
    assert s.get("nv_inference_exec_count", **lab) == 3
    check_histograms(s, "echo")


def test_exec_count_below_requests_when_batched(server_factory, tmp_path):
    """While the first request stalls in the backend for two seconds, four
    more queue up (the queue gauges show them) and run as one batch: fewer
    executions than requests."""
    repo = plugin_repo(tmp_path, {"delay_us": "2000000",
                                  "started_log": tmp_path / "echo-started.log"},
                       batching="dynamic_batching { max_queue_delay_microseconds: 0 }\n")
    srv = server_factory.start(repository=repo)
    started = stall_started(tmp_path)
    first = threading.Thread(target=lambda: echo(srv.url))
    first.start()
    wait_stall_started(tmp_path, started + 1)  # the first one is now stalled in the backend
    lab = {"model": "echo", "version": "1"}
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [pool.submit(echo, srv.url, n) for n in (1, 2, 1, 2)]
        queued = wait_for(srv, lambda s: s.get("inferd_queue_depth", **lab) == 4)
        codes = [f.result().status_code for f in futures]
    first.join()
    assert codes == [200] * 4
    assert queued.get("inferd_queue_depth", **lab) == 4
    assert queued.get("nv_inference_pending_request_count", **lab) == 4
    s = scrape(srv)
    assert s.get("nv_inference_request_success", **lab) == 5
    assert s.get("nv_inference_count", **lab) == 7
    assert s.get("nv_inference_exec_count", **lab) < 5
    check_histograms(s, "echo")


def test_canceled_when_the_client_leaves(server_factory, tmp_path):
    repo = plugin_repo(tmp_path, {"delay_us": "500000",
                                  "started_log": tmp_path / "echo-started.log"})
    srv = server_factory.start(repository=repo)
    body = json.dumps({"inputs": [{"name": "IN", "shape": [1, 4], "datatype": "INT32",
                                   "data": [1, 2, 3, 4]}]}).encode()
    started = stall_started(tmp_path)
    s = connect(srv.port)
    s.sendall(b"POST /v2/models/echo/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
              % len(body) + body)
    wait_stall_started(tmp_path, started + 1)  # the request is running
    # Reset (not just FIN): the server sees the peer gone while it waits.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    lab = {"model": "echo", "version": "1"}
    m = wait_for(srv, lambda m: m.get("nv_inference_request_failure", reason="CANCELED",
                                      **lab) == 1)
    assert m.get("nv_inference_request_failure", reason="CANCELED", **lab) == 1
    assert m.get("nv_inference_request_success", **lab) == 0
    check_histograms(m, "echo", canceled_samples=1)


def test_load_duration_ready_and_unavailable_model(server_factory, tmp_path):
    repo = server_factory.repository({"simple": MAIN_MODELS["simple"]})
    (repo / "broken" / "1").mkdir(parents=True)
    (repo / "broken" / "1" / "model.onnx").write_bytes(b"not onnx")
    srv = server_factory.start("--queue-limit", "77", repository=repo, wait=False)
    srv.wait_ready(path="/v2/health/live")
    s = wait_for(srv, lambda s: s.has("inferd_model_ready", model="broken"))
    assert s.get("nv_model_load_duration_secs", model="simple", version="1") > 0
    assert s.get("inferd_model_ready", model="simple", version="1") == 1
    assert s.get("inferd_model_ready", model="broken") == 0
    assert s.get("inferd_queue_capacity", model="simple", version="1") == 77
    assert not s.has("nv_model_load_duration_secs", model="broken")


def test_counters_survive_unload_and_reload(server_factory):
    srv = server_factory.start("--model-control-mode", "explicit", "--load-model", "simple")
    for i in range(3):
        ok_json(infer_request(srv.url, "simple", simple_inputs(1, i)))
    lab = {"model": "simple", "version": "1"}
    assert requests.post(srv.url + "/v2/repository/models/simple/unload").status_code == 200
    s = scrape(srv)
    assert s.get("nv_inference_request_success", **lab) == 3  # counters stay
    assert not s.has("inferd_model_ready", **lab)              # gauges go
    assert not s.has("inferd_queue_depth", **lab)
    assert requests.post(srv.url + "/v2/repository/models/simple/load").status_code == 200
    ok_json(infer_request(srv.url, "simple", simple_inputs(1)))
    s = scrape(srv)
    assert s.get("nv_inference_request_success", **lab) == 4  # and keep counting
    assert s.get("inferd_model_ready", **lab) == 1


def test_retired_versions_are_bounded(server_factory, tmp_path):
    """A model that gets a new version again and again: the unloaded
    versions keep their series, but only the newest four (memory and the
    scrape stay bounded under continuous deployment)."""
    onnx = MAIN_MODELS["simple"] / "1" / "model.onnx"
    repo = tmp_path / "repo"
    make_repository(repo, {"simple": {1: onnx}})
    srv = server_factory.start("--model-control-mode", "explicit", "--load-model", "simple",
                               repository=repo)
    newest = 8
    for v in range(1, newest + 1):
        if v > 1:
            make_repository(repo, {"simple": {v: onnx}})
            r = requests.post(srv.url + "/v2/repository/models/simple/load", timeout=60)
            assert r.status_code == 200, r.text
        r = ok_json(infer_request(srv.url, "simple", simple_inputs(1, v)))
        assert r["model_version"] == str(v)
    s = scrape(srv)
    listed = sorted(int(l["version"]) for l, _ in s.series("nv_inference_request_success")
                    if l["model"] == "simple")
    assert listed == [4, 5, 6, 7, 8]  # the loaded one and the four newest retired
    for v in listed:
        assert s.get("nv_inference_request_success", model="simple", version=v) == 1
        assert s.get("inferd_model_ready", model="simple", version=v) == (v == newest)


def test_no_metrics_flag_and_port_zero(server_factory):
    srv = server_factory.start("--no-metrics")
    with pytest.raises(requests.ConnectionError):
        requests.get(srv.metrics_url, timeout=5)
    srv = server_factory.start("--metrics-port", "0")
    line = [l for l in srv.stderr().splitlines() if "metrics on " in l]
    assert line, srv.stderr()
    port = int(line[0].rsplit(":", 1)[1])
    assert requests.get("http://127.0.0.1:%d/metrics" % port).status_code == 200


def promtool_problems(text):
    p = subprocess.run([PROMTOOL, "check", "metrics"], input=text.encode(),
                       capture_output=True, timeout=60)
    lines = (p.stdout + p.stderr).decode().splitlines()
    return p.returncode, [l for l in lines if l.strip()]


def test_promtool_check_metrics_after_traffic(msrv):
    # Traffic of every kind first: successes, an invalid request, a 404.
    ok_json(infer_request(msrv.url, "simple", simple_inputs(2)))
    assert infer_request(msrv.url, "simple", [], body="{").status_code == 400
    assert requests.get(msrv.url + "/v2/models/nope").status_code == 404
    text = requests.get(msrv.metrics_url).text
    rc, problems = promtool_problems(text)
    unexpected = [l for l in problems
                  if not (l.split(" ", 1)[0] in TRITON_NAMES and l.split(" ", 1)[1] in TRITON_LINT)]
    assert not unexpected, "\n".join(problems)
    assert rc in (0, 3), problems  # 3: lint problems only, no parse error
    # Without Triton's families, the exposition passes promtool outright.
    rest = "".join(l + "\n" for l in text.splitlines() if family_of(l) not in TRITON_NAMES)
    rc, problems = promtool_problems(rest)
    assert rc == 0, problems


def family_of(line):
    if line.startswith("# "):
        return line.split(" ")[2]
    name = line.split("{")[0].split(" ")[0]
    return name


def test_promtool_check_rules():
    p = subprocess.run([PROMTOOL, "check", "rules", str(ALERTS)], capture_output=True,
                       timeout=60)
    assert p.returncode == 0, (p.stdout + p.stderr).decode()
    assert b"SUCCESS" in p.stdout


def test_promtool_alert_unit_tests():
    """deploy/prometheus/alerts_test.yml: InferdModelLoadFailed fires after
    a minute of a failed last load and clears once a load succeeds."""
    tests = ALERTS.parent / "alerts_test.yml"
    p = subprocess.run([PROMTOOL, "test", "rules", str(tests)], capture_output=True,
                       timeout=60)
    assert p.returncode == 0, (p.stdout + p.stderr).decode()
    assert b"SUCCESS" in p.stdout


def test_load_failure_families_pass_promtool(server_factory, tmp_path):
    repo = tmp_path / "models"
    shutil.copytree(MAIN_MODELS["simple"], repo / "simple")
    (repo / "simple" / "2").mkdir()
    (repo / "simple" / "2" / "model.onnx").write_bytes(b"not a model")
    # Version 2, the one selected, fails: the server is live, not ready.
    srv = server_factory.start(repository=repo, wait=False)
    srv.wait_ready(path="/v2/health/live")
    text = requests.get(srv.metrics_url).text
    s = parse(text)
    assert s.get("inferd_model_load_failures_total", model="simple", reason="load") == 1
    assert s.get("inferd_model_last_load_success", model="simple") == 0
    mine = "".join(l + "\n" for l in text.splitlines()
                   if family_of(l) in ("inferd_model_load_failures_total",
                                       "inferd_model_last_load_success"))
    rc, problems = promtool_problems(mine)
    assert rc == 0, problems


def test_prometheus_server_scrapes_inferd(msrv, tmp_path):
    if not PROMETHEUS.exists():
        pytest.fail("prometheus not installed: %s" % PROMETHEUS)
    n = 5
    before = scrape(msrv).get("nv_inference_request_success", model="simple", version="1")
    for i in range(n):
        ok_json(infer_request(msrv.url, "simple", simple_inputs(1, i)))
    expected = before + n
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "rule_files:\n  - %s\n"
        "scrape_configs:\n  - job_name: inferd\n    static_configs:\n"
        "      - targets: ['127.0.0.1:%d']\n" % (ALERTS, msrv.metrics_port))
    log = open(tmp_path / "prometheus.log", "wb")
    proc = subprocess.Popen([str(PROMETHEUS), "--config.file=%s" % config,
                             "--storage.tsdb.path=%s" % (tmp_path / "data"),
                             "--web.listen-address=127.0.0.1:%d" % port],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        url = "http://127.0.0.1:%d/api/v1/query" % port
        query = 'nv_inference_request_success{model="simple"}'
        deadline = time.monotonic() + 60
        value = None
        while time.monotonic() < deadline:
            try:
                r = requests.get(url, params={"query": query}, timeout=5)
                result = r.json()["data"]["result"] if r.status_code == 200 else []
                if result:
                    value = float(result[0]["value"][1])
                    if value == expected:
                        break
            except requests.ConnectionError:
                pass
            time.sleep(0.25)
        assert value == expected, (value, expected, (tmp_path / "prometheus.log").read_text()[-3000:])
        # The alert rules load and evaluate against inferd's series.
        r = requests.get("http://127.0.0.1:%d/api/v1/rules" % port, timeout=5).json()
        groups = r["data"]["groups"]
        assert groups and all(rule["health"] != "err" for g in groups for rule in g["rules"]), r
        up = requests.get(url, params={"query": 'up{job="inferd"}'}, timeout=5).json()
        assert up["data"]["result"][0]["value"][1] == "1"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
