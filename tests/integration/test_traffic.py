"""Traffic routing (src/policy: route.h, routing.h, guard.h, shadow.h): which
version serves a request and why (x-inferd-model-version, x-inferd-route),
the canary split, sticky A/B buckets, changes of the table under load, the
GET/PUT /v2/models/{m}/routing API and its file, shadow copies and their
diff metrics, and the canary guard's automatic rollback.

One module-scoped server serves every model these tests route (each test
PUTs the table it needs first):
  digits      versions 1 (models/digits/1) and 2 (tests/models/digits_v2/2)
  digits_sh   the same two versions, only ever shadowed to version 2 (so
              version 2's primary statistics stay at 0)
  echo_*      the example plugin identity_stall with versions 1 and 2,
              version 2 made faulty by its per-version `parameters` file
The API test restarts its own server on its own repository.

Timing: no test asserts a duration. Statistical checks say their confidence
where they make them; most use fixed request ids and user ids, so that the
hash-based splits they check are deterministic anyway.
"""
import http.client
import json
import re
import shutil
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import requests

import digits_ref
from conftest import INFERD_BIN, REPO_ROOT, assert_error_response, ok_json
from prom import scrape, wait_for

PLUGIN = INFERD_BIN.parent / "libinferd_identity_stall.so"
V1_ONNX = REPO_ROOT / "models" / "digits" / "1" / "model.onnx"
V2_ONNX = REPO_ROOT / "tests" / "models" / "digits_v2" / "2" / "model.onnx"

DIGITS_CONFIG = "max_batch_size: 8\nversion_policy: { all: {} }\n"
ECHO_CONFIG = """backend: "identity_stall"
max_batch_size: 8
version_policy: { all: {} }
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 4 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 4 ] } ]
"""

# Requests the rollback tests needed before their guard tripped (the healthy
# canary gets at least as many).
ROLLBACK_NEEDED = {}


# --------------------------------------------------------------------------
# repositories


def digits_model(root, name):
    """<root>/<name>: digits versions 1 and 2 (symlinked files), all served."""
    for version, onnx in ((1, V1_ONNX), (2, V2_ONNX)):
        vdir = root / name / str(version)
        vdir.mkdir(parents=True)
        (vdir / "model.onnx").symlink_to(onnx.resolve())
    (root / name / "config.pbtxt").write_text(DIGITS_CONFIG)


def param(key, value):
    return 'parameters { key: "%s" value: { string_value: "%s" } }\n' % (key, value)


def echo_model(root, name, config_params=(), v2_parameters=None):
    """<root>/<name>: identity_stall versions 1 and 2; config_params are
    config.pbtxt parameters (both versions), v2_parameters the lines of
    version 2's `parameters` file (identity_stall's per-version override)."""
    if not PLUGIN.exists():
        pytest.fail("example plugin not built: %s" % PLUGIN)
    mdir = root / name
    for version in (1, 2):
        (mdir / str(version)).mkdir(parents=True)
        (mdir / str(version) / "model.onnx").write_bytes(b"")
    (mdir / "config.pbtxt").write_text(
        ECHO_CONFIG + "".join(param(k, v) for k, v in config_params))
    if v2_parameters:
        (mdir / "2" / "parameters").write_text("".join("%s %s\n" % kv for kv in v2_parameters))
    shutil.copy(PLUGIN, mdir / PLUGIN.name)


# --------------------------------------------------------------------------
# clients


class Conn:
    """One keep-alive HTTP/1.1 connection (http.client: much cheaper per
    request than requests, for the bulk tests). Not thread-safe: one per
    thread."""

    def __init__(self, port):
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def post(self, path, body, headers=None):
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        self.c.request("POST", path, body, h)
        r = self.c.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data

    def close(self):
        self.c.close()


def digits_body(pixels):
    """A JSON infer body for one image (float32 [64])."""
    data = [float(x) for x in np.asarray(pixels, dtype=np.float32).reshape(-1)]
    return json.dumps({"inputs": [{"name": "pixels", "shape": [1, 64], "datatype": "FP32",
                                   "data": data}]}).encode()


IMAGE = digits_ref.test_images(1)[0]
BODY = digits_body(IMAGE)
ECHO_BODY = json.dumps({"inputs": [{"name": "IN", "shape": [1, 4], "datatype": "INT32",
                                    "data": [1, 2, 3, 4]}]}).encode()


def infer(url, model, headers=None, version=None, body=BODY):
    path = "/v2/models/%s%s/infer" % (model, "/versions/%s" % version if version else "")
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    return requests.post(url + path, data=body, headers=h, timeout=60)


def served(r):
    """(version, route) of an infer answer, checked against its body's
    model_version."""
    assert r.status_code == 200, "HTTP %d: %s" % (r.status_code, r.text[:500])
    version = r.headers["x-inferd-model-version"]
    assert r.json()["model_version"] == version, (r.json()["model_version"], version)
    return version, r.headers["x-inferd-route"]


def get_table(url, model):
    return ok_json(requests.get(url + "/v2/models/%s/routing" % model, timeout=30))


def put(url, model, table):
    body = table if isinstance(table, (str, bytes)) else json.dumps(table)
    return requests.put(url + "/v2/models/%s/routing" % model, data=body, timeout=30,
                        headers={"Content-Type": "application/json"})


def put_ok(url, model, table):
    return ok_json(put(url, model, table))


_M64 = (1 << 64) - 1


def route_bucket(key):
    """route.h's route_bucket(): FNV-1a 64, MurmurHash3's fmix64, mod 10,000."""
    h = 0xcbf29ce484222325
    for b in key.encode():
        h = ((h ^ b) * 0x100000001b3) & _M64
    h ^= h >> 33
    h = (h * 0xff51afd7ed558ccd) & _M64
    h ^= h >> 33
    h = (h * 0xc4ceb9fe1a85ec53) & _M64
    h ^= h >> 33
    return h % 10000


def bucket_owners(table):
    """{bucket: version} of a GET answer's sticky buckets."""
    owners = {}
    for arm in table.get("sticky", []):
        for lo, hi in arm["buckets"]:
            for b in range(lo, hi + 1):
                assert b not in owners, "bucket %d owned twice" % b
                owners[b] = str(arm["version"])
    return owners


def route_counts(srv, model):
    """{(version, route): n} of inferd_route_requests_total."""
    return {(l["version"], l["route"]): v for l, v in
            scrape(srv).series("inferd_route_requests_total") if l["model"] == model}


def send_many(port, path, n, headers_of, threads=8, body=BODY):
    """Sends n requests over `threads` keep-alive connections; headers_of(i)
    gives request i's headers. Returns the list of (status, version, route)."""
    results = [None] * n

    def worker(k):
        c = Conn(port)
        try:
            for i in range(k, n, threads):
                status, h, data = c.post(path, body, headers_of(i))
                results[i] = (status, h.get("x-inferd-model-version"), h.get("x-inferd-route"))
        finally:
            c.close()

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert all(r is not None for r in results)
    return results


# --------------------------------------------------------------------------
# the module's server


@pytest.fixture(scope="module")
def srv(module_server_factory, tmp_path_factory):
    root = tmp_path_factory.mktemp("traffic") / "models"
    root.mkdir()
    digits_model(root, "digits")
    digits_model(root, "digits_sh")
    # fail_skip 1 spares the one warm-up run inferd makes before serving.
    echo_model(root, "echo_err", v2_parameters=[("fail_every_n", "2"), ("fail_skip", "1")])
    echo_model(root, "echo_slow", v2_parameters=[("delay_us", "30000")])
    # Both versions equal; a 2 ms floor makes machine noise a small share of
    # each latency, so that a p99 ratio of 5 needs a real difference.
    echo_model(root, "echo_ok", config_params=[("delay_us", "2000")])
    echo_model(root, "echo_sf", config_params=[("shadow_fail", "1")])
    # These tests count where requests go; the default queue budget's fast
    # 503s under a burst (test_queue_budget.py) would only blur the counts
    # on a slow machine (the sanitizer build).
    return module_server_factory.start("--queue-budget-ms", "off", repository=root)


# --------------------------------------------------------------------------
# 1. precedence


def test_precedence_of_the_rules(srv):
    """URL version > pin header > arm header > sticky bucket > canary >
    default: each rule answers with its route name, and the version it
    names is the one that served (header and body agree)."""
    url, m = srv.url, "digits"
    # No table: the newest version, route default.
    put_ok(url, m, {})
    assert served(infer(url, m)) == ("2", "default")
    t = put_ok(url, m, {"arms": {"blue": 1, "green": 2}, "key_header": "x-user-id",
                        "sticky": [{"version": 2, "percent": 50}],
                        "canary": {"stable": 1, "version": 2, "weight": 0}})
    owners = bucket_owners(t)
    assert len(owners) == 5000 and set(owners.values()) == {"2"}
    in_sticky = next(u for u in ("user%d" % i for i in range(1000))
                     if route_bucket(u) in owners)
    outside = next(u for u in ("user%d" % i for i in range(1000))
                   if route_bucket(u) not in owners)
    everything = {"x-model-version": "2", "x-ab-group": "blue", "x-user-id": in_sticky}

    # URL wins over all of them.
    assert served(infer(url, m, everything, version=1)) == ("1", "url")
    assert served(infer(url, m, {"x-model-version": "2"}, version=1)) == ("1", "url")
    # The pin header over arm and sticky.
    assert served(infer(url, m, everything)) == ("2", "pin")
    assert served(infer(url, m, {"x-model-version": "1"})) == ("1", "pin")
    # The arm header over sticky: blue is 1 although the user's bucket is 2's.
    assert served(infer(url, m, {"x-ab-group": "blue", "x-user-id": in_sticky})) == ("1", "ab")
    assert served(infer(url, m, {"x-ab-group": "green"})) == ("2", "ab")
    # An unknown arm falls through (to the canary here: weight 0 is stable).
    assert served(infer(url, m, {"x-ab-group": "purple"})) == ("1", "canary")
    # Sticky over the canary; a bucket no arm owns falls through to it.
    assert served(infer(url, m, {"x-user-id": in_sticky})) == ("2", "ab")
    assert served(infer(url, m, {"x-user-id": outside})) == ("1", "canary")
    assert served(infer(url, m)) == ("1", "canary")
    # The canary's other side.
    put_ok(url, m, {"canary": {"stable": 1, "version": 2, "weight": 100}})
    assert served(infer(url, m)) == ("2", "canary")
    # default_version, and renamed headers.
    put_ok(url, m, {"default_version": 1, "pin_header": "X-Pin", "arm_header": "x-arm",
                    "arms": {"new": 2}})
    assert served(infer(url, m)) == ("1", "default")
    assert served(infer(url, m, {"x-model-version": "2"})) == ("1", "default")
    assert served(infer(url, m, {"x-pin": "2"})) == ("2", "pin")
    assert served(infer(url, m, {"x-arm": "new"})) == ("2", "ab")

    # A bad pin is refused like a bad URL version; an unloaded one is 404.
    put_ok(url, m, {})
    assert_error_response(infer(url, m, {"x-model-version": "abc"}), 400)
    assert "pin header" in assert_error_response(infer(url, m, {"x-model-version": "7"}), 404)


def test_refused_pin_is_not_reported_as_default(srv):
    """A pin header naming no loaded version is refused; the answer and the
    metrics must not claim that the newest version served it by default
    (the table's default is version 1 here)."""
    url, m = srv.url, "digits"
    put_ok(url, m, {"default_version": 1})
    before = route_counts(srv, m)
    fails0 = scrape(srv).get("nv_inference_request_failure", model=m, version="2")
    r = infer(url, m, {"x-model-version": "7"})
    assert_error_response(r, 404)
    assert r.headers.get("x-inferd-route") in (None, "pin"), dict(r.headers)
    assert route_counts(srv, m).get(("2", "default"), 0) == before.get(("2", "default"), 0)
    assert scrape(srv).get("nv_inference_request_failure", model=m, version="2") == fails0


# --------------------------------------------------------------------------
# 2. canary share


def test_canary_share_10_percent(srv):
    """weight 10: of 20,000 requests with distinct x-request-id, 10 % +- 1.5
    points go to the canary, and inferd_route_requests_total counts exactly
    what the answers' headers said."""
    url, m, n = srv.url, "digits", 20000
    put_ok(url, m, {"canary": {"stable": 1, "version": 2, "weight": 10}})
    before = route_counts(srv, m)
    results = send_many(srv.port, "/v2/models/digits/infer", n,
                        lambda i: {"x-request-id": "canary-%d" % i})
    assert all(s == 200 for s, _, _ in results), Counter(s for s, _, _ in results)
    assert all(route == "canary" for _, _, route in results)
    seen = Counter(v for _, v, _ in results)
    assert set(seen) <= {"1", "2"}, seen
    share = 100.0 * seen["2"] / n
    # Binomial standard error at n = 20000, p = 0.1: 0.21 points; +-1.5 is
    # over 7 sigma (and the ids are fixed, so the draw is deterministic).
    assert abs(share - 10.0) <= 1.5, share
    after = route_counts(srv, m)
    for v in ("1", "2"):
        delta = after.get((v, "canary"), 0) - before.get((v, "canary"), 0)
        assert delta == seen[v], (v, delta, seen)


# --------------------------------------------------------------------------
# 3. sticky


def assignments(url, users, times=1):
    """{user: version}, asserting that each user got one version every time."""
    out = {}
    c = Conn(int(url.rsplit(":", 1)[1]))
    try:
        for _ in range(times):
            for u in users:
                status, h, data = c.post("/v2/models/digits/infer", BODY, {"x-user-id": u})
                assert status == 200, data[:300]
                assert h["x-inferd-route"] == "ab", (u, h)
                v = h["x-inferd-model-version"]
                assert out.setdefault(u, v) == v, "user %s got %s and %s" % (u, out[u], v)
    finally:
        c.close()
    return out


def test_sticky_assignment_and_minimal_moves(srv):
    """Sticky A/B: a user keeps its version (200 users x 5 requests); going
    from 50/50 to 60/40 moves only users of the shrinking arm to the growing
    one, about 10 % of them; a GET body PUT back changes nothing."""
    url, m = srv.url, "digits"
    users = ["u-%04d" % i for i in range(200)]
    put_ok(url, m, {})  # no previous buckets to start from
    t50 = put_ok(url, m, {"key_header": "x-user-id",
                          "sticky": [{"version": 1, "percent": 50}, {"version": 2, "percent": 50}]})
    owners50 = bucket_owners(t50)
    assert len(owners50) == 10000
    a50 = assignments(url, users, times=5)
    assert a50 == {u: owners50[route_bucket(u)] for u in users}  # the documented hash
    assert 70 <= Counter(a50.values())["1"] <= 130, Counter(a50.values())  # fixed ids

    t60 = put_ok(url, m, {"key_header": "x-user-id",
                          "sticky": [{"version": 1, "percent": 60}, {"version": 2, "percent": 40}]})
    owners60 = bucket_owners(t60)
    changed = {b for b in range(10000) if owners50[b] != owners60[b]}
    assert len(changed) == 1000 and all(owners50[b] == "2" for b in changed)
    a60 = assignments(url, users, times=2)
    moved = [u for u in users if a50[u] != a60[u]]
    assert all(a50[u] == "2" and a60[u] == "1" for u in moved), moved
    assert set(moved) == {u for u in users if route_bucket(u) in changed}
    # Expected 10 %; [5 %, 15 %] is about +-2.4 sigma for 200 random users,
    # but the user ids are fixed, so this is deterministic.
    assert 0.05 <= len(moved) / len(users) <= 0.15, len(moved)

    # Round trip: the GET form PUT back (generation, model and buckets
    # included) keeps every assignment.
    got = get_table(url, m)
    again = put_ok(url, m, got)
    assert again["generation"] == got["generation"] + 1
    assert again["sticky"] == got["sticky"]
    assert assignments(url, users) == a60


# --------------------------------------------------------------------------
# 4. changes under load


def test_weight_changes_under_load(srv):
    """PUTs of the canary weight while 4 threads send continuously: no
    request fails, and the first request after a PUT returns follows it."""
    url, m = srv.url, "digits"
    put_ok(url, m, {"canary": {"stable": 1, "version": 2, "weight": 0}})
    stop = threading.Event()
    statuses = Counter()
    lock = threading.Lock()

    def load(k):
        c = Conn(srv.port)
        mine = Counter()
        i = 0
        try:
            while not stop.is_set():
                status, h, _ = c.post("/v2/models/digits/infer", BODY,
                                      {"x-request-id": "load-%d-%d" % (k, i)})
                mine[(status, h.get("x-inferd-route"))] += 1
                i += 1
        finally:
            c.close()
            with lock:
                statuses.update(mine)

    threads = [threading.Thread(target=load, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    try:
        probe = Conn(srv.port)
        for cycle in range(4):
            for weight in (0, 50, 100, 0):
                put_ok(url, m, {"canary": {"stable": 1, "version": 2, "weight": weight}})
                if weight in (0, 100):
                    status, h, data = probe.post("/v2/models/digits/infer", BODY,
                                                 {"x-request-id": "probe-%d-%d" % (cycle, weight)})
                    assert status == 200, data[:300]
                    assert h["x-inferd-route"] == "canary"
                    assert h["x-inferd-model-version"] == ("2" if weight == 100 else "1"), \
                        (weight, h)
                time.sleep(0.05)
        probe.close()
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert sum(statuses.values()) > 0
    assert set(statuses) == {(200, "canary")}, statuses


# --------------------------------------------------------------------------
# 5. the API and the file


def test_routing_api_file_and_restart(server_factory, tmp_path):
    """GET/PUT: the empty form, 400 naming the field, 409 for a stale
    generation, 404 for an unknown model; the file follows every PUT and a
    restart reads it back."""
    root = tmp_path / "models"
    digits_model(root, "digits")
    s1 = server_factory.start(repository=root)
    url = s1.url
    assert get_table(url, "digits") == {"model": "digits", "generation": 0}
    assert not (root / "digits" / "routing.json").exists()

    bad = [
        ({"canary": {"stable": 1, "version": 2, "weight": 150}}, "canary.weight"),
        ({"key_header": "x-user-id", "sticky": [{"version": 1, "percent": 60},
                                                {"version": 2, "percent": 50}]}, "sticky"),
        ({"canry": {"stable": 1, "version": 2, "weight": 5}}, "canry"),
        ({"canary": {"stable": 1, "version": 2, "weight": 5, "guard": {"max_p99": 2}}},
         "canary.guard.max_p99"),
        ({"default_version": 7}, "default_version"),
        ({"shadow": {"version": 3, "percent": 5}}, "shadow.version"),
        ("{not json", "malformed JSON"),
    ]
    for body, field in bad:
        msg = assert_error_response(put(url, "digits", body), 400)
        assert field in msg, (body, msg)
    assert "is not loaded" in assert_error_response(put(url, "digits", {"default_version": 7}),
                                                    400)
    assert get_table(url, "digits")["generation"] == 0  # nothing changed

    assert_error_response(put(url, "nosuch", {}), 404)
    assert_error_response(requests.get(url + "/v2/models/nosuch/routing"), 404)

    table = {"key_header": "x-user-id", "arms": {"a": 1, "b": 2},
             "sticky": [{"version": 1, "percent": 30}, {"version": 2, "percent": 20.5}],
             "canary": {"stable": 1, "version": 2, "weight": 12.25,
                        "guard": {"max_error_ratio": 0.1, "window_s": 30, "min_requests": 50}},
             "default_version": 1}
    g1 = put_ok(url, "digits", table)
    assert g1["generation"] == 1
    g2 = put_ok(url, "digits", dict(table, generation=1))
    assert g2["generation"] == 2
    assert_error_response(put(url, "digits", dict(table, generation=1)), 409)
    got = get_table(url, "digits")
    assert got == g2
    assert got["canary"]["weight"] == 12.25 and got["sticky"][1]["percent"] == 20.5
    on_disk = json.loads((root / "digits" / "routing.json").read_text())
    assert on_disk == got

    # A restart on the same repository reads the file back.
    assert s1.stop() == []
    s2 = server_factory.start(repository=root)
    again = get_table(s2.url, "digits")
    assert {k: v for k, v in again.items() if k != "generation"} == \
        {k: v for k, v in got.items() if k != "generation"}
    assert again["generation"] in (got["generation"], got["generation"] + 1), \
        (again["generation"], got["generation"])
    # ... so that a client's generation stays good across the restart.
    assert put_ok(s2.url, "digits", dict(table, generation=again["generation"]))["generation"] \
        == again["generation"] + 1
    assert s2.stop() == []

    # A routing.json that does not parse, or names a version that is not
    # loaded, fails the model's load like a bad config.pbtxt.
    for text, words in (("{not json", "malformed JSON"),
                        (json.dumps({"default_version": 9}), "default_version")):
        (root / "digits" / "routing.json").write_text(text)
        s3 = server_factory.start(repository=root, wait=False)
        r = get_when_listening(s3.url + "/v2/models/digits")
        msg = assert_error_response(r, 404)
        assert "routing.json" in msg and words in msg, msg
        rows = requests.post(s3.url + "/v2/repository/index", timeout=30).json()
        whole = [row for row in rows if row["name"] == "digits" and row.get("state") != "READY"]
        assert whole and any("routing.json" in row["reason"] for row in whole), rows
        assert requests.get(s3.url + "/v2/models/digits/ready").status_code != 200
        assert s3.stop() == []


def test_rollback_record_survives_restart(server_factory, tmp_path):
    """A rolled-back canary read from routing.json at start still shows
    its rollback (the weight stays 0 either way)."""
    root = tmp_path / "models"
    digits_model(root, "digits")
    table = {"model": "digits", "generation": 7, "pin_header": "x-model-version",
             "arm_header": "x-ab-group",
             "canary": {"stable": 1, "version": 2, "weight": 0,
                        "guard": {"max_error_ratio": 0.2, "window_s": 60, "min_requests": 20},
                        "rollback": {"time_ms": 1764612000000, "weight": 50,
                                     "reason": "error ratio 0.5 above 0.2"}}}
    (root / "digits" / "routing.json").write_text(json.dumps(table))
    srv = server_factory.start(repository=root)
    got = get_table(srv.url, "digits")
    assert got["canary"]["weight"] == 0
    assert got["canary"].get("rollback") == table["canary"]["rollback"], got


def get_when_listening(url, timeout=30.0):
    deadline = time.time() + timeout
    while True:
        try:
            return requests.get(url, timeout=5)
        except requests.ConnectionError:
            if time.time() > deadline:
                raise
            time.sleep(0.05)


# --------------------------------------------------------------------------
# 6. shadow


SHADOW_LINE = re.compile(
    r"shadow diff: model=(\S+) version=(\S+) shadow_model=(\S+) shadow_version=(\S+) "
    r"request_id=(\S+) output=(\S+) elements=(\d+) equal=(\d+) max_abs=(\S+) max_rel=(\S+) "
    r"worst_index=(-?\d+) primary=(\S+) shadow=(\S+) argmax_agree=(\d+)/(\d+)")


def shadow_labels(model, **more):
    return dict(model=model, version="1", shadow_model=model, shadow_version="2", **more)


def wait_compared(srv, model, n, timeout=30.0):
    s = wait_for(srv, lambda s: s.get("inferd_shadow_requests_total",
                                      **shadow_labels(model)) >= n, timeout)
    got = s.get("inferd_shadow_requests_total", **shadow_labels(model))
    dropped = {l["reason"]: v for l, v in s.series("inferd_shadow_dropped_total")
               if l["model"] == model and v}
    assert got == n, "compared %s of %d (dropped: %s)" % (got, n, dropped)
    return s


def test_shadow_leaves_the_primary_answer_alone(srv):
    """(a) With every request shadowed to version 2 the client's answers are
    byte for byte those of no shadowing."""
    url, m = srv.url, "digits_sh"
    images = digits_ref.test_images(50)
    put_ok(url, m, {"default_version": 1})
    c = Conn(srv.port)
    off = [c.post("/v2/models/digits_sh/infer", digits_body(x), {"x-request-id": "a-%d" % i})
           for i, x in enumerate(images)]
    put_ok(url, m, {"default_version": 1, "shadow": {"version": 2, "percent": 100}})
    on = [c.post("/v2/models/digits_sh/infer", digits_body(x), {"x-request-id": "a-%d" % i})
          for i, x in enumerate(images)]
    c.close()
    for (s0, h0, b0), (s1, h1, b1) in zip(off, on):
        assert s0 == s1 == 200
        assert h0["x-inferd-model-version"] == h1["x-inferd-model-version"] == "1"
        assert b0 == b1
    wait_compared(srv, m, 50)


def test_shadow_diff_metrics_match_numpy(srv):
    """(b) The diff metrics and log lines of 60 held-out images shadowed from
    version 1 to version 2 are the numpy reference's numbers; (c) version 2
    counts no primary request meanwhile."""
    url, m, n = srv.url, "digits_sh", 60
    images = digits_ref.test_images(n)
    put_ok(url, m, {"default_version": 1,
                    "shadow": {"version": 2, "percent": 100, "log_every": 1}})
    before = scrape(srv)
    compared0 = before.get("inferd_shadow_requests_total", **shadow_labels(m))
    c = Conn(srv.port)
    for i, x in enumerate(images):
        status, h, data = c.post("/v2/models/digits_sh/infer", digits_body(x),
                                 {"x-request-id": "diff-%d" % i})
        assert status == 200 and h["x-inferd-model-version"] == "1", data[:300]
    c.close()
    after = wait_compared(srv, m, compared0 + n)

    ref = [digits_ref.compare(digits_ref.outputs(digits_ref.V1, x),
                              digits_ref.outputs(digits_ref.V2, x)) for x in images]
    proba, label = shadow_labels(m, output="probabilities"), shadow_labels(m, output="label")

    def delta(name, **labels):
        return after.get(name, **labels) - before.get(name, **labels)

    assert delta("inferd_shadow_argmax_rows_total", **proba) == n
    assert delta("inferd_shadow_argmax_agreements_total", **proba) == \
        sum(r["argmax_agree"] for r in ref)
    assert delta("inferd_shadow_elements_total", **label) == n
    assert delta("inferd_shadow_equal_elements_total", **label) == sum(r["label_equal"] for r in ref)
    assert delta("inferd_shadow_mismatch_total", **label) == \
        sum(1 for r in ref if r["label_equal"] == 0)
    assert delta("inferd_shadow_mismatch_total", **proba) == n  # tolerance 0: all differ

    # The histogram of each pair's max |a-b| (le = powers of ten 1e-9..10).
    def buckets(s):
        return {float(le): v for le, v in s.buckets("inferd_shadow_max_abs_difference", **proba)}
    b0, b1 = buckets(before), buckets(after)
    assert b1, after.series("inferd_shadow_max_abs_difference_bucket")
    bounds = sorted(b1)
    assert bounds[:-1] == [10.0 ** e for e in range(-9, 2)] and bounds[-1] == float("inf")
    for le in bounds:
        got = b1[le] - b0.get(le, 0)
        lo = sum(1 for r in ref if r["max_abs"] <= le * (1 - 1e-6))
        hi = sum(1 for r in ref if r["max_abs"] <= le * (1 + 1e-6))
        assert lo <= got <= hi, (le, got, lo, hi)

    # One log line per request id for probabilities, with numpy's max_abs.
    logged = {}
    for mt in SHADOW_LINE.finditer(srv.stderr()):
        if mt.group(1) == m and mt.group(6) == "probabilities" and \
                mt.group(5).startswith("diff-"):
            assert mt.group(5) not in logged, "logged twice: %s" % mt.group(5)
            logged[mt.group(5)] = float(mt.group(9))
    assert set(logged) == {"diff-%d" % i for i in range(n)}
    for i, r in enumerate(ref):
        assert abs(logged["diff-%d" % i] - r["max_abs"]) <= 1e-6, (i, logged["diff-%d" % i], r)

    # (c) Shadow copies are not primary traffic: version 2 served none.
    assert after.get("nv_inference_request_success", model=m, version="2") == 0
    assert after.get("nv_inference_request_success", model=m, version="1") >= n
    assert not after.has("inferd_route_requests_total", model=m, version="2")

    # A request without x-request-id: its diff line names the id the server
    # generated, the one its answer (and access log line) carries.
    r = requests.post(url + "/v2/models/digits_sh/infer", data=digits_body(images[0]),
                      timeout=10)
    assert r.status_code == 200
    generated = r.headers["x-request-id"]
    deadline = time.time() + 20
    while generated not in srv.stderr() and time.time() < deadline:
        time.sleep(0.05)
    assert any(mt.group(5) == generated for mt in SHADOW_LINE.finditer(srv.stderr())), generated


def test_shadow_copies_are_flagged_to_the_backend(srv):
    """(d) identity_stall with shadow_fail 1 refuses executions flagged as
    shadow: the primaries all succeed, every copy is dropped as failed and
    none is compared; the same version serves a pinned primary normally."""
    url, m, n = srv.url, "echo_sf", 30
    put_ok(url, m, {"default_version": 1, "shadow": {"version": 2, "percent": 100}})
    c = Conn(srv.port)
    for i in range(n):
        status, h, data = c.post("/v2/models/echo_sf/infer", ECHO_BODY, {"x-request-id": "sf-%d" % i})
        assert status == 200 and h["x-inferd-model-version"] == "1", data[:300]
    c.close()
    failed = shadow_labels(m, reason="failed")
    s = wait_for(srv, lambda s: s.get("inferd_shadow_dropped_total", **failed) >= n)
    assert s.get("inferd_shadow_dropped_total", **failed) == n
    assert s.get("inferd_shadow_requests_total", **shadow_labels(m)) == 0
    assert not s.has("inferd_shadow_mismatch_total", model=m)

    put_ok(url, m, {"default_version": 1})
    r = infer(url, m, {"x-model-version": "2"}, body=ECHO_BODY)
    assert served(r) == ("2", "pin")
    assert r.json()["outputs"][0]["data"] == [1, 2, 3, 4]


# --------------------------------------------------------------------------
# 7. rollback


GUARDED = {"canary": {"stable": 1, "version": 2, "weight": 50}}


def run_until_rollback(srv, m, limit=2000):
    """Sends requests (sequentially, distinct ids) until GET shows the
    rollback; returns (requests sent, table)."""
    c = Conn(srv.port)
    try:
        for i in range(1, limit + 1):
            status, h, data = c.post("/v2/models/%s/infer" % m, ECHO_BODY,
                                     {"x-request-id": "%s-%d" % (m, i)})
            assert status in (200, 500), (status, data[:300])
            if i % 5 == 0:
                t = get_table(srv.url, m)
                if "rollback" in t["canary"]:
                    return i, t
    finally:
        c.close()
    pytest.fail("%s: no rollback after %d requests: %s" % (m, limit, get_table(srv.url, m)))


def check_rolled_back(srv, m, n, t, reason):
    assert t["canary"]["weight"] == 0
    assert t["canary"]["rollback"]["weight"] == 50
    assert reason in t["canary"]["rollback"]["reason"], t
    assert scrape(srv).get("inferd_route_rollbacks_total", model=m) == 1
    # The file is written by a thread of its own, soon after the rollback.
    path = Path(srv.args[srv.args.index("--model-repository") + 1]) / m / "routing.json"
    deadline = time.time() + 20
    on_disk = json.loads(path.read_text())
    while on_disk != t and time.time() < deadline:
        time.sleep(0.05)
        on_disk = json.loads(path.read_text())
    assert on_disk == t
    c = Conn(srv.port)
    for i in range(50):
        status, h, data = c.post("/v2/models/%s/infer" % m, ECHO_BODY,
                                 {"x-request-id": "after-%d" % i})
        assert status == 200, data[:300]
        assert (h["x-inferd-model-version"], h["x-inferd-route"]) == ("1", "canary")
    c.close()
    ROLLBACK_NEEDED[m] = n


def test_rollback_on_error_ratio(srv):
    """A canary failing every other request (v2's parameters file:
    fail_every_n 2) trips max_error_ratio 0.2: weight 0, the reason, the
    metric, the file, and stable serves everything after."""
    m = "echo_err"
    put_ok(srv.url, m, dict(GUARDED, canary=dict(
        GUARDED["canary"], guard={"max_error_ratio": 0.2, "window_s": 60, "min_requests": 20})))
    n, t = run_until_rollback(srv, m)
    check_rolled_back(srv, m, n, t, "error ratio")


def test_rollback_on_p99_ratio(srv):
    """A canary 30 ms slower per request (delay_us 30000) trips
    max_p99_ratio 5."""
    m = "echo_slow"
    put_ok(srv.url, m, dict(GUARDED, canary=dict(
        GUARDED["canary"], guard={"max_p99_ratio": 5, "window_s": 60, "min_requests": 20})))
    n, t = run_until_rollback(srv, m)
    check_rolled_back(srv, m, n, t, "p99 ratio")


def test_healthy_canary_never_rolls_back(srv):
    """The same traffic to a canary equal to its stable version, with both
    guards, never trips (at least 300 requests, and as many as the failing
    canaries needed)."""
    m = "echo_ok"
    put_ok(srv.url, m, dict(GUARDED, canary=dict(
        GUARDED["canary"], guard={"max_error_ratio": 0.2, "max_p99_ratio": 5,
                                  "window_s": 60, "min_requests": 20})))
    n = max([300] + list(ROLLBACK_NEEDED.values()))
    results = Counter()
    c = Conn(srv.port)
    for i in range(n):
        status, h, _ = c.post("/v2/models/echo_ok/infer", ECHO_BODY, {"x-request-id": "ok-%d" % i})
        results[(status, h.get("x-inferd-model-version"))] += 1
    c.close()
    assert set(results) == {(200, "1"), (200, "2")}, results
    t = get_table(srv.url, m)
    assert "rollback" not in t["canary"] and t["canary"]["weight"] == 50, t
    assert scrape(srv).get("inferd_route_rollbacks_total", model=m) == 0
