"""USDT probes (src/base/probe.h, docs/probes.md): listed in the binary,
seen by bpftrace with the arguments the access log shows for the same
requests, and the scripts of tools/bpf/ printing what they claim.

bpftrace needs root (or CAP_BPF/CAP_PERFMON) and a kernel that lets it
attach: where it cannot, the attaching tests are skipped with the reason
bpftrace gave; the readelf test always runs."""
import json
import os
import shutil
import signal
import subprocess
import threading
import time

import pytest
import requests

from conftest import INFERD_BIN, MAIN_MODELS, REPO_ROOT, make_repository
from test_decoupled import repeat_repo

PROBES = ["conn_accepted", "request_begin", "admitted", "refused", "queued", "batch_formed",
          "exec_start", "exec_end", "request_done", "stream_token", "stream_resumed",
          "response_written", "model_load", "model_version_loaded", "model_unloaded"]
SCRIPTS = sorted((REPO_ROOT / "tools" / "bpf").glob("*.bt"))
SIMPLE = {"inputs": [
    {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
    {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}]}
WAIT = 30


def bpftrace_refusal():
    """Why bpftrace cannot attach here (None: it can)."""
    exe = shutil.which("bpftrace")
    if not exe:
        return "bpftrace is not installed (scripts/deps.sh installs it)"
    p = subprocess.run([exe, "-e", "BEGIN { printf(\"ok\\n\"); exit(); }"],
                       capture_output=True, text=True, timeout=60)
    if p.returncode != 0 or "ok" not in p.stdout:
        return "bpftrace cannot attach on this kernel: %s" % (p.stderr.strip()[-300:] or
                                                              "exit %d" % p.returncode)
    return None


@pytest.fixture(scope="module")
def can_attach():
    why = bpftrace_refusal()
    if why:
        pytest.skip(why)


# bpftrace prints "Attaching N probes..." before its uprobes are in place,
# and they go in one by one after it: a last probe, on a request with this
# id, says when every probe of the program before it is live.
ATTACH_CHECK_ID = "bpf-attach-check"
ATTACH_CHECK = ('\nusdt::inferd:request_begin /str(arg0) == "%s"/ { printf("ATTACHED\\n"); }\n'
                % ATTACH_CHECK_ID)


class Trace:
    """bpftrace attached to the server, its program followed by the attach
    check; stopped with SIGINT."""

    def __init__(self, srv, program):
        self.proc = subprocess.Popen(["bpftrace", "-p", str(srv.proc.pid), "-e",
                                      program + ATTACH_CHECK],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines = []
        self.attached = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        deadline = time.monotonic() + 60
        while not self.attached.is_set():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail("bpftrace did not attach:\n" + "\n".join(self.lines[-20:]))
            requests.get(srv.url + "/v2/health/live", headers={"x-request-id": ATTACH_CHECK_ID},
                         timeout=WAIT)
            self.attached.wait(0.05)

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.startswith("ATTACHED"):
                self.attached.set()

    def stop(self):
        """Stops it (its END prints the maps) and returns every line it printed."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.reader.join(timeout=10)
        return self.lines


@pytest.fixture(scope="module")
def srv(module_server_factory, tmp_path_factory):
    """simple, the repeat plugin (decoupled) and kjv (generative, resumable
    streams); digits is loaded and unloaded by the tests (explicit mode)."""
    root = repeat_repo(tmp_path_factory.mktemp("probes"))
    make_repository(root, {"simple": MAIN_MODELS["simple"], "digits": MAIN_MODELS["digits"],
                           "kjv": REPO_ROOT / "models" / "kjv"})
    log = tmp_path_factory.mktemp("probes_log") / "access.log"
    s = module_server_factory.start("--model-repository", str(root), "--model-control-mode",
                                    "explicit", "--load-model", "simple", "--load-model", "repeat",
                                    "--load-model", "kjv", "--access-log", str(log),
                                    "--stream-resume-secs", "30")
    s.access_log = log
    return s


def test_probes_are_in_the_binary():
    out = subprocess.run(["readelf", "-n", str(INFERD_BIN)], capture_output=True, text=True,
                         check=True).stdout
    notes = out.split("stapsdt")
    found = set()
    for n in notes[1:]:
        provider = n.split("Provider:")[1].split()[0] if "Provider:" in n else None
        name = n.split("Name:")[1].split()[0] if "Name:" in n else None
        if provider == "inferd":
            found.add(name)
    assert found == set(PROBES), sorted(found ^ set(PROBES))


def print_every_probe():
    """A bpftrace program printing each probe's arguments as one line:
    `P name|arg|arg...` (strings as strings)."""
    fmt = {
        "conn_accepted": ('"%d|%d"', "arg0, arg1"),
        "request_begin": ('"%s|%s|%d"', "str(arg0), str(arg1, arg2), arg3"),
        "admitted": ('"%s|%s|%s"', "str(arg0), str(arg1), str(arg2)"),
        "refused": ('"%s|%s|%d|%s"', "str(arg0), str(arg1), arg2, str(arg3)"),
        "queued": ('"%s|%s|%d|%d"', "str(arg0), str(arg1), arg2, arg3"),
        "batch_formed": ('"%s|%s|%d|%d|%d"', "str(arg0), str(arg1), arg2, arg3, arg4"),
        "exec_start": ('"%s|%s|%d"', "str(arg0), str(arg1), arg2"),
        "exec_end": ('"%s|%s|%d|%d|%d"', "str(arg0), str(arg1), arg2, arg3, arg4"),
        "request_done": ('"%s|%s|%s|%d|%d|%d"',
                         "str(arg0), str(arg1), str(arg2), arg3, arg4, arg5"),
        "stream_token": ('"%s|%d|%d"', "str(arg0), arg1, arg2"),
        "stream_resumed": ('"%s|%d|%d"', "str(arg0), arg1, arg2"),
        "response_written": ('"%s|%d|%d"', "str(arg0), arg1, arg2"),
        "model_load": ('"%s|%d|%d"', "str(arg0), arg1, arg2"),
        "model_version_loaded": ('"%s|%s|%d|%d"', "str(arg0), str(arg1), arg2, arg3"),
        "model_unloaded": ('"%s|%s"', "str(arg0), str(arg1)"),
    }
    assert set(fmt) == set(PROBES)
    return "\n".join('usdt::inferd:%s { printf("P %s|%s\\n", %s); }' % (
        name, name, f.strip('"'), args) for name, (f, args) in fmt.items())


def events(lines):
    out = {}
    for line in lines:
        if line.startswith("P "):
            name, _, rest = line[2:].partition("|")
            out.setdefault(name, []).append(rest.split("|"))
    return out


def access_log(srv, ids):
    """The access log lines of these request ids (waiting for all)."""
    deadline = time.monotonic() + WAIT
    while True:
        rows = {}
        if srv.access_log.exists():
            for line in srv.access_log.read_text().splitlines():
                doc = json.loads(line)
                if doc["request_id"] in ids:
                    rows[doc["request_id"]] = doc
        if len(rows) == len(ids) or time.monotonic() > deadline:
            return rows
        time.sleep(0.1)


def resumed_stream(url):
    """Starts an OpenAI stream of kjv, reads its first event, and resumes it
    with GET /v1/streams/{id}: the server's stream_resumed."""
    r = requests.post(url + "/v1/completions", json={
        "model": "kjv", "prompt": "In the beginning", "max_tokens": 8, "temperature": 0,
        "stream": True}, stream=True, timeout=WAIT)
    event_id = None
    for line in r.iter_lines(decode_unicode=True):
        if line.startswith("id:"):
            event_id = line[3:].strip()
            break
    assert event_id, "no event id in the stream"
    stream_id = event_id.split("-")[0]
    g = requests.get(url + "/v1/streams/" + stream_id, headers={"Last-Event-ID": event_id},
                     stream=True, timeout=WAIT)
    assert g.status_code == 200, g.text
    g.close()
    r.close()


def test_every_probe_fires_with_the_access_logs_arguments(srv, can_attach):
    trace = Trace(srv, print_every_probe())
    ids = ["probe-%d" % i for i in range(5)]
    try:
        for rid in ids:
            r = requests.post(srv.url + "/v2/models/simple/infer", json=SIMPLE,
                              headers={"x-request-id": rid}, timeout=WAIT)
            assert r.status_code == 200, r.text
        bad = requests.post(srv.url + "/v2/models/simple/infer", data="{",
                            headers={"x-request-id": "probe-bad"}, timeout=WAIT)
        assert bad.status_code == 400
        r = requests.post(srv.url + "/v2/models/repeat/generate_stream",
                          json={"IN": [4, 5, 6], "DELAY": [1, 1, 1]},
                          headers={"x-request-id": "probe-stream"}, timeout=WAIT)
        assert r.status_code == 200 and r.text.count("data:") == 3
        resumed_stream(srv.url)
        for action in ("load", "unload"):
            r = requests.post(srv.url + "/v2/repository/models/digits/" + action, timeout=WAIT)
            assert r.status_code == 200, r.text
        # the unloaded version is freed once nothing holds it: wait for its probe
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline and not any(
                "P model_unloaded|digits" in line for line in trace.lines):
            time.sleep(0.1)
    finally:
        lines = trace.stop()
    ev = events(lines)
    missing = sorted(set(PROBES) - set(ev))
    assert missing == [], (missing, [line for line in lines if not line.startswith("P ")][:10])

    logged = access_log(srv, set(ids))
    assert len(logged) == len(ids)
    done = {e[0]: e for e in ev["request_done"]}
    written = {e[0]: e for e in ev["response_written"]}
    begun = {e[0]: e for e in ev["request_begin"]}
    admitted = {e[0]: e for e in ev["admitted"]}
    for rid in ids:
        row = logged[rid]
        assert begun[rid][1] == "/v2/models/simple/infer"
        assert int(begun[rid][2]) == row["bytes_in"]
        assert admitted[rid][1:] == ["simple", "1"]
        _, model, version, queue_ns, compute_ns, _ = done[rid]
        assert (model, version) == (row["model"], row["version"])
        assert int(queue_ns) // 1000 == row["queue_us"], (rid, queue_ns, row)
        assert int(compute_ns) // 1000 == row["compute_us"], (rid, compute_ns, row)
        assert int(written[rid][1]) == row["status"] == 200
        assert int(written[rid][2]) == row["bytes_out"]
    refused = [e for e in ev["refused"] if e[0] == "probe-bad"]
    assert refused == [["probe-bad", "simple", "400", "decode"]]
    assert any(e[0] == "probe-stream" and e[2] == "1" for e in ev["stream_token"])
    assert len([e for e in ev["stream_token"] if e[0] == "probe-stream"]) >= 3
    assert all(e[0] == "simple" and e[1] == "1" for e in ev["exec_end"] if e[0] == "simple")
    assert ["digits", "1", "0"] in ev["model_load"]
    assert any(e[:2] == ["digits", "1"] for e in ev["model_version_loaded"])
    assert ["digits", "1"] in ev["model_unloaded"]


EXPECT = {
    "latency_by_stage.bt": ["@queue_us[simple]", "@compute_us[simple]", "@total_us[simple]"],
    "queue_wait.bt": ["queue wait (us) per model", "@wait_us[simple]"],
    "batch_sizes.bt": ["@batches[simple, 1]", "@requests_per_batch[simple, 1]",
                       "@samples_per_batch[simple, 1]", "@run_us[simple, 1]"],
    "slowest.bt": ["slowest requests", "@total_us[script-"],
    "refusals.bt": ["@refused[simple, decode, 400]", "@refused[nosuch, resolve, 404]"],
}


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_each_script_prints_what_it_claims(srv, can_attach, script):
    assert script.name in EXPECT, "a new script needs its expectations here"
    trace = Trace(srv, script.read_text())
    try:
        for i in range(20):
            r = requests.post(srv.url + "/v2/models/simple/infer", json=SIMPLE,
                              headers={"x-request-id": "script-%d" % i}, timeout=WAIT)
            assert r.status_code == 200
        assert requests.post(srv.url + "/v2/models/simple/infer", data="{",
                             timeout=WAIT).status_code == 400
        assert requests.post(srv.url + "/v2/models/nosuch/infer", json=SIMPLE,
                             timeout=WAIT).status_code == 404
        if script.name == "queue_wait.bt":
            # rows are printed each second: let one pass with the requests in it
            deadline = time.monotonic() + WAIT
            while time.monotonic() < deadline and not any(
                    "@wait_us[simple]" in line for line in trace.lines):
                time.sleep(0.1)
    finally:
        out = "\n".join(trace.stop())
    for want in EXPECT[script.name]:
        assert want in out, (want, out[-3000:])
