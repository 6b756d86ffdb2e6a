/*
 * Runs many streamed completions at once with the official OpenAI Node.js
 * SDK (npm package `openai`) and prints what each one returned, for
 * tests/integration/test_gateway_streams.py to check:
 *
 *   node tests/node/concurrent_streams.mjs --base-url http://127.0.0.1:PORT/v1 --model kjv
 *        --streams N --max-tokens M [--temperature T]
 *
 * Stream i sends prompt PROMPTS[i % PROMPTS.length] with seed 1000 + i.
 * Once every stream has had its first chunk the script prints the line
 * `started` (so the test can act while they are all running), then, when
 * all have ended, one JSON line: [{text, finish_reason, chunks, usage}] or
 * [{error: {class, status, message}}] for a stream the SDK threw on. The
 * SDK's retries are off (maxRetries 0): a failure shows as it came.
 */
import OpenAI from "openai";

const PROMPTS = ["In the beginning", "And God said", "Thou shalt not", "Blessed are the",
                 "And the LORD spake unto Moses, saying,"];

function parseArgs(argv) {
    const o = { baseURL: null, model: null, streams: 20, maxTokens: 100, temperature: 0.8 };
    for (let i = 0; i < argv.length; i += 2) {
        const k = argv[i], v = argv[i + 1];
        if (v === undefined) throw new Error("missing value for " + k);
        if (k === "--base-url") o.baseURL = v;
        else if (k === "--model") o.model = v;
        else if (k === "--streams") o.streams = Number(v);
        else if (k === "--max-tokens") o.maxTokens = Number(v);
        else if (k === "--temperature") o.temperature = Number(v);
        else throw new Error("unknown option " + k);
    }
    if (!o.baseURL || !o.model) throw new Error("--base-url and --model are required");
    return o;
}

const opts = parseArgs(process.argv.slice(2));
const client = new OpenAI({ baseURL: opts.baseURL, apiKey: "sk-inferd-tests", maxRetries: 0,
                            timeout: 120000 });
let waiting = opts.streams;
let resolveStarted;
const started = new Promise((r) => { resolveStarted = r; });

function firstChunk() {
    if (--waiting === 0) resolveStarted();
}

async function one(i) {
    let first = true;
    try {
        const s = await client.completions.create({
            model: opts.model, prompt: PROMPTS[i % PROMPTS.length], max_tokens: opts.maxTokens,
            temperature: opts.temperature, seed: 1000 + i, stream: true,
            stream_options: { include_usage: true },
        });
        const out = { text: "", finish_reason: null, chunks: 0, usage: null };
        for await (const chunk of s) {
            if (first) { first = false; firstChunk(); }
            out.chunks++;
            if (chunk.usage) out.usage = chunk.usage;
            for (const c of chunk.choices) {
                out.text += c.text;
                if (c.finish_reason) out.finish_reason = c.finish_reason;
            }
        }
        return out;
    } catch (e) {
        if (first) firstChunk();
        return { error: { class: e.constructor.name, status: e.status ?? null, message: e.message } };
    }
}

const all = Promise.all(Array.from({ length: opts.streams }, (_, i) => one(i)));
await started;
process.stdout.write("started\n");
process.stdout.write(JSON.stringify(await all) + "\n");
