"""HTTP/2: the REST API over h2 (prior knowledge), the gRPC port's HTTP/2-only
rule, concurrency on one connection, limits and abuse regressions.

Clients: curl --http2-prior-knowledge and h2load (nghttp2) for conformant
traffic; a raw socket client below (frames built with struct, HPACK with a
literal-only encoder) for hostile traffic. The raw client only reads frame
headers and payloads; it never decodes the server's HPACK.
"""
import json
import os
import signal
import socket
import struct
import subprocess
import time

import numpy as np
import requests

from conftest import REPO_ROOT, assert_error, connect, raw_http, usr1_stats

SLOW = REPO_ROOT / "tests" / "models" / "slow"

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, \
    WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4
REFUSED_STREAM, CANCEL = 0x7, 0x8


# --------------------------------------------------------------------------
# A raw HTTP/2 client


def frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + struct.pack(">BBI", ftype, flags, stream) + payload


def hpack_int(value, prefix_bits, first=0):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = [first | limit]
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def hpack_str(s):
    b = s.encode() if isinstance(s, str) else s
    return hpack_int(len(b), 7) + b


def hpack_literal(name, value, index=False):
    """Literal header field with a new name: without indexing, or with
    incremental indexing (it enters the dynamic table)."""
    return (b"\x40" if index else b"\x00") + hpack_str(name) + hpack_str(value)


def request_block(method, path, headers=()):
    block = b"".join(hpack_literal(n, v) for n, v in
                     ((":method", method), (":scheme", "http"), (":path", path),
                      (":authority", "localhost")))
    return block + b"".join(hpack_literal(n, v) for n, v in headers)


class H2:
    """A client connection: preface + empty SETTINGS sent on open."""

    def __init__(self, port, rcvbuf=None, timeout=10.0):
        if rcvbuf:
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            self.sock.settimeout(timeout)
            self.sock.connect(("127.0.0.1", port))
        else:
            self.sock = connect(port, timeout=timeout)
        self.buf = b""
        # Large receive windows: the tests read responses without ever
        # sending WINDOW_UPDATE.
        self.send(PREFACE + frame(SETTINGS, 0, 0, struct.pack(">HI", 0x4, 0x7FFFFFFF)) +
                  frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 0x7FFFFFFF - 65535)))

    def handshake(self):
        """Waits for the server's SETTINGS (acknowledged by read_frame) and
        its connection WINDOW_UPDATE, so that large bodies may be sent."""
        self.frames(lambda f: f[0] == WINDOW_UPDATE and f[2] == 0)
        return self

    def send(self, data):
        self.sock.sendall(data)

    def request(self, stream, method, path, headers=(), body=None):
        flags = END_HEADERS | (0 if body is not None else END_STREAM)
        out = frame(HEADERS, flags, stream, request_block(method, path, headers))
        if body is not None:
            chunks = [body[i:i + 16384] for i in range(0, len(body), 16384)] or [b""]
            for i, chunk in enumerate(chunks):
                out += frame(DATA, END_STREAM if i == len(chunks) - 1 else 0, stream, chunk)
        self.send(out)

    def read_frame(self, timeout=10.0):
        """The next frame as (type, flags, stream, payload), or None at EOF,
        reset or timeout."""
        deadline = time.monotonic() + timeout
        while True:
            if len(self.buf) >= 9:
                length = struct.unpack(">I", b"\0" + self.buf[:3])[0]
                if len(self.buf) >= 9 + length:
                    ftype, flags, stream = struct.unpack(">BBI", self.buf[3:9])
                    payload = self.buf[9:9 + length]
                    self.buf = self.buf[9 + length:]
                    if ftype == SETTINGS and not flags & ACK:
                        try:
                            self.send(frame(SETTINGS, ACK, 0))
                        except (BrokenPipeError, ConnectionResetError):
                            pass
                    return ftype, flags, stream & 0x7FFFFFFF, payload
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                b = self.sock.recv(65536)
            except (socket.timeout, ConnectionResetError):
                return None
            if not b:
                return None
            self.buf += b

    def frames(self, until, timeout=20.0):
        """Read frames until until(frame) is true (returns the frames read,
        the last one included) or the connection ends (then the last
        element is None)."""
        got = []
        deadline = time.monotonic() + timeout
        while True:
            f = self.read_frame(max(0.0, deadline - time.monotonic()))
            got.append(f)
            if f is None or until(f):
                return got

    def stream_end(self, stream, timeout=20.0):
        """Frames until the stream ends (END_STREAM or RST_STREAM)."""
        return self.frames(lambda f: f[2] == stream and (
            f[0] == RST_STREAM or (f[0] in (HEADERS, DATA) and f[1] & END_STREAM)), timeout)

    def close(self):
        self.sock.close()


def goaway_of(frames):
    for f in frames:
        if f and f[0] == GOAWAY:
            last, code = struct.unpack(">II", f[3][:8])
            return last & 0x7FFFFFFF, code
    return None


def closed_or_goaway(conn, timeout=30.0):
    """True if the server sends GOAWAY or closes the connection."""
    frames = conn.frames(lambda f: f[0] == GOAWAY, timeout)
    return frames[-1] is None or goaway_of(frames) is not None


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


# --------------------------------------------------------------------------
# curl and h2load


def curl_h2(url, *args, timeout=30):
    """One request with curl over HTTP/2 (prior knowledge). Returns (http
    version line, status, {header: value}, body bytes)."""
    r = subprocess.run(["curl", "-s", "-S", "-i", "--http2-prior-knowledge", "--max-time",
                        str(timeout)] + list(args) + [url], capture_output=True, timeout=timeout + 10)
    assert r.returncode == 0, r.stderr.decode()
    head, _, body = r.stdout.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    version, status = lines[0].split()[:2]
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return version, int(status), headers, body


SIMPLE_REQUEST = {"inputs": [
    {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": list(range(16))},
    {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": [1] * 16}]}


def test_h2_health_and_metadata(server):
    for path in ("/v2/health/live", "/v2/health/ready", "/v2/models/simple/ready"):
        version, status, _, body = curl_h2(server.url + path)
        assert (version, status, body) == ("HTTP/2", 200, b"")
    version, status, headers, body = curl_h2(server.url + "/v2")
    assert version == "HTTP/2" and status == 200
    assert headers["content-type"] == "application/json"
    assert json.loads(body) == requests.get(server.url + "/v2").json()
    _, status, _, body = curl_h2(server.url + "/v2/models/simple")
    assert status == 200 and json.loads(body)["name"] == "simple"


def test_h2_head_has_no_body(server):
    version, status, headers, body = curl_h2(server.url + "/v2", "-I")
    assert status == 200 and body == b""
    assert int(headers["content-length"]) > 0


def test_h2_infer_json(server):
    _, status, headers, body = curl_h2(server.url + "/v2/models/simple/infer", "-H",
                                       "content-type: application/json", "--data-binary",
                                       json.dumps(SIMPLE_REQUEST))
    assert status == 200, body
    outs = {o["name"]: o["data"] for o in json.loads(body)["outputs"]}
    assert outs["OUTPUT0"] == [i + 1 for i in range(16)]
    assert outs["OUTPUT1"] == [i - 1 for i in range(16)]


def test_h2_infer_binary(server, tmp_path):
    a = np.arange(16, dtype=np.int32)
    b = np.full(16, 2, dtype=np.int32)
    header = json.dumps({"inputs": [
        {"name": n, "datatype": "INT32", "shape": [1, 16],
         "parameters": {"binary_data_size": 64}} for n in ("INPUT0", "INPUT1")],
        "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}).encode()
    body_file = tmp_path / "body.bin"
    body_file.write_bytes(header + a.tobytes() + b.tobytes())
    _, status, headers, body = curl_h2(
        server.url + "/v2/models/simple/infer", "-H", "content-type: application/octet-stream",
        "-H", "Inference-Header-Content-Length: %d" % len(header), "--data-binary",
        "@%s" % body_file)
    assert status == 200, body
    json_len = int(headers["inference-header-content-length"])
    doc = json.loads(body[:json_len])
    assert doc["outputs"][0]["parameters"]["binary_data_size"] == 64
    assert np.frombuffer(body[json_len:], dtype=np.int32).tolist() == (a + b).tolist()


def test_h2_errors_have_json_bodies(server):
    _, status, headers, body = curl_h2(server.url + "/v2/models/nope")
    assert_error(status, body, 404, headers.get("content-type"))
    _, status, headers, body = curl_h2(server.url + "/v2/models/simple/infer", "--data-binary",
                                       "{not json")
    assert_error(status, body, 400, headers.get("content-type"))


def test_h2_body_over_limit_is_413(server_factory):
    srv = server_factory.start("--max-body-bytes", "1024")
    big = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [1, 400],
                                  "data": [1] * 400}]})
    _, status, headers, body = curl_h2(srv.url + "/v2/models/simple/infer", "--data-binary", big)
    assert_error(status, body, 413, headers.get("content-type"))
    # The limit also holds when no content-length announces the body.
    conn = H2(srv.port)
    conn.send(frame(HEADERS, END_HEADERS, 1, request_block("POST", "/v2/models/simple/infer")))
    conn.send(frame(DATA, 0, 1, b"x" * 800) + frame(DATA, END_STREAM, 1, b"x" * 800))
    frames = conn.stream_end(1)
    assert any(f and f[0] == HEADERS and f[2] == 1 for f in frames), frames
    conn.close()
    assert requests.get(srv.url + "/v2/health/live").status_code == 200


def test_h2load_many_streams_on_few_connections(server, tmp_path):
    body = tmp_path / "infer.json"
    body.write_text(json.dumps(SIMPLE_REQUEST))
    r = subprocess.run(["h2load", "-n", "2000", "-c", "4", "-m", "32", "-d", str(body), "-H",
                        "content-type: application/json",
                        server.url + "/v2/models/simple/infer"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2000 succeeded, 0 failed, 0 errored" in r.stdout, r.stdout
    assert "status codes: 2000 2xx, 0 3xx, 0 4xx, 0 5xx" in r.stdout, r.stdout


def stats_allocations(srv):
    return int(usr1_stats(srv)["allocations"])


def test_regress_h2_requests_allocate_nothing_once_warm(server_factory, tmp_path):
    """nghttp2's per-stream objects and the stream buffers are reused within
    a connection: what a run allocates is bounded per connection (its
    stream pool and block cache filling up), not per request. Before the
    reuse, every request over HTTP/2 cost about 11 allocations."""
    srv = server_factory.start()
    body = tmp_path / "infer.json"
    body.write_text(json.dumps(SIMPLE_REQUEST))
    n = 20000

    def run():
        r = subprocess.run(["h2load", "-n", str(n), "-c", "4", "-m", "32", "-d", str(body),
                            "-H", "content-type: application/json",
                            srv.url + "/v2/models/simple/infer"],
                           capture_output=True, text=True, timeout=300)
        assert "%d succeeded, 0 failed" % n in r.stdout, r.stdout + r.stderr

    run()  # warm-up: the model's batch pool and the first connections
    before = stats_allocations(srv)
    run()
    used = stats_allocations(srv) - before
    # 4 new connections, each filling a stream pool of up to 32 streams and
    # its block cache (about 500 allocations); nothing per request.
    assert used < 4 * 1000, "%d allocations for %d requests over HTTP/2" % (used, n)


def test_h2_streams_answer_out_of_order(server_factory):
    """A slow infer and a health check on one connection: the health check
    is answered while the infer is still running."""
    srv = server_factory.start(models={"slow": SLOW})
    conn = H2(srv.port).handshake()
    x = np.ones((512, 256), dtype=np.float32)
    header = json.dumps({"inputs": [{"name": "X", "shape": [512, 256], "datatype": "FP32",
                                     "parameters": {"binary_data_size": x.nbytes}}]}).encode()
    conn.request(1, "POST", "/v2/models/slow/infer",
                 [("inference-header-content-length", str(len(header)))], header + x.tobytes())
    conn.request(3, "GET", "/v2/health/live")
    ends = []
    while len(ends) < 2:
        f = conn.read_frame(60)
        assert f is not None
        if f[0] in (HEADERS, DATA) and f[1] & END_STREAM:
            ends.append(f[2])
    assert sorted(ends) == [1, 3]
    conn.close()


def test_grpc_port_refuses_http1(server):
    out = raw_http(server.grpc_port, b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 505 "), out
    assert b'{"error":' in out


def test_grpc_port_speaks_h2(server):
    _, status, _, _ = curl_h2("http://127.0.0.1:%d/v2/health/live" % server.grpc_port)
    assert status == 200


def test_h2_reset_while_handler_works(server_factory):
    """Streams reset (and a connection closed) while their infer runs: the
    server drops the answers and keeps serving."""
    srv = server_factory.start(models={"slow": SLOW})
    x = np.ones((256, 256), dtype=np.float32)
    header = json.dumps({"inputs": [{"name": "X", "shape": [256, 256], "datatype": "FP32",
                                     "parameters": {"binary_data_size": x.nbytes}}]}).encode()
    hdrs = [("inference-header-content-length", str(len(header)))]
    conn = H2(srv.port)
    for sid in (1, 3, 5):
        conn.request(sid, "POST", "/v2/models/slow/infer", hdrs, header + x.tobytes())
        conn.send(frame(RST_STREAM, 0, sid, struct.pack(">I", CANCEL)))
    conn.request(7, "POST", "/v2/models/slow/infer", hdrs, header + x.tobytes())
    conn.request(9, "GET", "/v2/health/live")
    conn.stream_end(9)
    conn.close()  # stream 7 is still running
    assert requests.get(srv.url + "/v2/health/live").status_code == 200
    _, status, _, _ = curl_h2(srv.url + "/v2/health/ready")
    assert status == 200


def test_h2_idle_connection_is_closed(server_factory):
    srv = server_factory.start("--idle-timeout-secs", "1")
    conn = H2(srv.port)
    frames = conn.frames(lambda f: False, timeout=30)
    assert frames[-1] is None  # closed by the server, not by our timeout
    conn.close()


def test_h2_graceful_drain(server_factory):
    """SIGTERM: GOAWAY, the stream in flight is answered, then the server exits."""
    srv = server_factory.start(models={"slow": SLOW})
    conn = H2(srv.port).handshake()
    conn.request(1, "GET", "/v2/health/live")
    conn.stream_end(1)
    x = np.ones((256, 256), dtype=np.float32)
    header = json.dumps({"inputs": [{"name": "X", "shape": [256, 256], "datatype": "FP32",
                                     "parameters": {"binary_data_size": x.nbytes}}]}).encode()
    conn.request(3, "POST", "/v2/models/slow/infer",
                 [("inference-header-content-length", str(len(header)))], header + x.tobytes())
    srv.proc.send_signal(signal.SIGTERM)
    frames = conn.frames(lambda f: False, timeout=60)
    assert frames[-1] is None  # the server closed the connection
    goaway = goaway_of(frames)
    assert goaway is not None and goaway[1] == 0, frames
    answered = [f for f in frames if f and f[2] == 3 and f[0] == HEADERS]
    if goaway[0] >= 3:
        assert answered, "stream 3 was accepted before GOAWAY but not answered"
    else:
        assert not answered
    conn.close()
    srv.proc.wait(timeout=30)  # exits on its own: no second signal
    problems = srv.stop(require_running=False)
    assert problems == [], "\n".join(problems)


# --------------------------------------------------------------------------
# Limits and abuse: each ends in a stream error, GOAWAY or close, and the
# server keeps serving other clients with bounded memory.


def assert_serving(srv):
    assert requests.get(srv.url + "/v2/health/live", timeout=10).status_code == 200
    _, status, _, _ = curl_h2(srv.url + "/v2/health/live")
    assert status == 200


def test_regress_hpack_bomb(server_factory):
    """One 4 KB header entered in the dynamic table, then referenced by a
    one-byte index thousands of times: ~48 MB of decoded headers per block.
    The stream is refused (431 or RST_STREAM) and memory stays bounded."""
    srv = server_factory.start()
    before = rss_kb(srv.proc.pid)
    conn = H2(srv.port)
    entry = hpack_literal("x-bomb", "a" * 4000, index=True)
    for i in range(20):
        sid = 1 + 2 * i
        block = request_block("GET", "/v2/health/live") + (entry if i == 0 else b"")
        block += b"\xbe" * (16000 - len(block))  # indexed field 62: the first dynamic entry
        conn.send(frame(HEADERS, END_HEADERS | END_STREAM, sid, block))
        frames = conn.stream_end(sid)
        if frames[-1] is None or goaway_of(frames):
            break
        assert frames[-1][0] in (HEADERS, DATA, RST_STREAM)
    conn.close()
    assert_serving(srv)
    assert rss_kb(srv.proc.pid) - before < 64 * 1024


def test_regress_h2_header_list_too_large(server_factory):
    srv = server_factory.start("--max-header-bytes", "8192", "--max-headers", "8")
    big = ["-H", "x-a: " + "a" * 3000, "-H", "x-b: " + "b" * 3000, "-H", "x-c: " + "c" * 3000]
    _, status, headers, body = curl_h2(srv.url + "/v2/health/live", *big)
    assert_error(status, body, 431, headers.get("content-type"))
    many = []
    for i in range(12):
        many += ["-H", "x-%d: %d" % (i, i)]
    _, status, headers, body = curl_h2(srv.url + "/v2/health/live", *many)
    assert_error(status, body, 431, headers.get("content-type"))
    assert_serving(srv)


def test_regress_rapid_reset(server_factory):
    """CVE-2023-44487: streams opened and reset at once, thousands of times.
    nghttp2's reset rate limit ends the connection with GOAWAY."""
    srv = server_factory.start()
    conn = H2(srv.port)
    block = request_block("POST", "/v2/models/simple/infer")
    burst = b"".join(frame(HEADERS, END_HEADERS, sid, block) +
                     frame(RST_STREAM, 0, sid, struct.pack(">I", CANCEL))
                     for sid in range(1, 2 * 3000, 2))
    try:
        conn.send(burst)
    except (BrokenPipeError, ConnectionResetError):
        pass
    assert closed_or_goaway(conn)
    conn.close()
    assert_serving(srv)


def flood(srv, unit, count=200000):
    """Sends `unit` frames without reading; the server must give up on the
    connection (GOAWAY and close) instead of queueing answers forever."""
    before = rss_kb(srv.proc.pid)
    conn = H2(srv.port, rcvbuf=4096)
    closed = False
    try:
        for _ in range(count // 1000):
            conn.send(unit * 1000)
    except (BrokenPipeError, ConnectionResetError, socket.timeout):
        closed = True
    if not closed:
        closed = closed_or_goaway(conn)
    conn.close()
    assert closed
    assert_serving(srv)
    assert rss_kb(srv.proc.pid) - before < 64 * 1024


def test_regress_ping_flood(server_factory):
    flood(server_factory.start(), frame(PING, 0, 0, b"12345678"))


def test_regress_settings_flood(server_factory):
    srv = server_factory.start()
    flood(srv, frame(SETTINGS, 0, 0, struct.pack(">HI", 0x4, 65535)))
    # One SETTINGS frame with more entries than allowed: GOAWAY at once.
    conn = H2(srv.port)
    conn.send(frame(SETTINGS, 0, 0, struct.pack(">HI", 0x4, 65535) * 100))
    assert closed_or_goaway(conn)
    conn.close()


def test_regress_h2_too_many_streams(server_factory):
    srv = server_factory.start("--h2-max-concurrent-streams", "4")
    conn = H2(srv.port)
    block = request_block("POST", "/v2/models/simple/infer")
    conn.send(b"".join(frame(HEADERS, END_HEADERS, sid, block) for sid in range(1, 21, 2)))
    refused = set()

    def sixth_refusal(f):
        if f[0] == RST_STREAM and struct.unpack(">I", f[3])[0] == REFUSED_STREAM:
            refused.add(f[2])
        return len(refused) >= 6

    frames = conn.frames(sixth_refusal, 20)
    assert len(refused) >= 6, frames
    conn.close()
    assert_serving(srv)


def test_regress_continuation_flood(server_factory):
    srv = server_factory.start()
    conn = H2(srv.port)
    block = request_block("GET", "/v2/health/live")
    data = frame(HEADERS, END_STREAM, 1, block)
    data += b"".join(frame(CONTINUATION, 0, 1, hpack_literal("x-c", "v")) for _ in range(2000))
    try:
        conn.send(data)
    except (BrokenPipeError, ConnectionResetError):
        pass
    assert closed_or_goaway(conn)
    conn.close()
    assert_serving(srv)


def test_regress_h2_garbage_after_preface(server):
    conn = H2(server.port)
    try:
        conn.send(os.urandom(4096))
    except (BrokenPipeError, ConnectionResetError):
        pass
    assert closed_or_goaway(conn)
    conn.close()
    assert_serving(server)
