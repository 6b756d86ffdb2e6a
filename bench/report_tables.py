"""The tables of bench/report.py: bench/RESULTS.md from the results files
(`report.py markdown`, cmd_markdown): the latest run's targets with a note
each, every experiment's markdown tables and text, and the history of every
results file. The figures are the results file's (report_data.py); only a
few medians and ratios of its rounds are taken here.
Standard library only, /usr/bin/python3.
"""
import glob
import json
import os

from report_data import (PREP_SIDES, best_round, capacity_problem, die, load, median, ratio,
                         rejudge_overload)


def fmt(v, spec="%.0f", none="—"):
    if v is None:
        return none
    return spec % v


def met(m):
    return {True: "met", False: "**missed**", None: "not measured"}[m]


def pct(v):
    return "—" if v is None else "%.0f %%" % (100 * v)


def describe_failures(r):
    parts = ["%s× HTTP %s" % (n, st) for st, n in sorted(r["non_200"].items())]
    parts += ["%s× %s" % (n, k) for k, n in sorted(r["errors"].items())]
    return ", ".join(parts) or "no failures"


def fmt_bytes(b):
    return "—" if b is None else "%.1f MiB" % (b / 1048576.0)


def why_missing(d):
    """Why an experiment (or a part of one) has no figures: "skipped: <why>"
    or "not measured: <error>"; None when it has them."""
    if d.get("skipped"):
        return "skipped: %s" % d["skipped"]
    if d.get("error"):
        return "not measured: %s" % d["error"]
    return None


def sentence(text):
    """text with a capital first letter (a table's line of its own)."""
    return text[:1].upper() + text[1:]

def gen_decoder_notes(g, notes):
    names = ("gen_decoder_single_stream", "gen_decoder_batched", "gen_ttft_tail",
             "gen_prefix_reuse")
    if (why := why_missing(g)):
        for name in names:
            notes[name] = why
        return
    s, fb = g["server"], g.get("floor_batched") or {}
    top = str(max(int(c) for c in s))
    notes["gen_decoder_single_stream"] = "%s vs %s tokens/s" % (
        fmt(s["1"]["tokens_per_s"]), fmt(g["floor"]["tokens_per_s"]))
    notes["gen_decoder_batched"] = "%s vs %s tokens/s" % (
        fmt((s.get(str(fb.get("batch"))) or {}).get("tokens_per_s")), fmt(fb.get("tokens_per_s")))
    notes["gen_ttft_tail"] = "TTFT p99 %s µs at %s streams; 1 stream p50 %s µs" % (
        fmt(s[top]["ttft_p99_us"]), top, fmt(s["1"]["ttft_p50_us"]))
    pr = g.get("prefix_reuse") or {}
    notes["gen_prefix_reuse"] = ("TTFT p50 %s µs without the cache, %s µs with it" % (
        fmt(pr.get("ttft_p50_off_us")), fmt(pr.get("ttft_p50_on_us"))) if pr else
        "not measured")


def gen_notes(g, notes):
    if (why := why_missing(g)):
        for name in ("gen_single_stream", "gen_batching"):
            notes[name] = why
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


def tq_notes(t, notes):
    if (why := why_missing(t)):
        for name in ("token_fairness", "token_ttft"):
            notes[name] = why
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
        if (why := why_missing(lim)):
            notes[name] = why
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
    dflt = ov.get("defaults") or {}
    if (why := why_missing(dflt)):
        notes["overload_default_p99"] = why
    elif dflt.get("overload"):
        o, u = dflt["overload"], dflt["unloaded"]
        notes["overload_default_p99"] = (
            "p99 %s µs at 3x vs %s µs at 10%% load; admitted %s req/s (%s of capacity), %s "
            "refused, refusal p99 %s µs" % (
                fmt(o["p99_us"]), fmt(u["p99_us"]), fmt(o["rps_ok"]),
                fmt(dflt.get("throughput_ratio"), "%.3f"), pct(o["refused_share"]),
                fmt(o["refused_p99_us"])))
    if (why := why_missing(ten)):
        notes["tenant_fairness"] = why
    elif ten.get("a"):
        notes["tenant_fairness"] = ("admitted by the server: A (offers 3x its limit) %s, B "
                                    "(offers its limit) %s calls; load generators: A %s req/s "
                                    "= %s of its limit, B %s req/s = %s" % (
                                        fmt(ten["a"]["server_admitted"], "%d"),
                                        fmt(ten["b"]["server_admitted"], "%d"),
                                        fmt(ten["a"]["rps_ok"]), pct(ten["a"]["share"]),
                                        fmt(ten["b"]["rps_ok"]), pct(ten["b"]["share"])))
    gen_notes(e.get("generation") or {"error": "no generation row in this results file"}, notes)
    gen_decoder_notes(e.get("generation_decoder") or
                      {"error": "no decoder generation row in this results file"}, notes)
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
        elif t["name"] == "instructions":
            s = fmt(v, "%.3f")
        elif t["name"] in ("latency_p99", "overload_refusal_p99"):
            s = fmt(v, "%.0f µs")
        elif t["name"] in ("json_decode", "node_ratio", "gen_batching", "prep_speedup",
                           "gen_prefix_reuse"):
            s = fmt(v, "%.2f×")
        elif t["name"] in ("node_p99", "shadow_p99", "overload_throughput", "overload_p99",
                           "latency_p99_nginx",
                           "overload_default_p99",
                           "tenant_fairness", "gen_single_stream", "token_fairness",
                           "token_ttft", "gen_decoder_single_stream", "gen_decoder_batched",
                           "gen_ttft_tail"):
            s = fmt(v, "%.3f")
        elif t["name"] == "allocations":
            s = fmt(v, "%.4g")
        else:
            s = fmt(v, "%+.2f %%")
        w("| %s | %s | %s | %s | %s |" % (t["what"], s, t["target"], met(t["met"]),
                                          notes.get(t["name"], "")))
    w("")
    md_missed(doc, w)

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
    out += md_generation(e.get("generation") or {"error": "no generation row in this results file"},
                         part="a")
    out += md_generation(e.get("generation_decoder") or
                         {"error": "no decoder generation row in this results file"},
                         "`bench/models/decoder` (8 layers, width 512, context 2048)", "b")
    out += md_prep(e.get("preprocessing") or {"error": "no preprocessing row in this results file"},
                   cores)
    out += md_http3(e.get("http3") or {"error": "no HTTP/3 row in this results file"})
    out += md_token_fairness(e.get("token_fairness") or
                             {"error": "no token fairness row in this results file"})
    out += md_instructions(e.get("instructions") or
                           {"error": "no instruction counts in this results file"})
    return out


INSTRUCTION_CASES = (
    ("simple_json", "`simple` over JSON"),
    ("simple_json_loaded", "`simple` over JSON, 64 connections (experiment 1's load, batched)"),
    ("simple_json_observed", "`simple` over JSON, metrics + access log + 10 % traces"),
    ("simple_json_observed_loaded",
     "`simple` over JSON, metrics + access log + 10 % traces, 64 connections"),
    ("simple_grpc", "`simple` over gRPC (ModelInfer)"),
    ("digits_binary", "`digits`, binary tensor data"),
    ("nginx", "nginx `return 200` of `simple`'s response"),
)


def md_instructions(ins):
    out = []
    w = out.append
    w("### 16. Instructions per request: callgrind, the figure the noise cannot move")
    w("")
    if not ins.get("cases"):
        w("Not measured: %s" % (ins.get("skipped") or ins.get("failed") or ins.get("error")))
        w("")
        return out
    c = ins["cases"]
    w("User-space instructions the server executed per request (every thread: parsing, "
      "routing, the model run, encoding, metrics; not the kernel's TCP work), requests one "
      "after the other on one keep-alive connection (the loaded case: 64 connections in a "
      "closed loop, requests batched as in experiment 1), counted by `valgrind --tool=callgrind` "
      "(bench/instructions.py). inferd with one I/O thread, one worker, one ONNX Runtime "
      "thread; nginx with one process.")
    w("")
    w("| case | instructions per request | ÷ nginx | of them on the I/O thread |")
    w("|---|---|---|---|")
    ng = (c.get("nginx") or {}).get("per_request")
    for key, name in INSTRUCTION_CASES:
        if key in c:
            n = c[key]["per_request"]
            w("| %s | %s | %s | %s |" % (name, fmt(n, "%d"), fmt(n / ng if ng else None, "%.2f"),
                                         fmt(c[key].get("io_thread_per_request"), "%d")))
    w("")
    w("**`simple` over JSON ÷ its first measurement (%s, commit bacb2c4) = %s** (target ≤ "
      "0.60). Observability on ÷ off: %s one at a time, %s under load (%s on the I/O thread: "
      "the access log's lines and the spans are formatted by threads of their own)." % (
          fmt(ins["first_simple_json"], "%d"), fmt(ins.get("ratio_to_first"), "%.3f"),
          fmt(ins.get("observed_over_plain"), "%.3f"),
          fmt(ins.get("observed_loaded_over_loaded"), "%.3f"),
          fmt(ins.get("observed_loaded_over_loaded_io"), "%.3f")))
    w("")
    for key, name in INSTRUCTION_CASES:
        top = (c.get(key) or {}).get("top")
        if not top:
            continue
        w("<details><summary>%s: the 15 functions with the most instructions of their own"
          "</summary>" % name)
        w("")
        w("| function | object | per request | share |")
        w("|---|---|---|---|")
        for f in top:
            w("| `%s` | %s | %s | %s |" % (f["function"].replace("|", "\\|"), f["object"],
                                          fmt(f["per_request"], "%d"), pct(f["share"])))
        w("")
        w("</details>")
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


def md_open_loop_pair(w, part, whose, p99_target="≤ 5", throughput_target=None,
                      refusal_target=None):
    """The rounds of an experiment 11 part at 10% and 3x capacity and its
    figures (assemble's open_loop_pair), or why it is missing."""
    if (why := why_missing(part)):
        w(sentence(why))
        return
    w(ADMISSION_HEAD)
    for i, r in enumerate(part["unloaded"]["rounds"]):
        w(md_admission_row("10%%, round %d" % (i + 1), r))
    for i, r in enumerate(part["overload"]["rounds"]):
        w(md_admission_row("3x, round %d" % (i + 1), r))
    w("")
    o, u = part["overload"], part["unloaded"]

    def goal(t):
        return "; target %s" % t if t else ""

    w("**admitted ÷ capacity = %s** (best round%s); **admitted p99 at 3x ÷ p99 at 10%% = %s** "
      "(medians over rounds, %s vs %s µs%s); **refusal p99 %s µs** (%s 503s and 429s, median%s); "
      "%s of the offered requests refused." % (
          fmt(part["throughput_ratio"], "%.3f"), goal(throughput_target),
          fmt(part["p99_ratio"], "%.2f"), fmt(o["p99_us"]), fmt(u["p99_us"]), goal(p99_target),
          fmt(o["refused_p99_us"]), whose, goal(refusal_target), pct(o["refused_share"])))


def md_overload(ov):
    out = []
    w = out.append
    w("### 11. Overload: `mlp` at 3x its capacity, the server's defaults and the concurrency "
      "limiter; two tenants with equal rate limits")
    w("")
    if (why := why_missing(ov)):
        w(sentence(why))
        w("")
        return out
    st = ov.get("setup") or {}
    cap = ov["capacity"]
    refused = [r.get("refused_share") or 0 for r in cap["rounds"]]
    w("`bench/models/mlp`, %s samples per request (experiment 9's sample repeated, binary "
      "tensor data, %s bytes). Capacity: a server without a configuration file%s, closed loop, "
      "%s requests in flight: **%s req/s** (rounds: %s; %s). Open-loop runs use %s "
      "connections; latency from the scheduled send time; admitted = 2xx, refused = 429 "
      "and 503 (`inferd bench`'s `latency_us_ok`, `latency_us_refused`)." % (
          st.get("batch", "?"), st.get("request_bytes", "?"),
          " or queue budget (`--queue-budget-ms off`)" if "capacity_refused_share" in st else "",
          st.get("capacity_concurrency", "?"),
          fmt(cap["rps"]), ", ".join(fmt(r["rps_ok"]) for r in cap["rounds"]),
          "none refused" if not any(refused) else
          "at most %.1f %% refused" % (100 * max(refused)),
          st.get("connections", "?")))
    if (problem := capacity_problem(cap)):
        w("")
        w("**Not a capacity**: %s. The overload targets are not judged on this run." %
          problem.rstrip("."))
    w("")
    dflt = ov.get("defaults") or {}
    w("**No configuration** (the server's defaults: the queue budget, `--queue-budget-ms "
      "auto`), alternating rounds at 10% of capacity and at 3x:")
    w("")
    md_open_loop_pair(w, dflt, "the budget's")
    if dflt.get("metrics_after"):
        w("")
        w("Queue metrics after the last run: %s." % ", ".join(
            "`%s` %s" % (k, fmt(v, "%g")) for k, v in sorted(dflt["metrics_after"].items())))
    w("")
    lim = ov.get("limiter") or {}
    w("**Concurrency limiter** (`--config`: `concurrency: [{model: mlp, min: %s, max: %s, "
      "queue: false}]`), one server, alternating rounds at 10%% of capacity and at 3x:" % (
          st.get("floor", "?"), st.get("ceiling", "?")))
    w("")
    md_open_loop_pair(w, lim, "the limiter's", p99_target="≤ 2", throughput_target="≥ 0.90",
                      refusal_target="< 1 ms")
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
    if (why := why_missing(ten)):
        w(sentence(why))
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


def md_generation(g, model="`models/kjv`", part=""):
    out = []
    w = out.append
    w("### 12%s. Generation: %s streamed by the server vs the in-process loop" % (part, model))
    w("")
    if (why := why_missing(g)):
        w(sentence(why))
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
    if st.get("present") == "new":
        w("")
        w("The graph returns only the new tokens' keys and values (`\"present\": \"new\"`, "
          "docs/generative.md%s): neither side copies the past per step." % (
              "; kjv's trained weights written so at bench time by "
              "`models/build/make_kjv.py --present new`" if st.get("model") == "kjv" else ""))
    elif st.get("present") == "all":
        w("")
        w("The graph is the usual export: its `present.*` is the whole past again, which ONNX "
          "Runtime copies on every step, in the loop and in the server alike.")
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
    if g.get("ttft_tail_ratio") is not None:
        w("")
        w("TTFT p99 at %s streams ÷ 1-stream TTFT p50 = %s (new prompts' chunks are prefilled "
          "together in one backend run)." % (max(int(c) for c in g["server"]),
                                             fmt(g["ttft_tail_ratio"], "%.2f")))
    pr = g.get("prefix_reuse")
    if pr:
        w("")
        w("Prefix reuse: one stream of requests sharing a %s-byte prompt (every request after "
          "the first shares it whole; max_tokens 8): TTFT p50 %s µs with the prefix cache, %s µs "
          "with `--no-prefix-cache`: **%s× lower** (target ≥ 3×; per round %s)." % (
              (g.get("setup") or {}).get("prefix_prompt_bytes", "?"), fmt(pr["ttft_p50_on_us"]),
              fmt(pr["ttft_p50_off_us"]), fmt(pr["ratio"], "%.1f"),
              ", ".join(fmt(v, "%.1f") for v in pr["rounds"])))
    if not g["valid"]:
        w("")
        w("**Some requests failed**: %s." % "; ".join(
            "%s streams: %s" % (c, describe_failures(r))
            for c, s in g["server"].items() for r in s["rounds"]))
    w("")
    return out


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


def md_token_fairness(t):
    out = []
    w = out.append
    w("### 15. Token fairness: two tenants with equal token quotas, short vs long prompts")
    w("")
    if (why := why_missing(t)):
        w(sentence(why))
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


def md_history(results_dir):
    rows = []
    for p in sorted(glob.glob(os.path.join(results_dir, "*.json"))):
        try:
            d = rejudge_overload(load(p))
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
            v("overload_refusal_p99", "%.0f µs"), v("tenant_fairness", "%.2f"),
            v("overload_default_p99", "%.2f")))
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
           "p99 ÷ unloaded / refusal p99 / tenants / defaults: p99 ÷ unloaded | generation: 1 stream ÷ in process / "
           "32 ÷ 1 streams | preprocessing ×Pillow: plain / draft | token quotas: lower ÷ "
           "higher tenant / TTFT p99 ÷ alone |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    return out + rows + [""]


def missed_reasons(path):
    """bench/missed.md: target name -> its section's text, one paragraph."""
    reasons, name, text = {}, None, []
    try:
        with open(path) as f:
            lines = f.read().split("\n")
    except OSError:
        return reasons
    for line in lines + ["## "]:
        if line.startswith("## "):
            if name:
                reasons[name] = " ".join(" ".join(text).split())
            name, text = line[3:].strip(), []
        elif name:
            text.append(line)
    return reasons


def md_missed(doc, w):
    """After the targets table: the measured reason of each missed target."""
    missed = [t for t in doc["targets"] if t["met"] is False]
    if not missed:
        return
    reasons = missed_reasons(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                          "missed.md"))
    w("### Why the missed targets are missed")
    w("")
    w("The measured reasons, from [bench/missed.md](missed.md) (kept by hand from profiles "
      "and A/B runs, not computed by this run).")
    w("")
    for t in missed:
        w("- **%s** (target %s): %s" % (t["what"], t["target"], reasons.get(
            t["name"], "no measured reason in bench/missed.md yet.")))
    w("")


def cmd_markdown(args):
    results_dir, out = args
    files = sorted(glob.glob(os.path.join(results_dir, "*.json")), key=os.path.getmtime)
    if not files:
        die("no results in %s" % results_dir)
    doc = rejudge_overload(load(files[-1]))
    doc["_file"] = os.path.basename(files[-1])
    lines = ["# Benchmark results", "",
             "Generated by `make bench` (`scripts/bench.sh`, `bench/report.py`) — do not edit by "
             "hand. What each experiment measures and how to read it: "
             "[bench/README.md](README.md).", ""]
    lines += md_run(doc)
    lines += md_history(results_dir)
    with open(out, "w") as f:
        f.write("\n".join(lines))
