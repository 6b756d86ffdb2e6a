#!/usr/bin/python3
"""make bench, experiment 16: user-space instructions per request, counted
with valgrind's callgrind: a figure the noisy machine cannot move.

    instructions.py OUT_JSON --inferd BIN --repo DIR [--nginx BIN]
                    [--requests N] [--warmup N] [--cases a,b,...] [--keep DIR]

Each case starts its server under `valgrind --tool=callgrind
--instr-atstart=no` (instrumentation off), sends --warmup requests on one
keep-alive connection, switches instrumentation on (`callgrind_control -i
on`), sends --requests more one after the other, switches it off and stops
the server. Everything the server process executed in user space while
those requests ran is counted, on every thread: the I/O thread's parsing,
routing, encoding and syscall wrappers, the model run, metrics recording.
The kernel's work (TCP, epoll) is not: it is the same for both servers.
Each thread is counted apart (--separate-threads=yes), so that the I/O
thread's share is known too: what the access log writer and the OTLP
exporter format and encode is counted in the total but not on the I/O
thread, whose time is the one a request waits for.

Cases (inferd with its defaults: metrics on, no access log, no tracing;
one I/O thread, one worker, one ONNX Runtime thread):
  simple_json     POST /v2/models/simple/infer, the README's JSON request
                  (experiment 1's bytes)
  simple_grpc     ModelInfer of the same tensors over gRPC (grpcio client)
  digits_binary   POST /v2/models/digits/infer, binary tensor data:
                  pixels FP32 [1,64] (experiment 6's REST body)
  simple_json_loaded  the same request under experiment 1's load: 64
                  connections in a closed loop (`inferd bench`) for
                  --loaded-seconds, after 2 s of it; the count is divided by
                  the requests answered in that window. Here requests are
                  batched (experiment 1's shape), so the model run is shared
                  and the per-request work of the front end shows; under
                  valgrind the server is ~50x slower, so its batches are
                  larger than on the bare machine
  simple_json_observed  the same with everything observable on: metrics,
                  the access log (to a file) and 10% of requests traced and
                  exported (OTLP/HTTP to a local sink)
  simple_json_observed_loaded  everything observable on, under experiment
                  1's load: ÷ simple_json_loaded is the count behind
                  experiment 7's timed ratio (observability on ÷ off)
  nginx           nginx (master_process off, one process) answering the
                  simple request with inferd's own response body: the
                  floor of the HTTP path

OUT_JSON gets, per case: requests, instructions in all, per request, per
request on the I/O thread, and the 15 functions with the most instructions of their own (self cost) with
their object file, per request and share; and inferd / nginx for
simple_json. The count repeats to within a few instructions per request
from run to run (callgrind counts, it does not sample).
"""

import argparse
import glob
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SIMPLE_REQ = (b'{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":'
              b'[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]},{"name":"INPUT1","shape":[1,16],'
              b'"datatype":"INT32","data":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}')
SIMPLE_PATH = "/v2/models/simple/infer"
DIGITS_PATH = "/v2/models/digits/infer"
TOP = 15


def die(msg):
    print("instructions: error: %s" % msg, file=sys.stderr)
    sys.exit(1)


def log(msg):
    print("instructions: %s" % msg, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def digits_body():
    """Experiment 6's REST body: JSON header + 64 FP32 pixels, binary output."""
    import struct
    header = json.dumps({
        "inputs": [{"name": "pixels", "shape": [1, 64], "datatype": "FP32",
                    "parameters": {"binary_data_size": 256}}],
        "outputs": [{"name": "label", "parameters": {"binary_data": True}}],
    }, separators=(",", ":")).encode()
    pixels = struct.pack("<64f", *[(i * 7 % 17) / 16.0 for i in range(64)])
    return header + pixels, len(header)


class Server:
    """A server process under callgrind with instrumentation off."""

    def __init__(self, argv, workdir, ready):
        self.dir = workdir
        self.out = workdir / "callgrind.out"
        self.log = open(workdir / "server.log", "wb")
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes",
               "--callgrind-out-file=%s" % self.out] + argv
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     cwd=str(workdir))
        deadline = time.monotonic() + 300
        while not ready():
            if self.proc.poll() is not None:
                die("server exited (%s): %s" % (self.proc.returncode, self.tail()))
            if time.monotonic() > deadline:
                self.stop()
                die("server not ready after 300 s: %s" % self.tail())
            time.sleep(0.5)

    def tail(self):
        self.log.flush()
        return (self.dir / "server.log").read_text(errors="replace")[-2000:]

    def instrument(self, on):
        subprocess.run(["callgrind_control", "-i", "on" if on else "off", str(self.proc.pid)],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def http_ready(port, path="/v2/health/ready"):
    def ready():
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", path)
            ok = c.getresponse().status == 200
            c.close()
            return ok
        except OSError:
            return False
    return ready


def http_driver(port, path, body, headers, check):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def send(n):
        for _ in range(n):
            conn.request("POST", path, body=body, headers=headers)
            r = conn.getresponse()
            data = r.read()
            if r.status != 200 or not check(data):
                die("unexpected answer %d: %r" % (r.status, data[:200]))
    return send, conn.close


def grpc_driver(port, py_dir):
    import grpc
    py_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run(["protoc", "--python_out=%s" % py_dir, "-I", str(ROOT / "proto"),
                    str(ROOT / "proto" / "grpc_service.proto")], check=True)
    sys.path.insert(0, str(py_dir))
    import grpc_service_pb2 as pb
    req = pb.ModelInferRequest(model_name="simple")
    for name, values in (("INPUT0", range(16)), ("INPUT1", [1] * 16)):
        t = req.inputs.add(name=name, datatype="INT32", shape=[1, 16])
        t.contents.int_contents.extend(values)
    channel = grpc.insecure_channel("127.0.0.1:%d" % port)
    call = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer",
                               request_serializer=pb.ModelInferRequest.SerializeToString,
                               response_deserializer=pb.ModelInferResponse.FromString)

    def send(n):
        for _ in range(n):
            r = call(req, timeout=60)
            if len(r.outputs) != 2:
                die("unexpected ModelInfer answer: %r" % r)
    return send, channel.close


class OtlpSink:
    """A local OTLP/HTTP endpoint that accepts every export (200)."""

    def __init__(self):
        import http.server
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


def inferd_argv(args, http_port, grpc_port, repo):
    # No queue budget: under valgrind a batch runs ~50x slower and the
    # loaded cases' 64 connections would now and then be refused (503) for
    # queueing longer than two of those runs; every request must be
    # answered and counted.
    return [args.inferd, "serve", "--model-repository", str(repo), "--host", "127.0.0.1",
            "--http-port", str(http_port), "--grpc-port", str(grpc_port),
            "--metrics-port", str(free_port()), "--io-threads", "1", "--worker-threads", "1",
            "--ort-intra-op-threads", "1", "--ort-inter-op-threads", "1",
            "--queue-budget-ms", "off"]


def annotate(out_file):
    """(total Ir, I/O thread's Ir, [(ir, function, object)]) of a process:
    callgrind writes a file per thread (OUT-01, OUT-02, ...; --separate-threads),
    each is read by annotate_thread and the functions of all are summed. The
    I/O thread is the one whose event loop (loop_run) executed the most; a
    process without one (nginx: a single thread) counts all as its I/O
    thread."""
    files = sorted(glob.glob(glob.escape(str(out_file)) + "-*")) or [str(out_file)]
    total, io, by_fn = 0, 0, {}
    for f in files:
        t, functions = annotate_thread(f)
        total += t
        if t > io and any(fn == "loop_run" for _, fn, _ in functions):
            io = t
        for ir, fn, obj in functions:
            by_fn[(fn, obj)] = by_fn.get((fn, obj), 0) + ir
    functions = sorted(((ir, fn, obj) for (fn, obj), ir in by_fn.items()), key=lambda f: -f[0])
    return total, io or total, functions


def annotate_thread(out_file):
    """(total Ir, [(ir, function, object)]) from one callgrind output file:
    callgrind_annotate's table of functions by their own (self) cost; a
    thread that executed nothing while instrumentation was on has no
    totals (0)."""
    text = subprocess.run(["callgrind_annotate", "--threshold=100", "--inclusive=no", "--auto=no",
                           str(out_file)], capture_output=True, text=True, check=True).stdout
    total = None
    functions = []
    in_table = False
    for line in text.splitlines():
        m = re.match(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?PROGRAM TOTALS", line)
        if m:
            total = int(m.group(1).replace(",", ""))
            continue
        if re.match(r"^Ir\s+file:function", line.strip()):
            in_table = True
            continue
        if not in_table or line.startswith("-"):
            continue
        if not line.strip():
            break
        m = re.match(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(.*?)(?:\s+\[(.+)\])?\s*$", line)
        if m:
            ir = int(m.group(1).replace(",", ""))
            where = m.group(2)
            fn = where.rsplit(":", 1)[-1] if ":" in where else where
            obj = os.path.basename(m.group(3) or "?")
            functions.append((ir, fn, obj))
    return total or 0, functions


def measure(name, server, send, close, requests, warmup):
    try:
        send(warmup)
        server.instrument(True)
        send(requests)
        server.instrument(False)
    finally:
        close()
        server.stop()
    return summarize(name, server, requests)


def summarize(name, server, requests):
    total, io, functions = annotate(server.out)
    if not total:
        die("%s: callgrind counted nothing (%s)" % (name, server.out))
    result = {
        "requests": requests,
        "instructions": total,
        "per_request": round(total / requests),
        "io_thread_per_request": round(io / requests),
        "top": [{"function": fn, "object": obj, "per_request": round(ir / requests),
                 "share": round(ir / total, 4)} for ir, fn, obj in functions[:TOP]],
    }
    log("%-14s %9d instructions per request, %d on the I/O thread" % (
        name, result["per_request"], result["io_thread_per_request"]))
    return result


def run_inferd_case(name, args, work, repo):
    http_port, grpc_port = free_port(), free_port()
    d = work / name
    d.mkdir()
    argv = inferd_argv(args, http_port, grpc_port, repo)
    sink = None
    if name.startswith("simple_json_observed"):
        sink = OtlpSink()
        argv += ["--access-log", str(d / "access.log"), "--trace-rate", "0.1",
                 "--otlp-endpoint", "http://127.0.0.1:%d/v1/traces" % sink.port]
    try:
        server = Server(argv, d, http_ready(http_port))
        return drive_inferd_case(name, args, d, server, http_port, grpc_port)
    finally:
        if sink:
            sink.close()


def drive_inferd_case(name, args, d, server, http_port, grpc_port):
    if name in ("simple_json_loaded", "simple_json_observed_loaded"):
        return measure_loaded(name, args, server, loaded_driver(args, http_port, d))
    if name in ("simple_json", "simple_json_observed"):
        send, close = http_driver(http_port, SIMPLE_PATH, SIMPLE_REQ,
                                  {"Content-Type": "application/json"},
                                  lambda b: b'"OUTPUT0"' in b)
    elif name == "digits_binary":
        body, json_len = digits_body()
        send, close = http_driver(http_port, DIGITS_PATH, body,
                                  {"Content-Type": "application/octet-stream",
                                   "Inference-Header-Content-Length": str(json_len)},
                                  lambda b: b'"label"' in b)
    else:
        send, close = grpc_driver(grpc_port, d / "py")
    return measure(name, server, send, close, args.requests, args.warmup)


def loaded_driver(args, port, work):
    """Experiment 1's closed loop from `inferd bench`; run(seconds) returns
    the requests answered (all must be 200)."""
    body = work / "simple_request.json"
    body.write_bytes(SIMPLE_REQ)

    def run(seconds):
        out = subprocess.run([args.inferd, "bench", "--url", "http://127.0.0.1:%d" % port,
                              "--path", SIMPLE_PATH, "--body-file", str(body), "--header",
                              "Content-Type: application/json", "--connections", "64",
                              "--duration", str(seconds), "--warmup", "0", "--json"],
                             capture_output=True, text=True)
        if out.returncode != 0:
            die("inferd bench failed: %s" % out.stderr[-500:])
        d = json.loads(out.stdout)
        if d["requests_ok"] != d["requests"] or not d["requests"]:
            die("inferd bench: %d of %d requests answered 200" % (d["requests_ok"], d["requests"]))
        return d["requests_ok"]
    return run


def measure_loaded(name, args, server, run):
    try:
        run(2)
        server.instrument(True)
        requests = run(args.loaded_seconds)
        server.instrument(False)
    finally:
        server.stop()
    return summarize(name, server, requests)


def simple_response(args, work, repo):
    """inferd's answer to the simple request, for nginx to return."""
    http_port, grpc_port = free_port(), free_port()
    proc = subprocess.Popen(inferd_argv(args, http_port, grpc_port, repo),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not http_ready(http_port)():
            if proc.poll() is not None or time.monotonic() > deadline:
                die("inferd did not start to capture the simple response")
            time.sleep(0.1)
        c = http.client.HTTPConnection("127.0.0.1", http_port, timeout=10)
        c.request("POST", SIMPLE_PATH, body=SIMPLE_REQ,
                  headers={"Content-Type": "application/json"})
        return c.getresponse().read()
    finally:
        proc.terminate()
        proc.wait()


def run_nginx(args, work, body):
    d = work / "nginx"
    d.mkdir()
    port = free_port()
    for sub in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (d / sub).mkdir()
    conf = (ROOT / "bench" / "nginx" / "nginx.conf.in").read_text()
    conf = conf.replace("master_process on;", "master_process off;")
    user = "user root;" if os.geteuid() == 0 else ""
    for key, value in (("WORKERS", "1"), ("DIR", str(d)), ("PORT", str(port)),
                       ("USER", user), ("BODY", body.decode().replace("'", "\\'"))):
        conf = conf.replace("@%s@" % key, value)
    (d / "nginx.conf").write_text(conf)
    argv = [args.nginx, "-p", str(d), "-c", str(d / "nginx.conf"), "-e", str(d / "error.log")]

    def ready():
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("POST", SIMPLE_PATH, body=SIMPLE_REQ)
            ok = c.getresponse().read() == body
            c.close()
            return ok
        except OSError:
            return False
    server = Server(argv, d, ready)
    send, close = http_driver(port, SIMPLE_PATH, SIMPLE_REQ,
                              {"Content-Type": "application/json"}, lambda b: b == body)
    return measure("nginx", server, send, close, args.requests, args.warmup)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out")
    p.add_argument("--inferd", required=True)
    p.add_argument("--repo", required=True, help="a repository with simple and digits")
    p.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    p.add_argument("--requests", type=int, default=1000)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--loaded-seconds", type=float, default=10,
                   help="simple_json_loaded: seconds counted (default 10)")
    p.add_argument("--cases",
                   default="simple_json,simple_json_loaded,simple_json_observed,"
                           "simple_json_observed_loaded,simple_grpc,digits_binary,nginx")
    p.add_argument("--keep", help="keep the callgrind files in this directory")
    args = p.parse_args()
    if not shutil.which("valgrind"):
        die("valgrind missing: run scripts/deps.sh --bench")
    cases = args.cases.split(",")
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="inferd-instr-"))
    work.mkdir(parents=True, exist_ok=True)
    repo = Path(args.repo)
    results = {"tool": "valgrind --tool=callgrind", "cases": {}}
    try:
        for name in cases:
            if name == "nginx":
                body = simple_response(args, work, repo)
                results["cases"][name] = run_nginx(args, work, body)
            elif name in ("simple_json", "simple_json_loaded", "simple_json_observed",
                          "simple_json_observed_loaded", "simple_grpc", "digits_binary"):
                results["cases"][name] = run_inferd_case(name, args, work, repo)
            else:
                die("unknown case %r" % name)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    c = results["cases"]
    if "simple_json" in c and "simple_json_observed" in c:
        results["observed_over_plain"] = round(
            c["simple_json_observed"]["per_request"] / c["simple_json"]["per_request"], 3)
        log("simple_json observed / plain: %.3f" % results["observed_over_plain"])
    if "simple_json_loaded" in c and "simple_json_observed_loaded" in c:
        results["observed_loaded_over_loaded"] = round(
            c["simple_json_observed_loaded"]["per_request"] /
            c["simple_json_loaded"]["per_request"], 3)
        log("simple_json observed / plain, loaded: %.3f" % results["observed_loaded_over_loaded"])
        results["observed_loaded_over_loaded_io"] = round(
            c["simple_json_observed_loaded"]["io_thread_per_request"] /
            c["simple_json_loaded"]["io_thread_per_request"], 3)
        log("simple_json observed / plain, loaded, I/O thread: %.3f" %
            results["observed_loaded_over_loaded_io"])
    if "simple_json" in c and "nginx" in c:
        results["simple_json_over_nginx"] = round(
            c["simple_json"]["per_request"] / c["nginx"]["per_request"], 2)
        log("simple_json / nginx: %.2f" % results["simple_json_over_nginx"])
    if "simple_json_loaded" in c and "nginx" in c:
        results["loaded_over_nginx"] = round(
            c["simple_json_loaded"]["per_request"] / c["nginx"]["per_request"], 2)
        log("simple_json_loaded / nginx: %.2f" % results["loaded_over_nginx"])
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
