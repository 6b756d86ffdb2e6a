"""Inference requests decided on their head (docs/limits.md, "Refused on
the head"): the key, the rate limits, an open breaker, the concurrency
limit and a full queue refuse a request before its body is read, and the
body of a refused request is never waited for.

Raw sockets throughout, so that a client can send a head that announces a
64 MiB body and then only a few bytes of it (or none) and still read its
answer: HTTP/1.1 (the answer closes the connection; with `Expect:
100-continue` the refusal comes instead of the 100), HTTP/2 (the answer,
then RST_STREAM(NO_ERROR); the connection keeps serving), TLS. An admitted
request whose body comes later, in pieces, chunked, over HTTP/1.0 or
HTTP/2, is answered once the body is complete; a client that leaves
mid-body ends its call (and the suite's ASan run checks for leaks).

"Admitted on its head" is observed through the rate-limit rule every
request of tenant `team-a` matches: its `admitted` counter moves as soon
as the head is in, before any byte of the body is sent.
"""
import json
import socket
import struct
import threading
import time

import pytest
import requests
from hpack import Decoder

from conftest import (HttpReader, MAIN_MODELS, connect, stall_repo, stall_started,
                      wait_stall_started)
from prom import scrape, wait_for
from test_admission import echo_repo
from test_auth import auth_yaml, new_key
from test_http2 import (CANCEL, DATA, END_HEADERS, END_STREAM, H2, HEADERS, RST_STREAM, frame,
                        request_block)
from test_tls import pki, tls_connect, tls_server  # noqa: F401 (pki is a fixture)

HUGE = 64 << 20  # what the refused clients announce (the server's default --max-body-bytes)
SIMPLE_BODY = json.dumps({"inputs": [
    {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
    {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}]}).encode()
SIMPLE_SUM = [i + 1 for i in range(16)]
INFER = "/v2/models/simple/infer"
ECHO_BODY = json.dumps({"inputs": [{"name": "IN", "shape": [1, 4], "datatype": "INT32",
                                    "data": [1, 2, 3, 4]}]}).encode()


@pytest.fixture(scope="module")
def keys():
    return {n: new_key() for n in ("team-a", "team-b")}


@pytest.fixture(scope="module")
def srv(module_server_factory, keys, tmp_path_factory):
    """team-a: unlimited in practice, and counted (rule 0); team-b: one
    call per 1000 s on simple (rule 1), spent here."""
    config = tmp_path_factory.mktemp("head") / "inferd.yaml"
    config.write_text(auth_yaml([("team-a", [keys["team-a"][1]], ["infer"]),
                                 ("team-b", [keys["team-b"][1]], ["infer"])]) +
                      "rate-limits:\n"
                      "  - tenant: team-a\n    rate: 100000\n    burst: 100000\n"
                      "  - tenant: team-b\n    model: simple\n    rate: 0.001\n    burst: 1\n")
    s = module_server_factory.start("--config", str(config),
                                    models={"simple": MAIN_MODELS["simple"]})
    r = requests.post(s.url + INFER, data=SIMPLE_BODY, headers=bearer(keys["team-b"][0]),
                      timeout=30)
    assert r.status_code == 200, r.text
    return s


def bearer(key):
    return {"authorization": "Bearer " + key}  # lower case: HTTP/2 requires it


def head(path, headers=(), length=HUGE, chunked=False, version="HTTP/1.1"):
    """A POST's head: Content-Length `length`, or chunked."""
    lines = ["POST %s %s" % (path, version), "Host: 127.0.0.1", "Content-Type: application/json"]
    lines.append("Transfer-Encoding: chunked" if chunked else "Content-Length: %d" % length)
    lines += ["%s: %s" % kv for kv in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def admitted(s):
    """Calls of team-a the rate limits let through so far."""
    return scrape(s).get("inferd_rate_limit_requests_total", rule="0", outcome="admitted")


def wait_admitted(s, count):
    got = wait_for(s, lambda x: x.get("inferd_rate_limit_requests_total", rule="0",
                                      outcome="admitted") >= count)
    assert got.get("inferd_rate_limit_requests_total", rule="0", outcome="admitted") >= count, \
        "the call was not started on its head"


def refused_on_head(port, data, sock=None):
    """Sends data (a head and at most a few bytes of the body it announces)
    and returns the answer; the server must then close the connection."""
    sock = sock or connect(port, timeout=20)
    try:
        sock.sendall(data)
        reader = HttpReader(sock)
        r = reader.read_response()
        assert r.header("connection") == "close", r
        assert reader.at_eof(timeout=20), "the connection stayed open after the refusal"
        return r
    finally:
        sock.close()


def assert_simple_ok(r):
    assert r.status == 200, r
    assert r.json()["outputs"][0]["data"] == SIMPLE_SUM


# --------------------------------------------------------------------------
# HTTP/1.1: refused before the body


def test_rate_limited_tenant_gets_429_before_sending_the_body(srv, keys):
    r = refused_on_head(srv.port, head(INFER, bearer(keys["team-b"][0]).items()) + b'{"inp')
    assert r.status == 429
    assert r.json() == {"error": "rate limit of tenant team-b on model simple exceeded "
                                 "(0.001/s, burst 1)"}
    assert int(r.header("retry-after")) >= 1
    assert r.header("ratelimit-remaining") == "0"


@pytest.mark.parametrize("headers", [[], [("Authorization", "Bearer not-a-key-of-anyone-here")]],
                         ids=["missing", "invalid"])
def test_missing_or_invalid_key_gets_401_before_the_body(srv, headers):
    r = refused_on_head(srv.port, head(INFER, headers))
    assert r.status == 401
    assert r.json()["error"] in ("missing API key", "invalid API key")
    assert r.header("www-authenticate").startswith("Bearer realm=\"inferd\"")
    # The OpenAI API names the model in the body: its key is checked on the
    # head all the same, in its own shape.
    r = refused_on_head(srv.port, head("/v1/chat/completions", headers) + b"{")
    assert r.status == 401
    assert r.json()["error"]["code"] == "invalid_api_key"


def test_expect_100_continue(srv, keys):
    """Refused: the final status instead of 100 Continue. Admitted: 100,
    then the answer, on a connection that stays open."""
    expect = [("Expect", "100-continue")]
    r = refused_on_head(srv.port, head(INFER, expect))
    assert r.status == 401
    s = connect(srv.port, timeout=20)
    try:
        s.sendall(head(INFER, expect + list(bearer(keys["team-a"][0]).items()),
                       length=len(SIMPLE_BODY)))
        reader = HttpReader(s)
        assert reader.read_response().status == 100
        s.sendall(SIMPLE_BODY)
        assert_simple_ok(reader.read_response())
        s.sendall(head(INFER, bearer(keys["team-a"][0]).items(), length=len(SIMPLE_BODY)) +
                  SIMPLE_BODY)
        assert_simple_ok(reader.read_response())
    finally:
        s.close()


def test_refused_request_with_an_unread_body_closes_before_the_next_one(srv):
    """What follows the refused head is its body, not a request: the
    pipelined request after it is never answered (nor misread)."""
    s = connect(srv.port, timeout=20)
    try:
        s.sendall(head(INFER, length=100) + b"x" * 10)
        reader = HttpReader(s)
        assert reader.read_response().status == 401
        try:
            s.sendall(b"y" * 90 + b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert reader.at_eof(timeout=20)
    finally:
        s.close()


def test_tls_refusal_on_the_head(server_factory, pki, tmp_path):  # noqa: F811
    config = tmp_path / "inferd.yaml"
    config.write_text(auth_yaml([("team-a", [new_key()[1]], ["infer"])]))
    srv = tls_server(server_factory, pki, tmp_path, "--config", str(config))
    r = refused_on_head(srv.port, head(INFER) + b"{", sock=tls_connect(pki, srv.port))
    assert r.status == 401


# --------------------------------------------------------------------------
# admitted on the head, body later


def test_body_in_pieces_is_answered_once_complete(srv, keys):
    """Content-Length over HTTP/1.1 and HTTP/1.0, and chunked: the call is
    admitted on the head (the rate limit counted it), decode waits for the
    last piece."""
    key = list(bearer(keys["team-a"][0]).items())
    pieces = [SIMPLE_BODY[:7], SIMPLE_BODY[7:100], SIMPLE_BODY[100:]]
    for version in ("HTTP/1.1", "HTTP/1.0"):
        before = admitted(srv)
        s = connect(srv.port, timeout=20)
        try:
            s.sendall(head(INFER, key, length=len(SIMPLE_BODY), version=version))
            wait_admitted(srv, before + 1)
            for p in pieces:
                s.sendall(p)
                time.sleep(0.05)
            assert_simple_ok(HttpReader(s).read_response())
        finally:
            s.close()
    before = admitted(srv)
    s = connect(srv.port, timeout=20)
    try:
        s.sendall(head(INFER, key, chunked=True))
        wait_admitted(srv, before + 1)
        for p in pieces:
            s.sendall(b"%x\r\n%s\r\n" % (len(p), p))
            time.sleep(0.05)
        s.sendall(b"0\r\n\r\n")
        reader = HttpReader(s)
        assert_simple_ok(reader.read_response())
        # Keep-alive: the connection goes on after a request taken on its head.
        s.sendall(head(INFER, key, length=len(SIMPLE_BODY)) + SIMPLE_BODY)
        assert_simple_ok(reader.read_response())
    finally:
        s.close()


def failures(s):
    return scrape(s).get("nv_inference_request_failure", model="simple")


def test_client_that_leaves_mid_body_ends_its_call(srv, keys):
    """The call waits in decode; the client closes (or resets) the
    connection: the call ends (counted as a failure of the model), nothing
    is answered, the server goes on."""
    key = list(bearer(keys["team-a"][0]).items())
    for reset in (False, True):
        before, failed = admitted(srv), failures(srv)
        s = connect(srv.port, timeout=20)
        s.sendall(head(INFER, key, length=len(SIMPLE_BODY)) + SIMPLE_BODY[:10])
        wait_admitted(srv, before + 1)
        if reset:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
        got = wait_for(srv, lambda x: x.get("nv_inference_request_failure", model="simple") >
                       failed)
        assert got.get("nv_inference_request_failure", model="simple") == failed + 1
    r = requests.post(srv.url + INFER, data=SIMPLE_BODY, headers=bearer(keys["team-a"][0]),
                      timeout=30)
    assert r.status_code == 200, r.text


# --------------------------------------------------------------------------
# HTTP/2


def h2_headers(conn, decoder, stream):
    """The frames of `stream` up to its end (END_STREAM or RST_STREAM) as
    (status, body, reset error code or None)."""
    status, body, reset = None, b"", None
    for f in conn.stream_end(stream):
        assert f is not None, "the connection ended"
        ftype, flags, sid, payload = f
        if ftype == HEADERS:
            fields = dict(decoder.decode(payload))  # every block, to keep HPACK in step
            if sid == stream:
                status = int(fields[":status"])
        elif sid == stream and ftype == DATA:
            body += payload
        elif sid == stream and ftype == RST_STREAM:
            reset = struct.unpack(">I", payload)[0]
    return status, body, reset


def test_h2_refused_stream_is_answered_and_reset_the_connection_goes_on(srv, keys):
    conn = H2(srv.port).handshake()
    decoder = Decoder()
    try:
        for sid, hdrs, want in ((1, [], 401), (3, bearer(keys["team-b"][0]).items(), 429)):
            conn.send(frame(HEADERS, END_HEADERS, sid, request_block(
                "POST", INFER, [("content-length", str(HUGE))] + list(hdrs))) +
                frame(DATA, 0, sid, b'{"inputs"'))
            status, body, reset = h2_headers(conn, decoder, sid)
            if reset is None:  # the answer ended the stream; the reset follows
                reset = [f for f in conn.frames(lambda f: f[0] == RST_STREAM and f[2] == sid)
                         if f and f[0] == RST_STREAM][0][3]
                reset = struct.unpack(">I", reset)[0]
            assert status == want, body
            assert b'"error"' in body
            assert reset == 0, "RST_STREAM(NO_ERROR) expected, got %d" % reset
        # Admitted on its head, its body later: answered, on the same connection.
        before = admitted(srv)
        conn.send(frame(HEADERS, END_HEADERS, 5, request_block(
            "POST", INFER, [("content-length", str(len(SIMPLE_BODY)))] +
            list(bearer(keys["team-a"][0]).items()))) + frame(DATA, 0, 5, SIMPLE_BODY[:10]))
        wait_admitted(srv, before + 1)
        conn.send(frame(DATA, END_STREAM, 5, SIMPLE_BODY[10:]))
        status, body, _ = h2_headers(conn, decoder, 5)
        assert status == 200, body
        assert json.loads(body)["outputs"][0]["data"] == SIMPLE_SUM
        # A stream reset mid-body ends its call; the connection goes on.
        before, failed = admitted(srv), failures(srv)
        conn.send(frame(HEADERS, END_HEADERS, 7, request_block(
            "POST", INFER, list(bearer(keys["team-a"][0]).items()))) +
            frame(DATA, 0, 7, SIMPLE_BODY[:10]))
        wait_admitted(srv, before + 1)
        conn.send(frame(RST_STREAM, 0, 7, struct.pack(">I", CANCEL)))
        wait_for(srv, lambda x: x.get("nv_inference_request_failure", model="simple") > failed)
        conn.request(9, "GET", "/v2/health/live")
        assert h2_headers(conn, decoder, 9)[0] == 200
    finally:
        conn.close()


# --------------------------------------------------------------------------
# breaker, concurrency limit, queue


def start_echo(server_factory, tmp_path, repo, config):
    path = tmp_path / "inferd.yaml"
    path.write_text(config)
    return server_factory.start("--config", str(path), repository=repo)


def test_open_breaker_refuses_on_the_head(server_factory, tmp_path):
    flag = tmp_path / "failing"
    flag.write_text("")
    repo = echo_repo(tmp_path, parameters={1: [("fail_while_exists", flag)]})
    srv = start_echo(server_factory, tmp_path, repo, "breakers:\n  - model: echo\n"
                     "    consecutive-failures: 1\n    open-secs: 600\n")
    r = requests.post(srv.url + "/v2/models/echo/infer", data=ECHO_BODY, timeout=30)
    assert r.status_code == 500, r.text
    r = refused_on_head(srv.port, head("/v2/models/echo/infer") + b"{")
    assert r.status == 503
    assert r.json()["error"].startswith("circuit breaker of echo version 1 is open"), r
    assert int(r.header("retry-after")) >= 1


def echo_refused_while(srv, steps):
    """For each (request, ready) of steps: request() runs in the background,
    then ready() waits until the server has it where it should be. Then an
    echo request's head (and one byte) is sent: its answer, returned once
    the background requests are done."""
    threads = []
    try:
        for request, ready in steps:
            threads.append(threading.Thread(target=request))
            threads[-1].start()
            ready()
        return refused_on_head(srv.port, head("/v2/models/echo/infer") + b"{")
    finally:
        for t in threads:
            t.join()


def test_concurrency_limit_refuses_on_the_head(server_factory, tmp_path):
    """At the limit, with no queueing: refused before the body, and the
    refusal counted once."""
    repo = echo_repo(tmp_path, parameters={1: [("delay_us", 1500000)]})
    srv = start_echo(server_factory, tmp_path, repo, "concurrency:\n  - model: echo\n"
                     "    min: 1\n    max: 1\n    queue: false\n")
    url = srv.url + "/v2/models/echo/infer"
    r = echo_refused_while(srv, [(
        lambda: requests.post(url, data=ECHO_BODY, timeout=60),
        lambda: wait_for(srv, lambda s: s.get("inferd_concurrency_in_flight", model="echo") == 1))])
    assert r.status == 503
    assert r.json()["error"] == "concurrency limit of echo version 1 reached (1 in flight)"
    assert int(r.header("retry-after")) >= 1
    assert scrape(srv).get("inferd_concurrency_refusals_total", model="echo",
                           reason="limit") == 1


def test_full_queue_refuses_on_the_head(server_factory, tmp_path):
    """One instance busy, the one place of the queue taken: a third request
    is refused (429, as submit refuses) before its body."""
    srv = server_factory.start("--queue-limit", "1", repository=stall_repo(tmp_path, 1500000))
    url = srv.url + "/v2/models/echo/infer"
    started = stall_started(tmp_path)  # warm-up runs count too
    post = lambda: requests.post(url, data=ECHO_BODY, timeout=60)  # noqa: E731
    r = echo_refused_while(srv, [
        (post, lambda: wait_stall_started(tmp_path, started + 1)),
        (post, lambda: wait_for(srv, lambda s: s.get("inferd_queue_depth", model="echo") == 1))])
    assert r.status == 429
    assert r.json()["error"] == "model 'echo' queue is full (1 requests waiting)"
    assert r.header("retry-after") == "1"
