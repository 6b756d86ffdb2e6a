"""Command line: help, version, flag errors, signals, startup failures."""
import json
import os
import re
import signal
import time
import subprocess

import pytest
import requests

from conftest import (INFERD_BIN, SANITIZER_MARKERS, MAIN_MODELS, IDENTITY_MODELS,
                      HttpReader, connect, free_port, http_request, make_repository,
                      sanitized_binary, usr1_stats)

FLAGS = ["--model-repository", "--host", "--http-port", "--max-request-line",
         "--max-header-bytes", "--max-headers", "--max-body-bytes",
         "--ort-intra-op-threads", "--ort-inter-op-threads", "--queue-budget-ms"]


def run(*args, timeout=15, **kw):
    env = dict(os.environ)
    p = subprocess.run([str(INFERD_BIN)] + list(args), capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL, env=env, **kw)
    for marker in SANITIZER_MARKERS:
        assert marker not in p.stderr, "sanitizer report from %s:\n%s" % (args, p.stderr)
    return p


@pytest.mark.parametrize("args", [["serve", "--help"], ["--help"]])
def test_help_lists_every_flag(args):
    p = run(*args)
    assert p.returncode == 0, p
    assert "serve" in p.stdout
    if args[0] == "serve":
        missing = [f for f in FLAGS if f not in p.stdout]
        assert not missing, "flags missing from `inferd serve --help`: %s\n%s" % (missing, p.stdout)


def test_version():
    p = run("--version")
    assert p.returncode == 0, p
    assert re.fullmatch(r"inferd \d+\.\d+\.\d+\S*\n?", p.stdout), repr(p.stdout)


@pytest.mark.parametrize("args", [["serve", "--no-such-flag"], ["--no-such-flag"],
                                  ["serve", "--http-port", "0", "--bogus", "1"]])
def test_unknown_flag_exits_2(args, tmp_path):
    p = run(*args, cwd=tmp_path)
    assert p.returncode == 2, p
    assert p.stderr.strip(), "no message on stderr"


@pytest.mark.parametrize("flag,value", [("--http-port", "abc"), ("--http-port", "70000"),
                                        ("--max-body-bytes", "-1"), ("--max-headers", "x"),
                                        ("--ort-intra-op-threads", "two"),
                                        ("--queue-budget-ms", "soon")])
def test_invalid_flag_value_fails(flag, value, tmp_path):
    repo = make_repository(tmp_path / "models", {"simple": MAIN_MODELS["simple"]})
    args = ["serve", "--host", "127.0.0.1", "--model-repository", str(repo)]
    if flag != "--http-port":
        args += ["--http-port", str(free_port())]
    try:
        p = run(*(args + [flag, value]))
    except subprocess.TimeoutExpired:
        pytest.fail("inferd accepted %s %s and kept running" % (flag, value))
    assert p.returncode != 0, p
    assert p.stderr.strip()


def test_flag_missing_value(tmp_path):
    try:
        p = run("serve", "--http-port", cwd=tmp_path)
    except subprocess.TimeoutExpired:
        pytest.fail("inferd accepted a flag without a value and kept running")
    assert p.returncode != 0, p
    assert p.stderr.strip()


def test_missing_repository_fails_startup(tmp_path):
    missing = tmp_path / "no-such-repository"
    try:
        p = run("serve", "--host", "127.0.0.1", "--http-port", str(free_port()),
                "--model-repository", str(missing), timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("inferd kept running with a missing model repository")
    assert p.returncode != 0, p
    assert str(missing) in p.stderr, "stderr does not name the missing directory:\n" + p.stderr


def lines_after_ready(err):
    lines = err.splitlines()
    idx = [i for i, l in enumerate(lines) if "ready" in l.lower()]
    assert idx, "no 'ready' line in stderr:\n" + err
    return lines[idx[0] + 1:]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_clean_shutdown(server_factory, sig):
    srv = server_factory.start()
    assert requests.get(srv.url + "/v2/health/ready", timeout=10).status_code == 200
    problems = srv.stop(sig)
    assert not problems, "\n".join(problems)
    assert srv.returncode == 0
    after = lines_after_ready(srv.stderr())
    assert any(re.search(r"shut|stop|exit|terminat", l, re.IGNORECASE) for l in after), \
        "no shutdown log line after 'ready':\n" + srv.stderr()


def test_shutdown_with_open_connections(server_factory):
    srv = server_factory.start()
    idle = connect(srv.port)
    busy = connect(srv.port)
    try:
        busy.sendall(http_request("GET", "/v2/health/live"))
        assert HttpReader(busy).read_response().status == 200
        idle.sendall(b"GET /v2/he")  # half a request line
        problems = srv.stop(signal.SIGTERM)
        assert not problems, "\n".join(problems)
    finally:
        idle.close()
        busy.close()


def test_ready_logged(server):
    err = server.stderr()
    ready = [l for l in err.splitlines() if "ready" in l.lower()]
    assert ready, "no 'ready' line in stderr:\n" + err


def test_default_repository_is_models_in_cwd(server_factory, tmp_path):
    make_repository(tmp_path / "models", {"simple": MAIN_MODELS["simple"]})
    srv = server_factory.start(cwd=tmp_path)
    doc = requests.get(srv.url + "/v2/models/simple", timeout=10).json()
    assert doc["name"] == "simple"


def test_all_flags_accepted(server_factory):
    srv = server_factory.start("--max-request-line", "8192", "--max-header-bytes", "65536",
                               "--max-headers", "100", "--max-body-bytes", str(64 * 1024 * 1024),
                               "--ort-intra-op-threads", "1", "--ort-inter-op-threads", "1")
    r = requests.post(srv.url + "/v2/models/simple/infer", timeout=10, json={"inputs": [
        {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
        {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [2] * 16}]})
    assert r.status_code == 200
    assert r.json()["outputs"][1]["data"] == [v - 2 for v in range(16)]


def test_sigterm_drains_in_flight_requests(server_factory):
    """Requests already sent when SIGTERM arrives get a complete answer (or,
    if not yet read, a clean close); never a truncated response."""
    srv = server_factory.start(models={"identity_fp64": IDENTITY_MODELS["identity_fp64"]})
    n = 100000
    values = [0.1 * i for i in range(n)]
    body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, n], "datatype": "FP64",
                                   "data": values}]}).encode()
    socks = [connect(srv.port) for _ in range(4)]
    try:
        for s in socks:
            s.sendall(http_request("POST", "/v2/models/identity_fp64/infer", body))
        srv.proc.send_signal(signal.SIGTERM)
        for s in socks:
            r = HttpReader(s)
            try:
                resp = r.read_response()
            except EOFError:
                assert not r.buf, "truncated response: %r" % r.buf[:200]
                continue
            assert resp.status == 200, resp
            assert json.loads(resp.body)["outputs"][0]["data"] == values
        srv.proc.wait(timeout=30)  # the drain ends by itself; a second signal would force it
        problems = srv.stop(signal.SIGTERM, require_running=False)
        assert not problems, "\n".join(problems)
    finally:
        for s in socks:
            s.close()


def test_sighup_is_ignored(server_factory):
    srv = server_factory.start()
    srv.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 10
    while "received SIGHUP: ignored" not in srv.stderr() and time.time() < deadline:
        time.sleep(0.05)
    assert "received SIGHUP: ignored" in srv.stderr()
    assert requests.get(srv.url + "/v2/health/ready", timeout=10).status_code == 200


def vm_size_bytes(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmSize in /proc/%d/status" % pid)


def test_sigusr1_logs_process_counters(server_factory):
    """SIGUSR1 logs one line of counters: the infer requests answered, the
    allocations made through inferd's allocator, the RSS and the C heap."""
    srv = server_factory.start()
    body = {"inputs": [{"name": n, "shape": [1, 16], "datatype": "INT32", "data": list(range(16))}
                       for n in ("INPUT0", "INPUT1")]}
    for _ in range(3):
        assert requests.post(srv.url + "/v2/models/simple/infer", json=body,
                             timeout=10).status_code == 200
    fields = usr1_stats(srv)
    assert sorted(fields) == ["allocations", "heap_free_bytes", "heap_in_use_bytes",
                              "infer_requests", "rss_bytes"], fields
    v = {k: int(x) for k, x in fields.items()}
    assert v["infer_requests"] == 3
    assert v["allocations"] > 0
    if sanitized_binary():
        return  # AddressSanitizer serves malloc: glibc's heap is nearly unused
    # A loaded ONNX Runtime session alone is well over a megabyte of heap,
    # all of it resident.
    assert 1 << 20 < v["heap_in_use_bytes"] < v["rss_bytes"], fields
    # Loading the session freed memory, which malloc keeps (at least the top
    # of each arena); and every heap byte, used or free, is mapped address
    # space of the process.
    assert v["heap_free_bytes"] > 0, fields
    vm_size = vm_size_bytes(srv.proc.pid)
    assert v["heap_in_use_bytes"] + v["heap_free_bytes"] <= vm_size, (fields, vm_size)


# ---- inferd routing get|set (docs/traffic.md) ----------------------------------------------

DIGITS_V1 = MAIN_MODELS["digits"] / "1" / "model.onnx"
DIGITS_V2 = MAIN_MODELS["digits"].parent.parent / "tests" / "models" / "digits_v2" / "2" / "model.onnx"


@pytest.fixture
def digits_two_versions(server_factory):
    """A server with versions 1 and 2 of digits (version_policy all)."""
    repo = server_factory.repository({"digits": {1: DIGITS_V1, 2: DIGITS_V2}})
    (repo / "digits" / "config.pbtxt").write_text("version_policy: { all: {} }\n")
    return server_factory.start(repository=repo), repo


def routing_cli(srv, *args, **kw):
    return run("routing", *args, "--url", srv.url, **kw)


def test_routing_help():
    p = run("routing", "--help")
    assert p.returncode == 0, p
    for flag in ("get", "set", "--file", "--json", "--canary", "--url", "INFERD_URL", "-h"):
        assert flag in p.stdout, "%s missing from `inferd routing --help`" % flag
    assert "routing" in run("--help").stdout


def test_routing_get_without_table(digits_two_versions):
    srv, _ = digits_two_versions
    p = routing_cli(srv, "get", "digits")
    assert p.returncode == 0, p
    assert json.loads(p.stdout) == {"model": "digits", "generation": 0}


def test_routing_set_json_file_stdin(digits_two_versions, tmp_path):
    srv, repo = digits_two_versions
    p = routing_cli(srv, "set", "digits", "--json",
                    '{"canary": {"stable": 1, "version": 2, "weight": 5}}')
    assert p.returncode == 0, p
    t = json.loads(p.stdout)
    assert t["generation"] == 1 and t["canary"] == {"stable": 1, "version": 2, "weight": 5}, t
    # The server wrote it to the repository and answers it on GET.
    assert json.loads((repo / "digits" / "routing.json").read_text()) == t
    assert json.loads(routing_cli(srv, "get", "digits").stdout) == t

    f = tmp_path / "table.json"
    f.write_text('{"default_version": 1}')
    p = routing_cli(srv, "set", "digits", "--file", str(f))
    assert p.returncode == 0, p
    t = json.loads(p.stdout)
    assert t["generation"] == 2 and t["default_version"] == 1 and "canary" not in t, t

    p = subprocess.run([str(INFERD_BIN), "routing", "set", "digits", "-", "--url", srv.url],
                       input='{"pin_header": "X-Version"}', capture_output=True, text=True,
                       timeout=15)
    assert p.returncode == 0, p
    t = json.loads(p.stdout)
    assert t["generation"] == 3 and t["pin_header"] == "x-version", t

    # INFERD_URL stands in for --url.
    p = subprocess.run([str(INFERD_BIN), "routing", "get", "digits"], capture_output=True,
                       text=True, timeout=15, env=dict(os.environ, INFERD_URL=srv.url))
    assert p.returncode == 0 and json.loads(p.stdout)["generation"] == 3, p


def test_routing_set_canary_keeps_the_rest(digits_two_versions):
    srv, _ = digits_two_versions
    base = {"default_version": 1, "shadow": {"version": 2, "percent": 10},
            "canary": {"stable": 1, "version": 2, "weight": 1,
                       "guard": {"max_error_ratio": 0.05, "min_requests": 50}}}
    assert routing_cli(srv, "set", "digits", "--json", json.dumps(base)).returncode == 0
    p = routing_cli(srv, "set", "digits", "--canary", "1:2:25.5")
    assert p.returncode == 0, p
    t = json.loads(p.stdout)
    assert t["generation"] == 2, t
    assert t["canary"] == {"stable": 1, "version": 2, "weight": 25.5,
                           "guard": {"max_error_ratio": 0.05, "window_s": 60,
                                     "min_requests": 50}}, t
    assert t["default_version"] == 1 and t["shadow"]["percent"] == 10, t


@pytest.mark.parametrize("args,message", [
    (["get", "nosuch"], "HTTP 404: "),
    (["set", "digits", "--json", '{"canary": {"stable": 1, "version": 2, "weight": 101}}'],
     "canary.weight"),
    (["set", "digits", "--json", '{"default_version": 7}'], "default_version: version 7"),
    (["set", "digits", "--json", '{"bogus": 1}'], "bogus: unknown field"),
    (["set", "digits", "--json", '{"generation": 5}'], "HTTP 409: generation 5"),
    (["set", "nosuch", "--canary", "1:2:5"], "HTTP 404: "),
])
def test_routing_server_errors_exit_1(digits_two_versions, args, message):
    srv, _ = digits_two_versions
    p = routing_cli(srv, *args)
    assert p.returncode == 1, p
    assert p.stdout == "", p
    assert message in p.stderr, p.stderr
    # The server's message, not its JSON envelope.
    assert '{"error"' not in p.stderr, p.stderr


@pytest.mark.parametrize("args", [
    ["routing"], ["routing", "frob", "digits"], ["routing", "get"],
    ["routing", "set", "digits"], ["routing", "get", "digits", "--json", "{}"],
    ["routing", "set", "digits", "--json", "{}", "--file", "x"],
    ["routing", "set", "digits", "--canary", "1:2"], ["routing", "set", "digits", "--canary", "1:1:5"],
    ["routing", "set", "digits", "--canary", "1:2:5.555"], ["routing", "get", "digits", "--bogus"],
    ["routing", "get", "digits", "--url"],
])
def test_routing_usage_errors_exit_2(args):
    p = run(*args)
    assert p.returncode == 2, p
    assert p.stderr.strip()


def test_routing_server_down_exits_1():
    p = run("routing", "get", "digits", "--url", "http://127.0.0.1:%d" % free_port())
    assert p.returncode == 1, p
    assert "refused" in p.stderr.lower(), p.stderr
