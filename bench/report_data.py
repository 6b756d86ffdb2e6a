"""The data of bench/report.py: what a run of scripts/bench.sh left in its
run directory (the load generators' reports, the server's log and metrics,
the floors' outputs), read and summed up into the figures of a results
file (`report.py assemble`, cmd_assemble): the best round, medians over
rounds, ratios, the targets.

Also what every module of report.py uses: die(), load(), load_opt().
Standard library only, /usr/bin/python3.
"""
import glob
import json
import os
import platform
import re
import sys


TARGETS = {
    "http_floor": ("inferd req/s ÷ nginx req/s", ">= 0.85", lambda v: v >= 0.85),
    "compute_floor": ("inferd inferences/s ÷ in-process inferences/s (mlp)", ">= 0.85",
                      lambda v: v >= 0.85),
    "latency_p99": ("p99 of simple at 50% of max rate", "<= 1 ms", lambda v: v <= 1000.0),
    "latency_p99_nginx": ("p99 of simple at 50% of max rate ÷ nginx's p99 at the same rate",
                          "<= 2", lambda v: v <= 2.0),
    "json_decode": ("inferd decoder speed-up over cJSON", ">= 5x", lambda v: v >= 5.0),
    "allocations": ("allocations per request after warm-up", "0", lambda v: v == 0),
    "rss_growth": ("RSS change over the memory run", "within ±5%", lambda v: abs(v) <= 5.0),
    "obs_overhead": ("req/s with metrics + access log + 10% traces ÷ all off", ">= 0.95",
                     lambda v: v >= 0.95),
    "node_ratio": ("inferd req/s ÷ Node.js onnxruntime-node req/s (mlp, JSON)", ">= 6x",
                   lambda v: v >= 6.0),
    "node_p99": ("inferd p99 ÷ Node.js onnxruntime-node p99 (mlp, JSON)", "< 1 (lower)",
                 lambda v: v < 1.0),
    "shadow_p99": ("p99 with 100% shadow traffic ÷ without, digits at 50% load",
                   "<= 1.05 (≤ 5 % added)", lambda v: v <= 1.05),
    "overload_throughput": ("admitted req/s at 3x capacity ÷ capacity (mlp, concurrency limiter)",
                            ">= 0.95", lambda v: v >= 0.95),
    "overload_p99": ("admitted p99 at 3x capacity ÷ p99 at 10% load", "<= 2", lambda v: v <= 2.0),
    "overload_refusal_p99": ("p99 of the refusals at 3x capacity", "< 1 ms",
                             lambda v: v < 1000.0),
    "overload_default_p99": ("admitted p99 at 3x capacity ÷ p99 at 10% load, no configuration "
                             "(the server's defaults: queue budget)", "<= 5",
                             lambda v: v <= 5.0),
    "tenant_fairness": ("calls admitted for two tenants with equal rate limits, lower ÷ "
                        "higher (one offers 3x its limit)", ">= 0.90 (within 10 %)", lambda v: v >= 0.90),
    "gen_single_stream": ("server tokens/s ÷ in-process generation loop, 1 stream (kjv, greedy)",
                          ">= 0.9", lambda v: v >= 0.9),
    "gen_batching": ("aggregate tokens/s at 32 streams ÷ 1 stream (kjv, continuous batching)",
                     ">= 4x", lambda v: v >= 4.0),
    "gen_decoder_single_stream": ("server tokens/s ÷ in-process generation loop, 1 stream "
                                  "(bench/models/decoder: 8 layers, width 512)", ">= 0.9",
                                  lambda v: v >= 0.9),
    "gen_decoder_batched": ("server tokens/s at 32 streams ÷ the in-process loop at batch 32 "
                            "(decoder)", ">= 0.85", lambda v: v >= 0.85),
    "gen_ttft_tail": ("TTFT p99 at 32 streams ÷ 1-stream TTFT p50 (decoder)", "<= 3",
                      lambda v: v <= 3.0),
    "gen_prefix_reuse": ("TTFT p50 without the prefix cache ÷ with it, a shared ~500-token "
                         "prompt (decoder)", ">= 3x", lambda v: v >= 3.0),
    "token_fairness": ("tokens served to two tenants with equal token quotas, lower ÷ higher "
                       "(kjv, 20- vs 200-token prompts)", ">= 0.90 (within 10 %)",
                       lambda v: v >= 0.90),
    "token_ttft": ("short-prompt tenant's TTFT p99 with the long-prompt tenant ÷ alone",
                   "<= 2", lambda v: v <= 2.0),
    "instructions": ("user-space instructions per simple JSON request ÷ the first "
                     "measurement (callgrind)", "<= 0.60 (40 % fewer)", lambda v: v <= 0.60),
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


def best_round(rs):
    return max(rs, key=lambda r: r["rps"] or 0)


def ratio(a, b):
    return a / b if a is not None and b else None


def latency_over_nginx(lat):
    """Experiment 3's p99 ÷ nginx's at the same rate (None without both)."""
    ref = ((lat.get("nginx_same_rate") or {}).get("latency_us") or {}).get("p99")
    return round(lat["p99_us"] / ref, 3) if ref and lat.get("p99_us") else None


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


# Experiment 16's reference: the first count of simple over JSON, at commit
# bacb2c4 (2026-12-06), before the hot path was steered by it.
FIRST_SIMPLE_JSON_INSTRUCTIONS = 79813


def assemble_instructions(run_dir):
    for kind in ("skipped", "failed"):
        p = os.path.join(run_dir, "instructions." + kind)
        if os.path.exists(p):
            return {kind: open(p).read().strip()}
    p = os.path.join(run_dir, "instructions.json")
    if not os.path.exists(p):
        return {"error": "experiment 16 did not run"}
    d = load(p)
    cases = d.get("cases", {})
    simple = (cases.get("simple_json") or {}).get("per_request")
    return {
        "cases": cases,
        "over_nginx": d.get("simple_json_over_nginx"),
        "observed_over_plain": d.get("observed_over_plain"),
        "observed_loaded_over_loaded": d.get("observed_loaded_over_loaded"),
        "observed_loaded_over_loaded_io": d.get("observed_loaded_over_loaded_io"),
        "first_simple_json": FIRST_SIMPLE_JSON_INSTRUCTIONS,
        "ratio_to_first": (simple / FIRST_SIMPLE_JSON_INSTRUCTIONS) if simple else None,
    }


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


def model_metrics(text, prefixes, model="mlp"):
    """The series of `model` whose names start with one of `prefixes`
    (Prometheus text): name → value, with the labels other than model in the
    name."""
    out = {}
    for line in text.splitlines():
        m = PROM_RE.match(line.strip())
        if not m or line.startswith("#") or not m.group(1).startswith(prefixes):
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


def open_loop_pair(run_dir, name, capacity):
    """Rounds of 10% (NAME_unloaded) and 3x capacity (NAME_3x), open loop:
    medians over rounds, the best admitted rate; None if not measured."""
    un, ov = (admission_rounds(run_dir, name + "_unloaded"), admission_rounds(run_dir, name + "_3x"))
    if not un or not ov:
        return None
    pair = {
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
    pair["throughput_ratio"] = ratio(pair["overload"]["rps_ok"], capacity)
    pair["p99_ratio"] = ratio(pair["overload"]["p99_us"], pair["unloaded"]["p99_us"])
    return pair


def metrics_after(run_dir, name, prefixes):
    p = os.path.join(run_dir, name)
    return model_metrics(open(p, errors="replace").read(), prefixes) if os.path.exists(p) else None


def capacity_problem(cap):
    """Why experiment 11's capacity is not the model's, or None: bench.sh
    failed the step, or (runs from before that check) a round had over 1 %
    of its requests refused. Every rate of the experiment is a share of it,
    so then no overload target is judged."""
    if not cap:
        return None
    if cap.get("error"):
        return cap["error"]
    refused = max((r.get("refused_share") or 0 for r in cap.get("rounds") or []), default=0)
    if refused > 0.01:
        return ("a capacity round had %.3f of its requests refused: its admitted rate is not "
                "the model's capacity" % refused)
    return None


OVERLOAD_TARGETS = ("overload_throughput", "overload_p99", "overload_refusal_p99",
                    "overload_default_p99", "tenant_fairness")


def rejudge_overload(doc):
    """A stored run whose experiment 11 capacity_problem() finds wrong keeps
    its figures but not its overload verdicts (runs from before the check)."""
    cap = ((doc.get("experiments") or {}).get("overload") or {}).get("capacity")
    if capacity_problem(cap):
        for t in doc.get("targets") or []:
            if t["name"] in OVERLOAD_TARGETS:
                t["value"] = t["met"] = None
    return doc


def assemble_overload(run_dir):
    """Experiment 11: capacity, the server's defaults and the concurrency
    limiter at 10% and 3x capacity, two tenants with equal rate limits."""
    cap_rounds = admission_rounds(run_dir, "overload_capacity")
    if not cap_rounds:
        state = part_state(run_dir, "limiter")
        return state if state else {"error": "not measured"}
    capacity = max(r["rps_ok"] or 0 for r in cap_rounds)
    doc = {"setup": load_opt(os.path.join(run_dir, "overload_setup.json")),
           "capacity": {"rps": capacity, "rounds": cap_rounds}}
    cap_state = part_state(run_dir, "capacity")
    if cap_state:
        doc["capacity"].update(cap_state)

    dflt = part_state(run_dir, "default")
    if dflt is None:
        dflt = open_loop_pair(run_dir, "overload_default", capacity) or {"error": "not measured"}
        if not dflt.get("error"):
            dflt["metrics_after"] = metrics_after(
                run_dir, "overload_default_metrics.txt",
                ("inferd_queue_budget_seconds", "inferd_queue_refusals_total"))
    doc["defaults"] = dflt

    lim = part_state(run_dir, "limiter")
    if lim is None:
        lim = open_loop_pair(run_dir, "overload", capacity) or {"error": "not measured"}
        if not lim.get("error"):
            lim["metrics_after"] = metrics_after(run_dir, "overload_limiter_metrics.txt",
                                                 ("inferd_concurrency_",))
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


def assemble_generation(run_dir, pfx="gen"):
    """Experiment 12 of one model: its files are PFX_* (gen: models/kjv,
    gendec: bench/models/decoder, which also has the prefix-reuse runs)."""
    for kind in ("skipped", "failed"):
        p = os.path.join(run_dir, pfx + "." + kind)
        if os.path.exists(p):
            return {("skipped" if kind == "skipped" else "error"): open(p).read().strip()}
    floors = [load(p) for p in round_paths(run_dir, pfx + "_floor")]
    if not floors:
        return {"error": "not measured"}
    setup = load_opt(os.path.join(run_dir, pfx + "_setup.json")) or {}
    streams = setup.get("streams") or [1, 8, 32]
    server = {}
    for c in streams:
        rs = [gen_summary(p) for p in round_paths(run_dir, "%s_c%d" % (pfx, c))]
        server[str(c)] = {
            "tokens_per_s": gen_median(rs, "tokens_per_s"),
            "ttft_p50_us": gen_median(rs, "ttft_us", "p50"),
            "ttft_p99_us": gen_median(rs, "ttft_us", "p99"),
            "tpot_p50_us": gen_median(rs, "tpot_us", "p50"),
            "tpot_p99_us": gen_median(rs, "tpot_us", "p99"),
            "rounds": rs,
        }
    one, most = server.get("1"), server.get(str(max(streams)))
    batched = [load(p) for p in round_paths(run_dir, pfx + "_floor_batched")]
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
        "check": load_opt(os.path.join(run_dir, pfx + "_check.json")),
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
        # TTFT p99 at the most streams ÷ the single stream's TTFT p50
        # (none when the most streams completed no request in the window)
        "ttft_tail_ratio": ratio((most or {}).get("ttft_p99_us") or None,
                                 (one or {}).get("ttft_p50_us")),
        "prefix_reuse": assemble_prefix_reuse(run_dir, pfx),
        "valid": all(r["valid"] for s in server.values() for r in s["rounds"]),
    }


def assemble_prefix_reuse(run_dir, pfx):
    """Experiment 12 (c): TTFT p50 of one stream sharing a ~500-token prompt,
    with the prefix cache and without (--no-prefix-cache), per round."""
    on = [gen_summary(p) for p in round_paths(run_dir, pfx + "pfx_on")]
    off = [gen_summary(p) for p in round_paths(run_dir, pfx + "pfx_off")]
    if not on or not off:
        return None
    per_round = [ratio((off[i].get("ttft_us") or {}).get("p50"),
                       (on[i].get("ttft_us") or {}).get("p50"))
                 for i in range(min(len(on), len(off)))]
    return {"ttft_p50_on_us": gen_median(on, "ttft_us", "p50"),
            "ttft_p50_off_us": gen_median(off, "ttft_us", "p50"),
            "rounds": per_round, "ratio": median(per_round),
            "valid": all(r["valid"] for r in on + off)}


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


def gen_tokens(path):
    """(prompt + completion tokens, requests ok) of an `inferd bench --openai
    --json` report: the sums over its window's ok responses."""
    g = load(path).get("generation") or {}
    return (g.get("prompt_tokens") or 0) + (g.get("completion_tokens") or 0), g.get("requests_ok")


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
        "generation_decoder": assemble_generation(run_dir, "gendec"),
        "preprocessing": assemble_prep(run_dir),
        "http3": assemble_http3(run_dir),
        "token_fairness": assemble_token_fairness(run_dir),
        "instructions": assemble_instructions(run_dir),
    }
    ov = exps["overload"]
    ov_lim, ov_ten = ov.get("limiter") or {}, ov.get("tenants") or {}
    if capacity_problem(ov.get("capacity")):
        ov_lim, ov_ten, ov = {}, {}, {}
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
        target("latency_p99_nginx", latency_over_nginx(lat)),
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
        target("overload_default_p99", (ov.get("defaults") or {}).get("p99_ratio")),
        target("tenant_fairness", ov_ten.get("fairness")),
        target("gen_single_stream", exps["generation"].get("single_stream_ratio")),
        target("gen_batching", exps["generation"].get("batching_ratio")),
        target("gen_decoder_single_stream", exps["generation_decoder"].get("single_stream_ratio")),
        target("gen_decoder_batched", exps["generation_decoder"].get("batched_ratio")),
        target("gen_ttft_tail", exps["generation_decoder"].get("ttft_tail_ratio")),
        target("gen_prefix_reuse",
               (exps["generation_decoder"].get("prefix_reuse") or {}).get("ratio")),
        target("prep_speedup", (exps["preprocessing"].get("plain") or {}).get("ratio")),
        target("token_fairness", exps["token_fairness"].get("fairness")),
        target("token_ttft", exps["token_fairness"].get("ttft_ratio")),
        target("instructions", exps["instructions"].get("ratio_to_first")),
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
