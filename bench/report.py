#!/usr/bin/python3
"""Helpers of scripts/bench.sh: small JSON chores, and the report.

  report.py cores [SERVER_CPUS CLIENT_CPUS]
      prints "SERVER CLIENT NSERVER NCLIENT": the core sets (taskset -c lists)
      for the server and the load generator. Default: the CPUs this process
      may run on, split in halves (server first); with 2 CPUs: 0 and 1.
  report.py free-port
      prints a TCP port that was free on 127.0.0.1 a moment ago.
  report.py cpu PID
      prints the CPU seconds and context switches of PID and its direct children.
  report.py get FILE KEY[.KEY...]
      prints one value of a JSON file (numbers as they are, objects as JSON).
  report.py nginx-conf TEMPLATE OUT --dir D --port P --body FILE --workers N
      fills bench/nginx/nginx.conf.in (the body must hold no newline).
  report.py stats LOG
      prints the SIGUSR1 "stats:" lines of an inferd log as JSON objects, one
      per line.
  report.py json-decode OUT FILE
      parses the figures bench/json_decode prints into OUT (JSON).
  report.py h2load TEXT OUT
      turns h2load's output into OUT in the shape of `inferd bench --json`.
  report.py mlp-request OUT
      writes the KServe v2 JSON request of experiment 9: one [1, 784] FP32
      input of bench/models/mlp, built as bench/json_decode.c builds its
      request (same generator, same %.9g numbers).
  report.py compare-outputs A B TOL [OUT]
      checks that two KServe v2 JSON responses hold the same outputs (name,
      datatype, shape) with values within TOL; exit 1 and a reason if not.
      OUT (JSON) gets the largest difference found.
  report.py binary-request JSON_REQUEST OUT [BATCH]
      writes a KServe v2 JSON request with FP32 inputs (models/digits/sample.json,
      experiment 9's mlp request) as a request with binary tensor data
      (outputs binary too) into OUT and prints the JSON header's length
      (Inference-Header-Content-Length). BATCH: every input of batch 1
      repeated BATCH times along the first dimension.
  report.py shadow-scrape METRICS_URL OUT [BEFORE]
      reads the shadow counters of `digits` (inferd_shadow_requests_total,
      inferd_shadow_dropped_total by reason, nv_inference_request_success per
      version) from the metrics port into OUT. With BEFORE (an earlier
      scrape), waits up to 3 s until every primary request of version 1
      since then has its copy compared or dropped.
  report.py ratelimit-scrape METRICS_URL OUT
      reads inferd_rate_limit_requests_total from the metrics port into OUT:
      {tenant: {"admitted": n, "limited": n}}, summed over rules.
  report.py ratelimit-delta BEFORE AFTER
      prints one line: calls each tenant's bucket admitted and limited between them.
  report.py shadow-delta BEFORE AFTER
      prints one line: primaries, copies compared and dropped between them.
  report.py gen-kv-bytes MODEL_DIR STREAMS
      prints the bytes of STREAMS whole contexts of a generative model's KV
      cache (its generation.json), for inferd serve --kv-cache-bytes.
  report.py gen-check FLOOR SERVER OUT
      checks that the in-process loop's greedy completion (FLOOR) equals the
      server's /v1/completions answer (SERVER); exit 1 and a reason if not.
  report.py prep-check URL MODEL DIR MEANS TOL OUT
      experiment 13: each DIR/img_*.jpg POSTed as a raw body to MODEL must
      answer the mean of Pillow's tensor for it (MEANS) within TOL; exit 1
      and a reason if not. OUT gets every answer.
  report.py prep-merge OUT TIME CPU_BEFORE CPU_AFTER PART...
      experiment 13: the reports of load generators that ran at once as one
      report (and OUT.cpu), in the shape `load` writes them.
  report.py prep-scrape METRICS_URL OUT
      reads inferd_preprocess_duration_seconds sum/count by model and stage
      into OUT, with each mean in µs.
  report.py tq-prompt URL TOKENS OUT
      experiment 15: the longest prefix of Genesis 1 of at most TOKENS prompt
      tokens of kjv (asked of the server at URL) into OUT; prints its count.
  report.py tq-setup RUN SHARE OFFER MAX_TOKENS [KEY=VALUE...]
      experiment 15: the per-minute quota (SHARE of the capacity runs' tokens/s
      for each tenant) and offered rates (OFFER x the quota), JSON on stdout.
  report.py tq-usage URL KEY OUT
      experiment 15: GET /v2/usage?model=kjv with the admin key KEY, summed by
      tenant, into OUT.
  report.py tq-line RUN
      prints one line: experiment 15's tokens, refusals and TTFT.
  report.py assemble RUN_DIR OUT_JSON  (meta from the environment, see below)
      reads the raw results of a run from RUN_DIR, computes the figures and
      writes OUT_JSON (bench/results/<date>.json).
  report.py markdown RESULTS_DIR OUT_MD
      regenerates bench/RESULTS.md from the newest results file, with a
      history of every results file in RESULTS_DIR.

Everything runs under /usr/bin/python3 with the standard library only.
"""
import glob
import http.client
import json
import os
import platform
import re
import socket
import sys

TARGETS = {
    "http_floor": ("inferd req/s ÷ nginx req/s", ">= 0.8", lambda v: v >= 0.8),
    "compute_floor": ("inferd inferences/s ÷ in-process inferences/s (mlp)", ">= 0.85",
                      lambda v: v >= 0.85),
    "latency_p99": ("p99 of simple at 50% of max rate", "<= 1 ms", lambda v: v <= 1000.0),
    "json_decode": ("inferd decoder speed-up over cJSON", ">= 5x", lambda v: v >= 5.0),
    "allocations": ("allocations per request after warm-up", "0", lambda v: v == 0),
    "rss_growth": ("RSS change over the memory run", "within ±5%", lambda v: abs(v) <= 5.0),
    "obs_overhead": ("req/s with metrics + access log + 10% traces ÷ all off", ">= 0.95",
                     lambda v: v >= 0.95),
    "node_ratio": ("inferd req/s ÷ Node.js onnxruntime-node req/s (mlp, JSON)", ">= 5x",
                   lambda v: v >= 5.0),
    "node_p99": ("inferd p99 ÷ Node.js onnxruntime-node p99 (mlp, JSON)", "< 1 (lower)",
                 lambda v: v < 1.0),
    "shadow_p99": ("p99 with 100% shadow traffic ÷ without, digits at 50% load",
                   "<= 1.05 (≤ 5 % added)", lambda v: v <= 1.05),
    "overload_throughput": ("admitted req/s at 3x capacity ÷ capacity (mlp, concurrency limiter)",
                            ">= 0.90", lambda v: v >= 0.90),
    "overload_p99": ("admitted p99 at 3x capacity ÷ p99 at 10% load", "<= 2", lambda v: v <= 2.0),
    "overload_refusal_p99": ("p99 of the refusals at 3x capacity", "< 1 ms",
                             lambda v: v < 1000.0),
    "tenant_fairness": ("calls admitted for two tenants with equal rate limits, lower ÷ "
                        "higher (one offers 3x its limit)", ">= 0.90 (within 10 %)", lambda v: v >= 0.90),
    "gen_single_stream": ("server tokens/s ÷ in-process generation loop, 1 stream (kjv, greedy)",
                          ">= 0.9", lambda v: v >= 0.9),
    "gen_batching": ("aggregate tokens/s at 32 streams ÷ 1 stream (kjv, continuous batching)",
                     ">= 4x", lambda v: v >= 4.0),
    "token_fairness": ("tokens served to two tenants with equal token quotas, lower ÷ higher "
                       "(kjv, 20- vs 200-token prompts)", ">= 0.90 (within 10 %)",
                       lambda v: v >= 0.90),
    "token_ttft": ("short-prompt tenant's TTFT p99 with the long-prompt tenant ÷ alone",
                   "<= 2", lambda v: v <= 2.0),
    "prep_speedup": ("inferd images/s ÷ Pillow + numpy in one process, JPEG decode + resize "
                     "+ normalize", ">= 3x", lambda v: v >= 3.0),
}

NOTE = ("This machine is shared and noisy (other jobs run on the same cores); absolute "
        "figures move from run to run. Only ratios measured in the same run, on the same "
        "cores, one right after the other, are meaningful — compare ratios, not raw rates, "
        "across runs.")


def die(msg):
    sys.stderr.write("report.py: %s\n" % msg)
    sys.exit(1)


def load(path):
    with open(path) as f:
        return json.load(f)


def load_opt(path):
    return load(path) if os.path.exists(path) else None


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


STATS_RE = re.compile(r"stats: (.*)$")


def parse_stats(path):
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            m = STATS_RE.search(line.rstrip("\n"))
            if not m:
                continue
            d = {}
            for kv in m.group(1).split():
                if "=" in kv:
                    k, v = kv.split("=", 1)
                    try:
                        d[k] = int(v)
                    except ValueError:
                        d[k] = v
            out.append(d)
    return out


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


PROM_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$')
PROM_LABEL_RE = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def shadow_counters(text, model="digits"):
    """The shadow counters of `model` in Prometheus text: compared, dropped by
    reason (summed over series) and successful primary requests per version."""
    out = {"compared": 0, "dropped": {}, "success": {}}
    for line in text.splitlines():
        m = PROM_RE.match(line.strip())
        if not m or line.startswith("#"):
            continue
        name, labels = m.group(1), dict(PROM_LABEL_RE.findall(m.group(2) or ""))
        if labels.get("model") != model:
            continue
        try:
            v = int(float(m.group(3)))
        except ValueError:
            continue
        if name == "inferd_shadow_requests_total":
            out["compared"] += v
        elif name == "inferd_shadow_dropped_total":
            r = labels.get("reason", "?")
            out["dropped"][r] = out["dropped"].get(r, 0) + v
        elif name == "nv_inference_request_success":
            ver = labels.get("version", "?")
            out["success"][ver] = out["success"].get(ver, 0) + v
    return out


def shadow_delta(before, after):
    """Counters between two scrapes: primaries (version 1 successes), v2
    primaries, compared, dropped (total and by reason), shares of primaries."""
    prim = after["success"].get("1", 0) - before["success"].get("1", 0)
    v2 = after["success"].get("2", 0) - before["success"].get("2", 0)
    comp = after["compared"] - before["compared"]
    drop = {r: n - before["dropped"].get(r, 0) for r, n in after["dropped"].items()}
    drop = {r: n for r, n in drop.items() if n}
    nd = sum(drop.values())
    return {"primaries": prim, "version2_primaries": v2, "compared": comp, "dropped": nd,
            "dropped_by_reason": drop,
            "compared_share": comp / prim if prim else None,
            "dropped_share": nd / prim if prim else None,
            "unaccounted": prim - comp - nd}


def fetch_text(url):
    import urllib.request
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode("utf-8", "replace")


def scrape(url):
    return shadow_counters(fetch_text(url))


def ratelimit_counters(text):
    """inferd_rate_limit_requests_total by tenant: {tenant: {outcome: n}},
    summed over rules and models."""
    out = {}
    for line in text.splitlines():
        m = PROM_RE.match(line.strip())
        if not m or line.startswith("#") or m.group(1) != "inferd_rate_limit_requests_total":
            continue
        labels = dict(PROM_LABEL_RE.findall(m.group(2) or ""))
        per = out.setdefault(labels.get("tenant", ""), {})
        outcome = labels.get("outcome", "?")
        per[outcome] = per.get(outcome, 0) + int(float(m.group(3)))
    return out


def ratelimit_delta(before, after):
    """{tenant: {outcome: n}} between two ratelimit-scrape files."""
    return {t: {k: n - before.get(t, {}).get(k, 0) for k, n in per.items()}
            for t, per in after.items()}


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


def prep_stage_means(text):
    """inferd_preprocess_duration_seconds sum/count by model and stage in
    Prometheus text: {model: {stage: {"count": n, "sum_s": s, "mean_us": m}}}."""
    out = {}
    for line in text.splitlines():
        m = PROM_RE.match(line.strip())
        if not m or line.startswith("#"):
            continue
        name = m.group(1)
        if name not in ("inferd_preprocess_duration_seconds_sum",
                        "inferd_preprocess_duration_seconds_count"):
            continue
        labels = dict(PROM_LABEL_RE.findall(m.group(2) or ""))
        st = out.setdefault(labels.get("model", "?"), {}).setdefault(labels.get("stage", "?"), {})
        st["sum_s" if name.endswith("_sum") else "count"] = float(m.group(3))
    for stages in out.values():
        for st in stages.values():
            n = st.get("count") or 0
            st["count"] = int(n)
            st["mean_us"] = st.get("sum_s", 0.0) / n * 1e6 if n else None
    return out


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


# ---- assemble ---------------------------------------------------------------

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


def bench_summary(path):
    """The parts of an `inferd bench --json` report the results keep."""
    r = load(path)
    cpu = load_opt(path + ".cpu") or {}
    status = r.get("status", {})
    ok = int(status.get("200", 0))
    bad = {k: v for k, v in status.items() if k != "200" and v}
    errors = {k: v for k, v in (r.get("errors") or {}).items() if v}
    dur = r.get("duration_s") or 0
    return {
        # Only successful responses count: a server answering errors fast
        # must not look fast.
        "rps": ok / dur if dur else None,
        "rps_all_statuses": r.get("rps"),
        "requests": r.get("requests"),
        "ok": ok,
        "duration_s": r.get("duration_s"),
        "latency_us": r.get("latency_us"),
        "non_200": bad,
        "errors": errors,
        "reconnects": r.get("reconnects"),
        # CPU used during the whole invocation (connect, warm-up, window,
        # drain) over its wall time: 1.0 = one core fully busy.
        "server_cpu_util": (cpu["server_cpu_s"] / cpu["wall_s"]
                            if cpu.get("wall_s") and "server_cpu_s" in cpu else None),
        "client_cpu_util": (cpu["client_cpu_s"] / cpu["wall_s"]
                            if cpu.get("wall_s") and "client_cpu_s" in cpu else None),
        # Server context switches per response over the whole invocation
        # (warm-up included, so an estimate).
        "server_ctxsw_per_request": (cpu["server_ctxsw"] / cpu["responses"]
                                     if cpu.get("responses") and "server_ctxsw" in cpu
                                     else None),
        "valid": not bad and not errors and ok > 0,
    }


def round_paths(run_dir, prefix):
    """PREFIX_r1.json, PREFIX_r2.json, ... in round order."""
    return sorted(glob.glob(os.path.join(run_dir, prefix + "_r*.json")),
                  key=lambda p: int(re.search(r"_r(\d+)\.json$", p).group(1)))


def rounds(run_dir, prefix):
    return [bench_summary(p) for p in round_paths(run_dir, prefix)]


def best(rs, key="rps"):
    vals = [r[key] for r in rs if r.get(key) is not None]
    return max(vals) if vals else None


def ratio(a, b):
    return a / b if a is not None and b else None


def target(name, value):
    what, text, ok = TARGETS[name]
    return {"name": name, "what": what, "target": text, "value": value,
            "met": (bool(ok(value)) if value is not None else None)}


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def assemble_http(run_dir):
    nginx = rounds(run_dir, "http_nginx")
    inferd = rounds(run_dir, "http_inferd")
    if not nginx or not inferd:
        return {"error": "no HTTP floor measurements"}
    n, i = best(nginx), best(inferd)
    return {
        "nginx": {"rps": n, "rounds": nginx},
        "inferd": {"rps": i, "rounds": inferd},
        "ratio": ratio(i, n),
        "valid": all(r["valid"] for r in nginx + inferd),
    }


def assemble_compute_model(run_dir, model):
    ort = sorted(glob.glob(os.path.join(run_dir, "compute_ort_%s_r*.json" % model)))
    inferd = rounds(run_dir, "compute_inferd_%s" % model)
    if not ort or not inferd:
        return None
    ort_runs = [load(p) for p in ort]
    per_batch = {}
    for r in ort_runs:
        for x in r["results"]:
            b = x["batch"]
            per_batch[b] = max(per_batch.get(b, 0.0), x["inferences_per_s"])
    best_batch = max(per_batch, key=lambda b: per_batch[b])
    floor = per_batch[best_batch]
    i = best(inferd)
    cfg = load_opt(os.path.join(run_dir, "compute_%s_config.json" % model))
    return {
        "in_process": {
            "best_batch": best_batch,
            "inferences_per_s": floor,
            "per_batch": [{"batch": b, "inferences_per_s": per_batch[b]}
                          for b in sorted(per_batch)],
            "intra_op_threads": ort_runs[0].get("intra_op_threads"),
            "inter_op_threads": ort_runs[0].get("inter_op_threads"),
            "ort_version": ort_runs[0].get("ort_version"),
            "rounds": len(ort_runs),
        },
        "inferd": {"inferences_per_s": i, "rounds": inferd},
        "server_model_config": cfg,
        "ratio": ratio(i, floor),
        "valid": all(r["valid"] for r in inferd),
    }


def assemble_latency(run_dir):
    r = os.path.join(run_dir, "latency.json")
    if not os.path.exists(r):
        return {"error": "no latency measurement"}
    s = bench_summary(r)
    cfg = load(r).get("config", {})
    ref = os.path.join(run_dir, "latency_nginx.json")
    return {
        "nginx_same_rate": bench_summary(ref) if os.path.exists(ref) else None,
        "rate": cfg.get("rate"),
        "achieved_rps": s["rps"],
        "latency_us": s["latency_us"],
        "p50_us": (s["latency_us"] or {}).get("p50"),
        "p99_us": (s["latency_us"] or {}).get("p99"),
        "run": s,
        "valid": s["valid"],
    }


def assemble_json_decode(run_dir):
    missing = os.path.join(run_dir, "json_decode.missing")
    if os.path.exists(missing):
        return {"error": open(missing).read().strip()}
    p = os.path.join(run_dir, "json_decode.json")
    if not os.path.exists(p):
        return {"error": "json_decode did not run"}
    d = load(p)
    fig = d.get("figures", {})
    speedup = None
    if fig.get("cjson_us") and fig.get("inferd_us"):
        speedup = fig["cjson_us"] / fig["inferd_us"]
    return {"figures": fig, "speedup": speedup, "output": d.get("output"),
            "error": None if speedup is not None else "no cjson/inferd figures in its output"}


def assemble_memory(run_dir):
    p = os.path.join(run_dir, "memory_server.log")
    if not os.path.exists(p):
        return {"error": "no memory measurement"}
    stats = parse_stats(p)
    if len(stats) < 3:
        return {"error": "expected 3 stats lines (idle, after warm-up, after run), got %d"
                % len(stats)}
    idle, warm, end = stats[0], stats[-2], stats[-1]
    run = bench_summary(os.path.join(run_dir, "memory_run.json"))
    dreq = end["infer_requests"] - warm["infer_requests"]
    dalloc = end["allocations"] - warm["allocations"]
    return {
        "idle_rss_bytes": idle["rss_bytes"],
        "warm_rss_bytes": warm["rss_bytes"],
        "final_rss_bytes": end["rss_bytes"],
        "warmup_requests": warm["infer_requests"],
        "requests": dreq,
        "allocations": dalloc,
        "allocations_per_request": (dalloc / dreq) if dreq else None,
        "rss_growth_pct": (100.0 * (end["rss_bytes"] - warm["rss_bytes"]) / warm["rss_bytes"]
                           if warm["rss_bytes"] else None),
        "stats": {"idle": idle, "after_warmup": warm, "after_run": end},
        "run": run,
        "valid": run["valid"],
    }


def median_latency(rs, q):
    """The median over rounds: one round hit by a neighbour's burst on this
    shared machine must not decide the figure."""
    vals = sorted(v for v in ((r["latency_us"] or {}).get(q) for r in rs) if v is not None)
    if not vals:
        return None
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2


def assemble_comparison(run_dir, base, other, by="rps"):
    """Two configurations loaded in turn: base and other are (key, round
    file prefix). by="rps" (closed loop): the ratio is other's best req/s ÷
    base's best. by="p99" (open loop at a fixed rate): each side's p50/p99
    are the medians over its rounds and the ratio is other's median p99 ÷
    base's."""
    (bkey, bprefix), (okey, oprefix) = base, other
    b, o = rounds(run_dir, bprefix), rounds(run_dir, oprefix)
    if not b or not o:
        return {"error": "not measured"}
    doc = {
        bkey: {"rps": best(b), "rounds": b},
        okey: {"rps": best(o), "rounds": o},
        "ratio": ratio(best(o), best(b)),
        "valid": all(x["valid"] for x in b + o),
    }
    if by == "p99":
        for key, rs in ((bkey, b), (okey, o)):
            doc[key]["p50_us"] = median_latency(rs, "p50")
            doc[key]["p99_us"] = median_latency(rs, "p99")
        doc["ratio"] = ratio(doc[okey]["p99_us"], doc[bkey]["p99_us"])
        doc["p50_ratio"] = ratio(doc[okey]["p50_us"], doc[bkey]["p50_us"])
    return doc


def assemble_grpc(run_dir):
    return assemble_comparison(run_dir, ("rest", "grpc_rest"), ("grpc", "grpc_grpc"))


def assemble_obs(run_dir):
    return assemble_comparison(run_dir, ("off", "obs_off"), ("on", "obs_on"))


def assemble_shm(run_dir):
    return assemble_comparison(run_dir, ("binary", "shm_binary"), ("shm", "shm_shm"))


def assemble_shadow(run_dir):
    skipped = os.path.join(run_dir, "shadow.skipped")
    if os.path.exists(skipped):
        return {"skipped": open(skipped).read().strip()}
    failed = os.path.join(run_dir, "shadow.failed")
    if os.path.exists(failed):
        return {"error": open(failed).read().strip()}
    doc = assemble_comparison(run_dir, ("off", "shadow_off"), ("on", "shadow_on"), by="p99")
    if doc.get("error"):
        return doc
    mx = rounds(run_dir, "shadow_max")
    doc["max_rps"] = best(mx)
    doc["max_rounds"] = mx
    cfg = load(os.path.join(run_dir, "shadow_on_r1.json")).get("config", {})
    doc["rate"] = cfg.get("rate")
    doc["p99_added_pct"] = 100.0 * (doc["ratio"] - 1.0) if doc["ratio"] is not None else None
    doc["server_model_config"] = load_opt(os.path.join(run_dir, "shadow_digits_config.json"))
    # Shadow counters around each run, per side and round, and the on side's total.
    for side in ("off", "on"):
        per = []
        for i in range(1, len(doc[side]["rounds"]) + 1):
            bf = os.path.join(run_dir, "shadow_metrics_%s_r%d_before.json" % (side, i))
            af = os.path.join(run_dir, "shadow_metrics_%s_r%d_after.json" % (side, i))
            per.append(shadow_delta(load(bf), load(af))
                       if os.path.exists(bf) and os.path.exists(af) else None)
        doc[side]["shadow"] = per
    on = [d for d in doc["on"]["shadow"] if d]
    tot = {"primaries": sum(d["primaries"] for d in on),
           "version2_primaries": sum(d["version2_primaries"] for d in on),
           "compared": sum(d["compared"] for d in on),
           "dropped": sum(d["dropped"] for d in on), "dropped_by_reason": {},
           "unaccounted": sum(d["unaccounted"] for d in on)}
    for d in on:
        for r, n in d["dropped_by_reason"].items():
            tot["dropped_by_reason"][r] = tot["dropped_by_reason"].get(r, 0) + n
    p = tot["primaries"]
    tot["compared_share"] = tot["compared"] / p if p else None
    tot["dropped_share"] = tot["dropped"] / p if p else None
    doc["shadow"] = tot if on else None
    off = [d for d in doc["off"]["shadow"] if d]
    doc["off_copies"] = sum(d["compared"] + d["dropped"] for d in off) if off else None
    return doc


def median(vals):
    vals = sorted(v for v in vals if v is not None)
    if not vals:
        return None
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2


def admission_summary(path):
    """An `inferd bench --json` report of a run under admission control:
    admitted (2xx) and refused (429, 503) responses apart."""
    r = load(path)
    cpu = load_opt(path + ".cpu") or {}
    n = r.get("requests") or 0
    return {
        "rate": (r.get("config") or {}).get("rate"),
        "rps_ok": r.get("rps_ok"),
        "requests": n,
        "requests_ok": r.get("requests_ok"),
        "requests_refused": r.get("requests_refused"),
        "refused_share": r["requests_refused"] / n if n and "requests_refused" in r else None,
        "latency_us": r.get("latency_us"),
        "latency_us_ok": r.get("latency_us_ok"),
        "latency_us_refused": r.get("latency_us_refused"),
        "status": r.get("status"),
        "errors": {k: v for k, v in (r.get("errors") or {}).items() if v},
        "server_cpu_util": (cpu["server_cpu_s"] / cpu["wall_s"]
                            if cpu.get("wall_s") and "server_cpu_s" in cpu else None),
        "client_cpu_util": (cpu["client_cpu_s"] / cpu["wall_s"]
                            if cpu.get("wall_s") and "client_cpu_s" in cpu else None),
    }


def admission_rounds(run_dir, prefix):
    return [admission_summary(p) for p in round_paths(run_dir, prefix)]


def part_state(run_dir, part):
    """{"skipped": why} or {"error": why} for a part of experiment 11, else None."""
    for kind in ("skipped", "failed"):
        p = os.path.join(run_dir, "overload_%s.%s" % (part, kind))
        if os.path.exists(p):
            return {"skipped" if kind == "skipped" else "error": open(p).read().strip()}
    return None


def concurrency_metrics(text, model="mlp"):
    """inferd_concurrency_* series of `model` (Prometheus text): name → value,
    with the labels other than model in the name."""
    out = {}
    for line in text.splitlines():
        m = PROM_RE.match(line.strip())
        if not m or line.startswith("#") or not m.group(1).startswith("inferd_concurrency_"):
            continue
        labels = dict(PROM_LABEL_RE.findall(m.group(2) or ""))
        if labels.pop("model", None) != model:
            continue
        key = m.group(1) + ("{%s}" % ",".join("%s=%s" % kv for kv in sorted(labels.items()))
                            if labels else "")
        try:
            out[key] = float(m.group(3))
        except ValueError:
            pass
    return out


def assemble_overload(run_dir):
    """Experiment 11: capacity, the concurrency limiter at 10% and 3x
    capacity, two tenants with equal rate limits."""
    cap_rounds = admission_rounds(run_dir, "overload_capacity")
    if not cap_rounds:
        state = part_state(run_dir, "limiter")
        return state if state else {"error": "not measured"}
    capacity = max(r["rps_ok"] or 0 for r in cap_rounds)
    doc = {"setup": load_opt(os.path.join(run_dir, "overload_setup.json")),
           "capacity": {"rps": capacity, "rounds": cap_rounds}}

    lim = part_state(run_dir, "limiter")
    if lim is None:
        un, ov = (admission_rounds(run_dir, "overload_unloaded"),
                  admission_rounds(run_dir, "overload_3x"))
        if not un or not ov:
            lim = {"error": "not measured"}
        else:
            lim = {
                "unloaded": {"rounds": un,
                             "p50_us": median((r["latency_us_ok"] or {}).get("p50") for r in un),
                             "p99_us": median((r["latency_us_ok"] or {}).get("p99") for r in un)},
                "overload": {"rounds": ov,
                             "rps_ok": max(r["rps_ok"] or 0 for r in ov),
                             "p50_us": median((r["latency_us_ok"] or {}).get("p50") for r in ov),
                             "p99_us": median((r["latency_us_ok"] or {}).get("p99") for r in ov),
                             "refused_p99_us": median((r["latency_us_refused"] or {}).get("p99")
                                                      for r in ov),
                             "refused_share": median(r["refused_share"] for r in ov)},
            }
            lim["throughput_ratio"] = ratio(lim["overload"]["rps_ok"], capacity)
            lim["p99_ratio"] = ratio(lim["overload"]["p99_us"], lim["unloaded"]["p99_us"])
            mp = os.path.join(run_dir, "overload_limiter_metrics.txt")
            lim["metrics_after"] = (concurrency_metrics(open(mp, errors="replace").read())
                                    if os.path.exists(mp) else None)
            lim["config"] = (open(os.path.join(run_dir, "overload.yaml")).read()
                             if os.path.exists(os.path.join(run_dir, "overload.yaml")) else None)
    doc["limiter"] = lim

    ten = part_state(run_dir, "tenants")
    if ten is None:
        a, b = (admission_rounds(run_dir, "overload_tenant_a"),
                admission_rounds(run_dir, "overload_tenant_b"))
        limit = (doc["setup"] or {}).get("tenant_limit")
        if not a or not b or len(a) != len(b):
            ten = {"error": "not measured"}
        else:
            # Client side: mean admitted (2xx) req/s of each load generator's window.
            ra = sum(r["rps_ok"] or 0 for r in a) / len(a)
            rb = sum(r["rps_ok"] or 0 for r in b) / len(b)
            # Server side: calls each tenant's bucket admitted while both ran
            # (metrics port, read before and after each round).
            server = []
            for i in range(1, len(a) + 1):
                bf = os.path.join(run_dir, "overload_tenants_r%d_before.json" % i)
                af = os.path.join(run_dir, "overload_tenants_r%d_after.json" % i)
                server.append(ratelimit_delta(load(bf), load(af))
                              if os.path.exists(bf) and os.path.exists(af) else None)
            sa = sum((d or {}).get("tenant-a", {}).get("admitted", 0) for d in server)
            sb = sum((d or {}).get("tenant-b", {}).get("admitted", 0) for d in server)
            measured = all(server) and sa and sb
            ten = {"limit": limit, "a": {"rounds": a, "rps_ok": ra, "share": ratio(ra, limit),
                                         "server_admitted": sa if measured else None},
                   "b": {"rounds": b, "rps_ok": rb, "share": ratio(rb, limit),
                         "server_admitted": sb if measured else None},
                   "server_rounds": server,
                   "fairness": ratio(min(sa, sb), max(sa, sb)) if measured else None,
                   "client_fairness": ratio(min(ra, rb), max(ra, rb))}
    doc["tenants"] = ten
    return doc


def assemble_node(run_dir):
    skipped = os.path.join(run_dir, "node.skipped")
    if os.path.exists(skipped):
        return {"skipped": open(skipped).read().strip()}
    failed = os.path.join(run_dir, "node.failed")
    if os.path.exists(failed):
        return {"error": open(failed).read().strip()}
    n, i = rounds(run_dir, "node_node"), rounds(run_dir, "node_inferd")
    if not n or not i:
        return {"error": "not measured"}
    bn, bi = best_round(n), best_round(i)
    p99n = (bn["latency_us"] or {}).get("p99")
    p99i = (bi["latency_us"] or {}).get("p99")
    return {
        "versions": load_opt(os.path.join(run_dir, "node_versions.json")),
        "check": load_opt(os.path.join(run_dir, "node_check.json")),
        "node": {"rps": best(n), "rounds": n},
        "inferd": {"rps": best(i), "rounds": i},
        "ratio": ratio(best(i), best(n)),
        # p50/p99 of the best round (by req/s) of each side
        "node_p50_us": (bn["latency_us"] or {}).get("p50"),
        "node_p99_us": p99n,
        "inferd_p50_us": (bi["latency_us"] or {}).get("p50"),
        "inferd_p99_us": p99i,
        "p99_ratio": ratio(p99i, p99n),
        "valid": all(x["valid"] for x in n + i),
    }


# ---- experiment 12: generation ------------------------------------------------

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


def gen_summary(path):
    """An `inferd bench --openai --json` report: bench_summary plus its
    "generation" part."""
    s = bench_summary(path)
    g = load(path).get("generation") or {}
    s.update({k: g.get(k) for k in ("tokens_per_s", "ttft_us", "tpot_us", "requests_ok",
                                     "requests_failed", "tokens_per_request", "finish")})
    s["valid"] = s["valid"] and not g.get("requests_failed")
    return s


def gen_median(rs, key, q=None):
    return median((r.get(key) or {}).get(q) if q else r.get(key) for r in rs)


def assemble_generation(run_dir):
    for kind in ("skipped", "failed"):
        p = os.path.join(run_dir, "gen." + kind)
        if os.path.exists(p):
            return {("skipped" if kind == "skipped" else "error"): open(p).read().strip()}
    floors = [load(p) for p in round_paths(run_dir, "gen_floor")]
    if not floors:
        return {"error": "not measured"}
    setup = load_opt(os.path.join(run_dir, "gen_setup.json")) or {}
    streams = setup.get("streams") or [1, 8, 32]
    server = {}
    for c in streams:
        rs = [gen_summary(p) for p in round_paths(run_dir, "gen_c%d" % c)]
        server[str(c)] = {
            "tokens_per_s": gen_median(rs, "tokens_per_s"),
            "ttft_p50_us": gen_median(rs, "ttft_us", "p50"),
            "ttft_p99_us": gen_median(rs, "ttft_us", "p99"),
            "tpot_p50_us": gen_median(rs, "tpot_us", "p50"),
            "tpot_p99_us": gen_median(rs, "tpot_us", "p99"),
            "rounds": rs,
        }
    one, most = server.get("1"), server.get(str(max(streams)))
    batched = [load(p) for p in round_paths(run_dir, "gen_floor_batched")]
    at_batch = server.get(str(setup.get("batched")))
    batched_rounds = ([ratio(at_batch["rounds"][i]["tokens_per_s"], batched[i].get("tokens_per_s"))
                       for i in range(min(len(batched), len(at_batch["rounds"])))]
                      if at_batch else [])
    n = min(len(floors), len((one or {}).get("rounds") or []))
    single = [ratio(one["rounds"][i]["tokens_per_s"], floors[i].get("tokens_per_s"))
              for i in range(n)]
    batching = ([ratio(most["rounds"][i]["tokens_per_s"], one["rounds"][i]["tokens_per_s"])
                 for i in range(min(len(most["rounds"]), len(one["rounds"])))]
                if one and most else [])
    return {
        "setup": setup,
        "check": load_opt(os.path.join(run_dir, "gen_check.json")),
        "floor": {"tokens_per_s": median(f.get("tokens_per_s") for f in floors),
                  "ttft_us": median(f.get("ttft_us") for f in floors),
                  "tpot_us": median(f.get("tpot_us") for f in floors),
                  "completion_tokens": floors[0].get("completion_tokens"),
                  "rounds": [{k: f.get(k) for k in ("tokens_per_s", "tokens_per_s_best",
                                                     "ttft_us", "tpot_us")} for f in floors]},
        "floor_batched": {"batch": setup.get("batched"),
                          "tokens_per_s": median(f.get("tokens_per_s") for f in batched),
                          "ttft_us": median(f.get("ttft_us") for f in batched),
                          "tpot_us": median(f.get("tpot_us") for f in batched),
                          "rounds": [{k: f.get(k) for k in ("tokens_per_s", "ttft_us", "tpot_us")}
                                     for f in batched]},
        "server": server,
        # Per round (the floor and the server runs right after one another),
        # then the median over rounds.
        "single_stream_rounds": single,
        "single_stream_ratio": median(single),
        "batching_rounds": batching,
        "batching_ratio": median(batching),
        # informative: the server at `batched` streams ÷ the in-process loop at that batch
        "batched_rounds": batched_rounds,
        "batched_ratio": median(batched_rounds),
        "valid": all(r["valid"] for s in server.values() for r in s["rounds"]),
    }


def gen_notes(g, notes):
    if g.get("skipped") or g.get("error"):
        for name in ("gen_single_stream", "gen_batching"):
            notes[name] = "%s: %s" % ("skipped" if g.get("skipped") else "not measured",
                                      g.get("skipped") or g.get("error"))
        return
    s = g["server"]
    top = str(max(int(c) for c in s))
    notes["gen_single_stream"] = "%s vs %s tokens/s; TTFT p50 %s vs %s µs" % (
        fmt(s["1"]["tokens_per_s"]), fmt(g["floor"]["tokens_per_s"]),
        fmt(s["1"]["ttft_p50_us"]), fmt(g["floor"]["ttft_us"]))
    notes["gen_batching"] = ("%s vs %s tokens/s; TTFT p50/p99 at %s streams %s / %s µs; the "
                             "in-process loop at batch %s: %s tokens/s" % (
                                 fmt(s[top]["tokens_per_s"]), fmt(s["1"]["tokens_per_s"]), top,
                                 fmt(s[top]["ttft_p50_us"]), fmt(s[top]["ttft_p99_us"]),
                                 (g.get("floor_batched") or {}).get("batch"),
                                 fmt((g.get("floor_batched") or {}).get("tokens_per_s"))))


def md_generation(g):
    out = []
    w = out.append
    w("### 12. Generation: `models/kjv` streamed by the server vs the in-process loop")
    w("")
    if g.get("skipped") or g.get("error"):
        w("%s: %s" % ("Skipped" if g.get("skipped") else "Not measured",
                      g.get("skipped") or g.get("error")))
        w("")
        return out
    st, ck = g.get("setup") or {}, g.get("check") or {}
    w("Greedy (temperature 0), prompt %s, max_tokens %s. In process: `inferd bench "
      "--generate-floor` (prefill, then one-token decode steps feeding `present.*` back as "
      "`past_key_values.*` where ONNX Runtime left them), median of %s generations per round. "
      "Server: `inferd serve --kv-cache-bytes %s` (%s whole contexts), `inferd bench --openai` "
      "(`POST /v1/completions`, `stream: true`, `stream_options.include_usage`), closed loop "
      "with 1 to %s streams in flight; tokens/s = tokens received in the window ÷ its length. "
      "Before the runs the server's greedy completion equalled the loop's (%s tokens, finish "
      "`%s`: %s)." % (
          json.dumps(st.get("prompt")), st.get("max_tokens", "?"), st.get("repeat", "?"),
          st.get("kv_cache_bytes", "?"), st.get("kv_streams", "?"),
          max(st.get("streams") or [32]), fmt(ck.get("completion_tokens"), "%d"),
          ck.get("finish_reason"), json.dumps(ck.get("text"))))
    w("")
    w("| run | tokens/s (median) | rounds (tokens/s) | TTFT p50 / p99 µs | TPOT p50 / p99 µs "
      "| tokens/request | requests ok / failed | server CPU | load-generator CPU |")
    w("|---|---|---|---|---|---|---|---|---|")
    f, fb = g["floor"], g.get("floor_batched") or {}
    w("| in process, 1 stream | %s | %s | %s (median) | %s (median) | %s | — | — | — |" % (
        fmt(f["tokens_per_s"]), ", ".join(fmt(r["tokens_per_s"]) for r in f["rounds"]),
        fmt(f["ttft_us"]), fmt(f["tpot_us"]), fmt(f.get("completion_tokens"), "%d")))
    if fb.get("rounds"):
        w("| in process, batch of %s | %s | %s | %s (median) | %s (median) | %s | — | — | — |" % (
            fb["batch"], fmt(fb["tokens_per_s"]),
            ", ".join(fmt(r["tokens_per_s"]) for r in fb["rounds"]), fmt(fb["ttft_us"]),
            fmt(fb["tpot_us"]), fmt(f.get("completion_tokens"), "%d")))
    for c, s in sorted(g["server"].items(), key=lambda kv: int(kv[0])):
        rs = s["rounds"]
        w("| server, %s stream%s | %s | %s | %s / %s | %s / %s | %s | %s / %s | %s | %s |" % (
            c, "" if c == "1" else "s", fmt(s["tokens_per_s"]),
            ", ".join(fmt(r["tokens_per_s"]) for r in rs), fmt(s["ttft_p50_us"]),
            fmt(s["ttft_p99_us"]), fmt(s["tpot_p50_us"]), fmt(s["tpot_p99_us"]),
            fmt(median(r.get("tokens_per_request") for r in rs), "%.1f"),
            fmt(sum(r.get("requests_ok") or 0 for r in rs), "%d"),
            fmt(sum(r.get("requests_failed") or 0 for r in rs), "%d"),
            pct(median(r.get("server_cpu_util") for r in rs)),
            pct(median(r.get("client_cpu_util") for r in rs))))
    w("")
    w("Latencies: medians over rounds of each round's percentile. **server ÷ in process, 1 "
      "stream = %s** (target ≥ 0.9; per round %s); **%s streams ÷ 1 = %s×** (target ≥ 4×; per "
      "round %s)." % (
          fmt(g["single_stream_ratio"], "%.3f"),
          ", ".join(fmt(v, "%.3f") for v in g["single_stream_rounds"]),
          max(int(c) for c in g["server"]), fmt(g["batching_ratio"], "%.2f"),
          ", ".join(fmt(v, "%.2f") for v in g["batching_rounds"])))
    if fb.get("rounds"):
        w("")
        w("Informative: the server at %s streams ÷ the in-process loop at batch %s = %s (per "
          "round %s); the batched loop's own gain over 1 stream, %s×, is what ONNX Runtime "
          "gives this model at that batch on these cores." % (
              fb["batch"], fb["batch"], fmt(g.get("batched_ratio"), "%.3f"),
              ", ".join(fmt(v, "%.3f") for v in g.get("batched_rounds") or []),
              fmt(ratio(fb["tokens_per_s"], f["tokens_per_s"]), "%.2f")))
    if not g["valid"]:
        w("")
        w("**Some requests failed**: %s." % "; ".join(
            "%s streams: %s" % (c, describe_failures(r))
            for c, s in g["server"].items() for r in s["rounds"]))
    w("")
    return out


PREP_SIDES = (("plain", "plain decode"), ("draft", "draft (DCT-scaled) decode"))


def assemble_prep(run_dir):
    p = os.path.join(run_dir, "prep.failed")
    if os.path.exists(p):
        return {"error": open(p).read().strip()}
    setup = load_opt(os.path.join(run_dir, "prep_setup.json"))
    if not setup:
        return {"error": "not measured"}
    stages = load_opt(os.path.join(run_dir, "prep_stages.json")) or {}
    doc = {"setup": setup, "valid": True}
    for side, _ in PREP_SIDES:
        pillow = [load(q) for q in round_paths(run_dir, "prep_pillow_" + side)]
        inferd = rounds(run_dir, "prep_inferd_" + side)
        if not pillow or not inferd:
            return {"error": "not measured", "setup": setup}
        best_p = max(pillow, key=lambda q: q["images_per_s"])
        doc[side] = {
            "check": load_opt(os.path.join(run_dir, "prep_check_%s.json" % side)),
            "pillow": {"images_per_s": best_p["images_per_s"], "step_us": best_p["step_us"],
                       "versions": best_p.get("versions"),
                       "rounds": [{k: q[k] for k in ("images_per_s", "images", "step_us")}
                                  for q in pillow]},
            "inferd": {"images_per_s": best(inferd), "rounds": inferd,
                       "stage_us": {k: v.get("mean_us") for k, v in
                                    (stages.get("prep_" + side) or {}).items()},
                       "stage_counts": {k: v.get("count") for k, v in
                                        (stages.get("prep_" + side) or {}).items()}},
            "ratio": ratio(best(inferd), best_p["images_per_s"]),
        }
        doc["valid"] = doc["valid"] and all(r["valid"] for r in inferd)
    return doc


def prep_notes(pr, notes):
    if pr.get("error"):
        notes["prep_speedup"] = "not measured: %s" % pr["error"]
        return
    pl, dr = pr["plain"], pr["draft"]
    notes["prep_speedup"] = ("%s vs %s images/s on %s preprocessing thread(s); with draft "
                             "decoding on both sides %s vs %s images/s = %s×" % (
                                 fmt(pl["inferd"]["images_per_s"], "%.1f"),
                                 fmt(pl["pillow"]["images_per_s"], "%.1f"),
                                 pr["setup"].get("preprocess_threads", "?"),
                                 fmt(dr["inferd"]["images_per_s"], "%.1f"),
                                 fmt(dr["pillow"]["images_per_s"], "%.1f"),
                                 fmt(dr["ratio"], "%.2f")))


def md_prep(pr, cores):
    out = []
    w = out.append
    w("### 13. Preprocessing: JPEG → 224×224 CHW FP32 tensor, inferd vs Pillow + numpy")
    w("")
    if pr.get("error"):
        w("Not measured: %s" % pr["error"])
        w("")
        return out
    st = pr["setup"]
    sizes = st.get("image_bytes") or []
    w("%d photo-like %d×%d JPEGs (quality %s, %s–%s bytes; `bench/prep_images.py`, generated at "
      "bench time). Both sides do the same steps to each: decode to RGB, resize the shorter "
      "side to 256 (bilinear, antialiased), center crop 224×224, ImageNet mean/std "
      "normalisation, CHW FP32. **Pillow + numpy** (`bench/prep_pillow.py`, Pillow %s, "
      "numpy %s): one Python process looping over the images on the server cores "
      "(`taskset -c %s`); *draft* adds `img.draft(\"RGB\", (w, h))` before the decode. "
      "**inferd**: `preprocess.json` with `\"draft\": false` / `true`, a Reshape + ReduceMean "
      "model (a 4-byte answer), raw-body POSTs (`Content-Type: image/jpeg`), one load "
      "generator per image at once, %d requests in flight in all, closed loop; default "
      "`--preprocess-threads` (%s on these cores). Before the runs each image's answer "
      "equalled the mean of Pillow's tensor (largest difference %s plain, %s draft; "
      "tolerance %s). Best round of each." % (
          len(sizes), st.get("width", 0), st.get("height", 0), st.get("quality", "?"),
          min(sizes) if sizes else "?", max(sizes) if sizes else "?",
          ((pr["plain"]["pillow"].get("versions") or {}).get("pillow", "?")),
          ((pr["plain"]["pillow"].get("versions") or {}).get("numpy", "?")), cores["server"],
          st.get("images", 0) * st.get("per_image", 0), st.get("preprocess_threads", "?"),
          fmt((pr["plain"].get("check") or {}).get("max_abs_diff"), "%.2g"),
          fmt((pr["draft"].get("check") or {}).get("max_abs_diff"), "%.2g"),
          st.get("tolerance", "?")))
    w("")
    w("| decode | Pillow images/s | rounds | inferd images/s | rounds | inferd p50 / p99 ms | "
      "server CPU | **inferd ÷ Pillow** |")
    w("|---|---|---|---|---|---|---|---|")
    for side, name in PREP_SIDES:
        x = pr[side]
        b = best_round(x["inferd"]["rounds"])
        lu = b.get("latency_us") or {}
        w("| %s | %s | %s | %s | %s | %s / %s | %s | **%s×** |" % (
            name, fmt(x["pillow"]["images_per_s"], "%.1f"),
            ", ".join(fmt(q["images_per_s"], "%.1f") for q in x["pillow"]["rounds"]),
            fmt(x["inferd"]["images_per_s"], "%.1f"),
            ", ".join(fmt(q["rps"], "%.1f") for q in x["inferd"]["rounds"]),
            fmt(lu.get("p50") and lu["p50"] / 1000.0, "%.1f"),
            fmt(lu.get("p99") and lu["p99"] / 1000.0, "%.1f"),
            pct(b.get("server_cpu_util")), fmt(x["ratio"], "%.2f")))
    w("")
    w("Target: plain ÷ plain ≥ 3× (inferd's threads against one Python process, each on "
      "the same cores); draft ÷ draft is informative. Latency: the median of the load "
      "generators' p50s and the largest of their p99s.")
    w("")
    w("Mean cost per image, µs. inferd: `inferd_preprocess_duration_seconds` sum ÷ count by "
      "stage (metrics port, every request of the run, warm-up included); its *resize* "
      "computes only the crop's pixels (no crop step of its own), its *normalize* includes "
      "the layout and the FP32 store, and *queue* is the wait for a worker. Pillow: each "
      "step timed in the loop of its best round.")
    w("")
    w("| step | Pillow, plain | inferd, plain | Pillow, draft | inferd, draft |")
    w("|---|---|---|---|---|")
    pl, dr = pr["plain"], pr["draft"]
    for label, pk, ik in (("decode (+ convert)", "decode", "decode"),
                          ("resize", "resize", "resize"), ("crop", "crop", None),
                          ("normalize (+ CHW)", "normalize", "normalize"),
                          ("queue (wait for a worker)", None, "queue")):
        w("| %s | %s | %s | %s | %s |" % (
            label, fmt(pl["pillow"]["step_us"].get(pk) if pk else None),
            fmt(pl["inferd"]["stage_us"].get(ik) if ik else None) if ik else "(in resize)",
            fmt(dr["pillow"]["step_us"].get(pk) if pk else None),
            fmt(dr["inferd"]["stage_us"].get(ik) if ik else None) if ik else "(in resize)"))
    tot = {}
    for side in ("plain", "draft"):
        x = pr[side]
        tot[side] = (sum(x["pillow"]["step_us"].values()),
                     sum(v for k, v in x["inferd"]["stage_us"].items()
                         if k != "queue" and v is not None) or None)
    w("| **total (without queue)** | %s | %s | %s | %s |" % (
        fmt(tot["plain"][0]), fmt(tot["plain"][1]), fmt(tot["draft"][0]), fmt(tot["draft"][1])))
    if not pr["valid"]:
        w("")
        w("**Some requests failed** — plain: %s; draft: %s." % (
            "; ".join(describe_failures(q) for q in pl["inferd"]["rounds"]),
            "; ".join(describe_failures(q) for q in dr["inferd"]["rounds"])))
    w("")
    return out


def assemble_http3(run_dir):
    """Experiment 14: each protocol's best round by req/s, p50/p99 the
    medians over rounds; ratio = h3 req/s / h2 req/s."""
    doc = {}
    for proto in ("h2", "h3"):
        rs = [load(p) for p in sorted(glob.glob(os.path.join(run_dir, "h3_%s_r*.json" % proto)))]
        if not rs:
            return {"error": "not measured"}
        doc[proto] = {"rps": best(rs), "p50_us": median_latency(rs, "p50"),
                      "p99_us": median_latency(rs, "p99"), "rounds": rs}
    doc["ratio"] = ratio(doc["h3"]["rps"], doc["h2"]["rps"])
    doc["p50_ratio"] = ratio(doc["h3"]["p50_us"], doc["h2"]["p50_us"])
    doc["valid"] = all(r["valid"] for p in ("h2", "h3") for r in doc[p]["rounds"])
    doc["client"] = "headless Chromium (bench/h3_chromium.py)"
    return doc


def md_http3(h3):
    out = []
    w = out.append
    w("### 14. HTTP/3 vs HTTP/2 over TLS: the `simple` request, headless Chromium as the client")
    w("")
    if h3.get("error"):
        w("Not measured: %s." % h3["error"])
        w("")
        return out
    w("| protocol | req/s (best round) | p50 | p99 |")
    w("|---|---|---|---|")
    for proto in ("h2", "h3"):
        d = h3[proto]
        w("| %s | %s | %s us | %s us |" % (proto, fmt(d["rps"]), fmt(d["p50_us"]),
                                         fmt(d["p99_us"])))
    w("")
    w("h3 ÷ h2: %s req/s, %s p50. The same Chromium sends both (QUIC forced for the origin, or "
      "off), %d fetch() loops: its own cost is in both figures, so the ratio compares the "
      "transports, not inferd's ceiling (experiment 1).%s" % (
          fmt(h3["ratio"], "%.2f"), fmt(h3["p50_ratio"], "%.2f"),
          h3["h3"]["rounds"][0]["concurrency"],
          "" if h3["valid"] else " **Some requests failed or went over another protocol.**"))
    w("")
    return out


# ---- experiment 15: token fairness -------------------------------------------

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


def gen_tokens(path):
    """(prompt + completion tokens, requests ok) of an `inferd bench --openai
    --json` report: the sums over its window's ok responses."""
    g = load(path).get("generation") or {}
    return (g.get("prompt_tokens") or 0) + (g.get("completion_tokens") or 0), g.get("requests_ok")


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


def tq_usage_delta(run_dir):
    """Each tenant's metered usage during the loaded run (after - before), or None."""
    b = load_opt(os.path.join(run_dir, "tq_usage_before.json"))
    a = load_opt(os.path.join(run_dir, "tq_usage_after.json"))
    if a is None or b is None:
        return None
    zero = {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    return {t: {k: a[t][k] - b.get(t, zero)[k] for k in zero} for t in a}


def tq_run(path):
    """One tenant's run of experiment 15: admitted, refused, tokens, TTFT."""
    r = load(path)
    g = r.get("generation") or {}
    tokens, ok = gen_tokens(path)
    status = r.get("status") or {}
    return {
        "rate": (r.get("config") or {}).get("rate"),
        "requests_ok": ok,
        "requests_refused": r.get("requests_refused"),
        "status": status,
        "errors": {k: v for k, v in (r.get("errors") or {}).items() if v},
        "tokens": tokens,
        "tokens_per_s": tokens / r["duration_s"] if r.get("duration_s") else None,
        "prompt_tokens": g.get("prompt_tokens"),
        "completion_tokens": g.get("completion_tokens"),
        "finish": g.get("finish"),
        "ttft_us": g.get("ttft_us"),
        "tpot_us": g.get("tpot_us"),
        # only 200s (streams) and 429s (the quota) are expected
        "valid": not any(v for k, v in status.items() if k not in ("200", "429")) and
        not any((r.get("errors") or {}).values()) and bool(ok),
    }


def assemble_token_fairness(run_dir):
    for kind in ("skipped", "failed"):
        p = os.path.join(run_dir, "tq." + kind)
        if os.path.exists(p):
            return {("skipped" if kind == "skipped" else "error"): open(p).read().strip()}
    setup = load_opt(os.path.join(run_dir, "tq_setup.json"))
    paths = {k: os.path.join(run_dir, "tq_%s.json" % k)
             for k in ("capacity_short", "capacity_long", "alone_short", "loaded_short",
                       "loaded_long")}
    if not setup or not all(os.path.exists(p) for p in paths.values()):
        return {"error": "not measured"}
    runs = {k: tq_run(p) for k, p in paths.items()}
    usage = tq_usage_delta(run_dir)
    served = ({side: (usage.get("tenant-" + side) or {}).get("total_tokens") or 0
               for side in ("short", "long")} if usage else None)
    cs, cl = runs["capacity_short"]["tokens"], runs["capacity_long"]["tokens"]
    ls, ll = runs["loaded_short"]["tokens"], runs["loaded_long"]["tokens"]
    alone_p99 = (runs["alone_short"]["ttft_us"] or {}).get("p99")
    loaded_p99 = (runs["loaded_short"]["ttft_us"] or {}).get("p99")
    return {
        "setup": setup,
        "runs": runs,
        # the server's metering (GET /v2/usage) over the loaded run
        "usage": usage,
        "fairness": (ratio(min(served.values()), max(served.values()))
                     if served and all(served.values()) else None),
        # the responses' usage, the load generators' windows
        "client_fairness": ratio(min(ls, ll), max(ls, ll)),
        # informative: the same two prompts without quotas (the capacity run)
        "unlimited_fairness": ratio(min(cs, cl), max(cs, cl)),
        "ttft_p99_alone_us": alone_p99,
        "ttft_p99_loaded_us": loaded_p99,
        "ttft_ratio": ratio(loaded_p99, alone_p99),
        "valid": all(r["valid"] for r in runs.values()),
    }


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


def tq_notes(t, notes):
    if t.get("skipped") or t.get("error"):
        for name in ("token_fairness", "token_ttft"):
            notes[name] = "%s: %s" % ("skipped" if t.get("skipped") else "not measured",
                                      t.get("skipped") or t.get("error"))
        return
    u, st = t["usage"] or {}, t["setup"]
    notes["token_fairness"] = ("metered tokens: tenant-short %s, tenant-long %s (%s total "
                               "tokens per minute each); without quotas the same prompts "
                               "share %s" % (
                                   fmt((u.get("tenant-short") or {}).get("total_tokens"), "%d"),
                                   fmt((u.get("tenant-long") or {}).get("total_tokens"), "%d"),
                                   st.get("limit_per_minute"),
                                   fmt(t["unlimited_fairness"], "%.3f")))
    notes["token_ttft"] = "TTFT p99 %s vs %s µs alone; p50 %s vs %s µs" % (
        fmt(t["ttft_p99_loaded_us"]), fmt(t["ttft_p99_alone_us"]),
        fmt((t["runs"]["loaded_short"]["ttft_us"] or {}).get("p50")),
        fmt((t["runs"]["alone_short"]["ttft_us"] or {}).get("p50")))


def md_token_fairness(t):
    out = []
    w = out.append
    w("### 15. Token fairness: two tenants with equal token quotas, short vs long prompts")
    w("")
    if t.get("skipped") or t.get("error"):
        w("%s: %s" % ("Skipped" if t.get("skipped") else "Not measured",
                      t.get("skipped") or t.get("error")))
        w("")
        return out
    st, r = t["setup"], t["runs"]
    w("`models/kjv`, greedy, `max_tokens` %s, streamed `/v1/completions` (`inferd bench "
      "--openai`). tenant-short sends a %s-token prompt, tenant-long a %s-token one (the issue's "
      "case is 20 vs 2,000 tokens; kjv's context is 256 tokens, so 10× instead of 100×). "
      "Capacity: a server without quotas, both prompts at once, %s streams each, closed loop: "
      "**%s tokens/s** (prompt + completion). Quota: `token-quotas: [{tenant: \"*\", model: kjv, "
      "per-minute: {total: %s}}]`, %s of the capacity for each tenant; each offers %s× its "
      "quota (open loop: %s and %s req/s at its reservation of prompt + max_tokens), %s "
      "connections each. The buckets are drained before each run (they start with a minute of "
      "tokens). Alone: tenant-short by itself; loaded: both at once; %s s each after %s s of "
      "warm-up." % (
          st.get("max_tokens"), st.get("prompt_short"), st.get("prompt_long"),
          st.get("cap_streams", "?"), fmt(st.get("capacity_tokens_per_s")),
          st.get("limit_per_minute"), pct(st.get("share")), fmt(st.get("offer"), "%g"),
          fmt(st.get("rate_short"), "%g"), fmt(st.get("rate_long"), "%g"),
          st.get("connections", "?"), fmt(st.get("duration_s"), "%g"),
          fmt(st.get("warmup_s"), "%g")))
    w("")
    w("| run | offered req/s | ok | refused (429) | tokens (window) | tokens/s | TTFT p50 / p99 "
      "µs | TPOT p50 µs | finish stop / length |")
    w("|---|---|---|---|---|---|---|---|---|")
    for key, name in (("capacity_short", "no quotas, short prompts"),
                      ("capacity_long", "no quotas, long prompts"),
                      ("alone_short", "tenant-short alone"),
                      ("loaded_short", "loaded, tenant-short"),
                      ("loaded_long", "loaded, tenant-long")):
        x = r[key]
        tt, fin = x["ttft_us"] or {}, x["finish"] or {}
        w("| %s | %s | %s | %s | %s | %s | %s / %s | %s | %s / %s |" % (
            name, fmt(x["rate"], "%g", "closed loop"), fmt(x["requests_ok"], "%d"),
            fmt(x["requests_refused"], "%d"), fmt(x["tokens"], "%d"), fmt(x["tokens_per_s"]),
            fmt(tt.get("p50")), fmt(tt.get("p99")), fmt((x["tpot_us"] or {}).get("p50")),
            fmt(fin.get("stop"), "%d"), fmt(fin.get("length"), "%d")))
    w("")
    u = t["usage"] or {}
    us, ul = u.get("tenant-short") or {}, u.get("tenant-long") or {}
    w("Metered by the server during the loaded run (`GET /v2/usage`, before and after): "
      "tenant-short %s calls, %s prompt + %s completion = %s tokens; tenant-long %s "
      "calls, %s + %s = %s tokens. **Lower ÷ higher = %s** (target ≥ 0.90: equal quotas give "
      "equal tokens, whatever the prompt length); the responses' usage in the windows gives "
      "%s. Without quotas (the capacity run) the same two prompts shared %s. **tenant-short's "
      "TTFT p99 loaded ÷ alone = %s** (%s vs %s µs; target ≤ 2)." % (
          fmt(us.get("requests"), "%d"), fmt(us.get("prompt_tokens"), "%d"),
          fmt(us.get("completion_tokens"), "%d"), fmt(us.get("total_tokens"), "%d"),
          fmt(ul.get("requests"), "%d"), fmt(ul.get("prompt_tokens"), "%d"),
          fmt(ul.get("completion_tokens"), "%d"), fmt(ul.get("total_tokens"), "%d"),
          fmt(t["fairness"], "%.3f"), fmt(t["client_fairness"], "%.3f"),
          fmt(t["unlimited_fairness"], "%.3f"), fmt(t["ttft_ratio"], "%.2f"),
          fmt(t["ttft_p99_loaded_us"]), fmt(t["ttft_p99_alone_us"])))
    if not t["valid"]:
        w("")
        w("**Some requests failed** (other than 429): %s." % "; ".join(
            "%s: statuses %s, errors %s" % (k, x["status"], x["errors"] or "none")
            for k, x in r.items() if not x["valid"]))
    w("")
    return out


def cmd_assemble(args):
    run_dir, out = args
    env = os.environ
    meta = load(os.path.join(run_dir, "meta.json"))
    exps = {
        "http_floor": assemble_http(run_dir),
        "compute_floor": {m: assemble_compute_model(run_dir, m) for m in ("mlp", "digits")},
        "latency": assemble_latency(run_dir),
        "json_decode": assemble_json_decode(run_dir),
        "memory": assemble_memory(run_dir),
        "grpc": assemble_grpc(run_dir),
        "observability": assemble_obs(run_dir),
        "shared_memory": assemble_shm(run_dir),
        "node": assemble_node(run_dir),
        "shadow": assemble_shadow(run_dir),
        "overload": assemble_overload(run_dir),
        "generation": assemble_generation(run_dir),
        "preprocessing": assemble_prep(run_dir),
        "http3": assemble_http3(run_dir),
        "token_fairness": assemble_token_fairness(run_dir),
    }
    ov = exps["overload"]
    ov_lim, ov_ten = ov.get("limiter") or {}, ov.get("tenants") or {}
    lat = exps["latency"]
    http = exps["http_floor"]
    if lat.get("rate") and http.get("inferd"):
        lat["max_rps"] = http["inferd"]["rps"]
    mlp = exps["compute_floor"].get("mlp") or {}
    mem = exps["memory"]
    targets = [
        target("http_floor", http.get("ratio")),
        target("compute_floor", mlp.get("ratio")),
        target("latency_p99", lat.get("p99_us")),
        target("json_decode", exps["json_decode"].get("speedup")),
        target("allocations", mem.get("allocations_per_request")),
        target("rss_growth", mem.get("rss_growth_pct")),
        target("obs_overhead", exps["observability"].get("ratio")),
        target("node_ratio", exps["node"].get("ratio")),
        target("node_p99", exps["node"].get("p99_ratio")),
        target("shadow_p99", exps["shadow"].get("ratio")),
        target("overload_throughput", ov_lim.get("throughput_ratio")),
        target("overload_p99", ov_lim.get("p99_ratio")),
        target("overload_refusal_p99", (ov_lim.get("overload") or {}).get("refused_p99_us")),
        target("tenant_fairness", ov_ten.get("fairness")),
        target("gen_single_stream", exps["generation"].get("single_stream_ratio")),
        target("gen_batching", exps["generation"].get("batching_ratio")),
        target("prep_speedup", (exps["preprocessing"].get("plain") or {}).get("ratio")),
        target("token_fairness", exps["token_fairness"].get("fairness")),
        target("token_ttft", exps["token_fairness"].get("ttft_ratio")),
    ]
    doc = {
        "schema": 1,
        "date": meta["date"],
        "mode": meta["mode"],
        "git_commit": meta.get("git_commit"),
        "git_dirty": meta.get("git_dirty"),
        "machine": {
            "cpu_model": cpu_model(),
            "cpus": len(os.sched_getaffinity(0)),
            "kernel": platform.release(),
            "loadavg_at_start": meta.get("loadavg_at_start"),
            "loadavg_at_end": open("/proc/loadavg").read().split()[:3],
        },
        "cores": meta["cores"],
        "priority": meta.get("priority"),
        "config": meta["config"],
        "elapsed_s": meta.get("elapsed_s") or (float(env["BENCH_ELAPSED"])
                                               if env.get("BENCH_ELAPSED") else None),
        "experiments": exps,
        "targets": targets,
        "note": NOTE,
    }
    with open(out, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")


# ---- markdown ---------------------------------------------------------------

def fmt(v, spec="%.0f", none="—"):
    if v is None:
        return none
    return spec % v


def met(m):
    return {True: "met", False: "**missed**", None: "not measured"}[m]


def pct(v):
    return "—" if v is None else "%.0f %%" % (100 * v)


def best_round(rs):
    return max(rs, key=lambda r: r["rps"] or 0)


def describe_failures(r):
    parts = ["%s× HTTP %s" % (n, st) for st, n in sorted(r["non_200"].items())]
    parts += ["%s× %s" % (n, k) for k, n in sorted(r["errors"].items())]
    return ", ".join(parts) or "no failures"


def fmt_bytes(b):
    return "—" if b is None else "%.1f MiB" % (b / 1048576.0)


def target_notes(doc):
    """One line of context per target, from the same run."""
    e = doc["experiments"]
    notes = {}
    h = e["http_floor"]
    if h.get("inferd"):
        notes["http_floor"] = "%s vs %s req/s" % (fmt(h["inferd"]["rps"]), fmt(h["nginx"]["rps"]))
    mlp = e["compute_floor"].get("mlp")
    if mlp:
        notes["compute_floor"] = "%s vs %s inferences/s (in process at batch %d)" % (
            fmt(mlp["inferd"]["inferences_per_s"]), fmt(mlp["in_process"]["inferences_per_s"]),
            mlp["in_process"]["best_batch"])
    lat = e["latency"]
    ref = lat.get("nginx_same_rate")
    if ref and ref.get("latency_us"):
        notes["latency_p99"] = "p50 %s µs; nginx at the same rate: p50 %s µs, p99 %s µs" % (
            fmt((lat.get("latency_us") or {}).get("p50")), fmt(ref["latency_us"].get("p50")),
            fmt(ref["latency_us"].get("p99")))
    j = e["json_decode"]
    if j.get("figures", {}).get("inferd_us"):
        notes["json_decode"] = "%.2f vs %.2f µs per request" % (j["figures"]["inferd_us"],
                                                              j["figures"]["cjson_us"])
    mem = e["memory"]
    if mem.get("requests") is not None:
        notes["allocations"] = "%d allocations in %d requests" % (mem["allocations"],
                                                                  mem["requests"])
        notes["rss_growth"] = "%s → %s over %d requests" % (
            fmt_bytes(mem["warm_rss_bytes"]), fmt_bytes(mem["final_rss_bytes"]),
            mem["requests"])
    ob = e.get("observability") or {}
    if ob.get("on"):
        notes["obs_overhead"] = "%s vs %s req/s" % (fmt(ob["on"]["rps"]), fmt(ob["off"]["rps"]))
    nd = e.get("node") or {}
    if nd.get("skipped"):
        notes["node_ratio"] = notes["node_p99"] = "skipped: %s" % nd["skipped"]
    elif nd.get("node"):
        notes["node_ratio"] = "%s vs %s req/s" % (fmt(nd["inferd"]["rps"]), fmt(nd["node"]["rps"]))
        notes["node_p99"] = "p99 %s vs %s µs (inferd lower: %s); p50 %s vs %s µs" % (
            fmt(nd["inferd_p99_us"]), fmt(nd["node_p99_us"]),
            {True: "yes", False: "no", None: "—"}[
                None if nd["p99_ratio"] is None else nd["p99_ratio"] < 1.0],
            fmt(nd["inferd_p50_us"]), fmt(nd["node_p50_us"]))
    sh = e.get("shadow") or {}
    if sh.get("skipped"):
        notes["shadow_p99"] = "skipped: %s" % sh["skipped"]
    elif sh.get("on"):
        c = sh.get("shadow") or {}
        notes["shadow_p99"] = ("p99 %s vs %s µs (%s added) at %s req/s; copies compared %s, "
                               "dropped %s" % (
                                   fmt(sh["on"]["p99_us"]), fmt(sh["off"]["p99_us"]),
                                   fmt(sh.get("p99_added_pct"), "%+.1f %%"), fmt(sh.get("rate")),
                                   pct(c.get("compared_share")), pct(c.get("dropped_share"))))
    ov = e.get("overload") or {}
    lim, ten = ov.get("limiter") or {}, ov.get("tenants") or {}
    for name in ("overload_throughput", "overload_p99", "overload_refusal_p99"):
        if lim.get("skipped") or lim.get("error"):
            notes[name] = "%s: %s" % ("skipped" if lim.get("skipped") else "not measured",
                                      lim.get("skipped") or lim.get("error"))
    if lim.get("overload"):
        o, u = lim["overload"], lim["unloaded"]
        notes["overload_throughput"] = "%s admitted vs %s req/s capacity; %s of the offered " \
            "%s req/s refused" % (fmt(o["rps_ok"]), fmt(ov["capacity"]["rps"]),
                                  pct(o["refused_share"]), fmt((ov.get("setup") or {}).get(
                                      "overload_rate")))
        notes["overload_p99"] = "p99 %s µs at 3x vs %s µs at 10%% load" % (fmt(o["p99_us"]),
                                                                          fmt(u["p99_us"]))
        notes["overload_refusal_p99"] = ("the limiter's 503s, from the scheduled send time; "
                                         "p50 %s µs" % fmt(median(
                                             (r["latency_us_refused"] or {}).get("p50")
                                             for r in o["rounds"])))
    if ten.get("skipped") or ten.get("error"):
        notes["tenant_fairness"] = "%s: %s" % ("skipped" if ten.get("skipped") else
                                               "not measured", ten.get("skipped") or ten["error"])
    elif ten.get("a"):
        notes["tenant_fairness"] = ("admitted by the server: A (offers 3x its limit) %s, B "
                                    "(offers its limit) %s calls; load generators: A %s req/s "
                                    "= %s of its limit, B %s req/s = %s" % (
                                        fmt(ten["a"]["server_admitted"], "%d"),
                                        fmt(ten["b"]["server_admitted"], "%d"),
                                        fmt(ten["a"]["rps_ok"]), pct(ten["a"]["share"]),
                                        fmt(ten["b"]["rps_ok"]), pct(ten["b"]["share"])))
    gen_notes(e.get("generation") or {"error": "no generation row in this results file"}, notes)
    prep_notes(e.get("preprocessing") or {"error": "no preprocessing row in this results file"},
               notes)
    tq_notes(e.get("token_fairness") or {"error": "no token fairness row in this results file"},
             notes)
    for t in doc["targets"]:
        if t.get("why"):
            notes[t["name"]] = "**%s** — %s" % (t["why"], notes.get(t["name"], ""))
    return notes


def md_run(doc):
    out = []
    e = doc["experiments"]
    cfg = doc["config"]
    cores = doc["cores"]
    w = out.append
    w("## Latest run: %s (%s mode)" % (doc["date"], doc["mode"]))
    w("")
    w("| | |")
    w("|---|---|")
    w("| date | %s |" % doc["date"])
    w("| git commit | `%s`%s |" % ((doc.get("git_commit") or "?")[:12],
                                  " (with uncommitted changes)" if doc.get("git_dirty") else ""))
    w("| CPU | %s (%d CPUs usable) |" % (doc["machine"]["cpu_model"], doc["machine"]["cpus"]))
    w("| kernel | %s |" % doc["machine"]["kernel"])
    w("| load average at start / end | %s / %s |" % (
        " ".join(doc["machine"].get("loadavg_at_start") or []),
        " ".join(doc["machine"].get("loadavg_at_end") or [])))
    w("| server cores | `taskset -c %s` (inferd: %s I/O thread(s), ONNX Runtime intra-op %s; "
      "nginx: %s worker(s)) |" % (cores["server"], cfg["io_threads"], cfg["intra_op_threads"],
                                   cfg["io_threads"]))
    w("| load-generator cores | `taskset -c %s` (`inferd bench --threads %s`) |"
      % (cores["client"], cfg["client_threads"]))
    w("| scheduling priority | %s |" % (doc.get("priority") or "?"))
    w("| run length | %s s measured per run after %s s warm-up, best of %s round(s); whole "
      "run (without the build) took %s s |" % (cfg["duration_s"], cfg["warmup_s"], cfg["rounds"],
                                    fmt(doc.get("elapsed_s"))))
    w("| results file | `bench/results/%s` |" % doc.get("_file", "?"))
    w("")
    w("> " + doc["note"])
    if doc["mode"] == "quick":
        w(">")
        w("> **QUICK=1 run**: ~%s s runs and a memory run of at most %s requests — a smoke test "
          "of the harness, noisier than a full run." % (cfg["duration_s"],
                                                         cfg["memory_requests"]))
    w("")
    w("### Targets (reported, never asserted)")
    w("")
    notes = target_notes(doc)
    w("| figure | measured | target | | note |")
    w("|---|---|---|---|---|")
    for t in doc["targets"]:
        v = t["value"]
        if t["name"] in ("http_floor", "compute_floor", "obs_overhead"):
            s = fmt(v, "%.3f")
        elif t["name"] in ("latency_p99", "overload_refusal_p99"):
            s = fmt(v, "%.0f µs")
        elif t["name"] in ("json_decode", "node_ratio", "gen_batching", "prep_speedup"):
            s = fmt(v, "%.2f×")
        elif t["name"] in ("node_p99", "shadow_p99", "overload_throughput", "overload_p99",
                           "tenant_fairness", "gen_single_stream", "token_fairness",
                           "token_ttft"):
            s = fmt(v, "%.3f")
        elif t["name"] == "allocations":
            s = fmt(v, "%.4g")
        else:
            s = fmt(v, "%+.2f %%")
        w("| %s | %s | %s | %s | %s |" % (t["what"], s, t["target"], met(t["met"]),
                                          notes.get(t["name"], "")))
    w("")

    h = e["http_floor"]
    w("### 1. HTTP floor: `simple` over JSON vs nginx returning the same body")
    w("")
    if h.get("error"):
        w("Not measured: %s" % h["error"])
    else:
        w("Closed loop, %s connections, %s requests in flight, the same request bytes "
          "(`POST /v2/models/simple/infer`, %s-byte JSON body) and the same %s-byte response "
          "body from both." % (cfg["http_connections"], cfg["http_connections"],
                               cfg.get("simple_request_bytes", "?"),
                               cfg.get("simple_response_bytes", "?")))
        w("")
        w("| server | req/s (best) | rounds (req/s) | p50 µs | p99 µs | server CPU | "
          "load-generator CPU | server context switches per request |")
        w("|---|---|---|---|---|---|---|---|")
        for name in ("nginx", "inferd"):
            x = h[name]
            b = best_round(x["rounds"])
            lat = b["latency_us"] or {}
            w("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                name, fmt(x["rps"]), ", ".join(fmt(r["rps"]) for r in x["rounds"]),
                fmt(lat.get("p50")), fmt(lat.get("p99")), pct(b.get("server_cpu_util")),
                pct(b.get("client_cpu_util")), fmt(b.get("server_ctxsw_per_request"), "%.2f")))
        w("")
        w("CPU: share of one core used over the whole load run (best round); a side near "
          "100 % was the bottleneck. Context switches: all server threads, per response.")
        w("")
        w("**inferd ÷ nginx = %s** (target ≥ 0.8)" % fmt(h["ratio"], "%.3f"))
        if not h["valid"]:
            w("")
            w("**Some requests failed** — nginx: %s; inferd: %s. Only 200s count." % (
                "; ".join(describe_failures(r) for r in h["nginx"]["rounds"]),
                "; ".join(describe_failures(r) for r in h["inferd"]["rounds"])))
    w("")

    c = e["compute_floor"]
    w("### 2. Compute floor: in-process ONNX Runtime vs inferd over HTTP (binary tensors)")
    w("")
    w("In process: `bench/ort_floor` runs the model with ONNX Runtime's C API at each batch "
      "size; its best is the floor. inferd: batch-1 requests with the binary tensor extension, "
      "%s connections in flight, batched by inferd's dynamic batcher." % cfg["compute_connections"])
    w("")
    w("| model | in-process best (batch) | inferd inferences/s | inferd ÷ in-process | "
      "target | inferd p50 / p99 µs | server CPU | load-generator CPU | "
      "server context switches per request |")
    w("|---|---|---|---|---|---|---|---|---|")
    for m in ("mlp", "digits"):
        x = c.get(m)
        if not x:
            w("| %s | not measured | | | | | | | |" % m)
            continue
        b = best_round(x["inferd"]["rounds"])
        lat = b["latency_us"] or {}
        w("| %s | %s (%d) | %s | **%s** | %s | %s / %s | %s | %s | %s |" % (
            m, fmt(x["in_process"]["inferences_per_s"]), x["in_process"]["best_batch"],
            fmt(x["inferd"]["inferences_per_s"]), fmt(x["ratio"], "%.3f"),
            "≥ 0.85" if m == "mlp" else "informative (HTTP-bound)",
            fmt(lat.get("p50")), fmt(lat.get("p99")), pct(b.get("server_cpu_util")),
            pct(b.get("client_cpu_util")), fmt(b.get("server_ctxsw_per_request"), "%.2f")))
    for m in ("mlp", "digits"):
        x = c.get(m)
        if x and not x["valid"]:
            w("")
            w("**%s: inferd answered errors** — %s; only 200s count." % (
                m, "; ".join(describe_failures(r) for r in x["inferd"]["rounds"])))
    w("")
    for m in ("mlp", "digits"):
        x = c.get(m)
        if not x:
            continue
        w("In-process inferences/s by batch size, %s: %s." % (m, ", ".join(
            "%d → %s" % (p["batch"], fmt(p["inferences_per_s"]))
            for p in x["in_process"]["per_batch"])))
        w("")

    lat = e["latency"]
    w("### 3. Latency of `simple` at 50% of inferd's maximum rate (open loop)")
    w("")
    if lat.get("error"):
        w("Not measured: %s" % lat["error"])
    else:
        lu = lat["latency_us"] or {}
        w("Rate %s req/s (maximum measured in experiment 1: %s req/s), %s connections, "
          "latency from the scheduled send time." % (fmt(lat["rate"]), fmt(lat.get("max_rps")),
                                                     cfg["http_connections"]))
        w("")
        w("| server | achieved req/s | p50 µs | p90 µs | p99 µs | p99.9 µs | max µs | "
          "server CPU | server context switches per request |")
        w("|---|---|---|---|---|---|---|---|---|")
        w("| inferd | %s | %s | %s | **%s** | %s | %s | %s | %s |" % (
            fmt(lat["achieved_rps"]), fmt(lu.get("p50")), fmt(lu.get("p90")),
            fmt(lu.get("p99")), fmt(lu.get("p999")), fmt(lu.get("max")),
            pct(lat["run"].get("server_cpu_util")),
            fmt(lat["run"].get("server_ctxsw_per_request"), "%.2f")))
        ref = lat.get("nginx_same_rate")
        if ref:
            ru = ref["latency_us"] or {}
            w("| nginx, same rate (reference) | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                fmt(ref["rps"]), fmt(ru.get("p50")), fmt(ru.get("p90")), fmt(ru.get("p99")),
                fmt(ru.get("p999")), fmt(ru.get("max")), pct(ref.get("server_cpu_util")),
                fmt(ref.get("server_ctxsw_per_request"), "%.2f")))
            w("")
            w("The nginx row shows what the machine and the load generator alone add to the "
              "tail at this rate.")
        if not lat["valid"]:
            w("")
            w("**Some requests failed**: %s." % describe_failures(lat["run"]))
    w("")

    j = e["json_decode"]
    w("### 4. JSON decode: inferd's decoder vs cJSON, the same 784-float request")
    w("")
    if j.get("error") and j.get("speedup") is None:
        w("Not measured: %s" % j["error"])
    else:
        labels = [
            ("request_bytes", "request size", "%.0f bytes"),
            ("cjson_us", "cJSON (parse the tree, walk to the data, convert)", "%.2f µs/request"),
            ("tree_us", "inferd's reader building the whole tree", "%.2f µs/request"),
            ("inferd_us", "**inferd's decoder** (data array parsed straight into floats)",
             "%.2f µs/request"),
            ("strtof_us", "a bare strtof loop over the numbers, no JSON", "%.2f µs/request"),
            ("format_numfmt_ns_per_float", "encode: inferd's numfmt_f32", "%.1f ns/float"),
            ("format_snprintf_ns_per_float", "encode: snprintf(\"%.9g\")", "%.1f ns/float"),
        ]
        w("| path | time |")
        w("|---|---|")
        for k, label, spec in labels:
            if k in j["figures"]:
                w("| %s | %s |" % (label, spec % j["figures"][k]))
        w("")
        w("**speed-up %s×** (target ≥ 5×)" % fmt(j["speedup"], "%.2f"))
    w("")

    mem = e["memory"]
    w("### 5. Memory: `simple` over JSON, counters from SIGUSR1")
    w("")
    if mem.get("error"):
        w("Not measured: %s" % mem["error"])
    else:
        w("| idle RSS | RSS after warm-up (%s requests) | RSS after %s more requests | change | "
          "allocations | allocations per request |" % (mem["warmup_requests"], mem["requests"]))
        w("|---|---|---|---|---|---|")
        w("| %s | %s | %s | %s | %s | **%s** |" % (
            fmt_bytes(mem["idle_rss_bytes"]), fmt_bytes(mem["warm_rss_bytes"]),
            fmt_bytes(mem["final_rss_bytes"]), fmt(mem["rss_growth_pct"], "%+.2f %%"),
            mem["allocations"], fmt(mem["allocations_per_request"], "%.4g")))
        if mem["requests"] < 1000000:
            w("")
            w("The run is time-bounded (%s s): it served %d requests, fewer than the 1M the "
              "target speaks of." % (cfg.get("memory_duration_s"), mem["requests"]))
        w("")
        w("`allocations` counts inferd's own allocator (ONNX Runtime's allocations are not "
          "included); RSS is the whole process.")
    w("")

    gr = e.get("grpc") or {"error": "not measured"}
    w("### 6. gRPC vs REST with binary tensors: `digits`, the same server")
    w("")
    if gr.get("error"):
        w("Not measured: %s" % gr["error"])
    else:
        w("h2load over HTTP/2, %s streams in flight, batch-1 requests: gRPC `ModelInfer` "
          "(pre-serialized ModelInferRequest, raw_input_contents) on the gRPC port vs REST "
          "with binary tensor data (prior-knowledge HTTP/2) on the HTTP port. h2load counts "
          "HTTP statuses only; grpcio checked grpc-status 0 for the same message first." %
          cfg["compute_connections"])
        w("")
        w("| protocol | req/s (best) | rounds (req/s) | mean latency µs | max latency µs |")
        w("|---|---|---|---|---|")
        for name, key in (("gRPC", "grpc"), ("REST binary", "rest")):
            x = gr[key]
            b = best_round(x["rounds"])
            lu = b.get("latency_us") or {}
            w("| %s | %s | %s | %s | %s |" % (
                name, fmt(x["rps"]), ", ".join(fmt(q["rps"]) for q in x["rounds"]),
                fmt(lu.get("mean")), fmt(lu.get("max"))))
        w("")
        w("**gRPC ÷ REST binary = %s** (informative)" % fmt(gr["ratio"], "%.3f"))
        if not gr["valid"]:
            w("")
            w("**Some requests failed** — gRPC: %s; REST: %s." % (
                "; ".join(describe_failures(q) for q in gr["grpc"]["rounds"]),
                "; ".join(describe_failures(q) for q in gr["rest"]["rounds"])))
    w("")
    ob = e.get("observability") or {}
    w("### 7. Observability overhead: `simple`, everything on vs everything off")
    w("")
    if ob.get("error") or not ob:
        w("Not measured: %s" % (ob.get("error") or "no data"))
    else:
        w("Two servers on the same cores, loaded in turn (closed loop, as experiment 1): "
          "`--no-metrics` and nothing else, vs metrics + `--access-log FILE` + "
          "`--trace-rate 0.1` exporting to a local OTLP sink.")
        w("")
        w("| configuration | req/s (best) | rounds (req/s) |")
        w("|---|---|---|")
        for name, key in (("all off", "off"), ("metrics + access log + 10% traces", "on")):
            w("| %s | %s | %s |" % (name, fmt(ob[key]["rps"]),
                                   ", ".join(fmt(q["rps"]) for q in ob[key]["rounds"])))
        w("")
        w("**on ÷ off = %s** (target ≥ 0.95)" % fmt(ob["ratio"], "%.3f"))
    w("")
    sm = e.get("shared_memory") or {"error": "not measured"}
    w("### 8. System shared memory vs binary tensor data: `identity_fp32`, 1 MiB in and out")
    w("")
    if sm.get("error"):
        w("Not measured: %s" % sm["error"])
    else:
        w("The same server, loaded in turn (closed loop, %s requests in flight): a [1, 262144] "
          "FP32 input sent as binary tensor data with its output returned as binary data, vs "
          "input and output in two registered regions of one shared-memory object (the "
          "request is a small JSON body; the input is read in place, the output written into "
          "its region)." % cfg.get("shm_connections", 16))
        w("")
        w("| transport | req/s (best) | rounds (req/s) | p50 µs | p99 µs | server CPU | "
          "load-generator CPU |")
        w("|---|---|---|---|---|---|---|")
        for name, key in (("binary tensor data", "binary"), ("system shared memory", "shm")):
            x = sm[key]
            b = best_round(x["rounds"])
            lu = b.get("latency_us") or {}
            w("| %s | %s | %s | %s | %s | %s | %s |" % (
                name, fmt(x["rps"]), ", ".join(fmt(q["rps"]) for q in x["rounds"]),
                fmt(lu.get("p50")), fmt(lu.get("p99")), pct(b.get("server_cpu_util")),
                pct(b.get("client_cpu_util"))))
        w("")
        w("**shared memory ÷ binary = %s** (informative)" % fmt(sm["ratio"], "%.3f"))
        if not sm["valid"]:
            w("")
            w("**Some requests failed** — binary: %s; shared memory: %s." % (
                "; ".join(describe_failures(q) for q in sm["binary"]["rounds"]),
                "; ".join(describe_failures(q) for q in sm["shm"]["rounds"])))
    w("")
    out += md_node(e.get("node") or {"error": "no Node.js row in this results file"}, cfg)
    out += md_shadow(e.get("shadow") or {"error": "no shadow row in this results file"}, cfg)
    out += md_overload(e.get("overload") or {"error": "no overload row in this results file"})
    out += md_generation(e.get("generation") or {"error": "no generation row in this results file"})
    out += md_prep(e.get("preprocessing") or {"error": "no preprocessing row in this results file"},
                   cores)
    out += md_http3(e.get("http3") or {"error": "no HTTP/3 row in this results file"})
    out += md_token_fairness(e.get("token_fairness") or
                             {"error": "no token fairness row in this results file"})
    return out


def md_shadow(sh, cfg):
    out = []
    w = out.append
    w("### 10. Shadow traffic: `digits` version 1 at 50% load, no shadow vs 100% shadowed "
      "to version 2")
    w("")
    if sh.get("skipped"):
        w("Skipped: %s" % sh["skipped"])
    elif sh.get("error"):
        w("Not measured: %s" % sh["error"])
    else:
        w("One server with `digits` versions 1 and 2 (`version_policy: { all: {} }`). Maximum "
          "rate of version 1 (`/versions/1/infer`, no routing table, closed loop, %s in "
          "flight): %s req/s (rounds: %s). Then open loop at %s req/s (50%%) on "
          "`/v2/models/digits/infer`, %s connections, `models/digits/sample.json` as binary "
          "tensor data, alternating: routing `{\"default_version\": 1}` vs the same plus "
          "`\"shadow\": {\"version\": 2, \"percent\": 100}`. Latency from the scheduled "
          "send time; p50/p99 are the medians over the rounds." % (
              cfg.get("shadow_connections", "?"), fmt(sh.get("max_rps")),
              ", ".join(fmt(q["rps"]) for q in sh.get("max_rounds") or []), fmt(sh.get("rate")),
              cfg.get("shadow_connections", "?")))
        w("")
        w("| configuration | achieved req/s | p50 µs | p99 µs | rounds: p99 µs | server CPU | "
          "copies compared | copies dropped |")
        w("|---|---|---|---|---|---|---|---|")
        for name, key in (("no shadow", "off"), ("100% shadow to version 2", "on")):
            x = sh[key]
            per = [d for d in x.get("shadow") or [] if d]
            cmp_ = sum(d["compared"] for d in per) if per else None
            drp = sum(d["dropped"] for d in per) if per else None
            cpu = [q.get("server_cpu_util") for q in x["rounds"]
                   if q.get("server_cpu_util") is not None]
            w("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                name, ", ".join(fmt(q["rps"]) for q in x["rounds"]), fmt(x.get("p50_us")),
                fmt(x.get("p99_us")), ", ".join(fmt((q["latency_us"] or {}).get("p99"))
                                               for q in x["rounds"]),
                pct(sum(cpu) / len(cpu) if cpu else None), fmt(cmp_, "%d"), fmt(drp, "%d")))
        w("")
        c = sh.get("shadow") or {}
        w("**p99 shadow ÷ no shadow = %s** (%s added; target ≤ 1.05); p50 ratio %s." % (
            fmt(sh["ratio"], "%.3f"), fmt(sh.get("p99_added_pct"), "%+.1f %%"),
            fmt(sh.get("p50_ratio"), "%.3f")))
        w("")
        if c:
            w("Shadow copies (metrics port, over the shadowed runs, warm-up included): %s "
              "primary requests served by version 1, **%s compared (%s)**, %s dropped (%s)%s%s."
              % (c["primaries"], c["compared"], pct(c["compared_share"]), c["dropped"],
                 pct(c["dropped_share"]),
                 ": " + ", ".join("%s %d" % kv for kv in sorted(c["dropped_by_reason"].items()))
                 if c["dropped"] else "",
                 "; %d not accounted for 3 s after the run" % c["unaccounted"]
                 if c["unaccounted"] else ""))
            w("")
            w("Copies run only on CPU time no client request wants (`shadow-N` threads at "
              "`SCHED_IDLE`) and are shed when 64 wait: the compared share is the capacity "
              "this machine had left at this load, with the load generator on the same "
              "cores. The p99 ratio is the cost to clients of the copies that did run.")
        else:
            w("No shadow counters were read.")
        if sh.get("off_copies"):
            w("")
            w("**The no-shadow runs made %d shadow copies** (the routing table was not "
              "applied)." % sh["off_copies"])
        if not sh["valid"]:
            w("")
            w("**Some requests failed** — no shadow: %s; shadow: %s." % (
                "; ".join(describe_failures(q) for q in sh["off"]["rounds"]),
                "; ".join(describe_failures(q) for q in sh["on"]["rounds"])))
    w("")
    return out


def md_admission_row(name, r):
    """A table row of an experiment 11 run: rates, latencies apart, CPU."""
    ok, ref = r.get("latency_us_ok") or {}, r.get("latency_us_refused") or {}
    return "| %s | %s | %s | %s / %s | %s | %s / %s | %s | %s |" % (
        name, fmt(r.get("rate")), fmt(r.get("rps_ok")), fmt(ok.get("p50")), fmt(ok.get("p99")),
        fmt(r.get("requests_refused"), "%d"), fmt(ref.get("p50")), fmt(ref.get("p99")),
        ", ".join("%s× %s" % (n, k) for k, n in sorted(r.get("errors", {}).items())) or "none",
        pct(r.get("server_cpu_util")))


ADMISSION_HEAD = ("| run | offered req/s | admitted req/s | admitted p50 / p99 µs | refused | "
                  "refused p50 / p99 µs | errors | server CPU |\n"
                  "|---|---|---|---|---|---|---|---|")


def md_overload(ov):
    out = []
    w = out.append
    w("### 11. Overload: `mlp` at 3x its capacity, concurrency limiter; two tenants with equal "
      "rate limits")
    w("")
    if ov.get("skipped") or ov.get("error"):
        w("%s: %s" % ("Skipped" if ov.get("skipped") else "Not measured",
                      ov.get("skipped") or ov.get("error")))
        w("")
        return out
    st = ov.get("setup") or {}
    cap = ov["capacity"]
    w("`bench/models/mlp`, %s samples per request (experiment 9's sample repeated, binary "
      "tensor data, %s bytes). Capacity: a server without a configuration file, closed loop, "
      "%s requests in flight: **%s req/s** (rounds: %s). Open-loop runs use %s connections; "
      "latency from the scheduled send time; admitted = 2xx, refused = 429 and 503 "
      "(`inferd bench`'s `latency_us_ok`, `latency_us_refused`)." % (
          st.get("batch", "?"), st.get("request_bytes", "?"), st.get("capacity_concurrency", "?"),
          fmt(cap["rps"]), ", ".join(fmt(r["rps_ok"]) for r in cap["rounds"]),
          st.get("connections", "?")))
    w("")
    lim = ov.get("limiter") or {}
    w("**Concurrency limiter** (`--config`: `concurrency: [{model: mlp, min: %s, max: %s, "
      "queue: false}]`), one server, alternating rounds at 10%% of capacity and at 3x:" % (
          st.get("floor", "?"), st.get("ceiling", "?")))
    w("")
    if lim.get("skipped") or lim.get("error"):
        w("%s: %s" % ("Skipped" if lim.get("skipped") else "Not measured",
                      lim.get("skipped") or lim.get("error")))
    else:
        w(ADMISSION_HEAD)
        for i, r in enumerate(lim["unloaded"]["rounds"]):
            w(md_admission_row("10%%, round %d" % (i + 1), r))
        for i, r in enumerate(lim["overload"]["rounds"]):
            w(md_admission_row("3x, round %d" % (i + 1), r))
        w("")
        o, u = lim["overload"], lim["unloaded"]
        w("**admitted ÷ capacity = %s** (best round; target ≥ 0.90); **admitted p99 at 3x ÷ p99 "
          "at 10%% = %s** (medians over rounds, %s vs %s µs; target ≤ 2); **refusal p99 %s µs** "
          "(median; target < 1 ms); %s of the offered requests refused." % (
              fmt(lim["throughput_ratio"], "%.3f"), fmt(lim["p99_ratio"], "%.2f"),
              fmt(o["p99_us"]), fmt(u["p99_us"]), fmt(o["refused_p99_us"]),
              pct(o["refused_share"])))
        if lim.get("metrics_after"):
            w("")
            w("Limiter metrics after the last run: %s." % ", ".join(
                "`%s` %s" % (k, fmt(v, "%g")) for k, v in sorted(lim["metrics_after"].items())))
    w("")
    ten = ov.get("tenants") or {}
    w("**Two tenants** (`auth` with one key each; `rate-limits: [{tenant: \"*\", rate: %s, "
      "burst: %s}]`, 45%% of capacity each), two load generators at once: tenant A offers %s "
      "req/s (3x its limit), tenant B %s req/s (its limit):" % (
          fmt(st.get("tenant_limit"), "%.1f"), st.get("tenant_burst", "?"),
          fmt(st.get("tenant_a_rate"), "%.1f"), fmt(st.get("tenant_limit"), "%.1f")))
    w("")
    if ten.get("skipped") or ten.get("error"):
        w("%s: %s" % ("Skipped" if ten.get("skipped") else "Not measured",
                      ten.get("skipped") or ten.get("error")))
    else:
        w(ADMISSION_HEAD)
        for key, name in (("a", "tenant A"), ("b", "tenant B")):
            for i, r in enumerate(ten[key]["rounds"]):
                w(md_admission_row("%s, round %d" % (name, i + 1), r))
        w("")
        w("Calls the tenants' buckets admitted while both ran (the server's "
          "`inferd_rate_limit_requests_total`, read before and after each round, all rounds): "
          "A %s, B %s. **Lower ÷ higher = %s** (target ≥ 0.90: one tenant over its limit never "
          "takes another's admitted capacity). The load generators' windows: A %s req/s = %s of "
          "its limit, B %s req/s = %s (mean over rounds; lower ÷ higher %s). The server's "
          "counts decide: they cover the same stretch of time for both tenants, where a "
          "window's count moves with how far the server fell behind the schedule during it." % (
              fmt(ten["a"]["server_admitted"], "%d"), fmt(ten["b"]["server_admitted"], "%d"),
              fmt(ten["fairness"], "%.3f"), fmt(ten["a"]["rps_ok"]), pct(ten["a"]["share"]),
              fmt(ten["b"]["rps_ok"]), pct(ten["b"]["share"]),
              fmt(ten.get("client_fairness"), "%.3f")))
    w("")
    return out


def md_node(nd, cfg):
    out = []
    w = out.append
    w("### 9. What users build instead: a Node.js server with onnxruntime-node, `mlp` over JSON")
    w("")
    if nd.get("skipped"):
        w("Skipped: %s" % nd["skipped"])
    elif nd.get("error"):
        w("Not measured: %s" % nd["error"])
    else:
        v = nd.get("versions") or {}
        ck = nd.get("check") or {}
        w("`bench/node/server.js` (Node.js %s, the `http` module, one process; onnxruntime-node "
          "%s with 1 inter-op thread and %s intra-op thread(s), as inferd) and inferd serve "
          "`bench/models/mlp` on the same cores, loaded in turn by the same closed loop: %s "
          "connections, %s requests in flight, the same %s-byte KServe v2 JSON request "
          "(`POST /v2/models/mlp/infer`, one [1, 784] FP32 input). Before the runs both "
          "answered it with the same outputs (largest difference %s, tolerance %s)." % (
              v.get("node", "?"), v.get("onnxruntime_node", "?"), cfg["intra_op_threads"],
              cfg["http_connections"], cfg["http_connections"], v.get("request_bytes", "?"),
              fmt(ck.get("max_abs_diff"), "%.3g"), fmt(ck.get("tolerance"), "%g")))
        w("")
        w("| server | req/s (best) | rounds (req/s) | p50 µs | p99 µs | server CPU | "
          "load-generator CPU |")
        w("|---|---|---|---|---|---|---|")
        for name, key in (("Node.js + onnxruntime-node", "node"), ("inferd", "inferd")):
            x = nd[key]
            b = best_round(x["rounds"])
            lu = b.get("latency_us") or {}
            w("| %s | %s | %s | %s | %s | %s | %s |" % (
                name, fmt(x["rps"]), ", ".join(fmt(q["rps"]) for q in x["rounds"]),
                fmt(lu.get("p50")), fmt(lu.get("p99")), pct(b.get("server_cpu_util")),
                pct(b.get("client_cpu_util"))))
        w("")
        w("p50/p99 of the best round of each. **inferd ÷ Node.js = %s×** (target ≥ 5×); "
          "**p99 inferd ÷ Node.js = %s** (target < 1: inferd's p99 lower)" % (
              fmt(nd["ratio"], "%.2f"), fmt(nd["p99_ratio"], "%.3f")))
        if not nd["valid"]:
            w("")
            w("**Some requests failed** — Node.js: %s; inferd: %s." % (
                "; ".join(describe_failures(q) for q in nd["node"]["rounds"]),
                "; ".join(describe_failures(q) for q in nd["inferd"]["rounds"])))
    w("")
    return out


def md_history(results_dir):
    rows = []
    for p in sorted(glob.glob(os.path.join(results_dir, "*.json"))):
        try:
            d = load(p)
            t = {x["name"]: x for x in d["targets"]}
        except (ValueError, KeyError, OSError):
            continue

        def v(name, spec):
            return fmt(t.get(name, {}).get("value"), spec)

        grpc = (d["experiments"].get("grpc") or {}).get("ratio")
        shm = (d["experiments"].get("shared_memory") or {}).get("ratio")
        shadow = d["experiments"].get("shadow") or {}
        shadow_cell = fmt(shadow.get("ratio"), "%.3f")
        overload_cell = " / ".join((
            v("overload_throughput", "%.2f"), v("overload_p99", "%.2f"),
            v("overload_refusal_p99", "%.0f µs"), v("tenant_fairness", "%.2f")))
        if not any(name in t for name in ("overload_throughput", "tenant_fairness")):
            overload_cell = "—"  # results from before experiment 11
        gen_cell = " / ".join((v("gen_single_stream", "%.3f"), v("gen_batching", "%.2f×")))
        if not any(name in t for name in ("gen_single_stream", "gen_batching")):
            gen_cell = "—"  # results from before experiment 12
        prep_cell = " / ".join((v("prep_speedup", "%.2f×"), fmt(
            ((d["experiments"].get("preprocessing") or {}).get("draft") or {}).get("ratio"),
            "%.2f×")))
        if "prep_speedup" not in t:
            prep_cell = "—"  # results from before experiment 13
        tq_cell = " / ".join((v("token_fairness", "%.3f"), v("token_ttft", "%.2f")))
        if not any(name in t for name in ("token_fairness", "token_ttft")):
            tq_cell = "—"  # results from before experiment 15
        if (shadow.get("shadow") or {}).get("compared_share") is not None:
            shadow_cell += " (%s compared)" % pct(shadow["shadow"]["compared_share"])
        rows.append("| [%s](results/%s) | %s | `%s` |" % (
            os.path.basename(p), os.path.basename(p), d["mode"], (d.get("git_commit") or "?")[:10])
            + " %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            v("http_floor", "%.3f"),
            v("compute_floor", "%.3f"), v("latency_p99", "%.0f µs"),
            v("json_decode", "%.2f×"), v("allocations", "%.3g"), v("rss_growth", "%+.2f %%"),
            fmt(grpc, "%.3f"), v("obs_overhead", "%.3f"), fmt(shm, "%.3f"),
            v("node_ratio", "%.2f×"), v("node_p99", "%.3f"), shadow_cell, overload_cell,
            gen_cell, prep_cell, tq_cell))
    out = ["## History", "",
           "| results | mode | commit | HTTP floor | compute floor | p99 @50% | JSON ×cJSON | "
           "allocs/req | RSS change | gRPC ÷ REST | obs on ÷ off | shm ÷ binary | "
           "×Node.js | p99 ÷ Node.js | shadow p99 ÷ none | overload: admitted ÷ capacity / "
           "p99 ÷ unloaded / refusal p99 / tenants | generation: 1 stream ÷ in process / "
           "32 ÷ 1 streams | preprocessing ×Pillow: plain / draft | token quotas: lower ÷ "
           "higher tenant / TTFT p99 ÷ alone |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    return out + rows + [""]


def cmd_markdown(args):
    results_dir, out = args
    files = sorted(glob.glob(os.path.join(results_dir, "*.json")), key=os.path.getmtime)
    if not files:
        die("no results in %s" % results_dir)
    doc = load(files[-1])
    doc["_file"] = os.path.basename(files[-1])
    lines = ["# Benchmark results", "",
             "Generated by `make bench` (`scripts/bench.sh`, `bench/report.py`) — do not edit by "
             "hand. What each experiment measures and how to read it: "
             "[bench/README.md](README.md).", ""]
    lines += md_run(doc)
    lines += md_history(results_dir)
    with open(out, "w") as f:
        f.write("\n".join(lines))


def main():
    if len(sys.argv) < 2:
        die("usage: report.py COMMAND ... (see the header of bench/report.py)")
    cmds = {
        "cores": cmd_cores, "cpu": cmd_cpu, "free-port": cmd_free_port, "get": cmd_get,
        "nginx-conf": cmd_nginx_conf, "stats": cmd_stats, "json-decode": cmd_json_decode,
        "h2load": cmd_h2load, "mlp-request": cmd_mlp_request,
        "compare-outputs": cmd_compare_outputs, "binary-request": cmd_binary_request,
        "shadow-scrape": cmd_shadow_scrape, "shadow-delta": cmd_shadow_delta,
        "ratelimit-scrape": cmd_ratelimit_scrape, "ratelimit-delta": cmd_ratelimit_delta,
        "gen-kv-bytes": cmd_gen_kv_bytes, "gen-check": cmd_gen_check,
        "prep-check": cmd_prep_check, "prep-merge": cmd_prep_merge,
        "prep-scrape": cmd_prep_scrape, "tq-prompt": cmd_tq_prompt, "tq-setup": cmd_tq_setup,
        "tq-usage": cmd_tq_usage, "tq-line": cmd_tq_line,
        "assemble": cmd_assemble, "markdown": cmd_markdown,
    }
    cmd = cmds.get(sys.argv[1])
    if not cmd:
        die("unknown command %s" % sys.argv[1])
    cmd(sys.argv[2:])


if __name__ == "__main__":
    main()
