"""The fleet (issue 17's acceptance): three inferd upstreams on loopback
registered in a real etcd and one gateway inferd in front of them
(`remote-models` with `discover: true`), under steady load from client
threads (grpcio and REST): one upstream killed with SIGKILL, restarted
with the same id and ports, another drained with SIGTERM.

Each request's outcome is recorded with the phase it started in; which
upstream served it is read from the upstreams' own counters
(nv_inference_request_success, every model summed). Between phases the
load pauses until nothing is in flight, so the counters of a phase are
exact. The counts are printed in one block (pytest -s) and written to
tests/integration/artifacts/fleet_counts.json. Properties are asserted,
never timings: waits are polls with generous deadlines (ASan, a loaded
machine)."""
import json
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import requests

from conftest import MAIN_MODELS, Server, stall_repo
from grpc_client import Client, generate
from etcd_server import requires_etcd, wait_for

pytestmark = requires_etcd

TTL = 3
PREFIX = "/fleet/"
GRPC_THREADS = 3
REST_THREADS = 3
THREADS = GRPC_THREADS + REST_THREADS
ECHO_DELAY_US = 150000      # the slow model: requests stay in flight on an upstream
PER_PHASE = 120             # completed requests each phase runs for (at least)
ARTIFACT = Path(__file__).resolve().parent / "artifacts" / "fleet_counts.json"

IN0 = np.arange(16, dtype=np.int32).reshape(1, 16)
IN1 = np.ones((1, 16), dtype=np.int32)
SIMPLE_REST = {"inputs": [
    {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": IN0.reshape(-1).tolist()},
    {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}]}
SIMPLE_SUM = (IN0 + IN1).reshape(-1).tolist()
ECHO_REST = {"inputs": [{"name": "IN", "shape": [1, 4], "datatype": "INT32",
                         "data": [4, 3, 2, 1]}]}


@pytest.fixture(scope="module")
def grpc_pb(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("fleet_proto_py"))


def etcd_flags(etcd, instance):
    return ["--etcd-endpoints", etcd.url, "--etcd-prefix", PREFIX, "--etcd-lease-ttl", str(TTL),
            "--instance-id", instance, "--advertise-host", "127.0.0.1"]


def key(instance):
    return PREFIX + "instances/" + instance


def served(srv):
    """Successful infer calls srv counted, every model (its own metrics)."""
    text = requests.get(srv.metrics_url, timeout=10).text
    return int(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("nv_inference_request_success{")))


def gateway_metric(gw, name, srv):
    """name{upstream="127.0.0.1:<srv's gRPC port>"} on the gateway, or None."""
    text = requests.get(gw.metrics_url, timeout=10).text
    label = 'upstream="127.0.0.1:%d"' % srv.grpc_port
    values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
              if line.startswith(name + "{") and label in line]
    return sum(values) if values else None


def healthy_upstreams(gw):
    """The gRPC ports of the upstreams the gateway holds healthy for every
    remote model (simple, digits, echo)."""
    text = requests.get(gw.metrics_url, timeout=10).text
    per_model = {}
    for line in text.splitlines():
        if line.startswith("inferd_upstream_healthy{") and line.rstrip().endswith(" 1"):
            # The label is the remote version, "model:version".
            model = line.split('model="', 1)[1].split('"', 1)[0].split(":", 1)[0]
            port = int(line.split('upstream="', 1)[1].split('"', 1)[0].rsplit(":", 1)[1])
            per_model.setdefault(model, set()).add(port)
    if set(per_model) != {"simple", "digits", "echo"}:
        return set()
    return set.intersection(*per_model.values())


class Load:
    """THREADS clients sending to the gateway without pause: the gRPC ones
    `simple` (every fourth call `echo`), the REST ones `simple`, `digits`
    and `echo` in turn. Every outcome is recorded as (start time, phase,
    thread, model, ok, detail). pause() stops new requests and waits until
    none is in flight; resume(phase) starts the next phase."""

    def __init__(self, gw, pb, hpb):
        self.gw, self.pb, self.hpb = gw, pb, hpb
        self.digits = json.loads((MAIN_MODELS["digits"] / "sample.json").read_text())
        self.cond = threading.Condition()
        self.phase = None
        self.paused = True
        self.stopping = False
        self.busy = 0
        self.records = []
        self.threads = [threading.Thread(target=self.run, args=(i,), daemon=True)
                        for i in range(THREADS)]
        for t in self.threads:
            t.start()

    def grpc_call(self, client, model):
        import grpc
        pb = self.pb
        req = pb.ModelInferRequest(model_name=model)
        if model == "echo":
            req.inputs.add(name="IN", datatype="INT32", shape=[1, 4])
            req.raw_input_contents.append(np.array([4, 3, 2, 1], dtype=np.int32).tobytes())
        else:
            for name in ("INPUT0", "INPUT1"):
                req.inputs.add(name=name, datatype="INT32", shape=[1, 16])
            req.raw_input_contents.append(IN0.tobytes())
            req.raw_input_contents.append(IN1.tobytes())
        try:
            resp = client.infer(req, timeout=30)
        except grpc.RpcError as e:
            return False, "grpc %s: %s" % (e.code().name, e.details())
        got = np.frombuffer(resp.raw_output_contents[0], dtype=np.int32).tolist()
        want = [4, 3, 2, 1] if model == "echo" else SIMPLE_SUM
        return got == want, "grpc answer %s" % got

    def rest_call(self, session, model):
        body = {"simple": SIMPLE_REST, "echo": ECHO_REST, "digits": self.digits}[model]
        try:
            r = session.post("%s/v2/models/%s/infer" % (self.gw.url, model), json=body,
                             timeout=30)
        except requests.RequestException as e:
            return False, "rest %r" % e
        if r.status_code != 200:
            return False, "rest HTTP %d %s" % (r.status_code, r.text[:200])
        outs = {o["name"]: o["data"] for o in r.json()["outputs"]}
        if model == "simple":
            return outs.get("OUTPUT0") == SIMPLE_SUM, "rest answer %s" % outs
        if model == "echo":
            return outs.get("OUT") == [4, 3, 2, 1], "rest answer %s" % outs
        return len(outs.get("probabilities", [])) == 10, "rest answer %s" % outs

    def run(self, i):
        use_grpc = i < GRPC_THREADS
        client = Client(self.pb, self.hpb, "127.0.0.1:%d" % self.gw.grpc_port) \
            if use_grpc else None
        session = None if use_grpc else requests.Session()
        n = 0
        try:
            while True:
                with self.cond:
                    while self.paused and not self.stopping:
                        self.cond.wait()
                    if self.stopping:
                        return
                    self.busy += 1
                    phase = self.phase
                started = time.monotonic()
                if use_grpc:
                    model = "echo" if n % 4 == 3 else "simple"
                    ok, detail = self.grpc_call(client, model)
                else:
                    model = ("simple", "digits", "echo")[n % 3]
                    ok, detail = self.rest_call(session, model)
                n += 1
                with self.cond:
                    self.busy -= 1
                    self.records.append((started, phase, i, model, ok, detail))
                    self.cond.notify_all()
        finally:
            if client:
                client.close()

    def resume(self, phase):
        with self.cond:
            self.phase = phase
            self.paused = False
            self.cond.notify_all()

    def pause(self):
        with self.cond:
            self.paused = True
            assert self.cond.wait_for(lambda: self.busy == 0, timeout=60), \
                "requests still in flight 60 s after the pause"

    def wait_done(self, phase, n, timeout=60):
        with self.cond:
            assert self.cond.wait_for(
                lambda: sum(1 for r in self.records if r[1] == phase) >= n, timeout=timeout), \
                "phase %s: fewer than %d requests done in %d s" % (phase, n, timeout)

    def stop(self):
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        for t in self.threads:
            t.join(timeout=60)

    def outcomes(self, phase):
        with self.cond:
            rs = [r for r in self.records if r[1] == phase]
        return {"total": len(rs), "ok": sum(1 for r in rs if r[4]),
                "failed": sum(1 for r in rs if not r[4]),
                "failures": sorted({r[5] for r in rs if not r[4]})}


def run_phase(load, phase, upstreams):
    """Runs `phase` for PER_PHASE calls, then pauses the load. Its outcomes,
    with the calls each upstream (name -> server) answered during it."""
    before = {n: served(u) for n, u in upstreams.items()}
    load.resume(phase)
    load.wait_done(phase, PER_PHASE)
    load.pause()
    return dict(load.outcomes(phase),
                per_upstream={n: served(u) - before[n] for n, u in upstreams.items()})


def restart(factory, old, workdir):
    """old started again with the same flags, ports and instance id."""
    workdir.mkdir()
    srv = Server(old.args + ["--grpc-port", str(old.grpc_port),
                             "--metrics-port", str(old.metrics_port)], workdir)
    factory.servers.append(srv)
    srv.start(port=old.port)
    srv.grpc_port, srv.metrics_port = old.grpc_port, old.metrics_port
    return srv


def test_fleet_kill_restart_drain(etcd, server_factory, tmp_path, grpc_pb):
    pb, hpb = grpc_pb
    names = ["u0", "u1", "u2"]
    ups = []
    for name in names:
        repo = stall_repo(tmp_path / name, ECHO_DELAY_US)
        for m in ("simple", "digits"):
            (repo / m).symlink_to(MAIN_MODELS[m].resolve())
        # Six clients may all wait on echo (150 ms a run, one at a time), up
        # to four on one upstream: more than its default queue budget (two
        # runs) admits. This test is about kills and restarts, not overload.
        ups.append(server_factory.start("--model-repository", str(repo), "--queue-budget-ms",
                                        "off", *etcd_flags(etcd, name), wait=False))
    for u in ups:
        u.wait_ready()
    for name in names:
        wait_for(lambda: (etcd.get(key(name)) or {}).get("ready"), 20, "%s registered" % name)
    cfg = tmp_path / "gateway.yaml"
    cfg.write_text("remote-models:\n" + "".join(
        "  - model: %s\n    discover: true\n"
        "    health-check: {interval-ms: 200, timeout-ms: 2000}\n"
        "    outlier: {consecutive-failures: 2, ejection-secs: 2}\n"
        "    max-retries: 2\n" % m for m in ("simple", "digits", "echo")))
    gw = server_factory.start("--config", str(cfg), *etcd_flags(etcd, "gw"), models={})
    all_ports = {u.grpc_port for u in ups}
    wait_for(lambda: healthy_upstreams(gw) == all_ports, 30, "all three upstreams healthy")

    load = Load(gw, pb, hpb)
    phases = {}
    try:
        # (1) steady: every call answered, each upstream takes a share.
        phases["steady"] = run_phase(load, "steady", dict(zip(names, ups)))

        # (2) SIGKILL u0 while calls run on it: only those may fail; it
        # leaves the pool (health check, then its key's lease expires).
        victim = ups[0]
        kill_before = [served(u) for u in ups[1:]]
        load.resume("kill")
        killed_in_flight = wait_for(
            lambda: gateway_metric(gw, "inferd_upstream_outstanding", victim), 30,
            "a call in flight on u0")
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait()
        victim.returncode = victim.proc.returncode
        wait_for(lambda: victim.grpc_port not in healthy_upstreams(gw), 30, "u0 ejected")
        wait_for(lambda: etcd.get(key("u0")) is None, TTL + 10, "u0's key expired")
        load.wait_done("kill", PER_PHASE // 2)
        load.pause()
        kill_after = [served(u) for u in ups[1:]]
        phases["kill"] = load.outcomes("kill")
        survivors = {n: a - b for n, a, b in zip(names[1:], kill_after, kill_before)}
        # u0's own counter died with it: what it answered is the rest.
        phases["kill"]["per_upstream"] = dict(
            {"u0 (before the kill)": phases["kill"]["ok"] - sum(survivors.values())}, **survivors)
        phases["kill"]["in_flight_on_u0_at_sigkill"] = int(killed_in_flight)

        # (2b) after the ejection: no failure, nothing sent to u0.
        sent_u0 = gateway_metric(gw, "inferd_upstream_requests_total", victim)
        phases["ejected"] = run_phase(load, "ejected", dict(zip(names[1:], ups[1:])))
        phases["ejected"]["per_upstream"] = dict({"u0": 0}, **phases["ejected"]["per_upstream"])
        # The gateway forgot u0 (discovery) or sent it nothing more.
        assert gateway_metric(gw, "inferd_upstream_requests_total", victim) in (None, sent_u0)

        # (3) u0 restarted, same id and ports: registered again, back in
        # the pool, taking calls.
        load.resume("restart")
        u0 = restart(server_factory, victim, tmp_path / "u0-again")
        u0.wait_ready()
        wait_for(lambda: (etcd.get(key("u0")) or {}).get("grpc_port") == u0.grpc_port, 20,
                 "u0 registered again")
        assert "u0" in etcd.ctl("get", key("u0"))  # etcdctl sees the key
        wait_for(lambda: u0.grpc_port in healthy_upstreams(gw), 30, "u0 back in the pool")
        load.pause()
        ups[0] = u0
        phases["restart"] = load.outcomes("restart")
        phases["rejoined"] = run_phase(load, "rejoined", dict(zip(names, ups)))

        # (4) SIGTERM u1 with calls in flight on it: not one fails; its key
        # goes before it exits.
        drained = ups[1]
        drain_before = [served(u) for u in (ups[0], ups[2])]
        load.resume("drain")
        # (echo runs 150 ms: what is in flight now still is at the signal)
        in_flight = wait_for(
            lambda: gateway_metric(gw, "inferd_upstream_outstanding", drained), 30,
            "a call in flight on u1")
        drained.proc.send_signal(signal.SIGTERM)
        drained.proc.wait(timeout=60)
        drained.returncode = drained.proc.returncode
        wait_for(lambda: drained.grpc_port not in healthy_upstreams(gw), 30, "u1 left the pool")
        load.wait_done("drain", PER_PHASE)
        load.pause()
        drain_after = [served(u) for u in (ups[0], ups[2])]
        phases["drain"] = load.outcomes("drain")
        others = {"u0": drain_after[0] - drain_before[0],
                  "u2": drain_after[1] - drain_before[1]}
        phases["drain"]["per_upstream"] = dict(
            {"u1 (until it exited)": phases["drain"]["ok"] - sum(others.values())}, **others)
        phases["drain"]["in_flight_on_u1_at_sigterm"] = int(in_flight)
    finally:
        load.stop()

    totals = {k: sum(p[k] for p in phases.values()) for k in ("total", "ok", "failed")}
    summary = {"threads": THREADS, "phases": phases, "totals": totals}
    ARTIFACT.parent.mkdir(exist_ok=True)
    ARTIFACT.write_text(json.dumps(summary, indent=2) + "\n")
    print("\n==== fleet counts (3 upstreams + 1 gateway, %d client threads) ====" % THREADS)
    for name, p in phases.items():
        print("%-9s total %4d  ok %4d  failed %2d  per upstream %s" % (
            name, p["total"], p["ok"], p["failed"], p.get("per_upstream", "-")))
        for k in ("in_flight_on_u0_at_sigkill", "in_flight_on_u1_at_sigterm"):
            if k in p:
                print("          %s (the gateway's count just before): %d" % (k, p[k]))
        for f in p["failures"]:
            print("          failure: %s" % f)
    print("%-9s total %4d  ok %4d  failed %2d" % ("all", totals["total"], totals["ok"],
                                                   totals["failed"]))
    print("====")

    steady, kill, ejected = phases["steady"], phases["kill"], phases["ejected"]
    rejoined, drain = phases["rejoined"], phases["drain"]
    assert steady["failed"] == 0, steady["failures"]
    assert sum(steady["per_upstream"].values()) == steady["ok"]
    assert all(n > 0 for n in steady["per_upstream"].values()), steady
    # Only the calls in flight on u0 when it died: at most one per thread,
    # and each one a failure of the stream it was on (502 / UNAVAILABLE).
    assert kill["failed"] <= THREADS, kill
    assert kill["per_upstream"]["u0 (before the kill)"] >= 0, kill
    assert all(f.startswith(("rest HTTP 502", "grpc INTERNAL", "grpc UNAVAILABLE"))
               for f in kill["failures"]), kill["failures"]
    assert ejected["failed"] == 0, ejected["failures"]
    assert ejected["per_upstream"]["u1"] + ejected["per_upstream"]["u2"] == ejected["ok"]
    assert phases["restart"]["failed"] == 0, phases["restart"]["failures"]
    assert rejoined["failed"] == 0, rejoined["failures"]
    assert sum(rejoined["per_upstream"].values()) == rejoined["ok"]
    assert rejoined["per_upstream"]["u0"] > 0, rejoined
    assert drain["failed"] == 0, drain["failures"]
    assert drain["per_upstream"]["u1 (until it exited)"] >= drain["in_flight_on_u1_at_sigterm"]
    assert drained.returncode == 0
    log = drained.stderr()
    assert log.index("deregistered from etcd") < log.index("shutdown complete")
    assert etcd.get(key("u1")) is None
    assert totals["failed"] == kill["failed"]
