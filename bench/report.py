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
This file is the command line; the commands are in report_chores.py (the
chores of a run), report_data.py (assemble) and report_tables.py (markdown).
"""
import sys

import report_chores as chores
import report_data as data
import report_tables as tables


def main():
    if len(sys.argv) < 2:
        data.die("usage: report.py COMMAND ... (see the header of bench/report.py)")
    cmds = {
        "cores": chores.cmd_cores, "cpu": chores.cmd_cpu, "free-port": chores.cmd_free_port,
        "get": chores.cmd_get, "nginx-conf": chores.cmd_nginx_conf, "stats": chores.cmd_stats,
        "json-decode": chores.cmd_json_decode, "h2load": chores.cmd_h2load,
        "mlp-request": chores.cmd_mlp_request, "compare-outputs": chores.cmd_compare_outputs,
        "binary-request": chores.cmd_binary_request, "shadow-scrape": chores.cmd_shadow_scrape,
        "shadow-delta": chores.cmd_shadow_delta, "ratelimit-scrape": chores.cmd_ratelimit_scrape,
        "ratelimit-delta": chores.cmd_ratelimit_delta, "gen-kv-bytes": chores.cmd_gen_kv_bytes,
        "gen-check": chores.cmd_gen_check, "prep-check": chores.cmd_prep_check,
        "prep-merge": chores.cmd_prep_merge, "prep-scrape": chores.cmd_prep_scrape,
        "tq-prompt": chores.cmd_tq_prompt, "tq-setup": chores.cmd_tq_setup,
        "tq-usage": chores.cmd_tq_usage, "tq-line": chores.cmd_tq_line,
        "assemble": data.cmd_assemble, "markdown": tables.cmd_markdown,
    }
    cmd = cmds.get(sys.argv[1])
    if not cmd:
        data.die("unknown command %s" % sys.argv[1])
    cmd(sys.argv[2:])


if __name__ == "__main__":
    main()
