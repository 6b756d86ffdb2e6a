"""Connection-level limits, each named for the abuse it prevents (see
docs/limits.md). Every timeout here is set to 1 s on the command line; the
tests wait for the server's action, they never assert how long it took."""
import json
import socket
import time

import requests

import prom
from conftest import IDENTITY_MODELS, HttpReader, connect, http_request


def recv_until_closed(s, timeout=10.0):
    """Read until the server closes the connection; returns the bytes."""
    s.settimeout(timeout)
    data = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return data
            data += chunk
    except ConnectionResetError:
        return data


def test_regress_slowloris_header_timeout(server_factory):
    srv = server_factory.start("--header-timeout-secs", "1")
    s = connect(srv.port)
    try:
        s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n")  # never finished
        data = recv_until_closed(s)
        assert data.startswith(b"HTTP/1.1 408 ")
        assert b'"error"' in data
    finally:
        s.close()
    assert requests.get(srv.url + "/v2/health/live").status_code == 200


def test_regress_idle_keepalive_connections_are_closed(server_factory):
    srv = server_factory.start("--idle-timeout-secs", "1")
    s = connect(srv.port)
    try:
        s.sendall(http_request("GET", "/v2/health/live"))
        assert HttpReader(s).read_response().status == 200
        assert recv_until_closed(s) == b""  # closed by the server, nothing more sent
    finally:
        s.close()


def test_regress_connection_flood_max_connections(server_factory):
    srv = server_factory.start("--max-connections", "2")
    # The readiness probe's connection counts until the server has seen it
    # close (slow under the sanitizers): wait until none is open.
    m = prom.wait_for(srv, lambda m: m.get("inferd_open_connections") == 0)
    assert m.get("inferd_open_connections") == 0
    held = [connect(srv.port) for _ in range(2)]
    try:
        for s in held:  # make sure both are accepted and counted
            s.sendall(http_request("GET", "/v2/health/live"))
            assert HttpReader(s).read_response().status == 200
        extra = connect(srv.port)
        assert recv_until_closed(extra) == b""  # refused: closed without an answer
        extra.close()
        held[0].sendall(http_request("GET", "/v2/health/live"))
        assert HttpReader(held[0]).read_response().status == 200
    finally:
        for s in held:
            s.close()
    # Once the server has seen them close, new connections are accepted again.
    m = prom.wait_for(srv, lambda m: m.get("inferd_open_connections") == 0)
    assert m.get("inferd_open_connections") == 0
    assert requests.get(srv.url + "/v2/health/live").status_code == 200


def test_regress_client_that_never_reads(server_factory):
    """A client that asks for a large response and stops reading is cut off
    after the write timeout instead of holding its buffer forever."""
    srv = server_factory.start("--write-timeout-secs", "1",
                               models={"identity_fp64": IDENTITY_MODELS["identity_fp64"]})
    n = 4_000_000  # 32 MB of output: far more than the socket buffers hold
    raw = b"\0" * (8 * n)
    header = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, n], "datatype": "FP64",
                                     "parameters": {"binary_data_size": len(raw)}}],
                         "parameters": {"binary_data_output": True}}).encode()
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: small window
    s.settimeout(60)
    s.connect(("127.0.0.1", srv.port))
    try:
        s.sendall(http_request("POST", "/v2/models/identity_fp64/infer", header + raw,
                               headers=[("Inference-Header-Content-Length", str(len(header)))]))
        time.sleep(4)  # stop reading long past the 1 s write timeout
        got = recv_until_closed(s, timeout=30)
        assert got.startswith(b"HTTP/1.1 200 ")
        head = got.split(b"\r\n\r\n", 1)[0]
        length = int([h for h in head.split(b"\r\n")
                      if h.lower().startswith(b"content-length")][0].split(b":")[1])
        assert len(got) - len(head) - 4 < length  # cut off before the end
    finally:
        s.close()
    assert requests.get(srv.url + "/v2/health/live").status_code == 200
