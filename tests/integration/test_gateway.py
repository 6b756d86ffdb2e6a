"""Gateway mode: a model version served by upstream KServe v2 gRPC servers
(the remote-models section): answers, balancing, ejection, retries,
deadlines, trace context and canary routing between a local and a remote
version. The upstreams are other inferd processes; grpcio is the
independent client where a test needs one."""
import json
import threading
import time

import numpy as np
import pytest
import requests

from conftest import MAIN_MODELS, free_port, infer_request, ok_json, stall_repo, tensor
from grpc_client import generate


@pytest.fixture(scope="session")
def grpc_pb(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("gw_proto_py"))

IN0 = np.arange(16, dtype=np.int32).reshape(1, 16)
IN1 = np.ones((1, 16), dtype=np.int32)
SIMPLE = [tensor("INPUT0", IN0, "INT32"), tensor("INPUT1", IN1, "INT32")]
EXPECTED = [(IN0 + IN1).reshape(-1).tolist(), (IN0 - IN1).reshape(-1).tolist()]


def gateway(factory, tmp_path, upstreams, models=None, extra="", flags=(), model="simple",
            version=None):
    ups = ", ".join('"127.0.0.1:%d"' % u.grpc_port for u in upstreams)
    cfg = tmp_path / "gateway.yaml"
    cfg.write_text("remote-models:\n  - model: %s\n    upstreams: [%s]\n%s%s" % (
        model, ups, '    version: "%s"\n' % version if version else "", extra))
    return factory.start("--config", str(cfg), *flags, models=models if models is not None else {})


def upstream_metric(srv, name, upstream):
    text = requests.get(srv.metrics_url, timeout=10).text
    for line in text.splitlines():
        if line.startswith(name + "{") and 'upstream="127.0.0.1:%d"' % upstream.grpc_port in line:
            return float(line.rsplit(" ", 1)[1])
    return None


def infer_count(srv, model="simple"):
    """Successful infer calls the server counted for model (its own metrics)."""
    text = requests.get(srv.metrics_url, timeout=10).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith("nv_inference_request_success{") and 'model="%s"' % model in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def outputs(resp):
    body = ok_json(resp)
    return [o["data"] for o in body["outputs"]]


def test_answers_match_a_direct_call(server_factory, tmp_path):
    up = server_factory.start()
    gw = gateway(server_factory, tmp_path, [up])
    direct = ok_json(infer_request(up.url, "simple", SIMPLE))
    via = ok_json(infer_request(gw.url, "simple", SIMPLE))
    assert via["outputs"] == direct["outputs"]
    assert [o["data"] for o in via["outputs"]] == EXPECTED
    assert via["model_version"] == "1"
    # The metadata is the upstream's.
    md = requests.get(gw.url + "/v2/models/simple", timeout=10).json()
    up_md = requests.get(up.url + "/v2/models/simple", timeout=10).json()
    assert md["inputs"] == up_md["inputs"] and md["outputs"] == up_md["outputs"]
    assert requests.get(gw.url + "/v2/models/simple/ready", timeout=10).status_code == 200


def test_grpc_client_through_the_gateway(server_factory, tmp_path, grpc_pb):
    import grpc
    from grpc_client import Client
    pb, hpb = grpc_pb
    up = server_factory.start()
    gw = gateway(server_factory, tmp_path, [up])
    c = Client(pb, hpb, "127.0.0.1:%d" % gw.grpc_port)
    try:
        req = pb.ModelInferRequest(model_name="simple", id="req-7")
        for name in ("INPUT0", "INPUT1"):
            req.inputs.add(name=name, datatype="INT32", shape=[1, 16])
        req.raw_input_contents.append(IN0.tobytes())
        req.raw_input_contents.append(IN1.tobytes())
        resp = c.infer(req)
        assert resp.id == "req-7"
        got = [np.frombuffer(r, dtype=np.int32).tolist() for r in resp.raw_output_contents]
        assert got == EXPECTED
        # An error of the upstream keeps its meaning.
        bad = pb.ModelInferRequest(model_name="simple")
        bad.inputs.add(name="INPUT0", datatype="INT32", shape=[1, 16])
        with pytest.raises(grpc.RpcError) as e:
            c.infer(bad)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        c.close()


def test_p2c_spreads_load(server_factory, tmp_path):
    ups = [server_factory.start() for _ in range(3)]
    gw = gateway(server_factory, tmp_path, ups)
    errors = []

    def worker():
        s = requests.Session()
        for _ in range(40):
            r = s.post(gw.url + "/v2/models/simple/infer", json={"inputs": SIMPLE}, timeout=30)
            if r.status_code != 200:
                errors.append(r.text)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    counts = [infer_count(u) for u in ups]
    print("per-upstream counts (their own metrics):", counts)
    assert sum(counts) == 240
    assert min(counts) >= 240 * 0.1, counts
    # The gateway's count is the upstream's, plus the ModelMetadata and
    # ModelConfig calls of the version's load.
    sent = [upstream_metric(gw, "inferd_upstream_requests_total", u) for u in ups]
    assert sum(sent) == 242
    assert all(s - c in (0, 1, 2) for s, c in zip(sent, counts))


def test_killed_upstream_is_ejected_and_traffic_continues(server_factory, tmp_path):
    ups = [server_factory.start() for _ in range(2)]
    gw = gateway(server_factory, tmp_path, ups,
                 extra="    health-check: {interval-ms: 200, timeout-ms: 200}\n"
                       "    outlier: {consecutive-failures: 2, ejection-secs: 30}\n")
    for _ in range(10):
        assert outputs(infer_request(gw.url, "simple", SIMPLE)) == EXPECTED
    ups[0].kill()
    ups[0].returncode = -9
    # In-flight requests on it may fail (none here: nothing was in flight);
    # new ones never reach it (connection refused: retried elsewhere) and
    # it leaves the pool.
    failed = 0
    for _ in range(60):
        if infer_request(gw.url, "simple", SIMPLE).status_code != 200:
            failed += 1
    assert failed == 0
    deadline = time.monotonic() + 10
    while upstream_metric(gw, "inferd_upstream_healthy", ups[0]) != 0:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    before = infer_count(ups[1])
    for _ in range(20):
        assert infer_request(gw.url, "simple", SIMPLE).status_code == 200
    assert infer_count(ups[1]) == before + 20


def test_retries_only_for_never_reached(server_factory, tmp_path):
    """A call refused at connect is retried (it never reached the upstream);
    a call that reached a slow upstream and timed out is not."""
    up = server_factory.start()
    gone = server_factory.start()
    slow = server_factory.start(repository=stall_repo(tmp_path / "slow", 3000000))
    # Health checks far apart: the killed upstream stays eligible, so
    # calls are sent to it and refused at connect (never reached). The one
    # check that counts is the first: a generous timeout, so that a loaded
    # machine does not fail it (the next would come in 10 minutes).
    gw = gateway(server_factory, tmp_path, [gone, up],
                 extra="    max-retries: 1\n"
                       "    outlier: {consecutive-failures: 1000, ejection-secs: 1}\n"
                       "    health-check: {interval-ms: 600000, timeout-ms: 5000}\n")
    deadline = time.monotonic() + 30  # the first health check found both healthy
    while not all(upstream_metric(gw, "inferd_upstream_healthy", u) == 1 for u in (gone, up)):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    gone.kill()
    gone.returncode = -9
    for _ in range(20):
        r = infer_request(gw.url, "simple", SIMPLE)
        assert r.status_code == 200, r.text
    assert infer_count(up) == 20
    refused = upstream_metric(gw, "inferd_upstream_failures_total", gone)
    assert refused >= 1
    # Reached but slow: one attempt only, answered 504 at the deadline (the
    # upstream would have answered 200 after its 3 s run).
    (tmp_path / "g2").mkdir()
    gw2 = gateway(server_factory, tmp_path / "g2", [slow], model="echo",
                  extra="    max-retries: 3\n")
    r = infer_request(gw2.url, "echo", [tensor("IN", np.arange(4, dtype=np.int32).reshape(1, 4),
                                               "INT32")], parameters={"timeout": 500000})
    assert r.status_code == 504, r.text
    # The version's ModelMetadata and ModelConfig at load, and this call's
    # one attempt.
    assert upstream_metric(gw2, "inferd_upstream_requests_total", slow) == 3


def test_grpc_deadline_propagates(server_factory, tmp_path, grpc_pb):
    import grpc
    from grpc_client import Client
    pb, hpb = grpc_pb
    slow = server_factory.start(repository=stall_repo(tmp_path, 3000000))
    gw = gateway(server_factory, tmp_path, [slow], model="echo")
    c = Client(pb, hpb, "127.0.0.1:%d" % gw.grpc_port)
    try:
        req = pb.ModelInferRequest(model_name="echo")
        req.inputs.add(name="IN", datatype="INT32", shape=[1, 4])
        req.raw_input_contents.append(np.arange(4, dtype=np.int32).tobytes())
        with pytest.raises(grpc.RpcError) as e:
            c.infer(req, timeout=0.5)
        assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    finally:
        c.close()
    # The gateway held the client's deadline too: once its call to the
    # upstream has ended, it ended as DEADLINE_EXCEEDED (a failure), not as
    # the upstream's answer after its 3 s run.
    deadline = time.monotonic() + 30
    while upstream_metric(gw, "inferd_upstream_outstanding", slow) != 0:
        assert time.monotonic() < deadline, "the gateway's upstream call never ended"
        time.sleep(0.05)
    assert upstream_metric(gw, "inferd_upstream_failures_total", slow) == 1


def is_infer(line):
    return line.get("model") == "simple" and line.get("endpoint", "").endswith("ModelInfer")


def test_traceparent_propagates(server_factory, tmp_path):
    log = tmp_path / "upstream_access.log"
    up = server_factory.start("--access-log", str(log))
    gw = gateway(server_factory, tmp_path, [up])
    trace = "0af7651916cd43dd8448eb211c80319c"
    r = requests.post(gw.url + "/v2/models/simple/infer", json={"inputs": SIMPLE}, timeout=10,
                      headers={"traceparent": "00-%s-b7ad6b7169203331-01" % trace,
                               "x-request-id": "gw-req-1"})
    assert r.status_code == 200
    deadline = time.monotonic() + 5
    lines = []
    while time.monotonic() < deadline:
        lines = [json.loads(x) for x in log.read_text().splitlines() if x.strip()] \
            if log.exists() else []
        if any(is_infer(x) for x in lines):
            break
        time.sleep(0.1)
    # The gateway's health checks (ModelReady) are logged there too.
    infer_lines = [x for x in lines if is_infer(x)]
    assert len(infer_lines) == 1, lines
    assert infer_lines[0]["trace_id"] == trace


def test_canary_between_local_and_remote_version(server_factory, tmp_path):
    up = server_factory.start()
    repo = tmp_path / "gwrepo"
    (repo / "simple" / "1").mkdir(parents=True)
    (repo / "simple" / "1" / "model.onnx").symlink_to(
        (MAIN_MODELS["simple"] / "1" / "model.onnx").resolve())
    (repo / "simple" / "routing.json").write_text(json.dumps(
        {"canary": {"stable": 1, "version": 2, "weight": 50}}))
    gw = gateway(server_factory, tmp_path, [up], version="2",
                 flags=("--model-repository", str(repo)))
    versions = {}
    for _ in range(60):
        r = infer_request(gw.url, "simple", SIMPLE)
        body = ok_json(r)
        assert [o["data"] for o in body["outputs"]] == EXPECTED
        versions[body["model_version"]] = versions.get(body["model_version"], 0) + 1
    print("canary split:", versions)
    assert set(versions) == {"1", "2"}
    assert infer_count(up) == versions["2"]
    # Pinning the remote version by URL.
    r = infer_request(gw.url, "simple", SIMPLE, version="2")
    assert ok_json(r)["model_version"] == "2"


def test_config_errors(server_factory, tmp_path):
    import subprocess
    from conftest import INFERD_BIN
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("remote-models:\n  - model: simple\n    upstreams: [\"nohost\"]\n")
    p = subprocess.run([str(INFERD_BIN), "serve", "--check-config", str(cfg)],
                       capture_output=True, text=True)
    assert p.returncode == 2
    assert "remote-models[0].upstreams[0]: expected host:port" in p.stderr
    cfg.write_text("remote-models:\n  - model: simple\n")
    p = subprocess.run([str(INFERD_BIN), "serve", "--check-config", str(cfg)],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "give either upstreams or discover: true" in p.stderr
    for section, key in (("health-check", "interval_ms"), ("outlier", "ejection-seconds")):
        cfg.write_text("remote-models:\n  - model: simple\n    upstreams: [\"h:1\"]\n"
                       "    %s: {%s: 5}\n" % (section, key))
        p = subprocess.run([str(INFERD_BIN), "serve", "--check-config", str(cfg)],
                           capture_output=True, text=True)
        assert p.returncode == 2
        assert "remote-models[0].%s: unknown key '%s'" % (section, key) in p.stderr
    cfg.write_text("remote-models:\n  - model: simple\n    upstreams: [\"h:1\"]\n"
                   "    health-check: {unhealthy-threshold: 0}\n")
    p = subprocess.run([str(INFERD_BIN), "serve", "--check-config", str(cfg)],
                       capture_output=True, text=True)
    assert p.returncode == 2
    assert "remote-models[0].health-check.unhealthy-threshold: expected a number from 1 to 1000" \
        in p.stderr



class ModelReadyProxy:
    """A grpcio server in front of `upstream` that passes every call
    through as bytes, except ModelReady (the gateway's health check), which
    it answers as `mode` says: "forward" (the upstream's answer), "stall"
    (no answer until the caller gives up or the mode changes) or
    "not_ready" (ready: false)."""

    def __init__(self, upstream, mode="forward"):
        import grpc
        from concurrent import futures
        self.mode = mode
        self.held = threading.Event()  # a ModelReady has been stalled
        self.closed = False
        channel = grpc.insecure_channel("127.0.0.1:%d" % upstream.grpc_port)
        proxy = self

        def handler(path):
            forward = channel.unary_unary(path)

            def call(request, context):
                if path.endswith("/ModelReady"):
                    while proxy.mode == "stall" and context.is_active() and not proxy.closed:
                        proxy.held.set()
                        time.sleep(0.01)
                    if proxy.closed or not context.is_active():
                        context.abort(grpc.StatusCode.UNAVAILABLE, "released")
                    if proxy.mode == "not_ready":
                        return b""  # ModelReadyResponse{ready: false}
                return forward(request, timeout=30)
            return grpc.unary_unary_rpc_method_handler(call)

        class Generic(grpc.GenericRpcHandler):
            def service(self, details):
                return handler(details.method)

        self.channel = channel
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=32))
        self.server.add_generic_rpc_handlers((Generic(),))
        self.grpc_port = self.server.add_insecure_port("127.0.0.1:%d" % free_port())
        self.server.start()

    def close(self):
        self.closed = True
        self.server.stop(0)
        self.channel.close()


def wait_for(what, cond, seconds=30):
    deadline = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_unanswered_health_checks_take_an_upstream_out_only_in_a_row(server_factory, tmp_path):
    """An upstream whose health checks time out stays in the pool (and its
    calls keep going there) until unhealthy-threshold of them in a row have
    gone unanswered; an answer "not ready" takes it out at once; a passing
    check brings it back."""
    proxy = ModelReadyProxy(server_factory.start())
    try:
        gw = gateway(server_factory, tmp_path, [proxy],
                     extra="    health-check: {interval-ms: 100, timeout-ms: 100, "
                           "unhealthy-threshold: 1000}\n")
        healthy = lambda: upstream_metric(gw, "inferd_upstream_healthy", proxy)  # noqa: E731
        missed = lambda: gw.stderr().count("missed a health check")  # noqa: E731
        assert outputs(infer_request(gw.url, "simple", SIMPLE)) == EXPECTED
        proxy.mode = "stall"
        wait_for("three health checks missed", lambda: missed() >= 3)
        assert healthy() == 1
        assert upstream_metric(gw, "inferd_upstream_health_check_misses_total", proxy) >= 3
        assert "failed its health check" not in gw.stderr()
        assert outputs(infer_request(gw.url, "simple", SIMPLE)) == EXPECTED
        assert "(1 of 1000 in a row)" in gw.stderr()

        proxy.mode = "not_ready"
        wait_for("not ready taken out", lambda: healthy() == 0)
        assert "failed its health check: model not ready" in gw.stderr()
        r = infer_request(gw.url, "simple", SIMPLE)
        assert r.status_code == 503 and "no healthy upstream" in r.text, r.text

        proxy.mode = "forward"
        wait_for("back after a passing check", lambda: healthy() == 1)
        assert outputs(infer_request(gw.url, "simple", SIMPLE)) == EXPECTED
    finally:
        proxy.close()

    # At the threshold it leaves, and says after how many.
    proxy = ModelReadyProxy(server_factory.start())
    try:
        (tmp_path / "g2").mkdir()
        gw = gateway(server_factory, tmp_path / "g2", [proxy],
                     extra="    health-check: {interval-ms: 100, timeout-ms: 100, "
                           "unhealthy-threshold: 2}\n")
        assert outputs(infer_request(gw.url, "simple", SIMPLE)) == EXPECTED
        proxy.mode = "stall"
        wait_for("taken out after two", lambda: upstream_metric(
            gw, "inferd_upstream_healthy", proxy) == 0)
        log = gw.stderr()
        assert "(1 of 2 in a row)" in log
        assert "failed its health check 2 times in a row" in log
        proxy.mode = "forward"
        wait_for("back", lambda: upstream_metric(gw, "inferd_upstream_healthy", proxy) == 1)
    finally:
        proxy.close()


def test_regress_stop_with_a_health_check_in_flight(server_factory, tmp_path):
    """SIGTERM while a health check waits on an upstream that does not
    answer it: the gateway exits cleanly. (Its upstreams were freed before
    their connections were closed; closing one then finished the pending
    health call into the freed upstream, a use-after-free that
    AddressSanitizer reported at exit.)"""
    proxy = ModelReadyProxy(server_factory.start(), mode="stall")
    try:
        gw = gateway(server_factory, tmp_path, [proxy],
                     extra="    health-check: {interval-ms: 100, timeout-ms: 60000}\n")
        assert outputs(infer_request(gw.url, "simple", SIMPLE)) == EXPECTED
        assert proxy.held.wait(30), "no health check reached the upstream"
        assert gw.stop() == []
    finally:
        proxy.close()
