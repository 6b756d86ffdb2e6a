"""The client commands of the inferd binary against live servers:
`inferd infer` (inputs from a KServe v2 JSON file, NumPy .npy files and raw
files; REST JSON, REST binary and gRPC; outputs printed, as JSON, or saved
as .npy), `inferd models list|load|unload|stats`, `inferd health`, the API
key from the environment, https with --cacert, the documented exit codes,
and the progress line of `bench` and `models load` (only on a terminal).

Independent checks: outputs equal those of a direct request made with
requests (REST) and grpcio (gRPC); .npy inputs are written and saved
outputs read by NumPy.
"""
import json
import os
import pty
import select
import shutil
import subprocess
import time

import numpy as np
import pytest
import requests

from conftest import INFERD_BIN, MAIN_MODELS, REPO_ROOT, SANITIZER_MARKERS, ok_json
from grpc_client import Client, generate
from test_auth import auth_yaml, new_key
from test_tls import make_cert, openssl

SEVEN = REPO_ROOT / "models" / "digits" / "sample_7.png"
IDENTITY = REPO_ROOT / "tests" / "models"


def cli(*args, env=None, timeout=60):
    """`inferd ARGS`: the finished process (text), checked for sanitizer reports."""
    e = dict(os.environ)
    e.pop("INFERD_API_KEY", None)
    e.pop("INFERD_URL", None)
    e.pop("INFERD_GRPC_PORT", None)
    e.update(env or {})
    p = subprocess.run([str(INFERD_BIN)] + [str(a) for a in args], capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL, env=e)
    for marker in SANITIZER_MARKERS:
        assert marker not in p.stderr, p.stderr
    return p


def ok(p):
    assert p.returncode == 0, "exit %d\nstdout: %s\nstderr: %s" % (p.returncode, p.stdout,
                                                                 p.stderr)
    return p.stdout


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    """A server with simple, digits and two identity models (module scope)."""
    from conftest import Server, make_repository
    models = {"simple": MAIN_MODELS["simple"], "digits": MAIN_MODELS["digits"],
              "identity_fp16": IDENTITY / "identity_fp16",
              "identity_bytes": IDENTITY / "identity_bytes",
              "identity_int8": IDENTITY / "identity_int8"}
    repo = make_repository(tmp_path_factory.mktemp("repo") / "models", models)
    s = Server(["--model-repository", str(repo)], tmp_path_factory.mktemp("server"))
    s.start()
    s.wait_ready()
    yield s
    problems = s.stop()
    assert not problems, problems


@pytest.fixture(scope="module")
def pbs(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("proto_cli"))


SIMPLE_IN0 = list(range(16))
SIMPLE_IN1 = [1] * 16


def simple_direct(url):
    body = {"inputs": [
        {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": SIMPLE_IN0},
        {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": SIMPLE_IN1}]}
    return ok_json(requests.post(url + "/v2/models/simple/infer", json=body, timeout=30))


def outputs_by_name(resp):
    return {o["name"]: (o["datatype"], o["shape"], o["data"]) for o in resp["outputs"]}


# ---- infer --------------------------------------------------------------------------


def test_infer_json_request_file_rest_and_grpc(srv, tmp_path):
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"inputs": [
        {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": [SIMPLE_IN0]},
        {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": SIMPLE_IN1}]}))
    want = outputs_by_name(simple_direct(srv.url))
    for extra in ([], ["--binary"], ["--grpc", "--grpc-port", srv.grpc_port]):
        out = json.loads(ok(cli("infer", "simple", "--url", srv.url, "--json", req,
                                "--json-output", *extra)))
        assert out["model_name"] == "simple" and out["model_version"] == "1", extra
        assert outputs_by_name(out) == want, extra


def test_infer_table_output(srv):
    out = ok(cli("infer", "simple", "--url", srv.url, "--input", "INPUT0=%s" % SIMPLE_IN0,
                 "--input", "INPUT1=%s" % SIMPLE_IN1))
    lines = out.splitlines()
    assert lines[0] == "model simple version 1"
    assert lines[1] == "OUTPUT0  INT32  [1, 16]"
    assert lines[2].split() == [str(v + 1) for v in SIMPLE_IN0]
    assert lines[3] == "OUTPUT1  INT32  [1, 16]"
    assert lines[4].split() == [str(v - 1) for v in SIMPLE_IN0]


def test_infer_npy_inputs_equal_direct_and_save(srv, tmp_path):
    """.npy written by NumPy (little- and big-endian) in; --save writes
    .npy that NumPy reads back equal to the direct request's outputs."""
    np.save(tmp_path / "a.npy", np.array([SIMPLE_IN0], dtype=np.int32))
    np.save(tmp_path / "b.npy", np.array([SIMPLE_IN1], dtype=">i4"))
    want = simple_direct(srv.url)
    for i, extra in enumerate(([], ["--grpc", "--grpc-port", srv.grpc_port])):
        save = tmp_path / ("out%d" % i)
        out = json.loads(ok(cli("infer", "simple", "--url", srv.url, "--input",
                                "INPUT0=%s" % (tmp_path / "a.npy"), "--input",
                                "INPUT1=%s" % (tmp_path / "b.npy"), "--save", save,
                                "--json-output", *extra)))
        assert outputs_by_name(out) == outputs_by_name(want)
        for o in want["outputs"]:
            arr = np.load(save / (o["name"] + ".npy"))
            assert arr.dtype == np.int32 and list(arr.shape) == o["shape"]
            assert arr.flatten().tolist() == o["data"]


def test_infer_fp16_and_bytes_npy_round_trip(srv, tmp_path):
    """FP16 cannot travel as JSON: the binary extension is chosen; S and U
    strings become BYTES; saved outputs are read back by NumPy."""
    h = np.array([[1.5, -2.25, 65504.0, 0.0009765625]], dtype=np.float16)
    np.save(tmp_path / "h.npy", h)
    for extra in ([], ["--grpc", "--grpc-port", srv.grpc_port]):
        save = tmp_path / ("h_out%d" % len(extra))
        ok(cli("infer", "identity_fp16", "--url", srv.url, "--input",
               "INPUT0=%s" % (tmp_path / "h.npy"), "--save", save, *extra))
        back = np.load(save / "OUTPUT0.npy")
        assert back.dtype == np.float16 and np.array_equal(back, h)
    np.save(tmp_path / "s.npy", np.array([[b"ab", b"xyz\x00q", b"\xff\xfe"]]))
    np.save(tmp_path / "u.npy", np.array([["h\u00e9llo", "\u20ac"]]))
    for name, want in (("s", [b"ab", b"xyz\x00q", b"\xff\xfe"]),
                       ("u", ["h\u00e9llo".encode(), "\u20ac".encode()])):
        for extra in ([], ["--grpc", "--grpc-port", srv.grpc_port]):
            save = tmp_path / ("%s_out%d" % (name, len(extra)))
            ok(cli("infer", "identity_bytes", "--url", srv.url, "--input",
                   "INPUT0=%s" % (tmp_path / (name + ".npy")), "--save", save, *extra))
            back = np.load(save / "OUTPUT0.npy")
            assert back.flatten().tolist() == want


def test_infer_raw_png_rest_and_grpc_equal_direct(srv, pbs):
    png = SEVEN.read_bytes()
    # The direct request: gRPC with grpcio (raw contents), as the independent client.
    pb, hpb = pbs
    c = Client(pb, hpb, "127.0.0.1:%d" % srv.grpc_port)
    try:
        req = pb.ModelInferRequest(model_name="digits")
        req.inputs.add(name="image", datatype="BYTES", shape=[1, 1])
        req.raw_input_contents.append(len(png).to_bytes(4, "little") + png)
        resp = c.infer(req)
    finally:
        c.close()
    probs = np.frombuffer(resp.raw_output_contents[[o.name for o in resp.outputs]
                                                   .index("probabilities")], dtype=np.float32)
    for extra in ([], ["--binary"], ["--grpc", "--grpc-port", srv.grpc_port]):
        out = json.loads(ok(cli("infer", "digits", "--url", srv.url, "--input",
                                "image=@%s" % SEVEN, "--json-output", *extra)))
        got = {o["name"]: o for o in out["outputs"]}
        assert got["probabilities"]["shape"] == [1, 10]
        assert np.array(got["probabilities"]["data"], dtype=np.float32).tolist() == \
            probs.tolist(), extra
        assert int(np.argmax(got["probabilities"]["data"])) == 7


def test_infer_raw_png_over_grpc_without_the_rest_port(srv):
    """The README's line with --grpc, the REST address unreachable: the
    input's shape comes from gRPC ModelMetadata, not from REST."""
    from conftest import free_port
    dead = free_port()
    out = json.loads(ok(cli("infer", "digits", "--url", "http://127.0.0.1:%d" % dead, "--grpc",
                            "--grpc-port", srv.grpc_port, "--input", "image=@%s" % SEVEN,
                            "--json-output")))
    got = {o["name"]: o for o in out["outputs"]}
    assert got["label"]["data"] == [7]
    # the gRPC port from the environment, as INFERD_URL gives the REST one
    env = {"INFERD_GRPC_PORT": str(srv.grpc_port)}
    out = json.loads(ok(cli("infer", "digits", "--url", "http://127.0.0.1:%d" % dead, "--grpc",
                            "--input", "image=@%s" % SEVEN, "--json-output", env=env)))
    assert {o["name"]: o for o in out["outputs"]}["label"]["data"] == [7]
    p = cli("infer", "digits", "--grpc", "--input", "image=@%s" % SEVEN,
            env={"INFERD_GRPC_PORT": "80000"})
    assert p.returncode == 2 and "INFERD_GRPC_PORT" in p.stderr


def test_unknown_model_suggests_the_nearest_over_both_protocols(srv):
    for extra in ([], ["--grpc", "--grpc-port", srv.grpc_port]):
        p = cli("infer", "simpel", "--url", srv.url, "--input", "INPUT0=%s" % SIMPLE_IN0,
                "--input", "INPUT1=%s" % SIMPLE_IN1, *extra)
        assert p.returncode == 1, p.stderr
        assert "'simpel' is not found; did you mean 'simple'?" in p.stderr, (extra, p.stderr)


def test_infer_output_selection_and_version(srv):
    out = json.loads(ok(cli("infer", "simple", "--version", "1", "--url", srv.url, "--input",
                            "INPUT0=%s" % SIMPLE_IN0, "--input", "INPUT1=%s" % SIMPLE_IN1,
                            "--output", "OUTPUT1", "--json-output")))
    assert [o["name"] for o in out["outputs"]] == ["OUTPUT1"]


# ---- exit codes --------------------------------------------------------------------


def test_exit_codes(srv, tmp_path):
    # 2: usage errors and unreadable inputs
    assert cli("infer", "simple", "--url", srv.url).returncode == 2
    assert cli("infer", "--url", srv.url, "--input", "x=[1]").returncode == 2
    assert cli("infer", "simple", "--bogus").returncode == 2
    assert cli("infer", "simple", "--url", "ftp://x", "--input", "a=[1]").returncode == 2
    p = cli("infer", "simple", "--url", srv.url, "--input", "INPUT0=%s" % (tmp_path / "no.npy"))
    assert p.returncode == 2 and "no.npy" in p.stderr
    (tmp_path / "bad.npy").write_bytes(b"\x93NUMPY\x01\x00\x10\x00{'descr': '|O'}")
    p = cli("infer", "simple", "--url", srv.url, "--input", "INPUT0=%s" % (tmp_path / "bad.npy"))
    assert p.returncode == 2 and "bad.npy" in p.stderr
    assert cli("models", "frobnicate", "--url", srv.url).returncode == 2
    assert cli("health", "--version", "1", "--url", srv.url).returncode == 2
    # 1: the server refused
    p = cli("infer", "nosuch", "--url", srv.url, "--input", "x={\"datatype\":\"INT32\","
            "\"shape\":[1],\"data\":[1]}")
    assert p.returncode == 1 and "HTTP 404" in p.stderr and "nosuch" in p.stderr
    p = cli("infer", "simple", "--url", srv.url, "--input", "INPUT0=%s" % SIMPLE_IN0)
    assert p.returncode == 1 and "HTTP 400" in p.stderr
    p = cli("infer", "simple", "--url", srv.url, "--input", "INPUT0=%s" % SIMPLE_IN0, "--grpc",
            "--grpc-port", srv.grpc_port)
    assert p.returncode == 1 and "gRPC status 3" in p.stderr
    # 3: nothing listens / timeout
    from conftest import free_port
    dead = free_port()
    assert cli("health", "--url", "http://127.0.0.1:%d" % dead).returncode == 3
    assert cli("models", "list", "--url", "http://127.0.0.1:%d" % dead).returncode == 3
    p = cli("infer", "simple", "--url", srv.url, "--grpc", "--grpc-port", dead, "--input",
            "INPUT0={\"datatype\":\"INT32\",\"shape\":[1,16],\"data\":%s}" % SIMPLE_IN0)
    assert p.returncode == 3 and "cannot connect" in p.stderr
    # the address it names is the one it dialed: the gRPC port, not the REST one
    assert "127.0.0.1:%d" % dead in p.stderr and ":%d" % srv.port not in p.stderr, p.stderr
    # help documents the codes
    for cmd in ("infer", "models", "health"):
        h = ok(cli(cmd, "--help"))
        assert "Exit status" in h and "3 cannot connect" in h


def test_timeout_is_exit_3(tmp_path):
    """A server that accepts and never answers: --timeout ends the wait."""
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(4)
    try:
        # Without --timeout the client would wait for ever (cli() gives up
        # after 60 s and the test fails).
        p = cli("health", "--url", "http://127.0.0.1:%d" % s.getsockname()[1], "--timeout", "0.5")
        assert p.returncode == 3 and "timed out" in p.stderr
    finally:
        s.close()


def test_main_help_lists_client_commands():
    out = ok(cli("--help"))
    for cmd in ("infer", "models", "health"):
        assert "\n  %s " % cmd in out


# ---- models and health ---------------------------------------------------------------


def test_models_list_load_unload_stats_explicit(server_factory):
    s = server_factory.start("--model-control-mode", "explicit", "--load-model", "simple",
                             models={"simple": MAIN_MODELS["simple"],
                                     "digits": MAIN_MODELS["digits"]})
    rows = [l.split() for l in ok(cli("models", "list", "--url", s.url)).splitlines()]
    assert rows[0] == ["NAME", "VERSION", "STATE", "REASON"]
    assert ["simple", "1", "READY"] in [r[:3] for r in rows]
    assert "digits" in [r[0] for r in rows] and ["digits", "1", "READY"] not in rows
    assert json.loads(ok(cli("models", "list", "--ready", "--json-output", "--url", s.url))) == \
        requests.post(s.url + "/v2/repository/index", json={"ready": True}, timeout=10).json()
    p = cli("models", "load", "digits", "--url", s.url)
    assert ok(p) == "loaded digits\n" and p.stderr == ""  # no progress line when piped
    assert requests.get(s.url + "/v2/models/digits/ready", timeout=10).status_code == 200
    ok(cli("infer", "digits", "--url", s.url, "--input", "image=@%s" % SEVEN))
    stats = ok(cli("models", "stats", "digits", "--url", s.url)).splitlines()
    assert stats[0].split()[:4] == ["NAME", "VERSION", "INFERENCES", "EXECUTIONS"]
    row = stats[1].split()
    assert row[0] == "digits" and row[1] == "1" and int(row[2]) == 1 and int(row[4]) == 1
    assert json.loads(ok(cli("models", "stats", "--json-output", "--url", s.url))).keys() == \
        {"model_stats"}
    assert ok(cli("models", "unload", "digits", "--url", s.url)) == "unloaded digits\n"
    assert requests.get(s.url + "/v2/models/digits/ready", timeout=10).status_code != 200
    p = cli("models", "load", "nosuch", "--url", s.url)
    assert p.returncode == 1 and "HTTP" in p.stderr


def test_health_ready_and_not_ready(srv, server_factory, tmp_path):
    assert ok(cli("health", "--url", srv.url)) == "live: yes\nready: yes\n"
    out = ok(cli("health", "--model", "simple", "--version", "1", "--url", srv.url))
    assert out.splitlines()[-1] == "model simple version 1 ready: yes"
    p = cli("health", "--model", "nosuch", "--url", srv.url)
    assert p.returncode == 1
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not an onnx model")
    s = server_factory.start(models={"simple": MAIN_MODELS["simple"], "broken": {1: bad}},
                             wait=False)
    s.wait_ready(path="/v2/models/simple/ready")
    p = cli("health", "--url", s.url)
    assert p.returncode == 4, p.stdout + p.stderr
    assert p.stdout.splitlines() == ["live: yes", "ready: no (HTTP 503)"]


# ---- API key, TLS ---------------------------------------------------------------------


def test_api_key_from_the_environment(server_factory, tmp_path, pbs):
    admin, admin_hash = new_key()
    cfg = tmp_path / "inferd.yaml"
    cfg.write_text(auth_yaml([("ops", [admin_hash], ["infer", "read", "admin"])]))
    s = server_factory.start("--config", str(cfg))
    args = ["infer", "simple", "--url", s.url, "--input", "INPUT0=%s" % SIMPLE_IN0, "--input",
            "INPUT1=%s" % SIMPLE_IN1]
    # without a key: the server's 401 and exit 1 (the metadata request is refused)
    p = cli(*args)
    assert p.returncode == 1 and "HTTP 401" in p.stderr, p.stderr
    p = cli("models", "list", "--url", s.url)
    assert p.returncode == 1 and "HTTP 401" in p.stderr
    p = cli("infer", "simple", "--url", s.url, "--grpc", "--grpc-port", s.grpc_port, "--input",
            "INPUT0={\"datatype\":\"INT32\",\"shape\":[1,16],\"data\":%s}" % SIMPLE_IN0)
    assert p.returncode == 1 and "gRPC status 16" in p.stderr
    env = {"INFERD_API_KEY": admin}
    ok(cli(*args, env=env))
    ok(cli(*(args + ["--grpc", "--grpc-port", s.grpc_port]), env=env))
    ok(cli("models", "list", "--url", s.url, env=env))
    # the key never appears on the command line
    assert admin not in " ".join(args)


def test_https_with_cacert(server_factory, tmp_path):
    d = tmp_path
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-subj",
            "/CN=cli test CA", "-days", "2", "-out", "ca.pem", cwd=d)
    make_cert(d, "server", "cli server")
    s = server_factory.start("--tls-cert", str(d / "server.pem"), "--tls-key",
                             str(d / "server.key"), wait=False)
    deadline = time.monotonic() + 60
    while "ready:" not in s.stderr():
        assert s.proc.poll() is None and time.monotonic() < deadline, s.stderr()
        time.sleep(0.05)
    url = "https://127.0.0.1:%d" % s.port
    # the system's CAs do not know the test CA: verification fails, exit 3
    p = cli("health", "--url", url)
    assert p.returncode == 3 and "certificate verification failed" in p.stderr
    assert ok(cli("health", "--url", url, "--cacert", d / "ca.pem")).startswith("live: yes")
    assert ok(cli("health", "--url", url, "--insecure")).startswith("live: yes")
    out = json.loads(ok(cli("infer", "simple", "--url", url, "--cacert", d / "ca.pem",
                            "--input", "INPUT0=%s" % SIMPLE_IN0, "--input",
                            "INPUT1=%s" % SIMPLE_IN1, "--json-output")))
    assert out["outputs"][0]["data"] == [v + 1 for v in SIMPLE_IN0]
    out = json.loads(ok(cli("infer", "simple", "--url", url, "--cacert", d / "ca.pem", "--grpc",
                            "--grpc-port", s.grpc_port, "--input",
                            "INPUT0={\"datatype\":\"INT32\",\"shape\":[1,16],\"data\":%s}"
                            % SIMPLE_IN0, "--input",
                            "INPUT1={\"datatype\":\"INT32\",\"shape\":[1,16],\"data\":%s}"
                            % SIMPLE_IN1, "--json-output")))
    assert out["outputs"][1]["data"] == [v - 1 for v in SIMPLE_IN0]


# ---- progress line --------------------------------------------------------------------


def run_on_pty(args, timeout=60):
    """Runs `inferd ARGS` with stdout and stderr on a pseudo-terminal:
    (exit code, everything written)."""
    master, slave = pty.openpty()
    env = dict(os.environ, TERM="xterm")
    env.pop("INFERD_API_KEY", None)
    p = subprocess.Popen([str(INFERD_BIN)] + [str(a) for a in args], stdin=subprocess.DEVNULL,
                         stdout=slave, stderr=slave, env=env)
    os.close(slave)
    data = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([master], [], [], 0.2)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            data += chunk
        elif p.poll() is not None:
            break
    os.close(master)
    return p.wait(timeout=10), data.decode(errors="replace")


def test_bench_progress_on_a_terminal_only(srv):
    args = ["bench", "--url", srv.url, "--path", "/v2/health/live", "--duration", "1.5",
            "--warmup", "0", "--connections", "1"]
    rc, out = run_on_pty(args)
    assert rc == 0, out
    assert "inferd bench [" in out and "%" in out and "\x1b[K" in out
    p = cli(*args)
    assert p.returncode == 0
    assert "\r" not in p.stderr and "\x1b" not in p.stderr and "inferd bench [" not in p.stderr


def test_models_load_progress_on_a_terminal(server_factory):
    s = server_factory.start("--model-control-mode", "explicit",
                             models={"digits": MAIN_MODELS["digits"]})
    rc, out = run_on_pty(["models", "load", "digits", "--url", s.url])
    assert rc == 0, out
    assert "loaded digits" in out
    # the progress line is on: it is erased at the end (\r, erase to end
    # of line); a frame is drawn every 200 ms the load takes
    assert "\r\x1b[K" in out
