"""The chores of bench/report.py: what scripts/bench.sh asks of Python while
the experiments run. The core sets and free ports, a process's CPU time,
one value of a JSON file, nginx's configuration and the request files, the
server's metrics read into files, the checks that two answers agree, other
tools' outputs in the shape of `inferd bench --json`, experiment 15's
prompts and quotas. Each cmd_* is a command of report.py; its header says
what each takes and does. Standard library only, /usr/bin/python3.
"""
import http.client
import json
import os
import re
import socket
import sys

from report_data import (assemble_token_fairness, die, gen_tokens, load, median, parse_stats,
                         prep_stage_means, ratelimit_counters, ratelimit_delta, shadow_counters,
                         shadow_delta)
from report_tables import fmt, pct


def parse_cpu_list(s):
    cpus = []
    for part in s.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            a, b = part.split("-")
            cpus.extend(range(int(a), int(b) + 1))
        else:
            cpus.append(int(part))
    return cpus


def cpu_list_str(cpus):
    return ",".join(str(c) for c in cpus)


def cmd_cores(args):
    if len(args) == 2 and args[0] and args[1]:
        server, client = parse_cpu_list(args[0]), parse_cpu_list(args[1])
    else:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            server = client = cpus
        else:
            half = len(cpus) // 2
            server, client = cpus[:half], cpus[half:]
    print(cpu_list_str(server), cpu_list_str(client), len(server), len(client))


def cmd_free_port(_args):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1])
    s.close()


def proc_cpu_s(pid):
    """utime + stime of a process (all its threads), in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_ctxsw(pid):
    """Context switches (voluntary + involuntary) of every thread of pid."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                for line in f:
                    if "ctxt_switches:" in line:
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def cmd_cpu(args):
    """CPU seconds and context switches so far of PID and its direct children
    (nginx workers): prints "SECONDS SWITCHES"."""
    pid = int(args[0])
    pids = [pid]
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    pids.append(int(d))
        except (OSError, ValueError, IndexError):
            pass
    cpu = sw = 0
    for p in pids:
        try:
            cpu += proc_cpu_s(p)
            sw += proc_ctxsw(p)
        except OSError:
            pass
    print("%.3f %d" % (cpu, sw))


def cmd_get(args):
    v = load(args[0])
    for k in args[1].split("."):
        if isinstance(v, list):
            v = v[int(k)]
        else:
            v = v[k]
    print(json.dumps(v) if isinstance(v, (dict, list)) else v)


def cmd_nginx_conf(args):
    template, out = args[0], args[1]
    opts = dict(zip(args[2::2], args[3::2]))
    with open(opts["--body"], "rb") as f:
        body = f.read().decode()
    if "\n" in body.rstrip("\n"):
        die("nginx body must be one line")
    body = body.rstrip("\n").replace("\\", "\\\\").replace("'", "\\'")
    text = open(template).read()
    user = "user root root;" if os.geteuid() == 0 else ""
    for k, v in (("@DIR@", opts["--dir"]), ("@PORT@", opts["--port"]),
                 ("@WORKERS@", opts["--workers"]), ("@USER@", user), ("@BODY@", body)):
        text = text.replace(k, v)
    with open(out, "w") as f:
        f.write(text)


def cmd_stats(args):
    for d in parse_stats(args[0]):
        print(json.dumps(d))


JSON_DECODE_RES = {
    "request_bytes": r"request: (\d+) bytes",
    "cjson_us": r"^\s*cjson\s+([\d.]+) us/request",
    "tree_us": r"^\s*tree\s+([\d.]+) us/request",
    "inferd_us": r"^\s*inferd\s+([\d.]+) us/request",
    "strtof_us": r"^\s*strtof\s+([\d.]+) us/request",
    "format_numfmt_ns_per_float": r"numfmt_f32 ([\d.]+) ns/float",
    "format_snprintf_ns_per_float": r"snprintf\(\"%\.9g\"\) ([\d.]+) ns/float",
}


def cmd_json_decode(args):
    """Keeps the figures bench/json_decode prints (text, see its main())."""
    out, src = args[0], args[1]
    text = open(src, errors="replace").read()
    figures = {}
    for k, rx in JSON_DECODE_RES.items():
        m = re.search(rx, text, re.M)
        if m:
            figures[k] = float(m.group(1))
    with open(out, "w") as f:
        json.dump({"figures": figures, "output": text}, f, indent=1)


MLP_ELEMENTS = 784


def mlp_request():
    """Experiment 9's request: bench/json_decode.c's make_request() (the same
    xorshift numbers in [0,1), printed with %.9g, the same id) for the input
    of bench/models/mlp, asking for its output `probabilities`."""
    x = 88172645463325252
    mask = (1 << 64) - 1
    nums = []
    for _ in range(MLP_ELEMENTS):
        x ^= (x << 13) & mask
        x ^= x >> 7
        x ^= (x << 17) & mask
        nums.append("%.9g" % ((x >> 40) / float(1 << 24)))
    return ('{"id":"42","inputs":[{"name":"input","shape":[1,%d],"datatype":"FP32","data":[%s]}],'
            '"outputs":[{"name":"probabilities"}]}' % (MLP_ELEMENTS, ",".join(nums)))


def cmd_mlp_request(args):
    with open(args[0], "w") as f:
        f.write(mlp_request())


def compare_outputs(a, b, tol):
    """(why, worst): why is None if the KServe v2 responses a and b (parsed)
    hold the same outputs within tol, else why not; worst is the largest
    absolute difference of the values (None if not compared)."""
    oa = {o.get("name"): o for o in a.get("outputs") or []}
    ob = {o.get("name"): o for o in b.get("outputs") or []}
    if not oa:
        return "the first response has no outputs", None
    if sorted(oa) != sorted(ob):
        return "output names differ: %s vs %s" % (sorted(oa), sorted(ob)), None
    worst = 0.0
    for name in sorted(oa):
        x, y = oa[name], ob[name]
        for k in ("datatype", "shape"):
            if x.get(k) != y.get(k):
                return "output %s: %s %s vs %s" % (name, k, x.get(k), y.get(k)), None
        dx, dy = x.get("data"), y.get("data")
        if not isinstance(dx, list) or not isinstance(dy, list) or len(dx) != len(dy) or \
                not dx:
            return "output %s: data missing, empty or of different lengths" % name, None
        worst = max([worst] + [abs(float(p) - float(q)) for p, q in zip(dx, dy)])
        if not worst <= tol:  # also catches NaN
            return ("output %s: values differ by up to %.3g (tolerance %g)" % (name, worst, tol),
                    worst)
    return None, worst


def cmd_compare_outputs(args):
    """compare-outputs A B TOL [OUT]: OUT gets {"max_abs_diff", "tolerance", "match"}."""
    a, b, tol = load(args[0]), load(args[1]), float(args[2])
    why, worst = compare_outputs(a, b, tol)
    if len(args) > 3:
        with open(args[3], "w") as f:
            json.dump({"max_abs_diff": worst, "tolerance": tol, "match": why is None,
                       "why": why}, f)
    if why:
        print(why)
        sys.exit(1)


def cmd_binary_request(args):
    """binary-request JSON_REQUEST OUT [BATCH]: the request's FP32 inputs as
    binary tensor data, each repeated BATCH times (default 1)."""
    import struct
    req = load(args[0])
    batch = int(args[2]) if len(args) > 2 else 1
    inputs, raw = [], b""
    for t in req["inputs"]:
        if t.get("datatype") != "FP32":
            die("%s: input %s is not FP32" % (args[0], t.get("name")))
        shape = list(t["shape"])
        if batch != 1:
            if not shape or shape[0] != 1:
                die("%s: input %s has no batch dimension of 1" % (args[0], t.get("name")))
            shape[0] = batch
        data = [float(x) for x in t["data"]] * batch
        blob = struct.pack("<%df" % len(data), *data)
        inputs.append({"name": t["name"], "shape": shape, "datatype": "FP32",
                       "parameters": {"binary_data_size": len(blob)}})
        raw += blob
    header = json.dumps({"inputs": inputs, "parameters": {"binary_data_output": True}},
                        separators=(",", ":")).encode()
    with open(args[1], "wb") as f:
        f.write(header + raw)
    print(len(header))


def fetch_text(url):
    import urllib.request
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode("utf-8", "replace")


def scrape(url):
    return shadow_counters(fetch_text(url))


def cmd_ratelimit_delta(args):
    d = ratelimit_delta(load(args[0]), load(args[1]))
    print(", ".join("%s %d admitted (%d limited)" % (t, per.get("admitted", 0),
                                                   per.get("limited", 0))
                    for t, per in sorted(d.items())) or "no rate-limit counters")


def cmd_ratelimit_scrape(args):
    url, out = args
    try:
        c = ratelimit_counters(fetch_text(url))
    except OSError as e:
        die("cannot read %s: %s" % (url, e))
    with open(out, "w") as f:
        json.dump(c, f)


def cmd_prep_scrape(args):
    url, out = args
    try:
        means = prep_stage_means(fetch_text(url))
    except OSError as e:
        die("cannot read %s: %s" % (url, e))
    if not means:
        die("no inferd_preprocess_duration_seconds at %s" % url)
    with open(out, "w") as f:
        json.dump(means, f, indent=1)


def finish_check(doc, why, out):
    """The end of a check: doc with "match" (why is None) to OUT; exit 1
    and print why when something was off."""
    doc["match"] = why is None
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    if why:
        print(why)
        sys.exit(1)


def cmd_prep_check(args):
    """prep-check URL MODEL DIR MEANS TOL OUT: each DIR/img_*.jpg POSTed as a
    raw body (image/jpeg) to MODEL must answer the mean of Pillow's tensor
    for it (MEANS, prep_pillow.py means) within TOL. OUT gets the answers
    and the largest difference; exit 1 and a reason if one is off."""
    import urllib.error
    import urllib.request
    url, model, d, means_path, tol, out = args
    tol = float(tol)
    means = load(means_path)
    doc = {"model": model, "tolerance": tol, "images": {}, "max_abs_diff": 0.0}
    why = None
    for name in sorted(means):
        with open(os.path.join(d, name), "rb") as f:
            body = f.read()
        req = urllib.request.Request("%s/v2/models/%s/infer" % (url, model), data=body,
                                     headers={"Content-Type": "image/jpeg"})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                resp = json.load(r)
            got = float(resp["outputs"][0]["data"][0])
        except urllib.error.HTTPError as e:
            why = "%s: HTTP %d %s" % (name, e.code, e.read().decode("utf-8", "replace")[:200])
            break
        except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
            why = "%s: no answer (%s)" % (name, e)
            break
        diff = abs(got - means[name])
        doc["images"][name] = {"server": got, "pillow": means[name], "diff": diff}
        doc["max_abs_diff"] = max(doc["max_abs_diff"], diff)
        if diff > tol:
            why = "%s: the server's tensor mean %.6f, Pillow's %.6f (tolerance %g)" % (
                name, got, means[name], tol)
            break
    finish_check(doc, why, out)


def cmd_prep_merge(args):
    """prep-merge OUT TIME CPU_BEFORE CPU_AFTER PART...: the reports of the
    load generators that ran at once (one per image) as one report in the
    shape of `inferd bench --json`: statuses and requests summed, the
    window's length their mean (so rps = the sum of their rates), latency
    percentiles the median of their p50s and the largest of their p99s;
    OUT.cpu as `load` writes it (scripts/bench.sh)."""
    out, times, s0, s1 = args[:4]
    parts = [load(p) for p in args[4:]]
    status, errors = {}, {}
    for p in parts:
        for k, v in (p.get("status") or {}).items():
            status[k] = status.get(k, 0) + v
        for k, v in (p.get("errors") or {}).items():
            errors[k] = errors.get(k, 0) + v
    dur = sum(p["duration_s"] for p in parts) / len(parts)
    lat = [p.get("latency_us") or {} for p in parts]
    requests = sum(p.get("requests") or 0 for p in parts)
    doc = {"requests": requests, "duration_s": dur,
           "rps": sum(p.get("rps") or 0 for p in parts),
           "status": status, "errors": errors,
           "reconnects": sum(p.get("reconnects") or 0 for p in parts),
           "latency_us": {"p50": median(x.get("p50") for x in lat),
                          "p99": max((x["p99"] for x in lat if x.get("p99") is not None),
                                     default=None)},
           "parts": [{"rps": p.get("rps"), "requests": p.get("requests"),
                      "latency_us": p.get("latency_us")} for p in parts],
           "config": {"duration_s": parts[0]["config"]["duration_s"],
                      "warmup_s": parts[0]["config"]["warmup_s"]}}
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    cu, cs, wall = times.split()
    b, a = s0.split(), s1.split()
    with open(out + ".cpu", "w") as f:
        json.dump({"client_cpu_s": float(cu) + float(cs), "wall_s": float(wall),
                   "server_cpu_s": float(a[0]) - float(b[0]),
                   "server_ctxsw": int(a[1]) - int(b[1]),
                   "responses": requests * (doc["config"]["duration_s"]
                                            + doc["config"]["warmup_s"])
                   / doc["config"]["duration_s"]}, f)


def cmd_shadow_scrape(args):
    import time
    url, out = args[0], args[1]
    try:
        c = scrape(url)
        if len(args) > 2:
            before = load(args[2])
            deadline = time.monotonic() + 3.0
            while shadow_delta(before, c)["unaccounted"] > 0 and time.monotonic() < deadline:
                time.sleep(0.1)
                c = scrape(url)
    except OSError as e:
        die("cannot read %s: %s" % (url, e))
    with open(out, "w") as f:
        json.dump(c, f)


def cmd_shadow_delta(args):
    d = shadow_delta(load(args[0]), load(args[1]))
    print("%d primaries, %d copies compared (%s), %d dropped%s" % (
        d["primaries"], d["compared"], pct(d["compared_share"]), d["dropped"],
        " (%s)" % ", ".join("%s %d" % kv for kv in sorted(d["dropped_by_reason"].items()))
        if d["dropped"] else ""))


def h2load_us(text):
    m = re.match(r"([0-9.]+)(us|ms|s)$", text)
    if not m:
        return None
    return float(m.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6}[m.group(2)]


def cmd_h2load(args):
    """h2load's text output -> the shape of `inferd bench --json` (2xx counted as 200)."""
    src, out = args
    text = open(src).read()
    fin = re.search(r"finished in ([0-9.]+)s, ([0-9.]+) req/s", text)
    reqs = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                     r"(\d+) failed, (\d+) errored, (\d+) timeout", text)
    codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", text)
    lat = re.search(r"time for request:\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", text)
    if not fin or not reqs or not codes:
        die("cannot read h2load output %s" % src)
    # "finished in" includes the warm-up; req/s is over the main duration.
    rps = float(fin.group(2))
    done = int(reqs.group(3))
    ok = int(codes.group(1))
    doc = {
        "duration_s": done / rps if rps else 0,
        "requests": done,
        "rps": rps,
        "status": {"200": ok, "3xx": int(codes.group(2)), "4xx": int(codes.group(3)),
                   "5xx": int(codes.group(4))},
        "errors": {"failed": max(0, int(reqs.group(5)) - int(codes.group(3)) -
                                 int(codes.group(4))),
                   "errored": int(reqs.group(6)), "timeout": int(reqs.group(7))},
        # h2load reports min, max, mean and sd, no percentiles.
        "latency_us": ({"min": h2load_us(lat.group(1)), "max": h2load_us(lat.group(2)),
                        "mean": h2load_us(lat.group(3))} if lat else None),
    }
    with open(out, "w") as f:
        json.dump(doc, f, indent=2)


def cmd_gen_kv_bytes(args):
    """gen-kv-bytes MODEL_DIR STREAMS: bytes of STREAMS whole contexts of the
    model's KV cache (keys and values, FP32, every layer), for --kv-cache-bytes."""
    g = load(os.path.join(args[0], "generation.json"))
    per_token = 2 * g["num_layers"] * g["num_heads"] * g["head_dim"] * 4
    print(per_token * g["max_context"] * int(args[1]))


def cmd_gen_check(args):
    """gen-check FLOOR SERVER OUT: the in-process loop's greedy text (FLOOR,
    `inferd bench --generate-floor --json`) must equal the server's
    (SERVER, a /v1/completions response): text, token count and finish
    reason. OUT gets both; exit 1 and a reason if they differ."""
    floor, server, out = load(args[0]), load(args[1]), args[2]
    choice = (server.get("choices") or [{}])[0]
    usage = server.get("usage") or {}
    doc = {"text": floor.get("text"), "completion_tokens": floor.get("completion_tokens"),
           "finish_reason": floor.get("finish_reason"), "prompt_tokens": floor.get("prompt_tokens"),
           "server_text": choice.get("text"),
           "server_completion_tokens": usage.get("completion_tokens"),
           "server_finish_reason": choice.get("finish_reason")}
    why = None
    if doc["text"] != doc["server_text"]:
        why = "greedy texts differ: in process %r, server %r" % (doc["text"], doc["server_text"])
    elif doc["completion_tokens"] != doc["server_completion_tokens"]:
        why = "token counts differ: in process %s, server %s" % (
            doc["completion_tokens"], doc["server_completion_tokens"])
    elif doc["finish_reason"] != doc["server_finish_reason"]:
        why = "finish reasons differ: in process %s, server %s" % (
            doc["finish_reason"], doc["server_finish_reason"])
    finish_check(doc, why, out)


# Genesis 1:1-9 (King James Version): the prompts of experiment 15 are
# prefixes of it, cut to a number of tokens of the model's tokenizer.
TQ_TEXT = ("In the beginning God created the heaven and the earth. And the earth was without "
           "form, and void; and darkness was upon the face of the deep. And the Spirit of God "
           "moved upon the face of the waters. And God said, Let there be light: and there was "
           "light. And God saw the light, that it was good: and God divided the light from the "
           "darkness. And God called the light Day, and the darkness he called Night. And the "
           "evening and the morning were the first day. And God said, Let there be a firmament "
           "in the midst of the waters, and let it divide the waters from the waters. And God "
           "made the firmament, and divided the waters which were under the firmament from the "
           "waters which were above the firmament: and it was so. And God called the firmament "
           "Heaven. And the evening and the morning were the second day. And God said, Let the "
           "waters under the heaven be gathered together unto one place, and let the dry land "
           "appear: and it was so.")


def http_json(url, method="GET", body=None, headers=None, timeout=30):
    """(status, parsed JSON body or None) of one request to an http:// URL."""
    m = re.match(r"http://([^/:]+)(?::(\d+))?(/.*)?$", url)
    if not m:
        die("not an http:// URL: %s" % url)
    conn = http.client.HTTPConnection(m.group(1), int(m.group(2) or 80), timeout=timeout)
    try:
        conn.request(method, m.group(3) or "/", body, headers or {})
        resp = conn.getresponse()
        data = resp.read()
    finally:
        conn.close()
    try:
        return resp.status, json.loads(data)
    except ValueError:
        return resp.status, None


def tq_prompt_tokens(url, text):
    """The prompt tokens of TEXT as the server counts them (usage of a
    1-token completion of kjv), or None when the server refuses it (too long)."""
    status, doc = http_json(url + "/v1/completions", "POST", json.dumps(
        {"model": "kjv", "prompt": text, "max_tokens": 1, "temperature": 0}),
        {"Content-Type": "application/json"})
    if status == 400:
        return None
    if status != 200 or not isinstance(doc, dict) or "usage" not in doc:
        die("POST /v1/completions answered %s: %s" % (status, doc))
    return doc["usage"]["prompt_tokens"]


def cmd_tq_prompt(args):
    """tq-prompt URL TOKENS OUT: the longest prefix of TQ_TEXT of at most
    TOKENS prompt tokens (bisection over its length) into OUT; prints its
    token count. Exit 1 when no prefix has exactly TOKENS tokens."""
    url, want, out = args[0], int(args[1]), args[2]
    lo, hi = 1, len(TQ_TEXT)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        n = tq_prompt_tokens(url, TQ_TEXT[:mid])
        if n is not None and n <= want:
            lo = mid
        else:
            hi = mid - 1
    n = tq_prompt_tokens(url, TQ_TEXT[:lo])
    if n != want:
        die("the longest prefix of at most %d tokens has %s" % (want, n))
    with open(out, "w") as f:
        f.write(TQ_TEXT[:lo])
    print(n)


def cmd_tq_setup(args):
    """tq-setup RUN SHARE OFFER MAX_TOKENS [KEY=VALUE...]: experiment 15's
    quota and offered rates from the capacity runs (tq_capacity_*.json) and
    the prompts' token counts, as JSON on stdout."""
    run, share, offer, max_tokens = args[0], float(args[1]), float(args[2]), int(args[3])
    setup = {"share": share, "offer": offer, "max_tokens": max_tokens}
    for arg in args[4:]:
        k, v = arg.split("=", 1)
        setup[k] = float(v) if "." in v else int(v)
    cap = 0.0
    for side in ("short", "long"):
        p = os.path.join(run, "tq_capacity_%s.json" % side)
        tokens, _ = gen_tokens(p)
        setup["capacity_%s_tokens_per_s" % side] = tokens / load(p)["duration_s"]
        cap += setup["capacity_%s_tokens_per_s" % side]
        with open(os.path.join(run, "tq_prompt_%s.tokens" % side)) as f:
            setup["prompt_%s" % side] = int(f.read())
        with open(os.path.join(run, "tq_prompt_%s.txt" % side)) as f:
            setup["prompt_%s_text" % side] = f.read()
    setup["capacity_tokens_per_s"] = round(cap, 1)
    limit = max(1, int(round(cap * share * 60)))
    setup["limit_per_minute"] = limit
    for side in ("short", "long"):
        per_request = setup["prompt_%s" % side] + max_tokens
        setup["rate_%s" % side] = round(offer * limit / 60.0 / per_request, 2)
    json.dump(setup, sys.stdout, indent=1)


def cmd_tq_usage(args):
    """tq-usage URL KEY OUT: GET /v2/usage?model=kjv (bearer KEY) summed by
    tenant over the days into OUT: {tenant: {requests, prompt_tokens,
    completion_tokens, total_tokens}}."""
    url, key, out = args
    status, doc = http_json(url + "/v2/usage?model=kjv",
                            headers={"Authorization": "Bearer " + key})
    if status != 200 or not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
        die("GET /v2/usage answered %s: %s" % (status, doc))
    by = {}
    for row in doc["rows"]:
        t = by.setdefault(row.get("tenant") or "", {"requests": 0, "prompt_tokens": 0,
                                                    "completion_tokens": 0, "total_tokens": 0})
        for k in t:
            t[k] += row.get(k) or 0
    with open(out, "w") as f:
        json.dump(by, f, indent=1)


def cmd_tq_line(args):
    """tq-line RUN: one line about experiment 15's loaded run, for the log."""
    t = assemble_token_fairness(args[0])
    if t.get("error") or t.get("skipped"):
        print(t.get("error") or t.get("skipped"))
        return
    u, r = t["usage"] or {}, t["runs"]
    print("tokens metered: short %s, long %s (lower / higher %s); refused: short %s, long %s; "
          "tenant-short TTFT p99 %s us vs %s us alone (x%s)" % (
              fmt((u.get("tenant-short") or {}).get("total_tokens"), "%d"),
              fmt((u.get("tenant-long") or {}).get("total_tokens"), "%d"),
              fmt(t["fairness"], "%.3f"), fmt(r["loaded_short"]["requests_refused"], "%d"),
              fmt(r["loaded_long"]["requests_refused"], "%d"), fmt(t["ttft_p99_loaded_us"]),
              fmt(t["ttft_p99_alone_us"]), fmt(t["ttft_ratio"], "%.2f")))
