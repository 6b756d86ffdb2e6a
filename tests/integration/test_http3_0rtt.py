"""HTTP/3 0-RTT (--http3-0rtt) and the QUIC limits Chromium cannot show,
checked with tests/tools/h3_client (build/h3_client: ngtcp2 + GnuTLS +
nghttp3, independent of the server's code). The client saves the TLS
session ticket and the server's transport parameters after a connection
and, given them again, resumes and sends its request as 0-RTT early data.

- with --http3-0rtt the second connection's request goes out before the
  handshake completes, GnuTLS says the server accepted the early data, the
  answer is the 1-RTT one (and the HTTP/1.1 one), and the access log has
  it with protocol h3;
- without the flag the server issues no ticket, and early data sent with
  an old ticket is rejected: the client sends its request again after the
  handshake and gets the same answer (1-RTT fallback);
- a replayed first flight (Initial + 0-RTT) does not run its request again
  (the server's anti-replay cache);
- a restarted server has a new ticket key: early data is rejected too;
- the server's MAX_STREAMS (--h2-max-concurrent-streams) is what the client
  sees and is extended as requests finish;
- an idle connection is closed after --idle-timeout-secs."""
import json
import subprocess
import tempfile
import time

import pytest
import requests

from conftest import INFERD_BIN, MAIN_MODELS, make_repository
from test_http3 import DIGITS_REQUEST, SIMPLE_REQUEST, access_log_lines, h1, start_h3
from test_http3 import pki  # noqa: F401 (fixture)

H3_CLIENT = INFERD_BIN.parent / "h3_client"
SIMPLE = json.dumps(SIMPLE_REQUEST).encode()
# An id of 200 kB: more early data than the first flight carries (the
# rest follows after the handshake, on the same stream).
LARGE = json.dumps(dict(SIMPLE_REQUEST, id="x" * 200000)).encode()
REQUESTS = {"simple": ("/v2/models/simple/infer", SIMPLE),
            "large": ("/v2/models/simple/infer", LARGE),
            "digits": ("/v2/models/digits/infer", DIGITS_REQUEST),
            "metadata": ("/v2/models/simple", None)}


class Answer:
    def __init__(self, out):
        head, _, self.body = out.partition(b"\n\n")
        self.info, self.headers, self.responses = {}, {}, []
        for line in head.decode().splitlines():
            key, _, value = line.partition(": ")
            if key == "header":
                name, _, v = value.partition(": ")
                self.headers[name] = v
            elif key == "response":
                self.responses.append([int(x) for x in value.split()])
            else:
                self.info[key] = value
        self.status = int(self.info.get("status", 0))


def h3(port, path, data=None, *, session=None, ca=None, extra=(), timeout=30):
    cmd = [str(H3_CLIENT)]
    body = tempfile.NamedTemporaryFile(suffix=".json")
    if data is not None:
        body.write(data)
        body.flush()
        cmd += ["--data", "@" + body.name]
    if session is not None:
        cmd += ["--session", str(session)]
    if ca is not None:
        cmd += ["--ca", str(ca)]
    cmd += list(extra) + [str(port), path]
    with body:
        r = subprocess.run(cmd, capture_output=True, timeout=timeout)
    assert r.returncode == 0, (r.stdout, r.stderr)
    return Answer(r.stdout)


@pytest.fixture(scope="module", autouse=True)
def client_built():
    if not H3_CLIENT.exists():
        pytest.fail("%s not found: build the h3_client target" % H3_CLIENT)


@pytest.fixture
def zsrv(server_factory, pki, tmp_path):  # noqa: F811
    repo = make_repository(tmp_path / "models", {"simple": MAIN_MODELS["simple"],
                                                 "digits": MAIN_MODELS["digits"]})
    srv = start_h3(server_factory, pki, tmp_path, "--http3-0rtt", "--access-log",
                   str(tmp_path / "access.log"), repository=repo)
    srv.access_log = tmp_path / "access.log"
    return srv


def logged(srv, request_id):
    deadline = time.monotonic() + 10
    while True:
        lines = [l for l in access_log_lines(srv.access_log) if l["request_id"] == request_id]
        if lines or time.monotonic() > deadline:
            return lines
        time.sleep(0.1)


@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_resumed_request_is_sent_and_answered_as_early_data(zsrv, pki, tmp_path, name):  # noqa: F811
    path, body = REQUESTS[name]
    session = tmp_path / "session"
    ca = pki[0] / "one.pem"
    first = h3(zsrv.port, path, body, session=session, ca=ca)
    assert first.info["early-data"] == "none" and first.status == 200
    assert session.exists(), "no session ticket from a --http3-0rtt server"

    early = h3(zsrv.port, path, body, session=session, ca=ca)
    assert early.info["early-data"] == "accepted", early.info
    # The request (HEADERS and, for a POST, DATA; the first 10 kB of the
    # large one at least) left before the handshake completed, on the first
    # request stream, and was not sent again.
    assert int(early.info["early-request-bytes"]) >= min(len(body or b""), 10000) + 10
    assert early.responses == [[0, 200, len(early.body)]]
    assert early.status == first.status == 200
    assert early.body == first.body == h1(zsrv, path, "POST" if body else "GET", body).content
    assert early.headers["content-type"] == first.headers["content-type"]

    lines = logged(zsrv, early.headers["x-request-id"])
    assert len(lines) == 1 and lines[0]["protocol"] == "h3" and lines[0]["status"] == 200
    assert lines[0]["endpoint"] == path


def open_connections(srv):
    text = requests.get(srv.metrics_url, timeout=10).text
    return int(next(l.split()[1] for l in text.splitlines()
                    if l.startswith("inferd_open_connections ")))


def test_a_replayed_first_flight_does_not_run_the_request_again(zsrv, tmp_path):
    """An attacker who captured a client's first flight (Initial + 0-RTT)
    sends it again from elsewhere: the server's replay cache recognises the
    ClientHello, refuses its early data, and the request is not run twice
    (with the cache disabled it is: the access log gets a second line)."""
    path = "/v2/health/live"
    session, flight = tmp_path / "session", tmp_path / "flight"
    h3(zsrv.port, "/v2/health/ready", session=session)
    r = h3(zsrv.port, path, session=session, extra=["--record", str(flight)])
    assert r.info["early-data"] == "accepted" and flight.stat().st_size > 0
    assert len(logged(zsrv, r.headers["x-request-id"])) == 1
    deadline = time.monotonic() + 10
    while open_connections(zsrv) > 0:  # the recorded connection is gone
        assert time.monotonic() < deadline
        time.sleep(0.1)
    out = subprocess.run([str(H3_CLIENT), "--replay", str(flight), str(zsrv.port), "-"],
                         capture_output=True, timeout=30)
    assert out.returncode == 0 and out.stdout.startswith(b"replayed: "), out
    time.sleep(1)  # a second (replayed) request would be logged by now
    assert [l["endpoint"] for l in access_log_lines(zsrv.access_log)].count(path) == 1


def test_without_the_flag_early_data_is_rejected_and_answered_after_the_handshake(
        server_factory, zsrv, pki, tmp_path):  # noqa: F811
    path, body = REQUESTS["simple"]
    session = tmp_path / "session"
    h3(zsrv.port, path, body, session=session)  # a ticket from a 0-RTT server

    plain = start_h3(server_factory, pki, tmp_path)
    none = tmp_path / "none"
    r = h3(plain.port, path, body, session=none)
    assert r.status == 200 and not none.exists(), "a server without --http3-0rtt issued a ticket"

    r = h3(plain.port, path, body, session=session)
    assert r.info["early-data"] == "rejected", r.info
    assert int(r.info["early-request-bytes"]) > len(body)  # it was sent as 0-RTT, then again
    assert r.status == 200 and r.responses[0][1] == 200
    assert r.body == h1(plain, path, "POST", body).content


def test_a_restarted_server_rejects_old_tickets(server_factory, pki, tmp_path):  # noqa: F811
    path, body = REQUESTS["simple"]
    session = tmp_path / "session"
    srv = start_h3(server_factory, pki, tmp_path, "--http3-0rtt")
    h3(srv.port, path, body, session=session)
    assert h3(srv.port, path, body, session=session).info["early-data"] == "accepted"
    assert srv.stop() == []
    srv.start(port=srv.port)
    deadline = time.monotonic() + 60
    while "ready:" not in srv.stderr():
        assert srv.proc.poll() is None and time.monotonic() < deadline, srv.stderr()
        time.sleep(0.05)
    r = h3(srv.port, path, body, session=session)
    assert r.info["early-data"] == "rejected" and r.status == 200


def test_max_streams_is_honoured_and_extended(server_factory, pki, tmp_path):  # noqa: F811
    srv = start_h3(server_factory, pki, tmp_path, "--h2-max-concurrent-streams", "2")
    r = h3(srv.port, "/v2/health/ready", extra=["--parallel", "12"])
    assert r.info["peer-max-streams-bidi"] == "2"
    assert r.info["max-open-streams"] == "2"
    # Every request answered: the server raised MAX_STREAMS as streams
    # finished (a client that may not open more would time out).
    assert [s for _, s, _ in r.responses] == [200] * 12
    assert [sid for sid, _, _ in r.responses] == [4 * i for i in range(12)]


def test_idle_timeout_closes_the_connection(server_factory, pki, tmp_path):  # noqa: F811
    srv = start_h3(server_factory, pki, tmp_path, "--idle-timeout-secs", "2")
    # The client's own idle timeout is 60 s: the 2 s come from the server.
    r = h3(srv.port, "/v2/health/ready", extra=["--hold-ms", "10000"])
    assert r.info["closed"].startswith("idle after "), r.info
    ms = int(r.info["closed"].split()[2])
    assert 1900 <= ms <= 4000, ms
    deadline = time.monotonic() + 5
    while open_connections(srv) > 0:
        assert time.monotonic() < deadline, "the server kept the idle QUIC connection"
        time.sleep(0.2)
