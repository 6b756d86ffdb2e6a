#!/usr/bin/python3
"""Chaos soak for inferd (`make soak`; SOAK_SECS, default 600).

Serves a temporary repository (explicit control mode) with `addv` (ONNX,
OUTPUT0 = INPUT0 + version), `simple` and `flaky` (the identity_stall example
plugin failing every 7th execute), then runs for SOAK_SECS:
  4 REST JSON + 2 REST binary clients (addv, simple), 1 flaky client,
  a disconnector, a malformer, a reloader and a signaller,
checking that every well-formed request gets exactly one correct response,
the process survives, RSS and fds do not grow, and SIGTERM exits 0.
Writes bench/SOAK.md; exits non-zero on FAIL.
Debian python3-requests / numpy / onnx only.
"""
import json
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import requests

ROOT = Path(__file__).resolve().parent.parent
INFERD = Path(os.environ.get("INFERD_BIN", ROOT / "build" / "inferd"))
PLUGIN = INFERD.parent / "libinferd_identity_stall.so"
SOAK_SECS = float(os.environ.get("SOAK_SECS", "600"))
WARMUP_SECS = min(60.0, SOAK_SECS / 4)   # "a warm-up minute" (shorter for short runs)
EXIT_TIMEOUT = 30

lock = threading.Lock()
stop = threading.Event()
pause = threading.Event()          # workers idle while set (fd sampling)
idle_count = [0]
WORKERS = []                       # names of pausable workers
failures = []                      # (kind, description)
stats = {}                         # kind -> dict(sent, received, lat=[])
reloads = [0]
addv_latest = [1]                  # newest addv version directory written
addv_seen = set()                  # addv versions named by correct responses
signals_sent = {"SIGHUP": 0, "SIGUSR1": 0}


def fail(kind, msg):
    with lock:
        failures.append((kind, msg))
        if len(failures) <= 30:
            print("FAILURE [%s] %s" % (kind, msg), flush=True)


def stat(kind):
    with lock:
        return stats.setdefault(kind, {"sent": 0, "received": 0, "lat": []})


def count(kind, field, n=1):
    s = stat(kind)
    with lock:
        s[field] += n


def latency(kind, secs):
    s = stat(kind)
    with lock:
        s["lat"].append(secs)


def maybe_pause():
    """Called by workers between requests: blocks while pause is set."""
    if pause.is_set():
        with lock:
            idle_count[0] += 1
        while pause.is_set() and not stop.is_set():
            time.sleep(0.02)
        with lock:
            idle_count[0] -= 1


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


# ---------------------------------------------------------------- repository

def write_addv(path, version, note=""):
    import onnx
    from onnx import TensorProto, helper
    c = helper.make_tensor("C", TensorProto.INT32, [1], [version])
    graph = helper.make_graph(
        [helper.make_node("Add", ["INPUT0", "C"], ["OUTPUT0"])], "addv",
        [helper.make_tensor_value_info("INPUT0", TensorProto.INT32, ["batch", 16])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.INT32, ["batch", 16])], [c],
        doc_string=note)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    onnx.save(model, str(tmp))
    os.replace(tmp, path)   # never a half-written model file


FLAKY_CONFIG = """backend: "identity_stall"
max_batch_size: 8
input  [ { name: "IN"  data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
parameters { key: "fail_every_n" value: { string_value: "7" } }
parameters { key: "delay_us" value: { string_value: "2000" } }
parameters { key: "fail_skip" value: { string_value: "1" } }
"""


def build_repo(root):
    write_addv(root / "addv" / "1" / "model.onnx", 1)
    shutil.copytree(ROOT / "models" / "simple", root / "simple")
    flaky = root / "flaky"
    (flaky / "1").mkdir(parents=True)
    shutil.copy(PLUGIN, flaky / PLUGIN.name)
    (flaky / "1" / "model.onnx").write_bytes(b"")
    (flaky / "config.pbtxt").write_text(FLAKY_CONFIG)


# ---------------------------------------------------------------- clients

def addv_body(a):
    return {"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "INT32",
                        "data": a.tolist()}]}


def simple_body(a, b):
    return {"inputs": [
        {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": a.tolist()},
        {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": b.tolist()}]}


def check_json_response(model, r, a, b):
    if r.status_code != 200:
        return "status %d: %s" % (r.status_code, r.text[:200])
    out = r.json()
    outs = {o["name"]: o for o in out.get("outputs", [])}
    if out.get("model_name") != model:
        return "model_name %r" % out.get("model_name")
    if model == "addv":
        v = int(out["model_version"])
        if outs["OUTPUT0"]["data"] != (a + v).tolist():
            return "addv data != input + version %d: %s" % (v, outs["OUTPUT0"]["data"][:4])
        with lock:
            addv_seen.add(v)
    else:
        if outs["OUTPUT0"]["data"] != (a + b).tolist() or \
                outs["OUTPUT1"]["data"] != (a - b).tolist():
            return "simple data wrong"
    return None


def json_client(k, base, kind="json"):
    sess = requests.Session()
    rng = random.Random(k)
    i = 0
    while not stop.is_set():
        maybe_pause()
        if stop.is_set():
            break
        model = "addv" if i % 2 == 0 else "simple"
        a = np.arange(16, dtype=np.int32) * rng.randint(-50, 50) + rng.randint(-10**6, 10**6)
        b = np.full(16, rng.randint(-1000, 1000), dtype=np.int32)
        body = addv_body(a) if model == "addv" else simple_body(a, b)
        count(kind, "sent")
        t0 = time.monotonic()
        try:
            r = sess.post(base + "/v2/models/%s/infer" % model, data=json.dumps(body),
                          headers={"Content-Type": "application/json"}, timeout=60)
            latency(kind, time.monotonic() - t0)
            count(kind, "received")
            err = check_json_response(model, r, a, b)
            if err:
                fail(kind, "%s: %s" % (model, err))
        except Exception as e:
            fail(kind, "%s: exception %r" % (model, e))
        i += 1


def binary_client(k, base, kind="binary"):
    sess = requests.Session()
    rng = random.Random(1000 + k)
    i = 0
    while not stop.is_set():
        maybe_pause()
        if stop.is_set():
            break
        model = "addv" if i % 2 == 0 else "simple"
        a = (np.arange(16, dtype=np.int32) * rng.randint(-50, 50)
             + rng.randint(-10**6, 10**6)).astype("<i4")
        b = np.full(16, rng.randint(-1000, 1000), dtype="<i4")
        names = ["INPUT0"] if model == "addv" else ["INPUT0", "INPUT1"]
        header = {"inputs": [{"name": n, "shape": [1, 16], "datatype": "INT32",
                              "parameters": {"binary_data_size": 64}} for n in names],
                  "parameters": {"binary_data_output": True}}
        hj = json.dumps(header).encode()
        payload = hj + a.tobytes() + (b.tobytes() if model == "simple" else b"")
        count(kind, "sent")
        t0 = time.monotonic()
        try:
            r = sess.post(base + "/v2/models/%s/infer" % model, data=payload,
                          headers={"Inference-Header-Content-Length": str(len(hj)),
                                   "Content-Type": "application/octet-stream"}, timeout=60)
            latency(kind, time.monotonic() - t0)
            count(kind, "received")
            err = check_binary_response(model, r, a, b)
            if err:
                fail(kind, "%s: %s" % (model, err))
        except Exception as e:
            fail(kind, "%s: exception %r" % (model, e))
        i += 1


def check_binary_response(model, r, a, b):
    if r.status_code != 200:
        return "status %d: %s" % (r.status_code, r.text[:200])
    hl = r.headers.get("Inference-Header-Content-Length")
    if hl is None:
        return "no Inference-Header-Content-Length in response"
    hl = int(hl)
    meta = json.loads(r.content[:hl])
    pos = hl
    outs = {}
    for o in meta["outputs"]:
        size = o.get("parameters", {}).get("binary_data_size")
        if size is None:
            return "output %s not binary" % o["name"]
        outs[o["name"]] = np.frombuffer(r.content[pos:pos + size], dtype="<i4")
        pos += size
    if pos != len(r.content):
        return "body length %d != %d" % (len(r.content), pos)
    if meta.get("model_name") != model:
        return "model_name %r" % meta.get("model_name")
    if model == "addv":
        v = int(meta["model_version"])
        if outs["OUTPUT0"].tolist() != (a + v).tolist():
            return "addv data != input + version %d" % v
        with lock:
            addv_seen.add(v)
    else:
        if outs["OUTPUT0"].tolist() != (a + b).tolist() or \
                outs["OUTPUT1"].tolist() != (a - b).tolist():
            return "simple data wrong"
    return None


def flaky_client(base, kind="flaky"):
    sess = requests.Session()
    rng = random.Random(7)
    ok = [0, 0]
    while not stop.is_set():
        maybe_pause()
        if stop.is_set():
            break
        x = [float(rng.randint(-1000, 1000)) / 4 for _ in range(4)]
        body = {"inputs": [{"name": "IN", "shape": [1, 4], "datatype": "FP32", "data": x}]}
        count(kind, "sent")
        t0 = time.monotonic()
        try:
            r = sess.post(base + "/v2/models/flaky/infer", data=json.dumps(body), timeout=60)
            latency(kind, time.monotonic() - t0)
            count(kind, "received")
            if r.status_code == 200:
                out = r.json()["outputs"][0]
                if out["name"] != "OUT" or out["data"] != x:
                    fail(kind, "200 with wrong data %r (sent %r)" % (out, x))
                ok[0] += 1
            elif r.status_code == 500 and "injected failure" in r.json().get("error", ""):
                ok[1] += 1
            else:
                fail(kind, "status %d: %s" % (r.status_code, r.text[:200]))
        except Exception as e:
            fail(kind, "exception %r" % (e,))
    with lock:
        stats["flaky"]["ok200"] = ok[0]
        stats["flaky"]["injected500"] = ok[1]


# ---------------------------------------------------------------- raw sockets

def infer_request(model="simple", close=False):
    a = np.arange(16, dtype=np.int32)
    body = json.dumps(simple_body(a, a) if model == "simple" else addv_body(a)).encode()
    head = ("POST /v2/models/%s/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n%s\r\n" % (model, len(body),
                                               "Connection: close\r\n" if close else ""))
    return head.encode() + body


def disconnector(port, kind="disconnect"):
    rng = random.Random(3)
    while not stop.is_set():
        maybe_pause()
        if stop.is_set():
            break
        req = infer_request(rng.choice(["simple", "addv", "flaky"]))
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            mode = rng.randrange(4)
            if mode == 0:            # part of the head
                s.sendall(req[:rng.randint(1, req.index(b"\r\n\r\n"))])
            elif mode == 1:          # head and part of the body
                s.sendall(req[:rng.randint(req.index(b"\r\n\r\n") + 4, len(req) - 1)])
            else:                    # the whole request, never read
                s.sendall(req)
            if mode == 3:            # abortive close (RST)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
            count(kind, "sent")
        except OSError as e:
            fail(kind, "connect/send: %r" % (e,))
        time.sleep(0.005)


class Closed(Exception):
    pass


def read_response(s):
    """Reads one HTTP/1.1 response (Content-Length framing). Raises Closed on
    EOF before any byte."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            if not buf:
                raise Closed()
            raise ValueError("EOF inside response head: %r" % buf[:200])
        buf += d
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for ln in lines[1:]:
        k, v = ln.split(":", 1)
        headers[k.strip().lower()] = v.strip()
    n = int(headers.get("content-length", "0"))
    while len(rest) < n:
        d = s.recv(65536)
        if not d:
            raise ValueError("EOF inside response body")
        rest += d
    return status, headers, rest[:n]


def malformed_cases():
    good = infer_request()
    body_simple = lambda b: (("POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n"
                              "Content-Length: %d\r\n\r\n" % len(b)).encode() + b)
    return [
        # (name, bytes, framing error: a close without answer is acceptable)
        ("bad json", body_simple(b'{"inputs": [ {"name": '), False),
        ("not an object", body_simple(b'[1,2,3]'), False),
        ("no inputs", body_simple(b'{}'), False),
        ("unknown input", body_simple(json.dumps({"inputs": [
            {"name": "NOPE", "shape": [1, 16], "datatype": "INT32", "data": [0] * 16}]}).encode()),
         False),
        ("wrong datatype", body_simple(json.dumps({"inputs": [
            {"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "data": [0.5] * 16},
            {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [0] * 16}]})
            .encode()), False),
        ("count != shape", body_simple(json.dumps({"inputs": [
            {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": [0] * 15},
            {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [0] * 16}]})
            .encode()), False),
        ("unknown model", good.replace(b"/models/simple/", b"/models/nosuch/"), False),
        ("bad binary header", good.replace(b"Host: x\r\n",
                                           b"Host: x\r\nInference-Header-Content-Length: 99999\r\n"),
         False),
        ("GET on infer", b"GET /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n\r\n", False),
        ("garbage request line", b"HELLO\x01\x02 WORLD\r\n\r\n", True),
        ("bad content-length", b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n"
                               b"Content-Length: 12abc\r\n\r\n", True),
        ("two content-lengths", b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n"
                                b"Content-Length: 3\r\nContent-Length: 4\r\n\r\n{}", True),
        ("bad chunk size", b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n"
                           b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", True),
        ("huge content-length", b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n"
                                b"Content-Length: 99999999999\r\n\r\n", True),
        ("header without colon", b"GET /v2/health/live HTTP/1.1\r\nHost x\r\n\r\n", True),
        ("HTTP/2.7", b"GET /v2/health/live HTTP/2.7\r\nHost: x\r\n\r\n", True),
        ("long request line", b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", True),
    ]


def malformer(port, kind="malformed"):
    cases = malformed_cases()
    i = 0
    while not stop.is_set():
        maybe_pause()
        if stop.is_set():
            break
        name, data, framing = cases[i % len(cases)]
        i += 1
        count(kind, "sent")
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            try:
                s.sendall(data)
                try:
                    status, headers, body = read_response(s)
                except Closed:
                    if not framing:
                        fail(kind, "%s: closed without a response" % name)
                    else:
                        count(kind, "received")
                    continue
                count(kind, "received")
                # 505 is the right answer to an unknown HTTP version
                if not (400 <= status < 500 or (name == "HTTP/2.7" and status == 505)):
                    fail(kind, "%s: status %d %r" % (name, status, body[:200]))
                    continue
                try:
                    err = json.loads(body)["error"]
                    assert isinstance(err, str) and err
                except Exception:
                    fail(kind, "%s: %d without a JSON error body: %r" % (name, status, body[:200]))
                    continue
                if not framing and headers.get("connection", "").lower() != "close":
                    # the connection must still serve a good request
                    s.sendall(infer_request())
                    st2, _, _ = read_response(s)
                    if st2 != 200:
                        fail(kind, "%s: follow-up request got %d" % (name, st2))
            finally:
                s.close()
        except (OSError, ValueError) as e:
            if framing and isinstance(e, ConnectionResetError):
                count(kind, "received")   # a reset is a close
            else:
                fail(kind, "%s: %r" % (name, e))
        time.sleep(0.005)


# ---------------------------------------------------------------- chaos

def reloader(base, repo, kind="reload"):
    rng = random.Random(11)
    version = 1
    n = 0
    while not stop.is_set():
        t_end = time.monotonic() + rng.uniform(2.0, 3.0)
        while time.monotonic() < t_end and not stop.is_set():
            time.sleep(0.05)
        maybe_pause()
        if stop.is_set():
            break
        n += 1
        choice = n % 3
        if choice == 0:
            version += 1
            write_addv(repo / "addv" / str(version) / "model.onnx", version)
            addv_latest[0] = version
            model = "addv"
        elif choice == 1:
            write_addv(repo / "addv" / str(version) / "model.onnx", version, "rewrite %d" % n)
            model = "addv"
        else:
            model = "simple"
        count(kind, "sent")
        t0 = time.monotonic()
        try:
            r = requests.post(base + "/v2/repository/models/%s/load" % model, timeout=120)
            latency(kind, time.monotonic() - t0)
            count(kind, "received")
            if r.status_code != 200:
                fail(kind, "load %s: %d %s" % (model, r.status_code, r.text[:200]))
            else:
                with lock:
                    reloads[0] += 1
        except Exception as e:
            fail(kind, "load %s: %r" % (model, e))
    return version


def signaller(proc):
    i = 0
    while not stop.is_set():
        time.sleep(1.5)
        if stop.is_set() or pause.is_set():
            continue
        sig = signal.SIGHUP if i % 2 == 0 else signal.SIGUSR1
        i += 1
        try:
            proc.send_signal(sig)
            with lock:
                signals_sent[sig.name] += 1
        except OSError as e:
            fail("signal", repr(e))


# ---------------------------------------------------------------- process stats

def rss_bytes(pid):
    with open("/proc/%d/statm" % pid) as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def quiet_fd_count(pid, n_workers):
    """Pauses every worker, lets the server settle, counts its fds."""
    pause.set()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with lock:
            if idle_count[0] >= n_workers:
                break
        time.sleep(0.05)
    else:
        fail("fd", "workers did not pause")
    time.sleep(1.0)   # let closed connections and unloads finish
    counts = []
    for _ in range(5):
        counts.append(fd_count(pid))
        time.sleep(0.2)
    pause.clear()
    return min(counts), max(counts)


def pct(values, p):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


# ---------------------------------------------------------------- main

def main():
    if not INFERD.exists() or not PLUGIN.exists():
        print("build first: %s / %s missing" % (INFERD, PLUGIN))
        return 2
    work = Path(tempfile.mkdtemp(prefix="inferd-soak-"))
    repo = work / "models"
    build_repo(repo)
    port = free_port()
    base = "http://127.0.0.1:%d" % port
    err_path = work / "stderr.log"
    errf = open(err_path, "wb")
    cmd = [str(INFERD), "serve", "--host", "127.0.0.1", "--http-port", str(port),
           "--model-repository", str(repo), "--model-control-mode", "explicit",
           "--load-model", "*", "--exit-timeout-secs", str(EXIT_TIMEOUT)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=errf, stdin=subprocess.DEVNULL)
    started = time.time()
    while True:
        if proc.poll() is not None:
            print("inferd exited at start (%s):\n%s" % (proc.returncode, err_path.read_text()))
            return 1
        try:
            if requests.get(base + "/v2/health/ready", timeout=2).status_code == 200:
                break
        except requests.RequestException:
            pass
        if time.time() - started > 60:
            print("inferd not ready after 60 s:\n%s" % err_path.read_text())
            proc.kill()
            return 1
        time.sleep(0.1)
    pid = proc.pid
    print("inferd pid %d on port %d, repository %s; soak %.0f s (warm-up %.0f s)"
          % (pid, port, repo, SOAK_SECS, WARMUP_SECS), flush=True)

    threads = []
    for k in range(4):
        threads.append(threading.Thread(target=json_client, args=(k, base), daemon=True))
    for k in range(2):
        threads.append(threading.Thread(target=binary_client, args=(k, base), daemon=True))
    threads.append(threading.Thread(target=flaky_client, args=(base,), daemon=True))
    threads.append(threading.Thread(target=disconnector, args=(port,), daemon=True))
    threads.append(threading.Thread(target=malformer, args=(port,), daemon=True))
    threads.append(threading.Thread(target=reloader, args=(base, repo), daemon=True))
    n_workers = len(threads)
    threads.append(threading.Thread(target=signaller, args=(proc,), daemon=True))
    t_start = time.monotonic()
    for t in threads:
        t.start()

    died = None
    rss_samples = []
    rss_warm = fd_warm = None
    t_end = t_start + SOAK_SECS
    next_report = t_start + 30
    while time.monotonic() < t_end:
        time.sleep(0.5)
        if proc.poll() is not None:
            died = proc.returncode
            fail("process", "inferd died with status %s" % died)
            break
        now = time.monotonic()
        rss_samples.append((now - t_start, rss_bytes(pid)))
        if rss_warm is None and now - t_start >= WARMUP_SECS:
            fd_warm = quiet_fd_count(pid, n_workers)
            rss_warm = rss_bytes(pid)
            print("warm-up done: rss %.1f MiB, fds %s" % (rss_warm / 2**20, fd_warm), flush=True)
        if now >= next_report:
            next_report += 30
            with lock:
                summ = ", ".join("%s %d" % (k, v["sent"]) for k, v in sorted(stats.items()))
            print("[%4.0f s] %s; reloads %d; failures %d"
                  % (now - t_start, summ, reloads[0], len(failures)), flush=True)

    fd_end = rss_end = None
    if died is None:
        fd_end = quiet_fd_count(pid, n_workers)
        rss_end = rss_bytes(pid)
    stop.set()
    for t in threads:
        t.join(timeout=90)
        if t.is_alive():
            fail("harness", "thread %s did not stop" % t.name)
    elapsed = time.monotonic() - t_start

    if died is None and proc.poll() is None:
        # the newest version serves, alone; clients saw the versions change
        try:
            meta = requests.get(base + "/v2/models/addv", timeout=10).json()
            if meta.get("versions") != [str(addv_latest[0])]:
                fail("reload", "addv serves versions %s, newest is %d"
                     % (meta.get("versions"), addv_latest[0]))
        except Exception as e:
            fail("reload", "GET /v2/models/addv: %r" % (e,))
        if addv_latest[0] > 2 and len(addv_seen) < 2:
            fail("reload", "clients saw only addv versions %s" % sorted(addv_seen))

    exit_status = None
    exit_secs = None
    if died is None and proc.poll() is None:
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            exit_status = proc.wait(timeout=EXIT_TIMEOUT + 10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            exit_status = "timeout"
        exit_secs = time.monotonic() - t0
        if exit_status != 0:
            fail("shutdown", "SIGTERM: exit status %s after %.1f s" % (exit_status, exit_secs))
    errf.close()
    log = err_path.read_text(errors="replace")

    # per-client request accounting
    for kind, s in stats.items():
        if s["sent"] != s["received"] and kind not in ("disconnect",):
            fail(kind, "sent %d requests, received %d responses" % (s["sent"], s["received"]))
    stats_lines = log.count(" stats: ")
    if stats_lines < signals_sent["SIGUSR1"]:
        fail("signal", "%d SIGUSR1 sent, %d stats lines logged"
             % (signals_sent["SIGUSR1"], stats_lines))
    for needle in ("AddressSanitizer", "runtime error", "fatal", "assert"):
        if needle in log:
            fail("log", "server log contains %r" % needle)

    growth = None
    if rss_warm and rss_end:
        growth = (rss_end - rss_warm) * 100.0 / rss_warm
        if growth >= 5.0:
            fail("rss", "RSS grew %.1f%% (%d -> %d)" % (growth, rss_warm, rss_end))
    elif died is None:
        fail("rss", "no RSS sample after warm-up")
    if fd_warm and fd_end and fd_end[0] > fd_warm[1]:
        fail("fd", "open fds grew: %s -> %s" % (fd_warm, fd_end))

    # where the growth happened: RSS halfway between warm-up and end
    rss_mid = None
    after = [(t, r) for t, r in rss_samples if t >= WARMUP_SECS]
    if after:
        mid_t = (WARMUP_SECS + after[-1][0]) / 2
        rss_mid = min(after, key=lambda x: abs(x[0] - mid_t))[1]
    ok = not failures
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "src"],
                               capture_output=True, text=True).stdout.strip()
        if dirty:
            commit += " (src/ modified)"
    except OSError:
        commit = "?"
    kinds = ["json", "binary", "flaky", "disconnect", "malformed", "reload"]
    desc = {"json": "4 REST JSON clients (addv, simple)",
            "binary": "2 REST binary clients (addv, simple)",
            "flaky": "1 client on flaky (identity_stall, fail_every_n 7)",
            "disconnect": "disconnector (partial/whole request, close unread)",
            "malformed": "malformer (malformed HTTP/JSON on raw sockets)",
            "reload": "reloader (repository load API)"}
    rows = []
    for k in kinds:
        s = stats.get(k, {"sent": 0, "received": 0, "lat": []})
        nfail = sum(1 for f in failures if f[0] == k)
        lat = s["lat"]
        rows.append("| %s | %d | %s | %d | %s | %s |" % (
            desc[k], s["sent"], s["received"] if k != "disconnect" else "—", nfail,
            "%.2f" % (pct(lat, 50) * 1e3) if lat else "—",
            "%.2f" % (pct(lat, 99) * 1e3) if lat else "—"))
    total_req = sum(stats.get(k, {}).get("sent", 0) for k in kinds)
    fl = stats.get("flaky", {})
    lines = [
        "# Soak test (`make soak`)",
        "",
        "`scripts/soak.py` serves a temporary repository in explicit control mode (`addv`,",
        "whose output proves its version; `simple`; `flaky`, the `identity_stall` example",
        "plugin failing every 7th execute after a 2 ms stall) and runs every client kind below",
        "at once, while a reloader loads a new `addv` version, rewrites the current one or",
        "reloads `simple` every 2–3 s, and a signaller sends SIGHUP and SIGUSR1 in turn every",
        "1.5 s. Every response is verified exactly; a request on a healthy keep-alive session",
        "that fails counts as a failure.",
        "",
        "| | |",
        "|---|---|",
        "| date | %s |" % time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "| git commit | %s |" % commit,
        "| duration | %.0f s (SOAK_SECS=%g; warm-up %.0f s) |" % (elapsed, SOAK_SECS, WARMUP_SECS),
        "| requests (all kinds) | %d |" % total_req,
        "| failures | %d |" % len(failures),
        "| reloads (200) | %d (addv versions 1–%d; %d of them named by responses) |"
        % (reloads[0], addv_latest[0], len(addv_seen)),
        "| signals | %d SIGHUP, %d SIGUSR1 (%d stats lines) |"
        % (signals_sent["SIGHUP"], signals_sent["SIGUSR1"], stats_lines),
        "| flaky outcomes | %s × 200 echo, %s × 500 injected failure |"
        % (fl.get("ok200", "?"), fl.get("injected500", "?")),
        "| RSS after warm-up → halfway → end | %s → %s → %s MiB (%s) |" % (
            "%.1f" % (rss_warm / 2**20) if rss_warm else "—",
            "%.1f" % (rss_mid / 2**20) if rss_mid else "—",
            "%.1f" % (rss_end / 2**20) if rss_end else "—",
            "%+.2f%%" % growth if growth is not None else "—"),
        "| open fds (quiet) after warm-up → end | %s → %s |" % (
            "%d" % fd_warm[1] if fd_warm else "—", "%d" % fd_end[0] if fd_end else "—"),
        "| SIGTERM | exit %s in %s s |" % (exit_status,
                                          "%.1f" % exit_secs if exit_secs is not None else "—"),
        "| result | **%s** |" % ("PASS" if ok else "FAIL"),
        "",
        "| client kind | requests | responses | failures | p50 ms | p99 ms |",
        "|---|---|---|---|---|---|",
    ] + rows
    if failures:
        lines += ["", "First failures:", ""]
        lines += ["- [%s] %s" % f for f in failures[:20]]
    text = "\n".join(lines) + "\n"
    (ROOT / "bench").mkdir(exist_ok=True)
    (ROOT / "bench" / "SOAK.md").write_text(text)
    print()
    print(text)
    if ok:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print("server log kept in %s" % err_path)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
