"""HTTP/3 (--http3): the REST API over QUIC, checked with an independent
client, headless Chromium forced onto QUIC for the server's origin
(--origin-to-force-quic-on; the test certificate is trusted by its SPKI
hash). Every answer must come over h3 (the Resource Timing entry's
nextHopProtocol) and be byte-for-byte the HTTP/1.1 answer; the access log
says protocol h3. Also: Alt-Svc on TLS answers, SSE over HTTP/3, the body
limit, the certificate reloaded on SIGHUP, and the flags' rules.

The certificates are made with the openssl CLI (P-256 keys, so both
OpenSSL and GnuTLS load them)."""
import base64
import hashlib
import json
import shutil
import signal
import subprocess
import time
import warnings

import pytest
import requests

from cdp import Browser
from conftest import INFERD_BIN, MAIN_MODELS, REPO_ROOT, make_repository
from test_decoupled import PLUGIN, REPEAT_CONFIG

SIMPLE_REQUEST = {"inputs": [
    {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
    {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}]}
DIGITS_REQUEST = (REPO_ROOT / "models" / "digits" / "sample.json").read_bytes()


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, capture_output=True)


def make_cert(d, name):
    """A self-signed P-256 certificate for 127.0.0.1; returns the base64
    SHA-256 of its SubjectPublicKeyInfo (what Chromium pins)."""
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", name + ".key", "-out", name + ".pem", "-days", "2",
            "-subj", "/CN=inferd h3 " + name,
            "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", cwd=d)
    der = subprocess.run(["openssl", "x509", "-in", name + ".pem", "-pubkey", "-noout"],
                         cwd=d, check=True, capture_output=True).stdout
    spki = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=der,
                          check=True, capture_output=True).stdout
    return base64.b64encode(hashlib.sha256(spki).digest()).decode()


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("h3pki")
    return d, {name: make_cert(d, name) for name in ("one", "two")}


def repo_with_repeat(tmp_path):
    root = make_repository(tmp_path / "models", {"simple": MAIN_MODELS["simple"],
                                                 "digits": MAIN_MODELS["digits"]})
    mdir = root / "repeat"
    (mdir / "1").mkdir(parents=True)
    (mdir / "1" / "model.onnx").write_bytes(b"")
    (mdir / "config.pbtxt").write_text(REPEAT_CONFIG)
    shutil.copy(PLUGIN, mdir / PLUGIN.name)
    return root


def start_h3(factory, pki, tmp_path, *flags, repository=None):
    d, _ = pki
    shutil.copy(d / "one.pem", tmp_path / "cert.pem")
    shutil.copy(d / "one.key", tmp_path / "key.pem")
    srv = factory.start("--tls-cert", str(tmp_path / "cert.pem"), "--tls-key",
                        str(tmp_path / "key.pem"), "--http3", *flags,
                        repository=repository, wait=False)
    deadline = time.monotonic() + 60
    while "ready:" not in srv.stderr():
        assert srv.proc.poll() is None, srv.stderr()
        assert time.monotonic() < deadline, srv.stderr()
        time.sleep(0.05)
    return srv


def quic_browser(port, spki):
    return Browser(extra_args=["--enable-quic", "--origin-to-force-quic-on=127.0.0.1:%d" % port,
                               "--ignore-certificate-errors-spki-list=" + spki])


FETCH_JS = """(async () => {
  const url = new URL(%s, location.origin).href;
  const init = %s;
  const r = await fetch(url, init);
  const bytes = new Uint8Array(await r.arrayBuffer());
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  const entries = performance.getEntriesByName(url);
  const headers = {};
  r.headers.forEach((v, k) => { headers[k] = v; });
  performance.clearResourceTimings();
  return JSON.stringify({status: r.status, body: btoa(bin), headers,
                         proto: entries.length ? entries[entries.length - 1].nextHopProtocol : ""});
})()"""


def h3_fetch(browser, path, method="GET", body=None):
    """fetch() in the page; returns (status, body bytes, headers, protocol)."""
    init = {"method": method, "cache": "no-store"}
    if body is not None:
        init["body"] = body.decode() if isinstance(body, bytes) else body
        init["headers"] = {"Content-Type": "application/json"}
    r = browser.call("Runtime.evaluate", expression=FETCH_JS % (json.dumps(path), json.dumps(init)),
                     awaitPromise=True, returnByValue=True)
    assert "exceptionDetails" not in r, r
    v = json.loads(r["result"]["value"])
    return v["status"], base64.b64decode(v["body"]), v["headers"], v["proto"]


def open_origin(browser, port):
    """Loads a page of the origin (over QUIC) so that fetch() is same-origin."""
    browser.navigate("https://127.0.0.1:%d/v2/health/ready" % port)
    assert browser.wait_until("location.href.startsWith('https://127.0.0.1')"
                              " && document.readyState === 'complete'"), "page did not load"


def h1(srv, path, method="GET", body=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unverified HTTPS: the test's own certificate
        r = requests.request(method, "https://127.0.0.1:%d%s" % (srv.port, path), data=body,
                             headers={"Content-Type": "application/json"} if body else {},
                             verify=False, timeout=30)
    return r


def access_log_lines(path):
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]


@pytest.fixture(scope="module")
def h3srv(module_server_factory, pki, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("h3srv")
    log = tmp / "access.log"
    srv = start_h3(module_server_factory, pki, tmp, "--access-log", str(log),
                   "--sse-keepalive-ms", "60000", repository=repo_with_repeat(tmp))
    srv.access_log = log
    return srv


@pytest.fixture(scope="module")
def browser(h3srv, pki):
    b = quic_browser(h3srv.port, pki[1]["one"])
    open_origin(b, h3srv.port)
    yield b
    b.close()


# ---- the same answers as HTTP/1.1 ----

@pytest.mark.parametrize("path", ["/v2/health/ready", "/v2/health/live", "/v2",
                                  "/v2/models/simple", "/v2/models/digits",
                                  "/v2/models/simple/config"])
def test_get_answers_as_http1(h3srv, browser, path):
    status, body, headers, proto = h3_fetch(browser, path)
    assert proto == "h3"
    ref = h1(h3srv, path)
    assert status == ref.status_code
    assert body == ref.content
    assert headers.get("content-type") == ref.headers.get("Content-Type")


@pytest.mark.parametrize("model,request_body", [
    ("simple", json.dumps(SIMPLE_REQUEST).encode()), ("digits", DIGITS_REQUEST)])
def test_infer_answers_as_http1(h3srv, browser, model, request_body):
    path = "/v2/models/%s/infer" % model
    status, body, headers, proto = h3_fetch(browser, path, "POST", request_body)
    assert proto == "h3"
    ref = h1(h3srv, path, "POST", request_body)
    assert status == ref.status_code == 200
    assert body == ref.content
    assert headers["content-length"] == str(len(body))
    out = json.loads(body)["outputs"]
    if model == "simple":
        assert out[0]["data"] == [i + 1 for i in range(16)]
    else:
        assert len(out) >= 1


def test_errors_answer_as_http1(h3srv, browser):
    for path, method, body in [("/v2/models/nope", "GET", None),
                               ("/v2/models/simple/infer", "POST", b"{not json")]:
        status, got, _, proto = h3_fetch(browser, path, method, body)
        ref = h1(h3srv, path, method, body)
        assert proto == "h3" and status == ref.status_code and status >= 400
        assert json.loads(got)["error"] == json.loads(ref.content)["error"]


def test_sse_streams_over_http3(h3srv, browser):
    path = "/v2/models/repeat/generate_stream"
    req = json.dumps({"IN": [4, 5, 6], "DELAY": [20, 20, 20]}).encode()
    status, body, headers, proto = h3_fetch(browser, path, "POST", req)
    assert proto == "h3" and status == 200
    assert headers["content-type"] == "text/event-stream; charset=utf-8"
    ref = h1(h3srv, path, "POST", req)
    assert body == ref.content
    events = [json.loads(l[len("data: "):]) for l in body.decode().splitlines()
              if l.startswith("data: ")]
    assert [e["OUT"] for e in events] == [4, 5, 6]


def test_access_log_says_h3(h3srv, browser):
    h3_fetch(browser, "/v2/models/simple/ready")
    deadline = time.monotonic() + 10
    while True:
        lines = [l for l in access_log_lines(h3srv.access_log)
                 if l["endpoint"] == "/v2/models/simple/ready"]
        if lines or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert lines and lines[-1]["protocol"] == "h3", lines
    infer = [l for l in access_log_lines(h3srv.access_log)
             if l["endpoint"] == "/v2/models/simple/infer"]
    assert {"h3", "http/1.1"} <= {l["protocol"] for l in infer}


def test_alt_svc_on_tls_answers(h3srv):
    r = h1(h3srv, "/v2/health/live")
    assert r.headers["Alt-Svc"] == 'h3=":%d"; ma=86400' % h3srv.port


def test_no_alt_svc_without_http3(server_factory, pki, tmp_path):
    d, _ = pki
    srv = server_factory.start("--tls-cert", str(d / "one.pem"), "--tls-key",
                               str(d / "one.key"), wait=False)
    deadline = time.monotonic() + 60
    while "ready:" not in srv.stderr():
        assert srv.proc.poll() is None and time.monotonic() < deadline, srv.stderr()
        time.sleep(0.05)
    assert "Alt-Svc" not in h1(srv, "/v2/health/live").headers


# ---- limits ----

def test_body_limit_over_http3(server_factory, pki, tmp_path):
    srv = start_h3(server_factory, pki, tmp_path, "--max-body-bytes", "1000")
    b = quic_browser(srv.port, pki[1]["one"])
    try:
        open_origin(b, srv.port)
        status, body, _, proto = h3_fetch(b, "/v2/models/simple/infer", "POST", b"x" * 5000)
        assert proto == "h3" and status == 413
        assert "1000" in json.loads(body)["error"]
        # The connection still serves.
        status, _, _, proto = h3_fetch(b, "/v2/health/ready")
        assert (status, proto) == (200, "h3")
    finally:
        b.close()


PARALLEL_JS = """(async () => {
  const t0 = performance.now();
  const body = JSON.stringify({IN: [1], DELAY: [%d]});
  const rs = await Promise.all(Array.from({length: %d}, () =>
      fetch("/v2/models/repeat/generate", {method: "POST", body, cache: "no-store"})
          .then(r => r.status)));
  return JSON.stringify({statuses: rs, ms: performance.now() - t0});
})()"""


def open_connections(srv):
    text = requests.get(srv.metrics_url, timeout=10).text
    return int(next(l.split()[1] for l in text.splitlines()
                    if l.startswith("inferd_open_connections ")))


def test_stream_limit_and_idle_timeout(server_factory, pki, tmp_path):
    """--h2-max-concurrent-streams 2 is the QUIC stream limit: of 6
    requests sent at once to a model that runs one at a time, never more
    than 2 are in the server, so none waits in its queue for more than
    about one run (with 128 streams the last would wait 5 runs). Then the
    idle connection is closed after --idle-timeout-secs (the open
    connections gauge drops to 0; Chromium alone would keep it 30 s)."""
    log = tmp_path / "access.log"
    srv = start_h3(server_factory, pki, tmp_path, "--h2-max-concurrent-streams", "2",
                   "--idle-timeout-secs", "2", "--access-log", str(log),
                   repository=repo_with_repeat(tmp_path))
    b = quic_browser(srv.port, pki[1]["one"])
    try:
        open_origin(b, srv.port)
        run_ms = 400
        r = b.call("Runtime.evaluate", expression=PARALLEL_JS % (run_ms, 6), awaitPromise=True,
                   returnByValue=True)
        v = json.loads(r["result"]["value"])
        assert v["statuses"] == [200] * 6
        assert v["ms"] >= 6 * run_ms * 0.9  # the model runs them one after the other
        deadline = time.monotonic() + 10
        while True:
            lines = [l for l in access_log_lines(log) if l["endpoint"] == "/v2/models/repeat/generate"]
            if len(lines) == 6 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert len(lines) == 6 and {l["protocol"] for l in lines} == {"h3"}
        assert max(l["queue_us"] for l in lines) < 2.5 * run_ms * 1000, lines
        assert open_connections(srv) >= 1
        b.navigate("about:blank")
        deadline = time.monotonic() + 10
        while open_connections(srv) > 0:
            assert time.monotonic() < deadline, "the idle QUIC connection is still open"
            time.sleep(0.2)
    finally:
        b.close()


# ---- certificates ----

def test_sighup_reloads_the_quic_certificate(server_factory, pki, tmp_path):
    """After SIGHUP a new connection gets the new certificate: a browser that
    trusts only the new one reaches the server over h3."""
    d, spkis = pki
    srv = start_h3(server_factory, pki, tmp_path)
    shutil.copy(d / "two.pem", tmp_path / "cert.pem")
    shutil.copy(d / "two.key", tmp_path / "key.pem")
    srv.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while "TLS certificate reloaded" not in srv.stderr():
        assert time.monotonic() < deadline, srv.stderr()
        time.sleep(0.05)
    assert "HTTP/3 too" in srv.stderr()
    b = quic_browser(srv.port, spkis["two"])
    try:
        open_origin(b, srv.port)
        status, _, _, proto = h3_fetch(b, "/v2/health/ready")
        assert (status, proto) == (200, "h3")
    finally:
        b.close()


# ---- flags ----

@pytest.mark.parametrize("flags,message", [
    (["--http3"], "--http3 needs --tls-cert and --tls-key"),
    (["--http3-0rtt"], "--http3-0rtt needs --http3"),
])
def test_flag_rules(flags, message):
    r = subprocess.run([str(INFERD_BIN), "serve", "--model-repository", "/nonexistent"] + flags,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert message in r.stderr


def test_http3_refuses_client_certificates(pki):
    d, _ = pki
    r = subprocess.run([str(INFERD_BIN), "serve", "--model-repository", "/nonexistent",
                        "--tls-cert", str(d / "one.pem"), "--tls-key", str(d / "one.key"),
                        "--tls-client-ca", str(d / "one.pem"), "--http3"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert "--http3 does not support client certificates" in r.stderr


def test_help_lists_the_flags():
    out = subprocess.run([str(INFERD_BIN), "serve", "--help"], capture_output=True, text=True,
                         timeout=30).stdout
    assert "--http3 " in out and "--http3-0rtt" in out
