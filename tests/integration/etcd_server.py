"""A real etcd for the tests that need one (Debian's etcd-server on free
loopback ports with a temp data dir), and etcdctl as the independent client
that reads what inferd wrote. The `etcd` fixture (conftest.py) starts one
per test."""
import json
import os
import shutil
import subprocess
import time

import pytest
import requests

from conftest import free_port

ETCD = shutil.which("etcd")
ETCDCTL = shutil.which("etcdctl")
# pytestmark for the modules that need etcd.
requires_etcd = pytest.mark.skipif(not ETCD or not ETCDCTL,
                                   reason="etcd-server / etcd-client not installed "
                                          "(scripts/deps.sh)")


class Etcd:
    """One etcd member on loopback with its own data dir."""

    def __init__(self, workdir):
        self.workdir = workdir
        self.data = workdir / "data"
        self.client_port = free_port()
        self.peer_port = free_port()
        self.proc = None
        self.log = None

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.client_port

    def start(self):
        self.log = open(self.workdir / "etcd.log", "ab")
        self.proc = subprocess.Popen(
            [ETCD, "--name", "t", "--data-dir", str(self.data),
             "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
             "--listen-peer-urls", "http://127.0.0.1:%d" % self.peer_port,
             "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % self.peer_port,
             "--initial-cluster", "t=http://127.0.0.1:%d" % self.peer_port],
            stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if requests.get(self.url + "/health", timeout=1).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.1)
        pytest.fail("etcd did not start:\n" + (self.workdir / "etcd.log").read_text())

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.log:
            self.log.close()
            self.log = None

    def ctl(self, *args):
        env = dict(os.environ, ETCDCTL_API="3")
        p = subprocess.run([ETCDCTL, "--endpoints", self.url] + list(args),
                           capture_output=True, text=True, env=env, timeout=10)
        assert p.returncode == 0, "etcdctl %s: %s" % (args, p.stderr)
        return p.stdout

    def get(self, key):
        """The value of key (parsed JSON), or None."""
        out = self.ctl("get", key, "--print-value-only")
        return json.loads(out) if out.strip() else None

    def keys(self, prefix):
        return [k for k in self.ctl("get", prefix, "--prefix", "--keys-only").split("\n") if k]

    def lease_of(self, key):
        out = json.loads(self.ctl("get", key, "-w", "json"))
        return out["kvs"][0]["lease"]


def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    pytest.fail("timed out after %.1f s waiting for %s" % (timeout, what))
