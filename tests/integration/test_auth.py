"""API keys, tenants and scopes (the `auth` section of --config,
docs/security.md) against the running server: REST with python requests,
gRPC with python3-grpcio, the metrics port with requests; the hashes come
from `inferd keys new` / `inferd keys hash`.

Checked: no keys = everything open (and the startup warning); 401 with
WWW-Authenticate for a missing, wrong or conflicting key; Bearer and
x-api-key; the infer scope per model; read vs admin (unload); open health
and metrics, and a metrics port that needs a key; UNAUTHENTICATED and
PERMISSION_DENIED over gRPC; the tenant in the access log; keys and hashes
never in the server's log, the access log or an answer; a SIGHUP reload
that removes a key while another tenant keeps working.
"""
import json
import signal
import subprocess
import time

import grpc
import pytest
import requests

from conftest import INFERD_BIN, MAIN_MODELS, assert_error
from grpc_client import SERVICE as SERVICE_PATH, Client, generate
from prom import parse as prom_parse

SIMPLE_BODY = json.dumps({"inputs": [
    {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
    {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}]})
DIGITS_BODY = json.dumps({"inputs": [
    {"name": "pixels", "shape": [1, 64], "datatype": "FP32", "data": [0.0] * 64}]})
WAIT = 20.0


def new_key():
    """(key, hash) from `inferd keys new`."""
    out = subprocess.run([str(INFERD_BIN), "keys", "new"], check=True, capture_output=True,
                         text=True).stdout.splitlines()
    assert len(out) == 2 and out[0].startswith("inferd_") and len(out[0]) == 50, out
    assert out[1].startswith("inferd-sha256$"), out
    return out[0], out[1]


def hash_key(key):
    r = subprocess.run([str(INFERD_BIN), "keys", "hash"], input=key + "\n",
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def auth_yaml(tenants, open_=None):
    """The auth section in YAML: tenants = [(name, [hash, ...], [scope, ...])]."""
    lines = ["auth:"]
    if open_ is not None:
        lines.append("  open: [%s]" % ", ".join(open_))
    lines.append("  tenants:")
    for name, hashes, scopes in tenants:
        lines.append("    - name: %s" % name)
        lines.append("      keys:")
        lines += ['        - "%s"' % h for h in hashes]
        lines.append("      scopes: [%s]" % ", ".join(scopes))
    return "\n".join(lines) + "\n"


def bearer(key):
    return {"Authorization": "Bearer " + key}


def infer_body(model):
    return SIMPLE_BODY if model == "simple" else DIGITS_BODY


@pytest.fixture(scope="session")
def pbs(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("proto_py_auth"))


@pytest.fixture(scope="module")
def keys():
    """name -> (key, hash) for every tenant of the module's server, and a
    second key of `infer-all` (a rotation: both work)."""
    names = ["admin", "reader", "infer-all", "infer-all-2", "digits-only"]
    return {n: new_key() for n in names}


@pytest.fixture(scope="module")
def secured(module_server_factory, keys, tmp_path_factory):
    """A server with four tenants, an access log, explicit model control."""
    d = tmp_path_factory.mktemp("auth")
    config = d / "inferd.yaml"
    config.write_text(auth_yaml([
        ("admin", [keys["admin"][1]], ["admin", "read"]),
        ("reader", [keys["reader"][1]], ["read"]),
        ("infer-all", [keys["infer-all"][1], keys["infer-all-2"][1]], ["infer"]),
        ("digits-only", [keys["digits-only"][1]], ["infer:digits"]),
    ]) + "access-log: %s\nmodel-control-mode: explicit\nload-model: ['*']\n" % (d / "access.log"))
    srv = module_server_factory.start(
        "--config", str(config),
        models={n: MAIN_MODELS[n] for n in ("simple", "digits", "strings")})
    srv.access_log = d / "access.log"
    srv.bodies = []  # every answer's body, checked for keys at the end
    return srv


def get(srv, path, headers=None):
    r = requests.get(srv.url + path, headers=headers or {}, timeout=10)
    srv.bodies.append(r.text)
    return r


def post(srv, path, body="", headers=None):
    r = requests.post(srv.url + path, data=body, headers=headers or {}, timeout=10)
    srv.bodies.append(r.text)
    return r


def grpc_client(srv, pbs):
    return Client(*pbs, "127.0.0.1:%d" % srv.grpc_port)


def rpc_code(fn, *args, **kw):
    with pytest.raises(grpc.RpcError) as e:
        fn(*args, **kw)
    return e.value.code(), e.value.details()


def simple_request(pb, model="simple"):
    req = pb.ModelInferRequest(model_name=model)
    if model == "simple":
        for name, data in (("INPUT0", range(16)), ("INPUT1", [1] * 16)):
            t = req.inputs.add(name=name, datatype="INT32", shape=[1, 16])
            t.contents.int_contents.extend(data)
    else:
        t = req.inputs.add(name="pixels", datatype="FP32", shape=[1, 64])
        t.contents.fp32_contents.extend([0.0] * 64)
    return req


# ---------------------------------------------------------------------------
# keys subcommand


def test_keys_hash_verifies_and_refuses_short_keys():
    key, h = new_key()
    h2 = hash_key(key)
    assert h2 != h  # a new salt each time
    assert h2.startswith("inferd-sha256$") and len(h2) == 111
    r = subprocess.run([str(INFERD_BIN), "keys", "hash"], input="fifteen-chars!!\n",
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == ""
    assert "16 to 256" in r.stderr and "fifteen" not in r.stderr


# ---------------------------------------------------------------------------
# without keys


def test_no_keys_everything_open(server_factory, pbs):
    srv = server_factory.start("--model-control-mode", "explicit", "--load-model", "simple")
    assert ("auth: no API keys configured: every endpoint, the admin API included, is open "
            "to anyone who can reach the ports") in srv.stderr()
    assert requests.get(srv.url + "/v2/logging", timeout=10).status_code == 200
    assert requests.post(srv.url + "/v2/models/simple/infer", data=SIMPLE_BODY,
                         timeout=10).status_code == 200
    assert requests.get(srv.metrics_url, timeout=10).status_code == 200
    c = grpc_client(srv, pbs)
    try:
        c.infer(simple_request(pbs[0]))
        c.call("RepositoryModelUnload", model_name="simple")
    finally:
        c.close()


# ---------------------------------------------------------------------------
# REST


def test_startup_line_names_tenants_and_open_endpoints(secured):
    assert "auth: 4 tenants, 5 keys; open without a key: health, metrics" in secured.stderr()
    assert "no API keys configured" not in secured.stderr()


def test_missing_key_401(secured):
    for path in ("/v2/models/simple", "/v2", "/v2/repository/index"):
        r = get(secured, path) if path != "/v2/repository/index" else post(secured, path)
        assert_error(r.status_code, r.text, 401)
        assert r.json() == {"error": "missing API key"}
        assert r.headers["WWW-Authenticate"] == 'Bearer realm="inferd"'
    r = post(secured, "/v2/models/simple/infer", SIMPLE_BODY)
    assert_error(r.status_code, r.text, 401)
    assert r.json() == {"error": "missing API key"}
    assert r.headers["WWW-Authenticate"] == 'Bearer realm="inferd"'
    # Which models exist is not for a caller without a key: 401, not 404.
    for path in ("/v2/models/nosuchmodel/infer", "/v2/models/nosuchmodel/generate"):
        r = post(secured, path, SIMPLE_BODY)
        assert_error(r.status_code, r.text, 401)
        assert r.json() == {"error": "missing API key"}


def test_wrong_key_401(secured, keys):
    wrong = new_key()[0]
    for r in (get(secured, "/v2/models/simple", bearer(wrong)),
              post(secured, "/v2/models/simple/infer", SIMPLE_BODY, bearer(wrong)),
              get(secured, "/v2/models/simple", {"x-api-key": "short"}),
              # Basic is not an API key: missing
              get(secured, "/v2/models/simple", {"Authorization": "Basic " + keys["reader"][0]})):
        assert_error(r.status_code, r.text, 401)
    r = get(secured, "/v2/models/simple", bearer(wrong))
    assert r.json() == {"error": "invalid API key"}
    assert r.headers["WWW-Authenticate"] == 'Bearer realm="inferd", error="invalid_token"'
    # Two different keys, even if one is right.
    r = get(secured, "/v2/models/simple", {**bearer(keys["reader"][0]), "x-api-key": wrong})
    assert_error(r.status_code, r.text, 401)
    assert r.headers["WWW-Authenticate"] == 'Bearer realm="inferd", error="invalid_request"'


def test_bearer_and_x_api_key(secured, keys):
    key = keys["reader"][0]
    assert get(secured, "/v2/models/simple", bearer(key)).status_code == 200
    assert get(secured, "/v2/models/simple", {"x-api-key": key}).status_code == 200
    assert get(secured, "/v2/models/simple", {"authorization": "bearer " + key}).status_code == 200
    assert get(secured, "/v2/models/simple", {**bearer(key), "x-api-key": key}).status_code == 200
    # Both keys of a tenant in a rotation.
    for name in ("infer-all", "infer-all-2"):
        r = post(secured, "/v2/models/simple/infer", SIMPLE_BODY, bearer(keys[name][0]))
        assert r.status_code == 200, r.text


def test_infer_scope_per_model(secured, keys):
    d = keys["digits-only"][0]
    assert post(secured, "/v2/models/digits/infer", DIGITS_BODY, bearer(d)).status_code == 200
    r = post(secured, "/v2/models/simple/infer", SIMPLE_BODY, bearer(d))
    assert_error(r.status_code, r.text, 403)
    assert r.json()["error"] == ("API key of tenant 'digits-only' lacks scope 'infer' "
                                 "for model 'simple'")
    assert "WWW-Authenticate" not in r.headers
    a = keys["infer-all"][0]
    for model in ("simple", "digits"):
        r = post(secured, "/v2/models/%s/infer" % model, infer_body(model), bearer(a))
        assert r.status_code == 200, r.text
    r = post(secured, "/v2/models/simple/versions/1/infer", SIMPLE_BODY, bearer(keys["reader"][0]))
    assert_error(r.status_code, r.text, 403)
    # infer is not read
    r = get(secured, "/v2/models/simple", bearer(a))
    assert_error(r.status_code, r.text, 403)
    assert r.json()["error"] == "API key of tenant 'infer-all' lacks scope 'read'"
    # shared memory needs an infer scope
    assert get(secured, "/v2/systemsharedmemory/status", bearer(d)).status_code == 200
    r = get(secured, "/v2/systemsharedmemory/status", bearer(keys["reader"][0]))
    assert_error(r.status_code, r.text, 403)


def test_read_and_admin(secured, keys):
    reader, admin = bearer(keys["reader"][0]), bearer(keys["admin"][0])
    for path in ("/v2/models/simple", "/v2/models/simple/ready", "/v2/models/simple/config",
                 "/v2/models/stats", "/v2"):
        assert get(secured, path, reader).status_code == 200, path
    for path in ("/v2/logging", "/v2/trace/setting", "/v2/models/simple/routing"):
        r = get(secured, path, reader)
        assert_error(r.status_code, r.text, 403)
        assert r.json()["error"] == "API key of tenant 'reader' lacks scope 'admin'"
        assert get(secured, path, admin).status_code == 200, path
    r = post(secured, "/v2/repository/models/strings/unload", "", reader)
    assert_error(r.status_code, r.text, 403)
    assert r.json()["error"] == "API key of tenant 'reader' lacks scope 'admin'"
    assert post(secured, "/v2/repository/models/strings/unload", "", admin).status_code == 200
    index = post(secured, "/v2/repository/index", "", admin).json()
    assert {m["name"]: m["state"] for m in index}["strings"] == "UNAVAILABLE"
    assert post(secured, "/v2/repository/models/strings/load", "", admin).status_code == 200


def test_rest_over_http2(secured, keys):
    """REST over HTTP/2 (curl, prior knowledge) reads the same headers."""
    from test_http2 import curl_h2
    version, status, headers, body = curl_h2(secured.url + "/v2/models/simple")
    assert (version, status) == ("HTTP/2", 401)
    assert headers["www-authenticate"] == 'Bearer realm="inferd"'
    assert json.loads(body) == {"error": "missing API key"}
    _, status, _, _ = curl_h2(secured.url + "/v2/models/simple", "-H",
                              "x-api-key: " + keys["reader"][0])
    assert status == 200
    _, status, _, body = curl_h2(secured.url + "/v2/models/simple/infer", "-H",
                                 "authorization: Bearer " + keys["digits-only"][0],
                                 "--data-binary", SIMPLE_BODY)
    assert status == 403, body


def test_routing_cli_sends_the_key_from_the_environment(secured, keys):
    """`inferd routing` needs the admin scope on a server with keys: it
    sends $INFERD_API_KEY as a Bearer token."""
    import os

    def routing(key):
        env = {k: v for k, v in os.environ.items() if k != "INFERD_API_KEY"}
        if key is not None:
            env["INFERD_API_KEY"] = key
        return subprocess.run([str(INFERD_BIN), "routing", "get", "simple", "--url", secured.url],
                              capture_output=True, text=True, timeout=30, env=env)

    r = routing(None)
    assert r.returncode == 1 and "missing API key" in r.stderr, r
    r = routing(keys["reader"][0])
    assert r.returncode == 1 and "lacks scope 'admin'" in r.stderr, r
    r = routing(keys["admin"][0])
    assert r.returncode == 0, r
    assert json.loads(r.stdout)["model"] == "simple"
    assert keys["admin"][0] not in r.stdout + r.stderr
    r = routing("a\r\nX-Injected: 1")
    assert r.returncode == 2 and "INFERD_API_KEY" in r.stderr, r


def test_open_health_and_metrics(secured):
    assert get(secured, "/v2/health/live").status_code == 200
    assert get(secured, "/v2/health/ready").status_code == 200
    r = requests.get(secured.metrics_url, timeout=10)
    assert r.status_code == 200
    scrape = prom_parse(r.text)
    assert scrape.types["inferd_auth_refusals_total"] == "counter"
    assert scrape.get("inferd_auth_refusals_total", reason="missing") >= 1
    # REST infer refusals by status: a call without a key is "unauthenticated"
    before = scrape.get("inferd_rejected_requests_total", reason="unauthenticated")
    assert post(secured, "/v2/models/simple/infer", SIMPLE_BODY).status_code == 401
    after = prom_parse(requests.get(secured.metrics_url, timeout=10).text)
    assert after.get("inferd_rejected_requests_total", reason="unauthenticated") == before + 1
    # the dashboard is not open by default
    r = get(secured, "/dashboard")
    assert_error(r.status_code, r.text, 401)


# ---------------------------------------------------------------------------
# gRPC


def test_grpc_codes(secured, keys, pbs):
    pb = pbs[0]
    c = grpc_client(secured, pbs)
    try:
        infer = c.unary("ModelInfer")
        code, details = rpc_code(infer, simple_request(pb), timeout=10)
        assert code == grpc.StatusCode.UNAUTHENTICATED and details == "missing API key"
        code, details = rpc_code(infer, simple_request(pb), timeout=10,
                                 metadata=[("authorization", "Bearer " + new_key()[0])])
        assert code == grpc.StatusCode.UNAUTHENTICATED and details == "invalid API key"
        code, details = rpc_code(infer, simple_request(pb), timeout=10,
                                 metadata=[("x-api-key", keys["digits-only"][0])])
        assert code == grpc.StatusCode.PERMISSION_DENIED
        assert "lacks scope 'infer' for model 'simple'" in details
        infer(simple_request(pb, "digits"), timeout=10,
              metadata=[("x-api-key", keys["digits-only"][0])])
        infer(simple_request(pb), timeout=10,
              metadata=[("authorization", "Bearer " + keys["infer-all"][0])])

        unload = c.unary("RepositoryModelUnload")
        load = c.unary("RepositoryModelLoad")
        req = pb.RepositoryModelUnloadRequest(model_name="strings")
        code, _ = rpc_code(unload, req, timeout=10)
        assert code == grpc.StatusCode.UNAUTHENTICATED
        code, details = rpc_code(unload, req, timeout=10,
                                 metadata=[("x-api-key", keys["reader"][0])])
        assert code == grpc.StatusCode.PERMISSION_DENIED
        assert details == "API key of tenant 'reader' lacks scope 'admin'"
        admin = [("authorization", "Bearer " + keys["admin"][0])]
        unload(req, timeout=30, metadata=admin)
        load(pb.RepositoryModelLoadRequest(model_name="strings"), timeout=30, metadata=admin)

        # an unknown method needs read, so a client without a key learns nothing
        code, _ = rpc_code(c.raw(SERVICE_PATH + "NoSuchMethod"), b"", timeout=10)
        assert code == grpc.StatusCode.UNAUTHENTICATED
        code, _ = rpc_code(c.raw(SERVICE_PATH + "NoSuchMethod"), b"", timeout=10,
                           metadata=[("x-api-key", keys["reader"][0])])
        assert code == grpc.StatusCode.UNIMPLEMENTED
        # health is open; metadata is not
        c.call("ServerLive")
        assert c.health_check() == 1
        code, _ = rpc_code(c.call, "ServerMetadata")
        assert code == grpc.StatusCode.UNAUTHENTICATED
        meta = c.unary("ModelMetadata")
        meta(pb.ModelMetadataRequest(name="simple"), timeout=10,
             metadata=[("x-api-key", keys["reader"][0])])
        # a stream without a key ends at once
        stream = c.stream_infer()
        code, _ = rpc_code(lambda: list(stream(iter([simple_request(pb)]), timeout=10)))
        assert code == grpc.StatusCode.UNAUTHENTICATED
        # with a key, each request is checked for its model
        answers = list(stream(iter([simple_request(pb, "digits"), simple_request(pb)]),
                              timeout=10, metadata=[("x-api-key", keys["digits-only"][0])]))
        by_model = {a.infer_response.model_name: a.error_message for a in answers}
        assert by_model["digits"] == ""
        assert "lacks scope 'infer' for model 'simple'" in by_model["simple"]
    finally:
        c.close()


# ---------------------------------------------------------------------------
# what is logged


def test_tenant_in_access_log_and_no_secret_anywhere(secured, keys):
    r = post(secured, "/v2/models/digits/infer", DIGITS_BODY, bearer(keys["digits-only"][0]))
    assert r.status_code == 200
    # What the lines must show (each I/O thread writes its lines in turn).
    wanted = {
        "an infer line with its tenant": lambda l: (
            l["endpoint"] == "/v2/models/digits/infer" and l.get("tenant") == "digits-only"
            and l["status"] == 200),
        "a 403 with its tenant": lambda l: l.get("tenant") == "digits-only" and l["status"] == 403,
        "a gRPC call with its tenant": lambda l: (
            l.get("tenant") == "reader" and l["protocol"] == "grpc"),
    }
    deadline = time.monotonic() + WAIT
    while True:
        lines = [json.loads(l) for l in secured.access_log.read_text().splitlines() if l]
        missing = [w for w, f in wanted.items() if not any(f(l) for l in lines)]
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not missing, lines[-5:]
    # a 401 has no tenant
    assert all("tenant" not in l for l in lines if l["status"] == 401)
    texts = [secured.stderr(), secured.access_log.read_text(),
             requests.get(secured.metrics_url, timeout=10).text] + secured.bodies
    for name, (key, h) in keys.items():
        for t in texts:
            assert key not in t, name
            assert h not in t and h.split("$")[2] not in t, name


# ---------------------------------------------------------------------------
# metrics that need a key, and reloads


def test_metrics_port_needs_read_when_not_open(server_factory, tmp_path):
    (reader, rh), (inferer, ih) = new_key(), new_key()
    config = tmp_path / "inferd.yaml"
    config.write_text(auth_yaml([("reader", [rh], ["read"]), ("inferer", [ih], ["infer"])],
                                open_=["health"]))
    srv = server_factory.start("--config", str(config))
    assert "open without a key: health" in srv.stderr()
    r = requests.get(srv.metrics_url, timeout=10)
    assert_error(r.status_code, r.text, 401)
    assert r.headers["WWW-Authenticate"] == 'Bearer realm="inferd"'
    r = requests.get(srv.metrics_url, headers=bearer(inferer), timeout=10)
    assert_error(r.status_code, r.text, 403)
    r = requests.get(srv.metrics_url, headers={"x-api-key": reader}, timeout=10)
    assert r.status_code == 200
    assert prom_parse(r.text).get("inferd_auth_refusals_total", reason="scope") == 1


def test_sighup_reload_removes_a_key(server_factory, tmp_path):
    (ka, ha), (kb, hb) = new_key(), new_key()
    config = tmp_path / "inferd.yaml"
    config.write_text(auth_yaml([("team-a", [ha], ["infer"]), ("team-b", [hb], ["infer"])]))
    srv = server_factory.start("--config", str(config))
    for k in (ka, kb):
        assert requests.post(srv.url + "/v2/models/simple/infer", data=SIMPLE_BODY,
                             headers=bearer(k), timeout=10).status_code == 200
    config.write_text(auth_yaml([("team-b", [hb], ["infer"])]))
    srv.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + WAIT
    while "auth: 1 tenant, 1 key" not in srv.stderr():
        assert time.monotonic() < deadline, srv.stderr()
        time.sleep(0.05)
    r = requests.post(srv.url + "/v2/models/simple/infer", data=SIMPLE_BODY, headers=bearer(ka),
                      timeout=10)
    assert_error(r.status_code, r.text, 401)
    assert r.json() == {"error": "invalid API key"}
    assert requests.post(srv.url + "/v2/models/simple/infer", data=SIMPLE_BODY,
                         headers=bearer(kb), timeout=10).status_code == 200
    # A file with a key pasted in place of its hash: the reload fails, the
    # running configuration stays, and the key is not in the log.
    config.write_text(auth_yaml([("team-b", [hb], ["infer"]), ("team-a", [ka], ["infer"])]))
    srv.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + WAIT
    while "reload of %s failed" % config not in srv.stderr():
        assert time.monotonic() < deadline, srv.stderr()
        time.sleep(0.05)
    assert "auth.tenants[1].keys[0]: this looks like a key itself" in srv.stderr()
    assert requests.post(srv.url + "/v2/models/simple/infer", data=SIMPLE_BODY,
                         headers=bearer(kb), timeout=10).status_code == 200
    assert requests.post(srv.url + "/v2/models/simple/infer", data=SIMPLE_BODY,
                         headers=bearer(ka), timeout=10).status_code == 401
    assert ka not in srv.stderr() and ha not in srv.stderr() and hb not in srv.stderr()


def test_bad_section_refused_without_quoting_secrets(tmp_path):
    key, h = new_key()
    cases = [
        # a key pasted where its hash belongs
        (auth_yaml([("team-a", [key], ["read"])]), "auth.tenants[0].keys[0]: this looks like a key"),
        # a hash listed twice
        (auth_yaml([("a", [h], ["read"]), ("b", [h], ["read"])]),
         "auth.tenants[1].keys[0]: the same key hash is already listed"),
        (auth_yaml([("team-a", [h], ["read", "write"])]), "auth.tenants[0].scopes[1]: expected"),
        (auth_yaml([("team-a", [h], ["read"])], open_=["admin"]), "auth.open[0]: expected"),
        (auth_yaml([("team-a", [h], ["read"])]).replace("  tenants:", "  tenant:"),
         "auth.tenant: unknown key"),
    ]
    for text, message in cases:
        config = tmp_path / "inferd.yaml"
        config.write_text(text)
        r = subprocess.run([str(INFERD_BIN), "serve", "--check-config", str(config)],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 2, r
        assert "%s: %s" % (config, message) in r.stderr, r.stderr
        assert key not in r.stderr + r.stdout and h.split("$")[2] not in r.stderr + r.stdout


def test_tenant_reaches_rate_limits(server_factory, tmp_path):
    """The auth stage runs before the rate limits and names the tenant
    they match: team-a's own bucket (burst 1, one token a minute) refuses
    its second request, team-b is not limited, and a refused key takes no
    token."""
    (ka, ha), (kb, hb) = new_key(), new_key()
    config = tmp_path / "inferd.yaml"
    config.write_text(auth_yaml([("team-a", [ha], ["infer"]), ("team-b", [hb], ["infer"])]) +
                      "rate-limits:\n  - tenant: team-a\n    rate: 0.017\n    burst: 1\n")
    srv = server_factory.start("--config", str(config))

    def infer(headers):
        return requests.post(srv.url + "/v2/models/simple/infer", data=SIMPLE_BODY,
                             headers=headers, timeout=10)

    for _ in range(3):
        assert infer({}).status_code == 401
        assert infer(bearer(new_key()[0])).status_code == 401
    assert infer(bearer(ka)).status_code == 200
    r = infer(bearer(ka))
    assert_error(r.status_code, r.text, 429)
    for _ in range(3):
        assert infer(bearer(kb)).status_code == 200


def test_tenant_span_attribute_and_no_key_in_spans(server_factory, tmp_path):
    """A traced request's server span carries inferd.tenant; no span
    attribute holds the key or its hash."""
    from test_tracing import Collector, attrs
    collector = Collector()
    try:
        key, h = new_key()
        config = tmp_path / "inferd.yaml"
        config.write_text(auth_yaml([("team-a", [h], ["infer"])]))
        srv = server_factory.start("--config", str(config), "--otlp-endpoint", collector.endpoint,
                                   "--otlp-interval-ms", "100", "--trace-rate", "1")
        r = requests.post(srv.url + "/v2/models/simple/infer", data=SIMPLE_BODY,
                          headers=bearer(key), timeout=10)
        assert r.status_code == 200
        spans = collector.wait_for(lambda s: any(
            attrs(x).get("inferd.tenant") == {"stringValue": "team-a"} for x in s))
        text = json.dumps(collector.posts)
        assert key not in text and h not in text
        assert all(x["name"] != "POST /v2/models/simple/infer" or "inferd.tenant" in attrs(x)
                   for x in spans if x["kind"] == 2)
    finally:
        collector.close()


def test_keys_usage():
    r = subprocess.run([str(INFERD_BIN), "keys"], capture_output=True, text=True)
    assert r.returncode == 2 and "usage: inferd keys new | hash" in r.stderr
    r = subprocess.run([str(INFERD_BIN), "keys", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "usage: inferd keys new | hash" in r.stdout
    r = subprocess.run([str(INFERD_BIN), "--help"], capture_output=True, text=True)
    assert "keys         make an API key" in r.stdout
    # a key longer than 256 characters, and an empty line
    for text in ("k" * 257 + "\n", "\n", ""):
        r = subprocess.run([str(INFERD_BIN), "keys", "hash"], input=text, capture_output=True,
                           text=True)
        assert r.returncode == 2 and r.stdout == "", (text[:10], r)


def test_each_tenant_its_own_bucket(server_factory, tmp_path):
    """A `tenant: "*"` rule gives every tenant a bucket of its own (burst 2,
    one token a minute): team-a spending all of its tokens, and more, takes
    nothing from team-b, which still gets its 2; then both are refused with
    their own RateLimit-* state."""
    (ka, ha), (kb, hb) = new_key(), new_key()
    config = tmp_path / "inferd.yaml"
    config.write_text(auth_yaml([("team-a", [ha], ["infer"]), ("team-b", [hb], ["infer"])]) +
                      'rate-limits:\n  - tenant: "*"\n    rate: 0.017\n    burst: 2\n')
    srv = server_factory.start("--config", str(config))

    def infer(key):
        return requests.post(srv.url + "/v2/models/simple/infer", data=SIMPLE_BODY,
                             headers=bearer(key), timeout=10)

    assert [infer(ka).status_code for _ in range(5)] == [200, 200, 429, 429, 429]
    assert [infer(kb).status_code for _ in range(3)] == [200, 200, 429]
    r = infer(kb)
    assert r.json()["error"] == "rate limit of tenant team-b exceeded (0.017/s, burst 2)", r.text
    assert (r.headers["RateLimit-Limit"], r.headers["RateLimit-Remaining"]) == ("2", "0")


@pytest.mark.parametrize("rules,message", [
    ("  - tenant: team-c\n    rate: 1\n",
     "rate-limits[0].tenant: 'team-c' is not a tenant of the auth section"),
    ('  - tenant: "*"\n    rate: 1\n',
     'rate-limits[0].tenant: "*" needs tenants, and the auth section has none'),
])
def test_rate_limit_tenants_must_exist(tmp_path, rules, message):
    """A rule naming a tenant the auth section does not have would never
    match: the file is refused, at --check-config and at a SIGHUP alike."""
    _, h = new_key()
    tenants = [("team-a", [h], ["infer"])] if "team-c" in rules else []
    config = tmp_path / "inferd.yaml"
    config.write_text((auth_yaml(tenants) if tenants else "") + "rate-limits:\n" + rules)
    r = subprocess.run([str(INFERD_BIN), "serve", "--check-config", str(config)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r
    assert message in r.stderr, r.stderr
