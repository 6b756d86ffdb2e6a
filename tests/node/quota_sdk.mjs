/*
 * Drives inferd's token budgets with the official OpenAI Node.js SDK (npm
 * package `openai`, pinned in package.json) and prints what it saw as one
 * JSON object, {step: result}, for tests/integration/test_token_quotas.py to
 * check. The checks live in the test; this only records.
 *
 *   node tests/node/quota_sdk.mjs --base-url http://127.0.0.1:PORT/v1 --model kjv
 *        --prompt TEXT --max-tokens N --minute-key KEY --daily-key KEY
 *
 * The server has a per-minute budget for the tenant of --minute-key and a
 * per-day one for --daily-key, each holding one completion of the prompt.
 * Steps, in this order:
 *   minute_fill  a completion that spends the per-minute budget
 *   no_retry     the same with maxRetries 0: the error the SDK throws
 *   retry        the same with maxRetries 2: the SDK sleeps retry-after-ms and retries
 *   daily_fill   a completion that spends the per-day budget
 *   exhausted    the same with maxRetries 2: the SDK must not retry (x-should-retry: false)
 * A result is {usage} of a completion, {error: {class, status, type, code,
 * message, headers}} when the SDK threw, and for retry and exhausted also
 * {requests: [{sent, received, status, retry_after_ms}]}: every HTTP request
 * the SDK made (times in ms from performance.now()).
 */
import OpenAI from "openai";

const HEADERS = ["retry-after", "retry-after-ms", "x-should-retry", "x-ratelimit-limit-tokens",
                 "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"];

function parseArgs(argv) {
    const o = {};
    const names = { "--base-url": "baseURL", "--model": "model", "--prompt": "prompt",
                    "--max-tokens": "maxTokens", "--minute-key": "minuteKey", "--daily-key": "dailyKey" };
    for (let i = 0; i < argv.length; i += 2) {
        const k = names[argv[i]];
        if (!k) throw new Error("unknown option " + argv[i]);
        if (argv[i + 1] === undefined) throw new Error("missing value for " + argv[i]);
        o[k] = argv[i + 1];
    }
    for (const k of Object.values(names)) if (o[k] === undefined) throw new Error("missing option for " + k);
    o.maxTokens = Number(o.maxTokens);
    return o;
}

/* A client whose HTTP requests are recorded into `log`. */
function client(o, apiKey, maxRetries, log) {
    const recording = async (url, init) => {
        const entry = { sent: performance.now(), received: null, status: null, retry_after_ms: null };
        log.push(entry);
        const r = await fetch(url, init);
        entry.received = performance.now();
        entry.status = r.status;
        entry.retry_after_ms = r.headers.get("retry-after-ms");
        return r;
    };
    return new OpenAI({ baseURL: o.baseURL, apiKey, maxRetries, timeout: 60000, fetch: recording });
}

async function complete(o, apiKey, maxRetries) {
    const requests = [];
    try {
        const r = await client(o, apiKey, maxRetries, requests).completions.create({
            model: o.model, prompt: o.prompt, max_tokens: o.maxTokens, temperature: 0 });
        return { result: { usage: r.usage }, requests };
    } catch (e) {
        if (!(e instanceof OpenAI.APIError)) throw e;
        const headers = {};
        for (const h of HEADERS) headers[h] = e.headers?.get(h) ?? null;
        return { error: { class: e.constructor.name, status: e.status ?? null, type: e.type ?? null,
                          code: e.code ?? null, message: e.message, headers }, requests };
    }
}

async function main() {
    const o = parseArgs(process.argv.slice(2));
    const out = {};
    const fill = async (key) => {
        const r = await complete(o, key, 0);
        return r.result ?? r;
    };
    out.minute_fill = await fill(o.minuteKey);
    out.no_retry = await complete(o, o.minuteKey, 0);
    out.retry = await complete(o, o.minuteKey, 2);
    out.daily_fill = await fill(o.dailyKey);
    out.exhausted = await complete(o, o.dailyKey, 2);
    process.stdout.write(JSON.stringify(out) + "\n");
}

await main();
