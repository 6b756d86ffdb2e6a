/*
 * Drives inferd's OpenAI-compatible API with the official OpenAI Node.js SDK
 * (npm package `openai`, pinned in package.json) and prints what it saw as
 * one JSON object, {case: result}, for tests/integration/test_generate_clients.py
 * to check. The checks themselves live in the test; this only records.
 *
 *   node tests/node/openai_sdk.mjs --base-url http://127.0.0.1:PORT/v1 --model kjv
 *                                  [--api-key KEY] [--cases a,b,...]
 *
 * Cases (all by default, in this order):
 *   completion          completions.create, not streamed, temperature 0
 *   completion_stream   the same streamed: the chunks' texts, ids, objects, finish reasons
 *   chat                chat.completions.create, not streamed, temperature 0
 *   chat_stream         the same streamed with stream_options.include_usage
 *   seed                three completions at temperature 0.8: seeds S, S and S + 1
 *   stop                a greedy completion, then the same with a stop sequence taken from its text
 *   unknown_model       a completion of a model the server does not have (expected: NotFoundError)
 *   bad_request         a completion with n = 2 (expected: BadRequestError)
 *   models              models.list()
 * A result is the data the call returned, or {error: {class, status, type, code, param, message}} when
 * the SDK threw. The SDK's retries are off (maxRetries 0) so every error shows as it came.
 */
import OpenAI from "openai";

const PROMPT = "In the beginning";
const CHAT_PROMPT = "And God said";
const MAX_TOKENS = 24;
const SEED = 1234;
const ALL_CASES = ["completion", "completion_stream", "chat", "chat_stream", "seed", "stop", "unknown_model",
                   "bad_request", "models"];

function parseArgs(argv) {
    const o = { baseURL: null, model: null, apiKey: "sk-inferd-tests", cases: ALL_CASES };
    for (let i = 0; i < argv.length; i += 2) {
        const k = argv[i], v = argv[i + 1];
        if (v === undefined) throw new Error("missing value for " + k);
        if (k === "--base-url") o.baseURL = v;
        else if (k === "--model") o.model = v;
        else if (k === "--api-key") o.apiKey = v;
        else if (k === "--cases") o.cases = v.split(",");
        else throw new Error("unknown option " + k);
    }
    if (!o.baseURL || !o.model) throw new Error("--base-url and --model are required");
    for (const c of o.cases) if (!ALL_CASES.includes(c)) throw new Error("unknown case " + c);
    return o;
}

function errorOf(e) {
    return {
        error: {
            class: e.constructor.name,
            status: e.status ?? null,
            type: e.type ?? null,
            code: e.code ?? null,
            param: e.param ?? null,
            message: e.message,
        },
    };
}

async function completion(client, model, extra = {}) {
    const r = await client.completions.create({
        model, prompt: PROMPT, max_tokens: MAX_TOKENS, temperature: 0, ...extra });
    return { id: r.id, object: r.object, model: r.model, created: r.created, text: r.choices[0].text,
             finish_reason: r.choices[0].finish_reason, n_choices: r.choices.length, usage: r.usage };
}

const CASES = {
    completion: (client, model) => completion(client, model),

    async completion_stream(client, model) {
        const stream = await client.completions.create({
            model, prompt: PROMPT, max_tokens: MAX_TOKENS, temperature: 0, stream: true });
        const chunks = [];
        for await (const c of stream) {
            chunks.push({ id: c.id, object: c.object, model: c.model, text: c.choices[0]?.text ?? null,
                          finish_reason: c.choices[0]?.finish_reason ?? null, usage: c.usage ?? null });
        }
        return { chunks, text: chunks.map((c) => c.text ?? "").join("") };
    },

    async chat(client, model) {
        const r = await client.chat.completions.create({
            model, messages: [{ role: "user", content: CHAT_PROMPT }], max_tokens: MAX_TOKENS,
            temperature: 0 });
        const m = r.choices[0].message;
        return { id: r.id, object: r.object, model: r.model, role: m.role, content: m.content,
                 finish_reason: r.choices[0].finish_reason, n_choices: r.choices.length, usage: r.usage };
    },

    async chat_stream(client, model) {
        const stream = await client.chat.completions.create({
            model, messages: [{ role: "user", content: CHAT_PROMPT }], max_tokens: MAX_TOKENS, temperature: 0,
            stream: true, stream_options: { include_usage: true } });
        const chunks = [];
        for await (const c of stream) {
            const ch = c.choices[0];
            chunks.push({ id: c.id, object: c.object, model: c.model, n_choices: c.choices.length,
                          role: ch?.delta?.role ?? null, content: ch?.delta?.content ?? null,
                          finish_reason: ch?.finish_reason ?? null, usage: c.usage ?? null });
        }
        return { chunks, content: chunks.map((c) => c.content ?? "").join("") };
    },

    async seed(client, model) {
        const run = async (seed) => (await completion(client, model, { temperature: 0.8, seed })).text;
        return { same: [await run(SEED), await run(SEED)], other: await run(SEED + 1) };
    },

    async stop(client, model) {
        const greedy = (await completion(client, model)).text;
        // A stop sequence from the middle of the greedy text: its second word.
        const words = greedy.split(/(?= )/);
        const stop = words.length >= 3 ? words[1] : greedy.slice(1, 3);
        const stopped = await completion(client, model, { stop: [stop] });
        return { greedy, stop, text: stopped.text, finish_reason: stopped.finish_reason };
    },

    unknown_model: (client) => completion(client, "no-such-model"),

    bad_request: (client, model) => completion(client, model, { n: 2 }),

    async models(client) {
        const ids = [];
        for await (const m of client.models.list())
            ids.push({ id: m.id, object: m.object, owned_by: m.owned_by });
        return { data: ids };
    },
};

async function main() {
    const o = parseArgs(process.argv.slice(2));
    const client = new OpenAI({ baseURL: o.baseURL, apiKey: o.apiKey, maxRetries: 0, timeout: 60000 });
    const out = {};
    for (const name of o.cases) {
        try {
            out[name] = await CASES[name](client, o.model);
        } catch (e) {
            if (!(e instanceof OpenAI.APIError)) throw e;
            out[name] = errorOf(e);
        }
    }
    process.stdout.write(JSON.stringify(out) + "\n");
}

await main();
