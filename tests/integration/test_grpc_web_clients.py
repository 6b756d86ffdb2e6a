"""gRPC-Web with independent clients (docs/protocols.md):
  - Node.js with Connect's gRPC-Web transport (@connectrpc/connect-node, a
    maintained gRPC-Web implementation from the npm registry) and message
    classes protoc-gen-es generates here from proto/grpc_service.proto
    (tests/node/grpc_web_client.mjs), over HTTP/1.1 and HTTP/2: unary calls
    on `simple` and `digits`, ServerLive, ModelMetadata, the server stream
    of ModelStreamInfer on `kjv` (token by token), NOT_FOUND and
    DEADLINE_EXCEEDED; every message equal to native gRPC's (Debian's
    python3-grpcio) for the same request.
  - headless Chromium: a page (tests/integration/grpc_web_page.html) served
    by a small HTTP server of the test on another origin calls ModelInfer
    with fetch(), so the browser's CORS checks apply, and shows the
    result; the screenshot is saved as
    tests/integration/artifacts/grpc_web_page.png (git-ignored). The same
    page with its origin not allowed is blocked by the browser.
The text form (application/grpc-web-text) is checked by hand in
test_grpc_web.py: Connect's transport sends binary only."""
import base64
import functools
import http.server
import json
import subprocess
import threading
from pathlib import Path

import pytest

from cdp import CHROMIUM, Browser
from conftest import MAIN_MODELS, REPO_ROOT, free_port, stall_repo
from grpc_client import SERVICE, Client, generate
from test_generate_clients import NODE, NODE_MODULES, NodeRunner

pytestmark = pytest.mark.skipif(NODE is None, reason="node (Node.js) is not on PATH")

KJV = REPO_ROOT / "models" / "kjv"
HERE = Path(__file__).resolve().parent
ARTIFACTS = HERE / "artifacts"
WAIT = 60


@pytest.fixture(scope="module")
def pbs(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("proto_py_web_clients"))


@pytest.fixture(scope="module")
def page_port():
    return free_port()


@pytest.fixture(scope="module")
def srv(module_server_factory, page_port):
    return module_server_factory.start(
        "--cors-allow-origin", "http://127.0.0.1:%d" % page_port,
        models={"simple": MAIN_MODELS["simple"], "digits": MAIN_MODELS["digits"], "kjv": KJV})


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    if not (NODE_MODULES / "@connectrpc" / "connect-node").is_dir():
        pytest.fail("%s has no @connectrpc/connect-node: run scripts/deps.sh" % NODE_MODULES)
    runner = NodeRunner(tmp_path_factory.mktemp("node_web"))
    gen = runner.workdir / "gen"
    gen.mkdir()
    subprocess.run(["protoc", "--plugin=protoc-gen-es=%s" % (NODE_MODULES / ".bin" / "protoc-gen-es"),
                    "--es_out=%s" % gen, "--es_opt=target=js", "-I", str(REPO_ROOT / "proto"),
                    str(REPO_ROOT / "proto" / "grpc_service.proto")], check=True)
    runner.gen = gen
    return runner


@pytest.fixture
def stall(server_factory, tmp_path):
    """A model that runs 1.5 s, new for each test: with no run measured yet
    the queue admits a request whose deadline then passes in the queue
    (DEADLINE_EXCEEDED; with a measured run it would be refused at once)."""
    return server_factory.start(repository=stall_repo(tmp_path, 1500000))


def native_unary(srv, pbs, method, request_bytes):
    pb, hpb = pbs
    c = Client(pb, hpb, "127.0.0.1:%d" % srv.grpc_port)
    try:
        req_cls, _ = c.rpcs[method]
        return c.unary(method)(req_cls.FromString(request_bytes), timeout=WAIT)
    finally:
        c.close()


def simple_request(pb, model, id):
    req = pb.ModelInferRequest(model_name=model, id=id)
    for k, name in enumerate(("INPUT0", "INPUT1")):
        t = req.inputs.add(name=name, datatype="INT32", shape=[1, 16])
        t.contents.int_contents.extend(i * (k + 1) for i in range(16))
    return req


def digits_request(pb):
    req = pb.ModelInferRequest(model_name="digits")
    t = req.inputs.add(name="pixels", datatype="FP32", shape=[1, 64])
    t.contents.fp32_contents.extend(float(i % 16) for i in range(64))
    return req


def messages(result, cls):
    assert "error" not in result, result
    return [cls.FromString(base64.b64decode(m)) for m in result["messages"]]


@pytest.mark.parametrize("http", ["1.1", "2"])
def test_connect_grpc_web_transport(srv, stall, pbs, node, http):
    pb, hpb = pbs
    out = node("grpc_web_client.mjs", ["--base-url", srv.url, "--http", http, "--gen",
                                       str(node.gen), "--stall-url", stall.url], timeout=120)
    c = Client(pb, hpb, "127.0.0.1:%d" % srv.grpc_port)
    try:
        assert messages(out["serverLive"], pb.ServerLiveResponse) == [
            c.unary("ServerLive")(pb.ServerLiveRequest(), timeout=WAIT)]
        assert messages(out["modelMetadata"], pb.ModelMetadataResponse) == [
            c.unary("ModelMetadata")(pb.ModelMetadataRequest(name="simple"), timeout=WAIT)]
        assert messages(out["simple"], pb.ModelInferResponse) == [
            c.infer(simple_request(pb, "simple", "node-1"), timeout=WAIT)]
        header = out["simple"]["header"]
        assert header["content-type"] == "application/grpc-web+proto"
        assert header["x-inferd-model-version"] == "1" and len(header["x-request-id"]) == 32
        assert messages(out["digits"], pb.ModelInferResponse) == [
            c.infer(digits_request(pb), timeout=WAIT)]
        assert out["notFound"]["error"]["name"] == "NotFound"
        assert "no-such-model" in out["notFound"]["error"]["message"]
        assert out["deadline"]["error"]["name"] == "DeadlineExceeded", out["deadline"]
        assert out["deadlineFirst"] == {"ok": True}
        if http == "2":
            got = messages(out["stream"], pb.ModelStreamInferResponse)
            req = pb.ModelInferRequest(model_name="kjv", id="node-s1")
            for name, dt, field, value in (("text_input", "BYTES", "bytes_contents", b"In the beginning"),
                                           ("max_tokens", "INT32", "int_contents", 12),
                                           ("temperature", "FP32", "fp32_contents", 0.0)):
                t = req.inputs.add(name=name, datatype=dt, shape=[1])
                getattr(t.contents, field).append(value)
            ref = list(c.stream_infer()(iter([req]), timeout=WAIT))
            assert got == ref and len(got) >= 12  # one response per token
            arrivals = out["stream"]["arrivals"]
            assert arrivals == sorted(arrivals)
        else:
            assert "stream" not in out  # bidirectional: over HTTP/2 only in Connect
    finally:
        c.close()


# ---- headless Chromium --------------------------------------------------------------


class PageServer:
    """The page's origin: http://127.0.0.1:<port>/ serving this directory's
    grpc_web_page.html (and nothing of inferd's)."""

    def __init__(self, port):
        handler = functools.partial(_QuietHandler, directory=str(HERE))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = "http://127.0.0.1:%d/grpc_web_page.html" % port

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def page(page_port):
    p = PageServer(page_port)
    yield p
    p.close()


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium not installed: %s" % CHROMIUM)
    b = Browser(width=900, height=500)
    yield b
    b.close()


def load(browser, page, server_url):
    browser.navigate("about:blank")
    assert browser.wait_until("location.href === 'about:blank'")
    browser.navigate(page.url + "?server=" + server_url)
    assert browser.wait_until("document.body && document.body.dataset.done === '1'", timeout=WAIT)


def test_chromium_page_calls_model_infer(srv, page, browser):
    load(browser, page, srv.url)
    assert browser.evaluate("document.body.dataset.error || ''") == ""
    assert browser.evaluate("document.body.dataset.status") == "0"
    rows = browser.evaluate("JSON.stringify([...document.querySelectorAll('tr[data-name]')]"
                            ".map(r => [r.dataset.name, JSON.parse(r.dataset.values)]))")
    got = dict(json.loads(rows))
    a, b = list(range(16)), [2] * 16
    assert got == {"OUTPUT0": [x + y for x, y in zip(a, b)],
                   "OUTPUT1": [x - y for x, y in zip(a, b)]}
    status = browser.evaluate("document.getElementById('status').textContent")
    assert "x-request-id " in status and "model version 1" in status  # exposed headers
    ARTIFACTS.mkdir(exist_ok=True)
    browser.screenshot(str(ARTIFACTS / "grpc_web_page.png"))
    assert (ARTIFACTS / "grpc_web_page.png").stat().st_size > 1000


def test_chromium_blocks_a_page_whose_origin_is_not_allowed(server_factory, page, browser):
    other = server_factory.start("--cors-allow-origin", "http://elsewhere.example",
                                 models={"simple": MAIN_MODELS["simple"]})
    load(browser, page, other.url)
    assert "Failed to fetch" in browser.evaluate("document.body.dataset.error || ''")
