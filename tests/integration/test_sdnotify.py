"""systemd Type=notify (src/net/sdnotify.h, src/net/watchdog.h) and the
unit file deploy/systemd/inferd.service.

Each test binds its own unix datagram socket, hands its address to inferd
in NOTIFY_SOCKET (an abstract "@name" or a path) and reads what inferd
sends: READY=1 once the ports accept, RELOADING=1 then READY=1 around a
SIGHUP, STOPPING=1 when SIGTERM starts the drain, WATCHDOG=1 every
WATCHDOG_USEC/2 while the I/O loops run (and none while one is stuck).
"""
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
import requests

from conftest import INFERD_BIN, REPO_ROOT, infer_request, stall_repo

UNIT = REPO_ROOT / "deploy" / "systemd" / "inferd.service"
UNIT_CONFIG = REPO_ROOT / "deploy" / "systemd" / "inferd.yaml"


class Listener:
    """The service manager's end: a unix datagram socket."""

    def __init__(self, path=None):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if path is None:
            name = "inferd-test-" + uuid.uuid4().hex
            self.sock.bind("\0" + name)
            self.address = "@" + name
        else:
            self.sock.bind(str(path))
            self.address = str(path)
        self.messages = []  # (monotonic time, {key: value})

    def recv(self, timeout):
        """The next message as a dict, or None after timeout seconds."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(4096)
        except socket.timeout:
            return None
        fields = dict(line.split("=", 1) for line in data.decode().split("\n") if line)
        self.messages.append((time.monotonic(), fields))
        return fields

    def wait_for(self, key, timeout=60.0, skip=("WATCHDOG",)):
        """Reads until a message with `key`; messages carrying only keys of
        `skip` are passed over, any other message first is an error."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = self.recv(max(0.01, deadline - time.monotonic()))
            if m is None:
                break
            if key in m:
                return m
            assert set(m) <= set(skip), "expected %s, got %r" % (key, m)
        pytest.fail("no %s=1 within %.0f s; got %r" % (key, timeout, self.messages))

    def close(self):
        self.sock.close()


@pytest.fixture
def listener():
    lst = Listener()
    yield lst
    lst.close()


def notify_env(monkeypatch, listener, watchdog_usec=None, watchdog_pid=None):
    monkeypatch.setenv("NOTIFY_SOCKET", listener.address)
    monkeypatch.delenv("WATCHDOG_USEC", raising=False)
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    if watchdog_usec is not None:
        monkeypatch.setenv("WATCHDOG_USEC", str(watchdog_usec))
    if watchdog_pid is not None:
        monkeypatch.setenv("WATCHDOG_PID", str(watchdog_pid))


def accepts(port):
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        return True


def test_ready_reload_stopping_in_order(server_factory, listener, monkeypatch):
    notify_env(monkeypatch, listener)
    srv = server_factory.start(wait=False)
    ready = listener.wait_for("READY")
    # The moment READY=1 arrives, every port accepts and the server answers.
    assert accepts(srv.port) and accepts(srv.grpc_port) and accepts(srv.metrics_port)
    assert requests.get(srv.url + "/v2/health/ready", timeout=5).status_code == 200
    assert ready["READY"] == "1"
    assert ready["MAINPID"] == str(srv.proc.pid)
    assert ready["STATUS"] == "serving 1 models; HTTP port %d, gRPC port %d" % (
        srv.port, srv.grpc_port)

    srv.proc.send_signal(signal.SIGHUP)
    reloading = listener.wait_for("RELOADING")
    assert reloading["RELOADING"] == "1"
    # MONOTONIC_USEC is CLOCK_MONOTONIC, the clock of Python's monotonic().
    assert abs(int(reloading["MONOTONIC_USEC"]) / 1e6 - time.monotonic()) < 5
    again = listener.wait_for("READY")
    assert again["READY"] == "1" and again["STATUS"].startswith("serving")

    srv.proc.send_signal(signal.SIGTERM)
    stopping = listener.wait_for("STOPPING")
    assert stopping["STOPPING"] == "1"
    assert stopping["STATUS"] == "draining: up to 30 s for running requests"
    srv.proc.wait(timeout=30)
    assert srv.stop(require_running=False) == []  # exit code 0, no sanitizer report
    assert [k for _, m in listener.messages for k in m if k in (
        "READY", "RELOADING", "STOPPING")] == ["READY", "RELOADING", "READY", "STOPPING"]
    assert listener.recv(0.2) is None  # nothing after STOPPING


def test_path_socket_and_no_watchdog_without_watchdog_usec(server_factory, tmp_path,
                                                           monkeypatch):
    lst = Listener(tmp_path / "notify.sock")
    try:
        notify_env(monkeypatch, lst)
        srv = server_factory.start(wait=False)
        lst.wait_for("READY", skip=())
        assert lst.recv(1.0) is None  # no WATCHDOG=1 without WatchdogSec=
        srv.proc.send_signal(signal.SIGTERM)
        lst.wait_for("STOPPING", skip=())
        srv.proc.wait(timeout=30)
        assert srv.stop(require_running=False) == []
    finally:
        lst.close()


def watchdog_times(listener, seconds):
    """Times of the WATCHDOG=1 messages received over `seconds`."""
    times = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        m = listener.recv(max(0.01, deadline - time.monotonic()))
        if m is None:
            break
        assert set(m) == {"WATCHDOG"} and m["WATCHDOG"] == "1", m
        times.append(time.monotonic())
    return times


def test_watchdog_pings_every_half_interval(server_factory, listener, monkeypatch):
    notify_env(monkeypatch, listener, watchdog_usec=400000)  # pings every 200 ms
    srv = server_factory.start("--io-threads", "2", wait=False)
    listener.wait_for("READY", skip=())
    times = watchdog_times(listener, 2.0)
    assert 7 <= len(times) <= 12, times  # 10 expected in 2 s
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert max(gaps) < 0.4, gaps  # never a gap of a whole WATCHDOG_USEC
    assert "service manager watchdog: every 200 ms" in srv.stderr()


def test_watchdog_pid_of_another_process_means_no_watchdog(server_factory, listener,
                                                           monkeypatch):
    notify_env(monkeypatch, listener, watchdog_usec=200000, watchdog_pid=1)
    server_factory.start(wait=False)
    listener.wait_for("READY", skip=())
    assert listener.recv(0.6) is None


def test_watchdog_skips_pings_while_a_loop_is_stuck(server_factory, listener, monkeypatch,
                                                    tmp_path):
    """A batch run inline on the only I/O thread blocks its loop for 1.5 s:
    no WATCHDOG=1 then, pings again after. The first request runs on the
    worker pool (no run time known yet; the loop stays free, pings go on);
    with its 1.5 s measured, far under --inline-budget-us, the second runs
    on the I/O thread itself. The requests run on another thread so that
    this one reads every ping as it comes."""
    notify_env(monkeypatch, listener, watchdog_usec=200000)  # every 100 ms
    repo = stall_repo(tmp_path, 1500000)
    srv = server_factory.start("--io-threads", "1", "--inline-budget-us", "10000000",
                               repository=repo, wait=False)
    listener.wait_for("READY", skip=())
    spans = []

    def client():
        for _ in range(2):
            sent = time.monotonic()
            r = infer_request(srv.url, "echo", [{"name": "IN", "datatype": "INT32",
                                                "shape": [1, 4], "data": [1, 2, 3, 4]}])
            spans.append((sent, time.monotonic(), r.status_code))

    worker = threading.Thread(target=client)
    worker.start()
    pings = watchdog_times(listener, 4.5)
    worker.join(timeout=30)
    assert [code for _, _, code in spans] == [200, 200]
    (s1, d1, _), (s2, d2, _) = spans
    assert d1 - s1 >= 1.4 and d2 - s2 >= 1.4
    on_pool = [t for t in pings if s1 + 0.2 < t < d1 - 0.2]
    assert len(on_pool) >= 8, (spans, pings)  # the pool's run blocks no loop
    assert [t for t in pings if s2 + 0.3 < t < d2 - 0.3] == [], (spans, pings)
    assert len([t for t in pings if t > d2]) >= 3, (spans, pings)  # fed again after
    err = srv.stderr()
    assert "watchdog: I/O thread io-0 has not run for 100 ms" in err
    assert "watchdog: I/O thread io-0 runs again" in err


@pytest.mark.parametrize("value, message", [
    ("relative/path", "NOTIFY_SOCKET: expected an absolute path or @name"),
    ("/" + "x" * 200, "NOTIFY_SOCKET: longer than 107 bytes"),
])
def test_unusable_notify_socket_stops_the_start(tmp_path, value, message):
    env = dict(os.environ, NOTIFY_SOCKET=value)
    p = subprocess.run([str(INFERD_BIN), "serve", "--model-repository", str(tmp_path),
                        "--http-port", "0", "--grpc-port", "0", "--no-metrics"],
                       env=env, capture_output=True, text=True, timeout=30,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 1
    assert message in p.stderr


def test_bad_watchdog_usec_stops_the_start(tmp_path, listener):
    env = dict(os.environ, NOTIFY_SOCKET=listener.address, WATCHDOG_USEC="10s")
    p = subprocess.run([str(INFERD_BIN), "serve", "--model-repository", str(tmp_path),
                        "--http-port", "0", "--grpc-port", "0", "--no-metrics"],
                       env=env, capture_output=True, text=True, timeout=30,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 1
    assert "WATCHDOG_USEC: expected a positive number, got '10s'" in p.stderr
    assert listener.recv(0.1) is None


# --- the unit file --------------------------------------------------------------

def unit_settings():
    """[Service] key -> list of values, from deploy/systemd/inferd.service."""
    settings, section = {}, None
    for line in UNIT.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = line
            continue
        key, value = line.split("=", 1)
        settings.setdefault((section, key), []).append(value)
    return settings


def test_unit_file_matches_the_server():
    s = unit_settings()
    svc = lambda k: s[("[Service]", k)][-1]
    assert svc("Type") == "notify"
    assert svc("ExecReload") == "/bin/kill -HUP $MAINPID"
    argv = shlex.split(svc("ExecStart"))
    assert argv[1] == "serve"
    exit_timeout = int(argv[argv.index("--exit-timeout-secs") + 1])
    # SIGKILL comes only after the drain had its whole time, plus time to unload.
    assert int(svc("TimeoutStopSec")) >= exit_timeout + 10
    assert int(svc("WatchdogSec")) >= 2
    for key, value in [("NoNewPrivileges", "yes"), ("ProtectSystem", "strict"),
                       ("ProtectHome", "yes"), ("PrivateTmp", "yes"), ("DynamicUser", "yes"),
                       ("CapabilityBoundingSet", "")]:
        assert svc(key) == value, key
    # Its settings file is valid for this inferd, with its command line.
    config = argv[argv.index("--config") + 1]
    assert config == "/etc/inferd/inferd.yaml"
    flags = [a for a in argv[2:]]
    i = flags.index("--config")
    del flags[i:i + 2]
    p = subprocess.run([str(INFERD_BIN), "serve"] + flags +
                       ["--check-config", str(UNIT_CONFIG)],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "%s: ok" % UNIT_CONFIG


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_systemd_analyze_verify(tmp_path):
    """systemd's own parser: no unknown key, no bad value. ExecStart must name
    an existing executable, so the copy points at the built binary."""
    text = UNIT.read_text().replace("/usr/local/bin/inferd", str(INFERD_BIN))
    unit = tmp_path / "inferd.service"
    unit.write_text(text)
    p = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)],
                       capture_output=True, text=True, timeout=60)
    lines = [l for l in p.stderr.splitlines() if "inferd.service" in l]
    assert p.returncode == 0 and lines == [], p.stderr
    # A broken copy is refused: the check can fail.
    bad = tmp_path / "bad" / "inferd.service"
    bad.parent.mkdir()
    bad.write_text(text.replace("Type=notify", "Type=notfy"))
    p = subprocess.run(["systemd-analyze", "verify", "--man=no", str(bad)],
                       capture_output=True, text=True, timeout=60)
    assert "inferd.service:20: Failed to parse service type" in p.stderr, p.stderr
