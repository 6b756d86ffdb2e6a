"""TLS on the HTTP and gRPC ports: HTTP/1.1 and HTTP/2 (ALPN), mutual TLS,
certificate reload on SIGHUP, and clients that do not speak TLS.

The certificates are made with the openssl CLI in a temporary directory.
"""
import shutil
import signal
import socket
import ssl
import subprocess
import time
import warnings
from pathlib import Path

import pytest
import requests

from conftest import INFERD_BIN, raw_http


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, capture_output=True)


def make_cert(d, name, cn, ca="ca", client=False):
    ext = d / (name + ".ext")
    ext.write_text("extendedKeyUsage=%s\n" % ("clientAuth" if client else
                   "serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost"))
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", name + ".key", "-subj",
            "/CN=" + cn, "-out", name + ".csr", cwd=d)
    openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key",
            "-CAcreateserial", "-days", "2", "-extfile", ext.name, "-out", name + ".pem", cwd=d)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-subj",
            "/CN=inferd test CA", "-days", "2", "-out", "ca.pem", cwd=d)
    make_cert(d, "server", "inferd server one")
    make_cert(d, "server2", "inferd server two")
    make_cert(d, "client", "inferd client", client=True)
    return d


def tls_server(server_factory, pki, tmp_path, *flags):
    """A server whose certificate files are copies (so tests may replace them)."""
    shutil.copy(pki / "server.pem", tmp_path / "cert.pem")
    shutil.copy(pki / "server.key", tmp_path / "key.pem")
    srv = server_factory.start("--tls-cert", str(tmp_path / "cert.pem"), "--tls-key",
                               str(tmp_path / "key.pem"), *flags, wait=False)
    deadline = time.monotonic() + 60
    while "ready:" not in srv.stderr():
        assert srv.proc.poll() is None, srv.stderr()
        assert time.monotonic() < deadline, srv.stderr()
        time.sleep(0.05)
    return srv


def https(srv, path="/v2/health/live", port=None):
    return "https://127.0.0.1:%d%s" % (port or srv.port, path)


def tls_connect(pki, port, cert=None, alpn=("http/1.1",)):
    ctx = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    if cert:
        ctx.load_cert_chain(str(pki / (cert + ".pem")), str(pki / (cert + ".key")))
    ctx.set_alpn_protocols(list(alpn))
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    return ctx.wrap_socket(raw, server_hostname="127.0.0.1")


def get_keepalive(sock):
    """One GET /v2/health/live on an open TLS socket; returns the status line."""
    sock.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        b = sock.recv(4096)
        assert b, data
        data += b
    return data.split(b"\r\n")[0]


def der(pki, name):
    r = subprocess.run(["openssl", "x509", "-in", str(pki / (name + ".pem")), "-outform", "DER"],
                       capture_output=True, check=True)
    return r.stdout


def wait_log(srv, text, count=1, timeout=30):
    deadline = time.monotonic() + timeout
    while srv.stderr().count(text) < count:
        assert time.monotonic() < deadline, "no %r in log:\n%s" % (text, srv.stderr())
        time.sleep(0.05)


def curl(*args):
    r = subprocess.run(["curl", "-s", "-S", "-i", "--max-time", "30"] + list(args),
                       capture_output=True, timeout=60)
    return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")


def test_tls_http1_with_requests(server_factory, pki, tmp_path):
    srv = tls_server(server_factory, pki, tmp_path)
    r = requests.get(https(srv, "/v2"), verify=str(pki / "ca.pem"), timeout=10)
    assert r.status_code == 200 and r.json()["name"] == "inferd"
    s = tls_connect(pki, srv.port)
    assert s.selected_alpn_protocol() == "http/1.1"
    assert get_keepalive(s) == b"HTTP/1.1 200 OK"
    assert get_keepalive(s) == b"HTTP/1.1 200 OK"
    s.close()


def test_tls_curl_http2_alpn(server_factory, pki, tmp_path):
    srv = tls_server(server_factory, pki, tmp_path)
    rc, out, err = curl("--http2", "--cacert", str(pki / "ca.pem"), https(srv, "/v2"))
    assert rc == 0, err
    assert out.startswith("HTTP/2 200"), out
    # The gRPC port offers only h2.
    rc, out, err = curl("--http2", "--cacert", str(pki / "ca.pem"),
                        https(srv, "/v2/health/live", port=srv.grpc_port))
    assert rc == 0 and out.startswith("HTTP/2 200"), out + err
    s = tls_connect(pki, srv.grpc_port, alpn=("h2", "http/1.1"))
    assert s.selected_alpn_protocol() == "h2"
    s.close()
    with pytest.raises((ssl.SSLError, ConnectionError)):
        tls_connect(pki, srv.grpc_port, alpn=("http/1.1",))


def test_tls_is_1_2_or_newer(server_factory, pki, tmp_path):
    srv = tls_server(server_factory, pki, tmp_path)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(str(pki / "ca.pem"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        ctx.maximum_version = ssl.TLSVersion.TLSv1_1
        ctx.minimum_version = ssl.TLSVersion.TLSv1
    ctx.set_ciphers("ALL:@SECLEVEL=0")
    raw = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    with pytest.raises((ssl.SSLError, ConnectionError)):
        ctx.wrap_socket(raw, server_hostname="127.0.0.1")
    raw.close()


def test_mutual_tls(server_factory, pki, tmp_path):
    srv = tls_server(server_factory, pki, tmp_path, "--tls-client-ca", str(pki / "ca.pem"))
    r = requests.get(https(srv), verify=str(pki / "ca.pem"),
                     cert=(str(pki / "client.pem"), str(pki / "client.key")), timeout=10)
    assert r.status_code == 200
    with pytest.raises(requests.exceptions.RequestException):
        requests.get(https(srv), verify=str(pki / "ca.pem"), timeout=10)
    rc, out, err = curl("--http2", "--cacert", str(pki / "ca.pem"), "--cert",
                        str(pki / "client.pem"), "--key", str(pki / "client.key"), https(srv))
    assert rc == 0 and out.startswith("HTTP/2 200"), out + err
    rc, out, err = curl("--http2", "--cacert", str(pki / "ca.pem"), https(srv))
    assert rc != 0


def test_sighup_reloads_certificate(server_factory, pki, tmp_path):
    srv = tls_server(server_factory, pki, tmp_path)
    old = tls_connect(pki, srv.port)
    assert old.getpeercert(binary_form=True) == der(pki, "server")
    assert get_keepalive(old) == b"HTTP/1.1 200 OK"

    shutil.copy(pki / "server2.pem", tmp_path / "cert.pem")
    shutil.copy(pki / "server2.key", tmp_path / "key.pem")
    srv.proc.send_signal(signal.SIGHUP)
    wait_log(srv, "TLS certificate reloaded")
    new = tls_connect(pki, srv.port)
    assert new.getpeercert(binary_form=True) == der(pki, "server2")
    assert get_keepalive(new) == b"HTTP/1.1 200 OK"
    # The connection opened before the reload keeps working.
    assert get_keepalive(old) == b"HTTP/1.1 200 OK"
    old.close()
    new.close()


def test_sighup_with_bad_certificate_keeps_old(server_factory, pki, tmp_path):
    srv = tls_server(server_factory, pki, tmp_path)
    (tmp_path / "cert.pem").write_text("-----BEGIN CERTIFICATE-----\nnot a certificate\n")
    srv.proc.send_signal(signal.SIGHUP)
    wait_log(srv, "TLS reload failed")
    s = tls_connect(pki, srv.port)
    assert s.getpeercert(binary_form=True) == der(pki, "server")
    assert get_keepalive(s) == b"HTTP/1.1 200 OK"
    s.close()
    # A key that does not match the certificate is refused too.
    shutil.copy(pki / "server.pem", tmp_path / "cert.pem")
    shutil.copy(pki / "server2.key", tmp_path / "key.pem")
    srv.proc.send_signal(signal.SIGHUP)
    wait_log(srv, "TLS reload failed", count=2)
    s = tls_connect(pki, srv.port)
    assert s.getpeercert(binary_form=True) == der(pki, "server")
    s.close()


def test_plaintext_client_on_tls_port(server_factory, pki, tmp_path):
    srv = tls_server(server_factory, pki, tmp_path)
    out = raw_http(srv.port, b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
    assert b"200 OK" not in out
    out = raw_http(srv.grpc_port, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    assert b"200" not in out
    r = requests.get(https(srv), verify=str(pki / "ca.pem"), timeout=10)
    assert r.status_code == 200


def test_tls_flags_go_together(pki):
    r = subprocess.run([str(INFERD_BIN), "serve", "--tls-cert", str(pki / "server.pem")],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--tls-key" in r.stderr
    r = subprocess.run([str(INFERD_BIN), "serve", "--tls-client-ca", str(pki / "ca.pem")],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2


def test_tls_bad_certificate_at_start_fails(server_factory, pki, tmp_path):
    (tmp_path / "bad.pem").write_text("garbage\n")
    r = subprocess.run([str(INFERD_BIN), "serve", "--model-repository",
                        str(server_factory.repository()), "--http-port", "0", "--grpc-port", "0",
                        "--tls-cert", str(tmp_path / "bad.pem"), "--tls-key",
                        str(pki / "server.key")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "cannot load certificate" in r.stderr


def key_lines(path):
    """The base64 lines of a PEM private key: what must never be logged."""
    return [l for l in Path(path).read_text().splitlines() if l and not l.startswith("-----")]


def test_private_key_is_never_logged(server_factory, pki, tmp_path):
    """Debug logging, an access log, requests, and two reloads that fail on
    the key (a key that is not PEM, then one that does not match the
    certificate): no line of either key reaches the server's output."""
    log = tmp_path / "access.log"
    srv = tls_server(server_factory, pki, tmp_path, "--log-level", "debug",
                     "--access-log", str(log))
    assert requests.get(https(srv), verify=str(pki / "ca.pem"), timeout=10).status_code == 200
    secret = key_lines(pki / "server.key") + key_lines(pki / "server2.key")
    broken = "-----BEGIN PRIVATE KEY-----\n" + "\n".join(key_lines(pki / "server.key")[:3]) + "\n"
    (tmp_path / "key.pem").write_text(broken)
    srv.proc.send_signal(signal.SIGHUP)
    wait_log(srv, "TLS reload failed")
    shutil.copy(pki / "server2.key", tmp_path / "key.pem")
    srv.proc.send_signal(signal.SIGHUP)
    wait_log(srv, "TLS reload failed", count=2)
    assert requests.get(https(srv), verify=str(pki / "ca.pem"), timeout=10).status_code == 200
    out = srv.stderr() + srv.stdout_path.read_text() + log.read_text()
    leaked = [l for l in secret if l in out]
    assert not leaked, "private key material in the server's output"
