"""Registration in etcd (--etcd-endpoints): a real etcd started per test
(Debian's etcd-server, free loopback ports, a temp data dir) and etcdctl as
the independent client that reads what inferd wrote."""
import json
import os
import shutil
import signal
import subprocess
import threading
import time

import requests

from conftest import INFERD_BIN, MAIN_MODELS, stall_repo, stall_started, wait_stall_started
from etcd_server import Etcd, requires_etcd, wait_for

pytestmark = requires_etcd

TTL = 3


def etcd_flags(etcd, instance="node-a", ttl=TTL):
    return ["--etcd-endpoints", etcd.url, "--etcd-prefix", "/t/", "--etcd-lease-ttl", str(ttl),
            "--instance-id", instance, "--advertise-host", "127.0.0.1"]


KEY = "/t/instances/node-a"


def test_registration_value(etcd, server_factory):
    srv = server_factory.start(*etcd_flags(etcd), models={"simple": MAIN_MODELS["simple"],
                                                          "digits": MAIN_MODELS["digits"]})
    v = wait_for(lambda: etcd.get(KEY), 5, "the key")
    assert v == {
        "id": "node-a", "host": "127.0.0.1", "http_port": srv.port, "grpc_port": srv.grpc_port,
        "metrics_port": srv.metrics_port, "ready": True, "draining": False,
        "version": v["version"],
        "models": [{"name": "digits", "versions": ["1"], "ready_versions": ["1"]},
                   {"name": "simple", "versions": ["1"], "ready_versions": ["1"]}]}
    assert v["version"] == subprocess.run([str(INFERD_BIN), "--version"], capture_output=True,
                                          text=True).stdout.split()[-1]
    # Put with a lease of the TTL asked for.
    lease = etcd.lease_of(KEY)
    ttl = json.loads(etcd.ctl("lease", "timetolive", "%x" % lease, "-w", "json"))
    assert 0 < ttl["ttl"] <= TTL and ttl["granted-ttl"] == TTL
    # Kept alive: still there after three TTLs.
    time.sleep(3 * TTL)
    assert etcd.get(KEY) == v
    # The default id is hostname:http-port; the host the --host.
    srv.stop()


def test_default_instance_id(etcd, server_factory):
    srv = server_factory.start("--etcd-endpoints", etcd.url)
    key = "/inferd/instances/%s:%d" % (os.uname().nodename, srv.port)
    v = wait_for(lambda: etcd.get(key), 5, key)
    assert v["host"] == "127.0.0.1" and v["id"] == key.rsplit("/", 1)[1]


def test_updated_on_load_and_unload(etcd, server_factory):
    srv = server_factory.start(*etcd_flags(etcd), "--model-control-mode", "explicit",
                               "--load-model", "simple",
                               models={"simple": MAIN_MODELS["simple"],
                                       "digits": MAIN_MODELS["digits"]})
    wait_for(lambda: etcd.get(KEY), 5, "the key")
    names = lambda: [m["name"] for m in (etcd.get(KEY) or {}).get("models", [])]
    assert names() == ["simple"]
    r = requests.post(srv.url + "/v2/repository/models/digits/load", timeout=30)
    assert r.status_code == 200, r.text
    wait_for(lambda: names() == ["digits", "simple"], 3, "digits in the value")
    digits = etcd.get(KEY)["models"][0]
    assert digits == {"name": "digits", "versions": ["1"], "ready_versions": ["1"]}
    r = requests.post(srv.url + "/v2/repository/models/simple/unload", timeout=30)
    assert r.status_code == 200, r.text
    wait_for(lambda: names() == ["digits"], 3, "simple gone from the value")


def test_killed_instance_expires_within_ttl(etcd, server_factory):
    srv = server_factory.start(*etcd_flags(etcd))
    wait_for(lambda: etcd.get(KEY), 5, "the key")
    srv.proc.send_signal(signal.SIGKILL)
    srv.proc.wait()
    srv.returncode = srv.proc.returncode
    t0 = time.monotonic()
    wait_for(lambda: etcd.get(KEY) is None, TTL + 2, "the key to expire")
    gone_after = time.monotonic() - t0
    # etcd checks expiries every 500 ms: the TTL and that much slack.
    assert gone_after <= TTL + 1.0, gone_after


def test_sigterm_deregisters_before_in_flight_requests_finish(etcd, server_factory, tmp_path):
    delay = 3.0
    repo = stall_repo(tmp_path, int(delay * 1e6))
    srv = server_factory.start(*etcd_flags(etcd), "--model-repository", str(repo))
    wait_for(lambda: etcd.get(KEY), 5, "the key")
    result = {}

    def slow():
        body = {"inputs": [{"name": "IN", "shape": [1, 4], "datatype": "INT32",
                            "data": [1, 2, 3, 4]}]}
        r = requests.post(srv.url + "/v2/models/echo/infer", json=body, timeout=30)
        result["status"] = r.status_code
        result["at"] = time.monotonic()

    started = stall_started(tmp_path)
    t = threading.Thread(target=slow)
    t.start()
    wait_stall_started(tmp_path, started + 1)  # the request is running on the model
    srv.proc.send_signal(signal.SIGTERM)
    wait_for(lambda: etcd.get(KEY) is None, 2, "the key deleted on SIGTERM")
    deleted_at = time.monotonic()
    assert srv.proc.poll() is None, "deleted only when the process had exited"
    assert "at" not in result, "the in-flight request finished before the key went"
    t.join()
    assert result["status"] == 200
    assert result["at"] > deleted_at
    srv.proc.wait(timeout=15)
    srv.returncode = srv.proc.returncode
    assert srv.returncode == 0
    # Revoked too: no lease of ours left behind.
    assert etcd.ctl("lease", "list").startswith("found 0 leases")
    log = srv.stderr()
    assert log.index("deregistered from etcd") < log.index("shutdown complete")


def test_etcd_restart_and_lost_lease(etcd, server_factory):
    srv = server_factory.start(*etcd_flags(etcd))
    v = wait_for(lambda: etcd.get(KEY), 5, "the key")
    # etcd killed and started again on the same data dir: the lease lives
    # on as long as inferd keeps it alive after the restart.
    etcd.kill()
    time.sleep(TTL / 2)
    etcd.start()
    time.sleep(3 * TTL)
    assert etcd.get(KEY) == v
    # The lease lost (revoked behind inferd's back): the key goes with it
    # and inferd registers again with a new lease.
    lease = etcd.lease_of(KEY)
    etcd.ctl("lease", "revoke", "%x" % lease)
    assert etcd.get(KEY) is None
    v2 = wait_for(lambda: etcd.get(KEY), TTL + 2, "the key put again")
    assert v2 == v and etcd.lease_of(KEY) != lease
    # etcd restarted without its data (a new cluster): registered again.
    etcd.kill()
    shutil.rmtree(etcd.data)
    etcd.start()
    wait_for(lambda: etcd.get(KEY), TTL + 3, "the key in the new etcd")
    assert requests.get(srv.url + "/v2/health/ready", timeout=5).status_code == 200
    log = srv.stderr()
    assert log.count("lease") >= 2 and "registering again" in log


def test_etcd_down_at_start(tmp_path, server_factory):
    etcd = Etcd(tmp_path)  # not started yet: nothing listens on its port
    srv = server_factory.start(*etcd_flags(etcd))
    # Serving does not wait for etcd.
    r = requests.post(srv.url + "/v2/models/simple/infer", timeout=10, json={"inputs": [
        {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
        {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}]})
    assert r.status_code == 200, r.text
    time.sleep(1.5)
    etcd.start()
    try:
        v = wait_for(lambda: etcd.get(KEY), 5, "the key once etcd is up")
        assert v["ready"] is True and v["grpc_port"] == srv.grpc_port
        log = srv.stderr()
        # Each state change logged once, not once per retry.
        assert log.count("etcd registration: etcd 127.0.0.1") == 1, log
        assert log.count("registered in etcd") == 1
    finally:
        srv.stop()
        etcd.kill()


def test_flag_errors(tmp_path):
    def run(*args):
        return subprocess.run([str(INFERD_BIN), "serve", "--model-repository", str(tmp_path)]
                              + list(args), capture_output=True, text=True, timeout=10)
    p = run("--instance-id", "x")
    assert p.returncode == 2 and "need --etcd-endpoints" in p.stderr
    p = run("--etcd-endpoints", "http://127.0.0.1:1", "--etcd-lease-ttl", "1")
    assert p.returncode == 2 and "--etcd-lease-ttl" in p.stderr
    p = run("--etcd-endpoints", "http://127.0.0.1:1", "--instance-id", "a/b")
    assert p.returncode == 2 and "without '/'" in p.stderr
    p = run("--etcd-endpoints", "https://127.0.0.1:1")
    assert p.returncode == 2 and "https is not supported" in p.stderr
    help_text = subprocess.run([str(INFERD_BIN), "serve", "--help"], capture_output=True,
                               text=True).stdout
    for flag in ("--etcd-endpoints", "--etcd-prefix", "--etcd-lease-ttl", "--advertise-host",
                 "--instance-id"):
        assert flag in help_text


def gateway_infer(gw):
    return requests.post(gw.url + "/v2/models/simple/infer", timeout=10, json={"inputs": [
        {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
        {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}]})


def upstreams_in_metrics(gw):
    text = requests.get(gw.metrics_url, timeout=10).text
    return sorted({line.split('upstream="', 1)[1].split('"', 1)[0]
                   for line in text.splitlines()
                   if line.startswith("inferd_upstream_healthy{")
                   and line.rstrip().endswith(" 1")})


def test_gateway_discovers_registered_instances(etcd, server_factory, tmp_path):
    """Two instances register; a gateway with `discover: true` on the same
    etcd serves their model, follows one leaving on SIGTERM and one coming,
    and is not offered as an upstream itself (its remote versions are not
    in its own registration)."""
    a = server_factory.start(*etcd_flags(etcd, "a"))
    b = server_factory.start(*etcd_flags(etcd, "b"))
    cfg = tmp_path / "gateway.yaml"
    cfg.write_text("remote-models:\n  - model: simple\n    discover: true\n"
                   "    health-check: {interval-ms: 200, timeout-ms: 500}\n")
    gw = server_factory.start("--config", str(cfg), *etcd_flags(etcd, "gw"), models={})
    want = sorted("127.0.0.1:%d" % s.grpc_port for s in (a, b))
    wait_for(lambda: upstreams_in_metrics(gw) == want, 10, "both upstreams healthy")
    for _ in range(10):
        assert gateway_infer(gw).status_code == 200
    # The gateway registers too, but offers no version of its own.
    gv = wait_for(lambda: etcd.get("/t/instances/gw"), 5, "the gateway's key")
    assert gv["models"] == [{"name": "simple", "versions": [], "ready_versions": []}]
    # a drains: it leaves the pool; the calls go to b.
    assert a.stop() == []
    wait_for(lambda: upstreams_in_metrics(gw) == ["127.0.0.1:%d" % b.grpc_port], 10,
             "a gone from the pool")
    for _ in range(5):
        assert gateway_infer(gw).status_code == 200
    c = server_factory.start(*etcd_flags(etcd, "c"))
    want = sorted("127.0.0.1:%d" % s.grpc_port for s in (b, c))
    wait_for(lambda: upstreams_in_metrics(gw) == want, 10, "c joined the pool")
    assert "upstream 127.0.0.1:%d added" % c.grpc_port in gw.stderr()
