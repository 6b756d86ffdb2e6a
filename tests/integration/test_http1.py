"""HTTP/1.1 connection handling, over raw sockets."""
import json
import socket
import time

import pytest
import requests

from conftest import HttpReader, assert_error_response, connect, http_request, raw_http, parse_responses

INFER_BODY = json.dumps({"inputs": [
    {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
    {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}]}).encode()
SUM = list(range(1, 17))
DIFF = list(range(-1, 15))


def check_infer(resp):
    assert resp.status == 200, resp
    doc = resp.json()
    assert doc["outputs"][0]["data"] == SUM
    assert doc["outputs"][1]["data"] == DIFF


def check_live(resp):
    assert resp.status == 200, resp
    assert resp.body == b""


def test_keep_alive_by_default(server):
    s = connect(server.port)
    try:
        r = HttpReader(s)
        for _ in range(3):
            s.sendall(http_request("GET", "/v2/health/live"))
            resp = r.read_response()
            check_live(resp)
            assert resp.version == "HTTP/1.1"
            assert "close" not in resp.header_tokens("connection")
            s.sendall(http_request("POST", "/v2/models/simple/infer", INFER_BODY))
            resp = r.read_response()
            check_infer(resp)
            assert "close" not in resp.header_tokens("connection")
            s.sendall(http_request("GET", "/v2/models/simple"))
            resp = r.read_response()
            assert resp.status == 200 and resp.json()["name"] == "simple"
    finally:
        s.close()


def test_connection_close(server):
    s = connect(server.port)
    try:
        s.sendall(http_request("GET", "/v2/health/live", headers=[("Connection", "close")]))
        r = HttpReader(s)
        resp = r.read_response()
        check_live(resp)
        assert "close" in resp.header_tokens("connection"), resp.headers
        assert r.at_eof(), "connection not closed after Connection: close"
    finally:
        s.close()


def test_connection_close_on_infer(server):
    data = raw_http(server.port, http_request("POST", "/v2/models/simple/infer", INFER_BODY,
                                              headers=[("Connection", "close")]))
    resps = parse_responses(data)
    assert len(resps) == 1
    check_infer(resps[0])
    assert "close" in resps[0].header_tokens("connection")


def test_http10_closes_by_default(server):
    s = connect(server.port)
    try:
        s.sendall(b"GET /v2/health/live HTTP/1.0\r\n\r\n")
        r = HttpReader(s)
        check_live(r.read_response())
        assert r.at_eof(), "HTTP/1.0 connection left open"
    finally:
        s.close()


def test_http10_keep_alive(server):
    s = connect(server.port)
    try:
        r = HttpReader(s)
        s.sendall(b"GET /v2/health/live HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        resp = r.read_response()
        check_live(resp)
        assert "close" not in resp.header_tokens("connection")
        body = INFER_BODY
        s.sendall(b"POST /v2/models/simple/infer HTTP/1.0\r\nConnection: keep-alive\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        check_infer(r.read_response())
        s.sendall(b"GET /v2/health/live HTTP/1.0\r\n\r\n")
        check_live(r.read_response())
        assert r.at_eof()
    finally:
        s.close()


def test_pipelining(server):
    s = connect(server.port)
    try:
        s.sendall(http_request("GET", "/v2/health/live")
                  + http_request("POST", "/v2/models/simple/infer", INFER_BODY)
                  + http_request("GET", "/v2/models/digits"))
        r = HttpReader(s)
        check_live(r.read_response())
        check_infer(r.read_response())
        resp = r.read_response()
        assert resp.status == 200 and resp.json()["name"] == "digits"
    finally:
        s.close()


def test_pipelining_errors_and_close(server):
    """Pipelined: an infer, a 404, an infer with an id, then Connection: close."""
    body2 = json.loads(INFER_BODY)
    body2["id"] = "second"
    body2 = json.dumps(body2).encode()
    data = (http_request("POST", "/v2/models/simple/infer", INFER_BODY)
            + http_request("GET", "/v2/models/nosuchmodel")
            + http_request("POST", "/v2/models/simple/infer", body2)
            + http_request("GET", "/v2/health/ready", headers=[("Connection", "close")]))
    resps = parse_responses(raw_http(server.port, data))
    assert [x.status for x in resps] == [200, 404, 200, 200]
    check_infer(resps[0])
    assert_error_response(resps[1], 404)
    check_infer(resps[2])
    assert "id" not in resps[0].json()
    assert resps[2].json()["id"] == "second"


def test_infer_errors_keep_the_connection(server):
    """A 400/404 from the API layer is not an HTTP error: the connection and
    the pipelined requests behind it are served."""
    bad_json = b"{not json"
    bad_shape = json.loads(INFER_BODY)
    bad_shape["inputs"][0]["shape"] = [2, 16]
    data = (http_request("POST", "/v2/models/simple/infer", bad_json)
            + http_request("POST", "/v2/models/simple/infer", json.dumps(bad_shape).encode())
            + http_request("GET", "/v2/models/simple/infer")
            + http_request("POST", "/v2/models/simple/infer", INFER_BODY))
    s = connect(server.port)
    try:
        s.sendall(data)
        r = HttpReader(s)
        assert_error_response(r.read_response(), 400)
        assert_error_response(r.read_response(), 400)
        assert_error_response(r.read_response(), 405)
        check_infer(r.read_response())
    finally:
        s.close()


def test_pipelining_burst(server):
    n = 100
    reqs = []
    for i in range(n):
        body = json.loads(INFER_BODY)
        body["id"] = str(i)
        body["inputs"][1]["data"] = [i] * 16
        reqs.append(http_request("POST", "/v2/models/simple/infer", json.dumps(body).encode()))
    s = connect(server.port)
    try:
        s.sendall(b"".join(reqs))
        r = HttpReader(s)
        for i in range(n):
            resp = r.read_response()
            assert resp.status == 200, resp
            doc = resp.json()
            assert doc["id"] == str(i)
            assert doc["outputs"][0]["data"] == [v + i for v in range(16)]
    finally:
        s.close()


def test_pipelined_requests_sent_byte_by_byte(server):
    data = http_request("GET", "/v2/health/live") + http_request("POST", "/v2/models/simple/infer",
                                                                 INFER_BODY)
    s = connect(server.port)
    try:
        for i in range(len(data)):
            s.sendall(data[i:i + 1])
        r = HttpReader(s)
        check_live(r.read_response())
        check_infer(r.read_response())
    finally:
        s.close()


def chunked(body, size):
    out = b""
    for i in range(0, len(body), size):
        piece = body[i:i + size]
        out += b"%x\r\n" % len(piece) + piece + b"\r\n"
    return out + b"0\r\n\r\n"


def chunked_head(extra=b""):
    return (b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n" + extra + b"\r\n")


def test_chunked_body(server):
    s = connect(server.port)
    try:
        s.sendall(chunked_head() + chunked(INFER_BODY, 37))
        r = HttpReader(s)
        check_infer(r.read_response())
        # the connection stays usable after a chunked request
        s.sendall(http_request("GET", "/v2/health/live"))
        check_live(r.read_response())
    finally:
        s.close()


def test_chunked_body_extensions_trailers_uppercase_hex(server):
    body = INFER_BODY
    half = len(body) // 2
    wire = (b"%X;name=value\r\n" % half + body[:half] + b"\r\n"
            + b"%X\r\n" % (len(body) - half) + body[half:] + b"\r\n"
            + b"0\r\nX-Trailer: yes\r\n\r\n")
    s = connect(server.port)
    try:
        s.sendall(chunked_head() + wire)
        check_infer(HttpReader(s).read_response())
    finally:
        s.close()


def test_chunked_body_sent_in_pieces(server):
    wire = chunked_head() + chunked(INFER_BODY, 50)
    s = connect(server.port)
    try:
        for i in range(0, len(wire), 23):
            s.sendall(wire[i:i + 23])
            time.sleep(0.001)
        check_infer(HttpReader(s).read_response())
    finally:
        s.close()


def test_body_sent_after_headers(server):
    req = http_request("POST", "/v2/models/simple/infer", INFER_BODY)
    head, body = req.split(b"\r\n\r\n", 1)
    s = connect(server.port)
    try:
        s.sendall(head + b"\r\n\r\n")
        time.sleep(0.05)
        s.sendall(body[:10])
        time.sleep(0.05)
        s.sendall(body[10:])
        check_infer(HttpReader(s).read_response())
    finally:
        s.close()


def test_expect_100_continue(server):
    s = connect(server.port)
    try:
        s.sendall(b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: application/json\r\nExpect: 100-continue\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(INFER_BODY))
        r = HttpReader(s)
        interim = r.read_response()
        assert interim.status == 100, interim
        assert interim.version == "HTTP/1.1"
        s.sendall(INFER_BODY)
        check_infer(r.read_response())
    finally:
        s.close()


def test_expect_100_continue_chunked(server):
    s = connect(server.port)
    try:
        s.sendall(chunked_head(b"Expect: 100-continue\r\n"))
        r = HttpReader(s)
        interim = r.read_response()
        assert interim.status == 100, interim
        s.sendall(chunked(INFER_BODY, 64))
        check_infer(r.read_response())
    finally:
        s.close()


def test_expect_100_continue_body_sent_without_waiting(server):
    """A client may send the body right away; it still gets its answer
    (possibly after an interim 100)."""
    s = connect(server.port)
    try:
        s.sendall(b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: application/json\r\nExpect: 100-continue\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(INFER_BODY) + INFER_BODY)
        r = HttpReader(s)
        resp = r.read_response()
        if resp.status == 100:
            resp = r.read_response()
        check_infer(resp)
        s.sendall(http_request("GET", "/v2/health/live"))
        check_live(r.read_response())
    finally:
        s.close()


def test_expect_100_continue_too_large(server):
    """Content-Length over the default 64 MiB limit: 413 without waiting for the body."""
    s = connect(server.port)
    try:
        s.sendall(b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: application/json\r\nExpect: 100-continue\r\n"
                  b"Content-Length: %d\r\n\r\n" % (64 * 1024 * 1024 + 1))
        resp = HttpReader(s).read_response()
        assert_error_response(resp, 413)
    finally:
        s.close()


def test_expect_100_continue_unknown_model(server):
    """A request that will fail anyway may be answered early; either way the
    client ends up with a 404, never a hang."""
    s = connect(server.port)
    try:
        s.sendall(b"POST /v2/models/nosuchmodel/infer HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: application/json\r\nExpect: 100-continue\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(INFER_BODY))
        r = HttpReader(s)
        resp = r.read_response()
        if resp.status == 100:
            s.sendall(INFER_BODY)
            resp = r.read_response()
        assert_error_response(resp, 404)
    finally:
        s.close()


def test_slowloris_does_not_block_others(server):
    req = http_request("GET", "/v2/health/live")
    slow = connect(server.port)
    try:
        half = len(req) // 2
        for b in req[:half]:
            slow.sendall(bytes([b]))
            time.sleep(0.002)
        # Another client is served while the slow one is mid-headers.
        for _ in range(3):
            r = requests.post(server.url + "/v2/models/simple/infer", data=INFER_BODY, timeout=10)
            assert r.status_code == 200 and r.json()["outputs"][0]["data"] == SUM
        for b in req[half:]:
            slow.sendall(bytes([b]))
            time.sleep(0.002)
        check_live(HttpReader(slow).read_response())
    finally:
        slow.close()


def test_slow_body_does_not_block_others(server):
    req = http_request("POST", "/v2/models/simple/infer", INFER_BODY)
    head_len = req.index(b"\r\n\r\n") + 4
    slow = connect(server.port)
    try:
        slow.sendall(req[:head_len + 20])
        for _ in range(3):
            r = requests.get(server.url + "/v2/models/simple", timeout=10)
            assert r.status_code == 200 and r.json()["name"] == "simple"
        for i in range(head_len + 20, len(req), 16):
            slow.sendall(req[i:i + 16])
            time.sleep(0.001)
        check_infer(HttpReader(slow).read_response())
    finally:
        slow.close()


def test_idle_connections_do_not_block_others(server):
    idle = [connect(server.port) for _ in range(50)]
    try:
        for s in idle[::2]:
            s.sendall(b"GET /v2/heal")  # partial request line
        r = requests.post(server.url + "/v2/models/simple/infer", data=INFER_BODY, timeout=10)
        assert r.status_code == 200 and r.json()["outputs"][0]["data"] == SUM
    finally:
        for s in idle:
            s.close()
    assert requests.get(server.url + "/v2/health/live", timeout=10).status_code == 200


def test_malformed_request_does_not_affect_other_connections(server):
    good = connect(server.port)
    try:
        rg = HttpReader(good)
        good.sendall(http_request("GET", "/v2/health/live"))
        check_live(rg.read_response())
        # a half-sent request on the good connection stays pending meanwhile
        req = http_request("POST", "/v2/models/simple/infer", INFER_BODY)
        good.sendall(req[:40])

        bad = connect(server.port)
        try:
            bad.sendall(b"\x00\x01garbage garbage\r\n\r\n")
            rb = HttpReader(bad)
            resp = rb.read_response()
            assert_error_response(resp, 400)
            assert rb.at_eof()
        finally:
            bad.close()

        good.sendall(req[40:])
        check_infer(rg.read_response())
    finally:
        good.close()


def test_client_disconnect_mid_request(server):
    req = http_request("POST", "/v2/models/simple/infer", INFER_BODY)
    for cut in (5, 60, len(req) - 10):  # in the request line, the headers, the body
        s = connect(server.port)
        s.sendall(req[:cut])
        s.close()
    s = connect(server.port)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    s.sendall(http_request("POST", "/v2/models/simple/infer", INFER_BODY)[:100])
    s.close()  # RST
    r = requests.post(server.url + "/v2/models/simple/infer", data=INFER_BODY, timeout=10)
    assert r.status_code == 200 and r.json()["outputs"][0]["data"] == SUM


def test_many_sequential_connections(server):
    req = http_request("GET", "/v2/health/live", headers=[("Connection", "close")])
    for i in range(300):
        s = connect(server.port)
        try:
            s.sendall(req)
            r = HttpReader(s)
            check_live(r.read_response())
        finally:
            s.close()
    r = requests.post(server.url + "/v2/models/simple/infer", data=INFER_BODY, timeout=10)
    assert r.status_code == 200


def test_many_requests_on_one_connection(server):
    with requests.Session() as sess:
        for i in range(100):
            body = json.loads(INFER_BODY)
            body["inputs"][1]["data"] = [i] * 16
            r = sess.post(server.url + "/v2/models/simple/infer", data=json.dumps(body), timeout=10)
            assert r.status_code == 200
            assert r.json()["outputs"][0]["data"] == [v + i for v in range(16)]


def test_absolute_form_request_target(server):
    """RFC 9112 §3.2.2: servers must accept absolute-form targets."""
    s = connect(server.port)
    try:
        s.sendall(b"GET http://127.0.0.1/v2/health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                  b"GET http://127.0.0.1/v2/models/simple HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        reader = HttpReader(s)
        assert reader.read_response().status == 200
        meta = reader.read_response()
        assert meta.status == 200
        assert json.loads(meta.body)["name"] == "simple"
    finally:
        s.close()


SMUGGLED = b"GET /v2/repository/index HTTP/1.1\r\nHost: x\r\n\r\n"
SMUGGLING = {
    # Content-Length and Transfer-Encoding together: which one frames the
    # body is what the front proxy and the server would disagree on.
    "cl-te": b"POST /v2/health/live HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
             b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "te-cl": b"POST /v2/health/live HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
             b"Content-Length: 4\r\n\r\n0\r\n\r\n",
    "two-content-lengths": b"POST /v2/health/live HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
                           b"Content-Length: 47\r\n\r\n",
    "content-length-list": b"POST /v2/health/live HTTP/1.1\r\nHost: x\r\nContent-Length: 0, 47\r\n\r\n",
    "te-not-chunked-last": b"POST /v2/health/live HTTP/1.1\r\nHost: x\r\n"
                           b"Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
    "te-obfuscated": b"POST /v2/health/live HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\n\r\n"
                     b"0\r\n\r\n",
    "obs-fold": b"POST /v2/health/live HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
                b"X-Pad: a\r\n Transfer-Encoding: chunked\r\n\r\n",
    "bare-cr": b"POST /v2/health/live HTTP/1.1\r\nHost: x\rContent-Length: 47\r\n"
               b"Content-Length: 0\r\n\r\n",
}


@pytest.mark.parametrize("name", sorted(SMUGGLING))
def test_request_smuggling_is_refused_and_closes(server, name):
    """Each classic smuggling head is answered 400 (or 501) with a JSON error, and
    the connection closes: the request hidden behind it is never read as a
    second request."""
    # A transfer coding the server does not know is 501 (RFC 9112, 6.1).
    status = 501 if name == "te-not-chunked-last" else 400
    resps = parse_responses(raw_http(server.port, SMUGGLING[name] + SMUGGLED))
    assert [r.status for r in resps] == [status], (name, resps)
    assert_error_response(resps[0], status)
    assert "close" in resps[0].header_tokens("connection"), resps[0]
