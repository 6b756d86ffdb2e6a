"""make bench, experiment 14: HTTP/3 against HTTP/2 over TLS, one client.

The client is headless Chromium (tests/integration/cdp.py drives it): a page
of the server's origin runs CONCURRENCY fetch() loops of the same POST for
WARMUP then DURATION seconds and records each request's latency. For h3 the
origin is forced onto QUIC (--origin-to-force-quic-on); for h2, QUIC is off
and Chromium speaks HTTP/2 over TLS (ALPN). Every run checks that the
requests really went over the protocol under test (Resource Timing's
nextHopProtocol). Chromium's own cost is in both figures: the ratio compares
the transports, not the absolute server throughput (experiment 1 does that).

usage: h3_chromium.py PORT SPKI_SHA256_B64 h3|h2 PATH BODY_FILE DURATION WARMUP CONCURRENCY OUT
"""
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))
from cdp import Browser  # noqa: E402

LOOP_JS = """(async () => {
  const body = %s, path = %s, warmup = %f, duration = %f, conc = %d;
  const lat = [], statuses = {};
  let errors = 0;
  const t0 = performance.now(), tw = t0 + warmup * 1000, tend = tw + duration * 1000;
  async function worker() {
    while (performance.now() < tend) {
      const s = performance.now();
      try {
        const r = await fetch(path, {method: "POST", body, cache: "no-store",
                                     headers: {"Content-Type": "application/json"}});
        await r.arrayBuffer();
        const e = performance.now();
        if (s >= tw && e <= tend) { lat.push(e - s); statuses[r.status] = (statuses[r.status] || 0) + 1; }
      } catch (x) { errors++; }
      if (performance.getEntriesByType("resource").length > 200) performance.clearResourceTimings();
    }
  }
  performance.clearResourceTimings();
  const first = await fetch(path, {method: "POST", body, headers: {"Content-Type": "application/json"}});
  await first.arrayBuffer();
  await new Promise(r => setTimeout(r, 50));
  const entries = performance.getEntriesByType("resource");
  const proto = entries.length ? entries[entries.length - 1].nextHopProtocol : "unknown";
  await Promise.all(Array.from({length: conc}, worker));
  lat.sort((a, b) => a - b);
  const q = p => lat.length ? lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] * 1000 : null;
  return JSON.stringify({proto, requests: lat.length, rps: lat.length / duration, statuses, errors,
                         latency_us: {p50: q(0.5), p90: q(0.9), p99: q(0.99)}});
})()"""


def main():
    port, spki, proto, path, body_file, duration, warmup, conc, out = sys.argv[1:]
    args = ["--ignore-certificate-errors-spki-list=" + spki]
    if proto == "h3":
        args += ["--enable-quic", "--origin-to-force-quic-on=127.0.0.1:%s" % port]
    else:
        args += ["--disable-quic"]
    body = Path(body_file).read_text()
    b = Browser(extra_args=args)
    try:
        b.navigate("https://127.0.0.1:%s/v2/health/ready" % port)
        if not b.wait_until("document.readyState === 'complete' && location.protocol === 'https:'"):
            sys.exit("h3_chromium: the page did not load")
        r = b.call("Runtime.evaluate", awaitPromise=True, returnByValue=True, timeout=600000,
                   expression=LOOP_JS % (json.dumps(body), json.dumps(path), float(warmup),
                                         float(duration), int(conc)))
        if "exceptionDetails" in r:
            sys.exit("h3_chromium: %s" % r["exceptionDetails"])
        res = json.loads(r["result"]["value"])
    finally:
        b.close()
    res.update({"protocol": proto, "concurrency": int(conc), "duration_s": float(duration),
                "valid": res["proto"] == proto and res["errors"] == 0
                and set(res["statuses"]) == {"200"}})
    Path(out).write_text(json.dumps(res, indent=1) + "\n")
    if res["proto"] != proto:
        sys.exit("h3_chromium: requests went over %s, not %s" % (res["proto"], proto))


if __name__ == "__main__":
    main()
