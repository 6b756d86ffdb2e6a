"""Admission control per model version (docs/limits.md): circuit breakers
(`breakers`) and adaptive concurrency (`concurrency`) from the server's
configuration file, over REST (requests) and gRPC (grpcio), with the
identity_stall example plugin: a version that fails while a file exists,
and executions that stall."""
import json
import shutil
import signal
import time

import grpc
import numpy as np
import pytest
import requests

from conftest import INFERD_BIN, assert_error_response, burst, ok_json
from grpc_client import Client, generate
from prom import scrape, wait_for

PLUGIN = INFERD_BIN.parent / "libinferd_identity_stall.so"

ECHO_CONFIG = """backend: "identity_stall"
max_batch_size: 8
version_policy: { all: {} }
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 4 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 4 ] } ]
"""


def echo_repo(tmp_path, versions=(1,), parameters=None, extra_config=""):
    """<tmp_path>/models/echo served by identity_stall; parameters: {version:
    [(key, value)]}, that version's `parameters` file; extra_config: more
    config.pbtxt lines."""
    if not PLUGIN.exists():
        pytest.fail("example plugin not built: %s" % PLUGIN)
    mdir = tmp_path / "models" / "echo"
    for v in versions:
        (mdir / str(v)).mkdir(parents=True)
        (mdir / str(v) / "model.onnx").write_bytes(b"")
        lines = (parameters or {}).get(v, [])
        if lines:
            (mdir / str(v) / "parameters").write_text("".join("%s %s\n" % kv for kv in lines))
    (mdir / "config.pbtxt").write_text(ECHO_CONFIG + extra_config)
    shutil.copy(PLUGIN, mdir / PLUGIN.name)
    return tmp_path / "models"


def start(server_factory, tmp_path, repo, config):
    """A server whose configuration file holds `config` (YAML text)."""
    path = tmp_path / "inferd.yaml"
    path.write_text(config)
    return server_factory.start("--config", str(path), repository=repo)


def echo(url, data=(1, 2, 3, 4), version=None, parameters=None, timeout=30):
    body = {"inputs": [{"name": "IN", "shape": [1, 4], "datatype": "INT32", "data": list(data)}]}
    if parameters:
        body["parameters"] = parameters
    path = "/v2/models/echo" + ("/versions/%s" % version if version else "") + "/infer"
    return requests.post(url + path, data=json.dumps(body), timeout=timeout)


def executions(srv):
    r = requests.get(srv.url + "/v2/models/echo/stats", timeout=10)
    assert r.status_code == 200, r.text
    return sum(s["execution_count"] for s in r.json()["model_stats"])


@pytest.fixture(scope="module")
def pb(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("proto_py"))


def grpc_client(srv, pb):
    return Client(pb[0], pb[1], "127.0.0.1:%d" % srv.grpc_port)


def grpc_request(pb, version=""):
    req = pb[0].ModelInferRequest(model_name="echo", model_version=version)
    req.inputs.add(name="IN", datatype="INT32", shape=[1, 4])
    req.raw_input_contents.append(np.array([1, 2, 3, 4], dtype="<i4").tobytes())
    return req


# --------------------------------------------------------------------------
# circuit breakers


def test_breaker_opens_answers_at_once_probes_and_closes(server_factory, tmp_path):
    flag = tmp_path / "failing"
    repo = echo_repo(tmp_path, parameters={1: [("fail_while_exists", flag)]})
    srv = start(server_factory, tmp_path, repo, """
breakers:
  - model: echo
    consecutive-failures: 3
    open-secs: 1
    half-open-probes: 2
""")
    assert ok_json(echo(srv.url))["outputs"][0]["data"] == [1, 2, 3, 4]
    flag.write_text("")
    for _ in range(3):
        assert "injected failure" in assert_error_response(echo(srv.url), 500)
    # Open: answered at once, nothing executes.
    before = executions(srv)
    for _ in range(5):
        r = echo(srv.url)
        msg = assert_error_response(r, 503)
        assert msg.startswith("circuit breaker of echo version 1 is open (half-open in "), msg
        assert r.headers["Retry-After"] == "1"
    assert executions(srv) == before
    assert "breaker: echo version 1 closed -> open (3 consecutive failures)" in srv.stderr()
    s = scrape(srv)
    assert s.get("inferd_breaker_state", model="echo", version="1") == 1
    assert s.get("inferd_breaker_transitions_total", model="echo", version="1", to="open") == 1

    # After open-secs a probe goes through; it fails: open again.
    time.sleep(1.1)
    assert "injected failure" in assert_error_response(echo(srv.url), 500)
    assert_error_response(echo(srv.url), 503)
    assert "breaker: echo version 1 half-open -> open (a probe failed)" in srv.stderr()

    # Recovered: two probes succeed and it closes.
    flag.unlink()
    time.sleep(1.1)
    assert ok_json(echo(srv.url))["outputs"][0]["data"] == [1, 2, 3, 4]
    assert ok_json(echo(srv.url))["outputs"][0]["data"] == [1, 2, 3, 4]
    assert "breaker: echo version 1 half-open -> closed (2 probes succeeded)" in srv.stderr()
    for _ in range(3):
        assert echo(srv.url).status_code == 200
    s = scrape(srv)
    assert s.get("inferd_breaker_state", model="echo", version="1") == 0
    assert s.get("inferd_breaker_transitions_total", model="echo", version="1", to="open") == 2
    assert s.get("inferd_breaker_transitions_total", model="echo", version="1",
                 to="half-open") == 2
    assert s.get("inferd_breaker_transitions_total", model="echo", version="1", to="closed") == 1


def test_breaker_fallback_version_over_rest_and_grpc(server_factory, tmp_path, pb):
    flag = tmp_path / "failing"
    repo = echo_repo(tmp_path, versions=(1, 2), parameters={2: [("fail_while_exists", flag)]})
    srv = start(server_factory, tmp_path, repo, """
breakers:
  - model: echo
    version: "2"
    consecutive-failures: 2
    open-secs: 60
    fallback-version: "1"
""")
    r = echo(srv.url)
    assert r.headers["x-inferd-model-version"] == "2" and r.headers["x-inferd-route"] == "default"
    flag.write_text("")
    for _ in range(2):
        assert_error_response(echo(srv.url), 500)
    # Open: version 1 answers, and says why.
    for _ in range(3):
        r = echo(srv.url)
        assert ok_json(r)["model_version"] == "1"
        assert r.headers["x-inferd-model-version"] == "1"
        assert r.headers["x-inferd-route"] == "fallback"
    c = grpc_client(srv, pb)
    try:
        resp, call = c.unary("ModelInfer").with_call(grpc_request(pb), timeout=30)
        md = dict(call.initial_metadata())
        assert resp.model_version == "1"
        assert md["x-inferd-model-version"] == "1" and md["x-inferd-route"] == "fallback"
        # A client that names version 2 gets the refusal.
        with pytest.raises(grpc.RpcError) as e:
            c.infer(grpc_request(pb, version="2"))
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "circuit breaker of echo version 2 is open" in e.value.details()
    finally:
        c.close()
    r = echo(srv.url, version=2)
    assert "circuit breaker of echo version 2 is open" in assert_error_response(r, 503)
    assert int(r.headers["Retry-After"]) in range(55, 61)
    s = scrape(srv)
    assert s.get("inferd_breaker_state", model="echo", version="2") == 1
    assert s.get("inferd_route_requests_total", model="echo", version="1", route="fallback") == 4


# --------------------------------------------------------------------------
# adaptive concurrency


def test_limiter_refuses_calls_over_the_limit(server_factory, tmp_path, pb):
    repo = echo_repo(tmp_path, parameters={1: [("delay_us", 200000)]})
    srv = start(server_factory, tmp_path, repo, """
concurrency:
  - model: echo
    min: 2
    max: 2
    queue: false
""")
    results = burst(6, lambda: echo(srv.url))
    statuses = sorted(r.status_code for r in results)
    assert statuses == [200] * 2 + [503] * 4, statuses
    for r in results:
        if r.status_code == 503:
            msg = assert_error_response(r, 503)
            assert msg.startswith("concurrency limit of echo version 1 reached ("), msg
            assert int(r.headers["Retry-After"]) >= 1
    c = grpc_client(srv, pb)
    try:
        def one():
            try:
                c.infer(grpc_request(pb))
                return "OK"
            except grpc.RpcError as e:
                assert "concurrency limit of echo version 1 reached" in e.details()
                return e.code().name
        assert sorted(burst(5, one)) == ["OK"] * 2 + ["UNAVAILABLE"] * 3
    finally:
        c.close()
    s = scrape(srv)
    assert s.get("inferd_concurrency_limit", model="echo", version="1") == 2
    assert s.get("inferd_concurrency_in_flight", model="echo", version="1") == 0
    assert s.get("inferd_concurrency_refusals_total", model="echo", version="1",
                 reason="limit") == 7


def test_lower_priority_levels_are_refused_first(server_factory, tmp_path):
    """Level 1 may use the whole limit (2), level 2 half of it (1)."""
    repo = echo_repo(tmp_path, parameters={1: [("delay_us", 200000)]},
                     extra_config="dynamic_batching { priority_levels: 2 "
                                  "default_priority_level: 2 }\n")
    srv = start(server_factory, tmp_path, repo, """
concurrency:
  - model: echo
    min: 2
    max: 2
    low-priority-share: 0.5
    queue: false
""")
    # The default level is 2 here: a lower level.
    statuses = sorted(r.status_code for r in burst(3, lambda: echo(srv.url)))
    assert statuses == [200, 503, 503], statuses
    statuses = sorted(r.status_code for r in
                      burst(3, lambda: echo(srv.url, parameters={"priority": 1})))
    assert statuses == [200, 200, 503], statuses


def test_limiter_queues_calls_within_their_timeout(server_factory, tmp_path, pb):
    repo = echo_repo(tmp_path, parameters={1: [("delay_us", 50000)]})
    srv = start(server_factory, tmp_path, repo, """
concurrency:
  - model: echo
    min: 1
    max: 1
""")
    # With a timeout (µs) the calls wait their turn, one at a time.
    t0 = time.monotonic()
    results = burst(4, lambda: echo(srv.url, parameters={"timeout": 5000000}))
    assert [r.status_code for r in results] == [200] * 4, [r.text for r in results]
    assert time.monotonic() - t0 >= 0.2
    # Without one they cannot wait.
    statuses = sorted(r.status_code for r in burst(3, lambda: echo(srv.url)))
    assert statuses == [200, 503, 503], statuses
    # gRPC: the call's deadline (grpc-timeout) is its budget.
    c = grpc_client(srv, pb)
    try:
        outs = burst(3, lambda: c.infer(grpc_request(pb), timeout=10).model_version)
        assert outs == ["1"] * 3
    finally:
        c.close()
    # A budget that runs out while waiting: 503 when a slot frees too late.
    results = burst(2, lambda: echo(srv.url, parameters={"timeout": 20000}))
    statuses = sorted(r.status_code for r in results)
    assert statuses == [200, 503], [r.text for r in results]
    msg = [assert_error_response(r, 503) for r in results if r.status_code == 503][0]
    assert "the deadline leaves no time to wait for a slot" in msg, msg
    s = scrape(srv)
    assert s.get("inferd_concurrency_refusals_total", model="echo", version="1",
                 reason="expired") == 1
    assert s.get("inferd_concurrency_waiting", model="echo", version="1") == 0


def test_limiter_measures_latency(server_factory, tmp_path):
    repo = echo_repo(tmp_path, parameters={1: [("delay_us", 20000)]})
    srv = start(server_factory, tmp_path, repo, """
concurrency:
  - model: echo
    min: 1
    max: 50
    initial: 4
    min-rtt-samples: 5
    sample-window-ms: 50
""")
    for _ in range(12):
        assert echo(srv.url).status_code == 200
    s = wait_for(srv, lambda s: s.get("inferd_concurrency_sampled_latency_us", model="echo",
                                      version="1") > 0)
    min_us = s.get("inferd_concurrency_min_latency_us", model="echo", version="1")
    sampled_us = s.get("inferd_concurrency_sampled_latency_us", model="echo", version="1")
    assert 20000 <= min_us < 1000000, min_us
    assert 20000 <= sampled_us < 1000000, sampled_us
    # Latency stays near the minimum: the limit grew from 4.
    assert s.get("inferd_concurrency_limit", model="echo", version="1") > 4
    assert s.types["inferd_concurrency_limit"] == "gauge"
    assert s.types["inferd_concurrency_refusals_total"] == "counter"


def test_reload_changes_the_limit(server_factory, tmp_path):
    repo = echo_repo(tmp_path, parameters={1: [("delay_us", 200000)]})
    config = tmp_path / "inferd.yaml"
    body = "concurrency:\n  - model: echo\n    min: %d\n    max: %d\n    queue: false\n"
    config.write_text(body % (1, 1))
    srv = server_factory.start("--config", str(config), repository=repo)
    statuses = sorted(r.status_code for r in burst(4, lambda: echo(srv.url)))
    assert statuses == [200] + [503] * 3, statuses
    config.write_text(body % (3, 3))
    srv.proc.send_signal(signal.SIGHUP)
    # A version's limiter (and its series) appears with its first call.
    deadline = time.monotonic() + 10
    while scrape(srv).get("inferd_concurrency_limit", model="echo", version="1") != 3:
        assert time.monotonic() < deadline, "the reload did not apply: " + srv.stderr()
        assert echo(srv.url).status_code == 200
    statuses = sorted(r.status_code for r in burst(4, lambda: echo(srv.url)))
    assert statuses == [200] * 3 + [503], statuses
