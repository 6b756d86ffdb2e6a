"""Rate limits (docs/limits.md, "Rate limits") against the running server,
configured by the `rate-limits` section of a --config file: a burst then
429 with Retry-After and the RateLimit-* headers (values checked; also under
OpenAI's x-ratelimit-*-requests names, with retry-after-ms), refill,
a per-model rule leaving other models alone, gRPC RESOURCE_EXHAUSTED with
retry-after and grpc-retry-pushback-ms in the trailing metadata, refusals
on a ModelStreamInfer stream as error messages, the
ratelimit-* metadata of a success, the metrics, a SIGHUP reload that keeps
an unchanged rule's bucket and restarts a changed one, and a section that
does not parse.

Tenant rules need API keys (the `auth` section): their matching is tested
in tests/unit/test_ratelimit.c."""
import re
import signal
import subprocess
import time

import grpc
import pytest
import requests

from conftest import INFERD_BIN, MAIN_MODELS, infer_request, tensor
from grpc_client import Client, generate

MODELS = {"simple": MAIN_MODELS["simple"], "digits": MAIN_MODELS["digits"]}


@pytest.fixture(scope="module")
def pbs(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("proto_py"))


def write_config(path, rules):
    """A config file whose `rate-limits` section is `rules` (YAML text)."""
    path.write_text("rate-limits:\n" + rules)
    return path


def start(server_factory, tmp_path, rules):
    cfg = write_config(tmp_path / "inferd.yaml", rules)
    return server_factory.start("--config", str(cfg), models=MODELS), cfg


def simple(srv):
    a = list(range(16))
    return infer_request(srv.url, "simple",
                         [tensor("INPUT0", a, "INT32", [1, 16]),
                          tensor("INPUT1", a, "INT32", [1, 16])])


def digits(srv):
    return infer_request(srv.url, "digits", [tensor("pixels", [0.0] * 64, "FP32", [1, 64])])


def limit_headers(r):
    return tuple(int(r.headers[h]) for h in
                 ("RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"))


def openai_headers(r):
    """The same bucket under OpenAI's names (docs/openai.md)."""
    return tuple(r.headers[h] for h in ("x-ratelimit-limit-requests",
                                        "x-ratelimit-remaining-requests",
                                        "x-ratelimit-reset-requests"))


def metric(srv, series):
    text = requests.get(srv.metrics_url, timeout=10).text
    m = re.search("^" + re.escape(series) + r" (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def test_burst_then_429_with_headers_then_refill(server_factory, tmp_path):
    srv, _ = start(server_factory, tmp_path, "  - model: simple\n    rate: 1\n    burst: 3\n")
    # The burst: one token each, the bucket full again k seconds later.
    for k in (1, 2, 3):
        r = simple(srv)
        assert r.status_code == 200, r.text
        assert limit_headers(r) == (3, 3 - k, k)
        assert openai_headers(r) == ("3", str(3 - k), "%ds" % k)
        assert "Retry-After" not in r.headers
    r = simple(srv)
    assert r.status_code == 429
    assert r.json() == {"error": "rate limit of model simple exceeded (1/s, burst 3)"}
    assert r.headers["Retry-After"] == "1"  # the next token: under a second away
    assert r.headers["retry-after-ms"] == "1000"
    assert "x-should-retry" not in r.headers
    assert limit_headers(r) == (3, 0, 3)
    assert openai_headers(r) == ("3", "0", "3s")
    # Another model: no rule, no headers, not limited.
    for _ in range(5):
        r = digits(srv)
        assert r.status_code == 200, r.text
        assert "RateLimit-Limit" not in r.headers
        assert not [h for h in r.headers if h.lower().startswith("x-ratelimit-")]
    # A second later a token is back, and only one.
    time.sleep(1.05)
    r = simple(srv)
    assert r.status_code == 200, r.text
    assert limit_headers(r)[:2] == (3, 0)
    assert simple(srv).status_code == 429
    labels = 'rule="0",model="simple"'
    assert metric(srv, "inferd_rate_limit_requests_total{%s,outcome=\"admitted\"}" % labels) == 4
    assert metric(srv, "inferd_rate_limit_requests_total{%s,outcome=\"limited\"}" % labels) == 2
    assert metric(srv, "inferd_rate_limit_tokens{%s}" % labels) == 0


def simple_grpc_request(pb):
    req = pb.ModelInferRequest(model_name="simple")
    for name in ("INPUT0", "INPUT1"):
        t = req.inputs.add(name=name, datatype="INT32", shape=[1, 16])
        t.contents.int_contents.extend(range(16))
    return req


def test_grpc_resource_exhausted_with_retry_metadata(server_factory, tmp_path, pbs):
    srv, _ = start(server_factory, tmp_path, "  - model: simple\n    rate: 0.5\n    burst: 2\n")
    c = Client(*pbs, "127.0.0.1:%d" % srv.grpc_port)
    try:
        req = simple_grpc_request(pbs[0])
        for k in (1, 2):
            _, call = c.unary("ModelInfer").with_call(req, timeout=30)
            md = dict(call.initial_metadata())
            assert (md["ratelimit-limit"], md["ratelimit-remaining"],
                    md["ratelimit-reset"]) == ("2", str(2 - k), str(2 * k))
        with pytest.raises(grpc.RpcError) as e:
            c.unary("ModelInfer").with_call(req, timeout=30)
        err = e.value
        assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert err.details() == "rate limit of model simple exceeded (0.5/s, burst 2)"
        md = dict(err.trailing_metadata())
        assert md["retry-after"] == "2"  # the next token: 2 s away, less the µs since
        assert md["grpc-retry-pushback-ms"] == "2000"
        assert (md["ratelimit-limit"], md["ratelimit-remaining"],
                md["ratelimit-reset"]) == ("2", "0", "4")
        # REST and gRPC calls share the bucket.
        r = simple(srv)
        assert r.status_code == 429 and r.headers["Retry-After"] == "2"
        # On a ModelStreamInfer stream a refusal is that request's error
        # message; the stream goes on.
        reqs = []
        for i in range(3):
            reqs.append(simple_grpc_request(pbs[0]))
            reqs[-1].id = "s%d" % i
        responses = list(c.stream_infer()(iter(reqs), timeout=30))
        assert [(x.infer_response.id, x.error_message) for x in responses] == [
            ("s%d" % i, "rate limit of model simple exceeded (0.5/s, burst 2)") for i in range(3)]
    finally:
        c.close()


def test_sighup_keeps_unchanged_buckets(server_factory, tmp_path):
    # Tokens come back every 100 s: an empty bucket stays empty here.
    srv, cfg = start(server_factory, tmp_path,
                     "  - model: simple\n    rate: 0.01\n    burst: 2\n"
                     "  - model: digits\n    rate: 0.01\n    burst: 2\n")
    for call in (simple, digits):
        assert [call(srv).status_code for _ in range(3)] == [200, 200, 429]
    # digits' rule changes (and moves first); simple's is the same rule.
    write_config(cfg, "  - model: digits\n    rate: 0.02\n    burst: 2\n"
                      "  - model: simple\n    rate: 0.01\n    burst: 2\n")
    srv.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while True:
        r = digits(srv)
        if r.status_code == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    # The changed rule starts full (the 200 above took its first token)...
    assert r.status_code == 200, r.text
    assert limit_headers(r)[:2] == (2, 1)
    assert digits(srv).status_code == 200
    assert digits(srv).status_code == 429
    # ...the unchanged one kept its empty bucket and its counters.
    r = simple(srv)
    assert r.status_code == 429
    assert r.json()["error"] == "rate limit of model simple exceeded (0.01/s, burst 2)"
    labels = 'rule="1",model="simple"'
    assert metric(srv, "inferd_rate_limit_requests_total{%s,outcome=\"admitted\"}" % labels) == 2
    assert metric(srv, "inferd_rate_limit_requests_total{%s,outcome=\"limited\"}" % labels) == 2


def test_bad_section_names_the_path(server_factory, tmp_path):
    cfg = write_config(tmp_path / "inferd.yaml",
                       "  - model: simple\n    rate: 1\n  - model: digits\n    rate: 1\n"
                       "    burst: -3\n")
    p = subprocess.run([str(INFERD_BIN), "serve", "--config", str(cfg), "--model-repository",
                        str(server_factory.repository(MODELS)), "--http-port", "0",
                        "--grpc-port", "0", "--metrics-port", "0"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert "rate-limits[1].burst: expected an integer from 1 to 1000000, got -3" in p.stderr
