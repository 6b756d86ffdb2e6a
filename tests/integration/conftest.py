"""Fixtures and helpers for the inferd integration suite.

The suite runs the real `build/inferd` binary (override with INFERD_BIN)
over the real ONNX Runtime. One session-scoped server serves a temporary
model repository that links every model the tests use; tests that need
other flags start their own servers through `server_factory`.

Run from the repo root:  /usr/bin/python3 -m pytest tests/integration
"""
import json
import struct
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
import requests

REPO_ROOT = Path(__file__).resolve().parents[2]
INFERD_BIN = Path(os.environ.get("INFERD_BIN", REPO_ROOT / "build" / "inferd")).absolute()

# Models served by the session server: name -> directory.
MAIN_MODELS = {name: REPO_ROOT / "models" / name for name in ("simple", "digits", "strings")}
IDENTITY_TYPES = ["bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16",
                  "int32", "int64", "fp16", "fp32", "fp64", "bytes"]
IDENTITY_MODELS = {"identity_" + t: REPO_ROOT / "tests" / "models" / ("identity_" + t)
                   for t in IDENTITY_TYPES}
ALL_MODELS = {**MAIN_MODELS, **IDENTITY_MODELS}

STARTUP_TIMEOUT = 60.0   # seconds until /v2/health/ready must answer 200
SHUTDOWN_TIMEOUT = 30.0  # seconds between SIGTERM and exit
# LeakSanitizer's suppressions for the integration suite; see the file. Every
# process the suite starts inherits them (harmless for a build without
# sanitizers), so no test has to pass them on.
LSAN_SUPP = Path(__file__).resolve().parents[1] / "lsan.supp"
os.environ.setdefault("LSAN_OPTIONS", "suppressions=%s:print_suppressions=0" % LSAN_SUPP)
def sanitized_binary():
    """True for an AddressSanitizer build. ASan keeps freed memory in its
    quarantine and serves malloc itself: RSS and glibc's heap figures say
    nothing about leaks there (LeakSanitizer checks those at exit)."""
    return b"__asan_init" in INFERD_BIN.read_bytes()


def usr1_stats(srv):
    """Sends SIGUSR1 to srv and returns the fields of the stats line it logs
    (infer_requests, allocations, rss_bytes, heap_in_use_bytes,
    heap_free_bytes) as {name: text}."""
    before = srv.stderr().count(" stats: ")
    srv.proc.send_signal(signal.SIGUSR1)
    deadline = time.time() + 10
    while srv.stderr().count(" stats: ") == before and time.time() < deadline:
        time.sleep(0.05)
    line = [l for l in srv.stderr().splitlines() if " stats: " in l][-1]
    return dict(kv.split("=", 1) for kv in line.split(" stats: ")[1].split())


SANITIZER_MARKERS = ("AddressSanitizer", "LeakSanitizer", "runtime error:")


def run_bench(*args, timeout=60):
    """`inferd bench ARGS` (each str()'d): the finished process (text mode),
    once its stderr is checked to hold no sanitizer report."""
    env = dict(os.environ)
    p = subprocess.run([str(INFERD_BIN), "bench"] + [str(a) for a in args], capture_output=True,
                       text=True, timeout=timeout, stdin=subprocess.DEVNULL, env=env)
    for marker in SANITIZER_MARKERS:
        assert marker not in p.stderr, "sanitizer report from bench %s:\n%s" % (args, p.stderr)
    return p


def run_bench_json(*args, timeout=60):
    """run_bench(*args, "--json"), which must exit 0: its report, parsed."""
    p = run_bench(*(list(args) + ["--json"]), timeout=timeout)
    assert p.returncode == 0, "exit %d\nstdout: %s\nstderr: %s" % (p.returncode, p.stdout, p.stderr)
    return json.loads(p.stdout)


# --------------------------------------------------------------------------
# Model repositories and server processes


_issued_ports = set()


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def _worker_slice(low, high):
    """The part of [low, high) that belongs to this pytest-xdist worker
    (gw0, gw1, ... of PYTEST_XDIST_WORKER_COUNT; the whole range when the
    suite runs in one process), so two workers never hand out one port."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if not worker.startswith("gw") or count <= 1:
        return low, high
    index = int(worker[2:]) % count
    span = (high - low) // count
    return low + index * span, low + (index + 1) * span


def free_port():
    """A port nobody listens on now, that this process has not handed out
    before, and (when the system's ephemeral range leaves room) below that
    range, so no client connection's local port can take it before the
    server binds it. bind(0) alone is not enough: it can return the same
    port twice in a row (a server once got one port for HTTP and metrics).
    Under pytest-xdist each worker draws from its own slice of the range."""
    low = _ephemeral_low()
    first, end = _worker_slice(10000, low)
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            if low > 11000:
                port = random.randrange(first, end)
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            else:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
        if port not in _issued_ports:
            _issued_ports.add(port)
            return port


def make_repository(root, models):
    """Create a repository at `root` whose entries are symlinks.

    `models` maps model name -> model directory (symlinked whole), or
    model name -> {version: model.onnx path} (a fresh directory with one
    symlinked model.onnx per version)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for name, src in models.items():
        if isinstance(src, dict):
            for version, onnx_file in src.items():
                vdir = root / name / str(version)
                vdir.mkdir(parents=True, exist_ok=True)
                (vdir / "model.onnx").symlink_to(Path(onnx_file).resolve())
        else:
            src = Path(src)
            if not (src / "1" / "model.onnx").exists():
                pytest.fail("model %s missing: %s/1/model.onnx (run models/build/*.py)"
                            % (name, src))
            (root / name).symlink_to(src.resolve())
    return root


STALL_PLUGIN = INFERD_BIN.parent / "libinferd_identity_stall.so"


def stall_config(max_batch_size=1, batching="", delay_us=300000, dtype="TYPE_INT32",
                 dims="4", extra=""):
    """identity_stall with one instance: IN -> OUT, each execute() sleeps delay_us."""
    return ('backend: "identity_stall"\n'
            'max_batch_size: %d\n'
            'input [ { name: "IN" data_type: %s dims: [ %s ] } ]\n'
            'output [ { name: "OUT" data_type: %s dims: [ %s ] } ]\n'
            'instance_group [ { count: 1 kind: KIND_CPU } ]\n'
            '%s\n'
            'parameters { key: "delay_us" value: { string_value: "%d" } }\n%s'
            % (max_batch_size, dtype, dims, dtype, dims, batching, delay_us, extra))


def add_stall_model(root, name, config):
    """root/name: a model of the example plugin with config.pbtxt `config`."""
    if not STALL_PLUGIN.exists():
        pytest.fail("example plugin not built: %s" % STALL_PLUGIN)
    mdir = root / name
    (mdir / "1").mkdir(parents=True)
    (mdir / "1" / "model.onnx").write_bytes(b"")  # a version; the plugin does not read it
    (mdir / "config.pbtxt").write_text(config)
    shutil.copy(STALL_PLUGIN, mdir / STALL_PLUGIN.name)


def stall_repo(tmp_path, delay_us):
    """A repository with model `echo` (INT32 [4] in and out) served by the
    example plugin, which stalls each execution for delay_us. Each execution
    (warm-up included) first appends a line to tmp_path/echo-started.log:
    see wait_stall_started."""
    plugin = INFERD_BIN.parent / "libinferd_identity_stall.so"
    if not plugin.exists():
        pytest.fail("example plugin not built: %s" % plugin)
    mdir = tmp_path / "models" / "echo"
    (mdir / "1").mkdir(parents=True)
    (mdir / "1" / "model.onnx").write_bytes(b"")
    (mdir / "config.pbtxt").write_text(
        'backend: "identity_stall"\nmax_batch_size: 8\n'
        'input [ { name: "IN" data_type: TYPE_INT32 dims: [ 4 ] } ]\n'
        'output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 4 ] } ]\n'
        'parameters { key: "delay_us" value: { string_value: "%d" } }\n'
        'parameters { key: "started_log" value: { string_value: "%s" } }\n'
        % (delay_us, tmp_path / "echo-started.log"))
    shutil.copy(plugin, mdir / plugin.name)
    return tmp_path / "models"


def stall_started(tmp_path):
    """How many executions of stall_repo's model have started so far."""
    try:
        return (tmp_path / "echo-started.log").read_text().count("\n")
    except FileNotFoundError:
        return 0


def wait_stall_started(tmp_path, count, timeout=30):
    """Waits until `count` executions of stall_repo's model have started
    (take the count before sending: stall_started(tmp_path) + n)."""
    deadline = time.monotonic() + timeout
    while stall_started(tmp_path) < count:
        if time.monotonic() > deadline:
            pytest.fail("%d executions started in %d s, expected %d"
                        % (stall_started(tmp_path), timeout, count))
        time.sleep(0.01)


def burst(n, fn):
    """Runs fn() in n threads released together; returns their results."""
    gate = threading.Barrier(n)
    out = [None] * n

    def run(i):
        gate.wait()
        out[i] = fn()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def wait_queued(srv, model, count, timeout=30):
    """Waits until `count` requests of `model` wait in its queue
    (nv_inference_pending_request_count)."""
    from prom import wait_for
    s = wait_for(srv, lambda s: s.get("nv_inference_pending_request_count", model=model) >= count,
                 timeout)
    got = s.get("nv_inference_pending_request_count", model=model)
    assert got >= count, "%d requests of %s queued after %d s, expected %d" % (
        got, model, timeout, count)


class Server:
    """One inferd process. stdout/stderr go to files so the pipes never block."""

    def __init__(self, args, workdir, cwd=None, cpus=None):
        self.args = list(args)
        self.cpus = cpus  # a set of CPU numbers: the process's affinity (taskset -c)
        self.workdir = Path(workdir)
        self.stdout_path = self.workdir / "stdout.log"
        self.stderr_path = self.workdir / "stderr.log"
        self.port = None
        self.grpc_port = None
        self.metrics_port = None
        self.proc = None
        self.cwd = cwd
        self.returncode = None

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    @property
    def metrics_url(self):
        return "http://127.0.0.1:%d/metrics" % self.metrics_port

    def start(self, port=None):
        if not INFERD_BIN.exists():
            pytest.fail("inferd binary not found: %s (build it or set INFERD_BIN)" % INFERD_BIN)
        self.port = port or free_port()
        self.returncode = None  # running again (stop_all stops it at the end)
        # Each server gets its own gRPC port so parallel servers never
        # collide on the default 8001 (a flag in args overrides it).
        self.grpc_port = free_port()
        # The same for the metrics port (default 8002).
        self.metrics_port = free_port()
        cmd = [str(INFERD_BIN), "serve", "--host", "127.0.0.1",
               "--http-port", str(self.port), "--grpc-port", str(self.grpc_port),
               "--metrics-port", str(self.metrics_port)] + self.args
        env = dict(os.environ)
        self._out = open(self.stdout_path, "wb")
        self._err = open(self.stderr_path, "wb")
        cpus = self.cpus
        self.proc = subprocess.Popen(
            cmd, stdout=self._out, stderr=self._err, stdin=subprocess.DEVNULL, cwd=self.cwd,
            env=env, preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
        self.cmd = cmd
        return self

    def stderr(self):
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_ready(self, timeout=STARTUP_TIMEOUT, path="/v2/health/ready"):
        """Poll `path` until it answers 200; fail with stderr if inferd exits."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            rc = self.proc.poll()
            if rc is not None:
                self.returncode = rc
                pytest.fail("inferd exited early with code %d\ncommand: %s\nstderr:\n%s"
                            % (rc, " ".join(self.cmd), self.stderr()))
            try:
                r = requests.get(self.url + path, timeout=2)
                if r.status_code == 200:
                    return self
                last = "HTTP %d %r" % (r.status_code, r.text[:200])
            except requests.RequestException as e:
                last = repr(e)
            time.sleep(0.05)
        self.kill()
        pytest.fail("inferd not ready after %.0f s (last: %s)\nstderr:\n%s"
                    % (timeout, last, self.stderr()))

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._close_files()

    def _close_files(self):
        for f in (getattr(self, "_out", None), getattr(self, "_err", None)):
            if f and not f.closed:
                f.close()

    def stop(self, sig=signal.SIGTERM, require_running=True):
        """Signal the server (if still running), wait for it and return a
        list of problems: no exit within the timeout, a non-zero exit code,
        a sanitizer report, or (with require_running) an earlier exit."""
        problems = []
        if self.proc is None:
            return problems
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=SHUTDOWN_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                problems.append("did not exit within %.0f s of %s"
                                % (SHUTDOWN_TIMEOUT, signal.Signals(sig).name))
        elif require_running:
            problems.append("had already exited before %s" % signal.Signals(sig).name)
        self._close_files()
        self.returncode = self.proc.returncode
        if self.returncode != 0 and not problems:
            problems.append("exit code %d after %s" % (self.returncode, signal.Signals(sig).name))
        err = self.stderr()
        for marker in SANITIZER_MARKERS:
            if marker in err:
                problems.append("stderr contains %r" % marker)
        if problems:
            problems = ["inferd (%s): %s" % (" ".join(self.cmd), p) for p in problems]
            problems.append("stderr:\n" + err[-20000:])
        return problems


class ServerFactory:
    """Starts servers with custom flags; stop_all() stops every one of them."""

    def __init__(self, tmpdir_factory):
        self._tmp = tmpdir_factory
        self.servers = []

    def repository(self, models=None):
        models = models if models is not None else {"simple": MAIN_MODELS["simple"]}
        return make_repository(Path(self._tmp.mktemp("repo")) / "models", models)

    def start(self, *flags, models=None, repository=None, wait=True, cwd=None, cpus=None):
        """Start `inferd serve` with `flags`; the repository is built from
        `models` (default: just simple) unless `repository` is given or
        flags already name one. `cpus` (a set of CPU numbers) restricts the
        process to those CPUs from its first instruction, like taskset -c."""
        flags = list(flags)
        if "--model-repository" not in flags and cwd is None:
            repo = repository or self.repository(models)
            flags = ["--model-repository", str(repo)] + flags
        srv = Server(flags, self._tmp.mktemp("server"), cwd=cwd, cpus=cpus)
        self.servers.append(srv)
        srv.start()
        if wait:
            srv.wait_ready()
        return srv

    def stop_all(self):
        problems = []
        for srv in self.servers:
            if srv.returncode is None:
                problems += srv.stop()
        self.servers = []
        return problems


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """The shared server with every model (main + identity_*)."""
    repo = make_repository(tmp_path_factory.mktemp("repo") / "models", ALL_MODELS)
    srv = Server(["--model-repository", str(repo)], tmp_path_factory.mktemp("server"))
    srv.start()
    srv.wait_ready()
    yield srv
    problems = srv.stop()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture
def server_factory(tmp_path_factory):
    factory = ServerFactory(tmp_path_factory)
    yield factory
    problems = factory.stop_all()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture(scope="module")
def module_server_factory(tmp_path_factory):
    factory = ServerFactory(tmp_path_factory)
    yield factory
    problems = factory.stop_all()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture
def etcd(tmp_path):
    """A real etcd member for this test (etcd_server.py), killed after it."""
    from etcd_server import Etcd  # etcd_server imports conftest
    e = Etcd(tmp_path)
    e.start()
    yield e
    e.kill()


@pytest.fixture
def base_url(server):
    return server.url


# --------------------------------------------------------------------------
# KServe v2 client helpers


def tensor(name, data, datatype, shape=None, parameters=None):
    """An input tensor dict; `data` may be a numpy array (shape taken from it)."""
    if shape is None:
        shape = list(getattr(data, "shape", [len(data)]))
    if hasattr(data, "tolist"):
        data = data.reshape(-1).tolist()
    t = {"name": name, "shape": list(shape), "datatype": datatype, "data": data}
    if parameters is not None:
        t["parameters"] = parameters
    return t


def infer_request(base_url, model, inputs, outputs=None, version=None, id=None,
                  parameters=None, body=None, timeout=30, **extra):
    """POST /v2/models/{model}[/versions/{version}]/infer; returns the Response.

    `outputs` is a list of names or of output dicts. `body`, if given, is sent
    verbatim (str/bytes) instead of the built request."""
    path = "/v2/models/%s" % model
    if version is not None:
        path += "/versions/%s" % version
    path += "/infer"
    if body is None:
        req = {"inputs": inputs}
        if id is not None:
            req["id"] = id
        if parameters is not None:
            req["parameters"] = parameters
        if outputs is not None:
            req["outputs"] = [o if isinstance(o, dict) else {"name": o} for o in outputs]
        req.update(extra)
        body = json.dumps(req)
    if isinstance(body, str):
        body = body.encode("utf-8")
    return requests.post(base_url + path, data=body, timeout=timeout,
                         headers={"Content-Type": "application/json"})


def bytes_infer_request(base_url, model, input_name, elements, batched=True, outputs=None,
                        timeout=30):
    """POST raw BYTES elements (images, sounds, texts: bytes or str) as one
    input with Triton's binary tensor extension (each element a 4-byte
    little-endian length and its bytes); shape [n, 1] when `batched`, else
    [n]. Outputs come back as JSON. Returns the Response."""
    elements = [e.encode("utf-8") if isinstance(e, str) else bytes(e) for e in elements]
    blob = b"".join(struct.pack("<I", len(e)) + e for e in elements)
    shape = [len(elements), 1] if batched else [len(elements)]
    req = {"inputs": [{"name": input_name, "shape": shape, "datatype": "BYTES",
                       "parameters": {"binary_data_size": len(blob)}}]}
    if outputs is not None:
        req["outputs"] = [o if isinstance(o, dict) else {"name": o} for o in outputs]
    head = json.dumps(req).encode("utf-8")
    return requests.post("%s/v2/models/%s/infer" % (base_url, model), data=head + blob,
                         timeout=timeout,
                         headers={"Content-Type": "application/octet-stream",
                                  "Inference-Header-Content-Length": str(len(head))})


@pytest.fixture
def infer(server):
    """infer(model, inputs, outputs=None, **kw) -> requests.Response on the shared server."""
    def _infer(model, inputs, outputs=None, **kw):
        return infer_request(server.url, model, inputs, outputs, **kw)
    return _infer


def _parse_int(s):
    # JSON "-0" denotes negative zero; Python's int() would drop the sign.
    return -0.0 if s == "-0" else int(s)


def ok_json(r):
    """Assert a 200 JSON response and return its body ("-0" decodes to -0.0)."""
    assert r.status_code == 200, "HTTP %d: %s" % (r.status_code, r.text[:2000])
    ctype = r.headers.get("Content-Type", "")
    assert ctype.split(";")[0].strip().lower() == "application/json", ctype
    return json.loads(r.content.decode("utf-8"), parse_int=_parse_int)


def assert_error(status, body, expected_status, content_type="application/json"):
    """Assert an error answer: the status and a JSON body {"error": "<non-empty>"}."""
    if isinstance(body, (bytes, bytearray)):
        body = body.decode("utf-8", errors="replace")
    assert status == expected_status, "expected %d, got %d: %s" % (expected_status, status, body[:2000])
    try:
        doc = json.loads(body)
    except ValueError:
        pytest.fail("error body is not JSON: %r" % body[:2000])
    assert isinstance(doc, dict), doc
    assert isinstance(doc.get("error"), str) and doc["error"].strip(), doc
    ctype = (content_type or "").split(";")[0].strip().lower()
    assert ctype == "application/json", "error Content-Type is %r" % content_type
    return doc["error"]


def check_self_contained_page(base_url, path):
    """A page served from the binary (/dashboard, /playground): HTML with
    no external assets (no src/href to another origin, no link or script
    files, no @import), not cached, HEAD answered, POST 405, subpaths 404.
    Returns the page's text."""
    r = requests.get(base_url + path)
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "text/html; charset=utf-8"
    assert r.headers["Cache-Control"] == "no-store"
    page = r.text
    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")
    assert not re.search(r'(src|href)\s*=\s*["\']?(https?:)?//', page)
    assert "<link" not in page and "<script src" not in page and "@import" not in page
    assert requests.head(base_url + path).status_code == 200
    assert_error_response(requests.post(base_url + path), 405)
    assert_error_response(requests.get(base_url + path + "/nope"), 404)
    return page


def assert_error_response(r, expected_status):
    """Like assert_error, for a requests.Response or a raw-socket Response."""
    if hasattr(r, "status_code"):
        return assert_error(r.status_code, r.text, expected_status, r.headers.get("Content-Type"))
    return assert_error(r.status, r.body, expected_status, r.header("content-type"))


# --------------------------------------------------------------------------
# Raw HTTP over sockets


def connect(port, timeout=10.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def raw_http(port, data, timeout=5.0):
    """Send `data` on a fresh connection and read until the server closes it
    (or `timeout` seconds pass without it closing). Returns the bytes read."""
    s = connect(port, timeout=timeout)
    chunks = []
    try:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may answer and close before reading everything
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            s.settimeout(left)
            try:
                b = s.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                break
            if not b:
                break
            chunks.append(b)
    finally:
        s.close()
    return b"".join(chunks)


class Response:
    def __init__(self, version, status, reason, headers, body):
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers  # list of (lower-case name, value)
        self.body = body

    def header(self, name, default=None):
        name = name.lower()
        for k, v in self.headers:
            if k == name:
                return v
        return default

    def header_tokens(self, name):
        """Comma-separated tokens of every field `name`, lower-cased."""
        out = []
        for k, v in self.headers:
            if k == name.lower():
                out += [t.strip().lower() for t in v.split(",") if t.strip()]
        return out

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return "<Response %d %r %r %r>" % (self.status, self.reason, self.headers, self.body[:300])


class HttpReader:
    """Minimal HTTP/1.1 response reader over a socket (for keep-alive and
    pipelining tests). Bodies: Content-Length, chunked, or none for 1xx/204/304."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""
        self.eof = False

    def _fill(self):
        if self.eof:
            return False
        try:
            b = self.sock.recv(65536)
        except ConnectionResetError:
            b = b""
        if not b:
            self.eof = True
            return False
        self.buf += b
        return True

    def _read_until(self, sep):
        while sep not in self.buf:
            if not self._fill():
                raise EOFError("connection closed before %r; have %r" % (sep, self.buf[:500]))
        i = self.buf.index(sep) + len(sep)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def _read_n(self, n):
        while len(self.buf) < n:
            if not self._fill():
                raise EOFError("connection closed with %d of %d body bytes" % (len(self.buf), n))
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_response(self, head_request=False):
        head = self._read_until(b"\r\n\r\n").decode("latin-1")
        lines = head.split("\r\n")
        parts = lines[0].split(" ", 2)
        assert len(parts) >= 2 and parts[0].startswith("HTTP/1."), "bad status line %r" % lines[0]
        version, status = parts[0], int(parts[1])
        reason = parts[2] if len(parts) > 2 else ""
        headers = []
        for line in lines[1:]:
            if not line:
                continue
            k, _, v = line.partition(":")
            headers.append((k.strip().lower(), v.strip()))
        resp = Response(version, status, reason, headers, b"")
        if 100 <= status < 200 or status in (204, 304) or head_request:
            return resp
        te = resp.header("transfer-encoding")
        cl = resp.header("content-length")
        if te and "chunked" in te.lower():
            body = b""
            while True:
                size_line = self._read_until(b"\r\n").decode("latin-1")
                size = int(size_line.split(";")[0].strip(), 16)
                if size == 0:
                    # trailers until blank line
                    while self._read_until(b"\r\n") != b"\r\n":
                        pass
                    break
                body += self._read_n(size)
                assert self._read_n(2) == b"\r\n"
            resp.body = body
        elif cl is not None:
            resp.body = self._read_n(int(cl))
        else:
            while self._fill():
                pass
            resp.body, self.buf = self.buf, b""
        return resp

    def at_eof(self, timeout=5.0):
        """True if the server closes the connection (with no further bytes)
        within `timeout` seconds."""
        old = self.sock.gettimeout()
        self.sock.settimeout(timeout)
        try:
            if self.buf:
                return False
            try:
                return not self._fill()
            except socket.timeout:
                return False
        finally:
            self.sock.settimeout(old)


def parse_responses(data):
    """Parse every complete response in `data` (as read by raw_http)."""

    class _Buf:
        def __init__(self, d):
            self.d = d

        def recv(self, n):
            out, self.d = self.d[:n], self.d[n:]
            return out

    reader = HttpReader(_Buf(data))
    out = []
    while True:
        if not reader.buf and not reader._fill():
            break
        out.append(reader.read_response())
    return out


@pytest.fixture
def http_reader():
    """Returns the HttpReader class."""
    return HttpReader


def http_request(method, path, body=b"", headers=None, version="HTTP/1.1"):
    """Serialize a request; adds Host and (for bodies) Content-Length."""
    if isinstance(body, str):
        body = body.encode("utf-8")
    hdrs = [("Host", "127.0.0.1")]
    if body or method in ("POST", "PUT"):
        hdrs.append(("Content-Length", str(len(body))))
    if body:
        hdrs.append(("Content-Type", "application/json"))
    hdrs += list(headers or [])
    head = "%s %s %s\r\n" % (method, path, version)
    head += "".join("%s: %s\r\n" % kv for kv in hdrs)
    return head.encode("latin-1") + b"\r\n" + body
