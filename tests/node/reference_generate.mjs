/*
 * An in-process greedy generation loop over a generative model directory
 * (models/kjv/1/: model.onnx, tokenizer.json, generation.json), written
 * independently of inferd's C code (src/gen/) from the model interface of
 * issue 15 (docs/generative.md). The integration tests compare the
 * server's greedy output with what this prints, byte for byte.
 *
 *   node tests/node/reference_generate.mjs MODEL_DIR < job.json
 *
 * job.json, one of:
 *   {"mode": "generate", "prompts": ["In the beginning", ...], "max_tokens": 20,
 *    "kv_cache": true}
 *       Greedy generation (argmax, lowest id on ties) of each prompt. With
 *       kv_cache (default true) the prompt is prefilled once and every step
 *       feeds one token with the previous step's present.* as past_key_values.*;
 *       with kv_cache false every step recomputes the whole sequence with an
 *       empty past (a second check of the same model). max_tokens may be null:
 *       then up to the context's end (max_context - prompt tokens).
 *       Prints [{prompt, tokens, text, text_hex, finish_reason,
 *       num_input_tokens, num_output_tokens}, ...]: tokens are the generated
 *       ids (the end-of-text id is not among them), text their bytes decoded
 *       as UTF-8 (invalid bytes replaced by U+FFFD), text_hex the raw bytes;
 *       finish_reason "stop" (end-of-text generated) or "length" (max_tokens
 *       reached or the context full).
 *   {"mode": "tokenize", "prompts": ["text", ...]}
 *       Prints [{prompt, ids}, ...]: the ids the tokenizer gives each text.
 *
 * The tokenizer (byte-level BPE from tokenizer.json): ids 0..255 are the
 * bytes; merge k makes id 256 + k from its pair, its rank is k; the last id
 * is the end-of-text token and has no bytes. The input is cut into pieces, a
 * new piece starting at offset 0 and before every space or newline byte;
 * each piece starts as its bytes and repeatedly has every occurrence (left to
 * right, no overlap) of its lowest-ranked adjacent merge pair replaced by the
 * merged id, until no adjacent pair is a merge. "<|endoftext|>" in the input
 * is plain text.
 *
 * ONNX Runtime: one intra-op thread, sequential execution. Exit status 1
 * with a message on stderr for a bad job or model directory.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import ort from "onnxruntime-node";

const MAX_PROMPTS = 256;

function fail(msg) {
    process.stderr.write("reference_generate: " + msg + "\n");
    process.exit(1);
}

class Tokenizer {
    constructor(doc) {
        if (doc.type !== "byte-bpe") fail("tokenizer.json: type is not byte-bpe");
        if (!Array.isArray(doc.merges)) fail("tokenizer.json: merges is not an array");
        this.ranks = new Map(); // a * 2^20 + b -> rank
        this.pairs = []; // rank -> [a, b]
        this.bytes = []; // id -> Uint8Array
        for (let b = 0; b < 256; b++) this.bytes.push(Uint8Array.of(b));
        doc.merges.forEach(([a, b], k) => {
            const id = 256 + k;
            if (!(a >= 0 && a < id && b >= 0 && b < id)) fail("tokenizer.json: merge " + k + " is bad");
            this.ranks.set(a * 1048576 + b, k);
            this.pairs.push([a, b]);
            const joined = new Uint8Array(this.bytes[a].length + this.bytes[b].length);
            joined.set(this.bytes[a], 0);
            joined.set(this.bytes[b], this.bytes[a].length);
            this.bytes.push(joined);
        });
        this.eos = 256 + doc.merges.length;
        if (doc.vocab_size !== this.eos + 1) fail("tokenizer.json: vocab_size is not 256 + merges + 1");
        if (doc.eos_token_id !== this.eos) fail("tokenizer.json: eos_token_id is not the last id");
        this.vocabSize = doc.vocab_size;
    }

    encodePiece(bytes) {
        let ids = Array.from(bytes);
        for (;;) {
            let best = -1;
            for (let i = 0; i + 1 < ids.length; i++) {
                const r = this.ranks.get(ids[i] * 1048576 + ids[i + 1]);
                if (r !== undefined && (best < 0 || r < best)) best = r;
            }
            if (best < 0) return ids;
            const [a, b] = this.pairs[best];
            const next = [];
            for (let i = 0; i < ids.length; i++) {
                if (i + 1 < ids.length && ids[i] === a && ids[i + 1] === b) {
                    next.push(256 + best);
                    i++;
                } else {
                    next.push(ids[i]);
                }
            }
            ids = next;
        }
    }

    encode(text) {
        const bytes = Buffer.from(text, "utf8");
        const ids = [];
        let start = 0;
        for (let i = 1; i <= bytes.length; i++) {
            if (i === bytes.length || bytes[i] === 0x20 || bytes[i] === 0x0a) {
                if (i > start) ids.push(...this.encodePiece(bytes.subarray(start, i)));
                start = i;
            }
        }
        return ids;
    }

    decodeBytes(ids) {
        return Buffer.concat(ids.filter((id) => id !== this.eos).map((id) => this.bytes[id]));
    }
}

class Model {
    constructor(session, gen) {
        this.session = session;
        this.gen = gen;
    }

    emptyPast() {
        const { num_layers: layers, num_heads: heads, head_dim: dim } = this.gen;
        const feeds = {};
        for (let i = 0; i < layers; i++) {
            for (const kv of ["key", "value"])
                feeds[`past_key_values.${i}.${kv}`] =
                    new ort.Tensor("float32", new Float32Array(0), [1, heads, 0, dim]);
        }
        return feeds;
    }

    // Runs ids at positions pastLen.. with `past` (tensors by input name);
    // returns {next: the argmax of the last position, present: by input name}.
    async step(ids, pastLen, past) {
        const n = ids.length;
        const feeds = {
            input_ids: new ort.Tensor("int64", BigInt64Array.from(ids, BigInt), [1, n]),
            position_ids: new ort.Tensor("int64", BigInt64Array.from(ids, (_, i) => BigInt(pastLen + i)),
                                         [1, n]),
            attention_mask: new ort.Tensor("int64", new BigInt64Array(pastLen + n).fill(1n),
                                           [1, pastLen + n]),
            ...past,
        };
        const out = await this.session.run(feeds);
        const vocab = this.gen.vocab_size;
        const logits = out.logits.data;
        if (out.logits.dims.join() !== [1, n, vocab].join()) fail("logits have shape " + out.logits.dims);
        let next = 0;
        const base = (n - 1) * vocab;
        for (let v = 1; v < vocab; v++) if (logits[base + v] > logits[base + next]) next = v;
        const present = {};
        for (let i = 0; i < this.gen.num_layers; i++) {
            for (const kv of ["key", "value"])
                present[`past_key_values.${i}.${kv}`] = out[`present.${i}.${kv}`];
        }
        return { next, present };
    }

    async generate(tok, prompt, maxTokens, kvCache) {
        const promptIds = tok.encode(prompt);
        if (promptIds.length === 0) fail("empty prompt");
        if (promptIds.length >= this.gen.max_context)
            fail("prompt of " + promptIds.length + " tokens fills the context");
        const room = this.gen.max_context - promptIds.length;
        const limit = maxTokens === null || maxTokens === undefined ? room : Math.min(maxTokens, room);
        const out = [];
        let finish = "length";
        let seq = promptIds.slice();
        let past = this.emptyPast();
        let pending = promptIds; // what the next step feeds
        while (out.length < limit) {
            const r = kvCache ? await this.step(pending, seq.length - pending.length, past)
                              : await this.step(seq, 0, this.emptyPast());
            if (r.next === tok.eos) {
                finish = "stop";
                break;
            }
            out.push(r.next);
            seq.push(r.next);
            past = r.present;
            pending = [r.next];
        }
        const bytes = tok.decodeBytes(out);
        return {
            prompt,
            tokens: out,
            text: new TextDecoder("utf-8").decode(bytes),
            text_hex: bytes.toString("hex"),
            finish_reason: finish,
            num_input_tokens: promptIds.length,
            num_output_tokens: out.length,
        };
    }
}

async function main() {
    const dir = process.argv[2];
    if (!dir || process.argv.length !== 3) fail("usage: node reference_generate.mjs MODEL_DIR < job.json");
    let job;
    try {
        job = JSON.parse(readFileSync(0, "utf8"));
    } catch (e) {
        fail("job: " + e.message);
    }
    if (!Array.isArray(job.prompts) || job.prompts.length > MAX_PROMPTS ||
        !job.prompts.every((p) => typeof p === "string"))
        fail("job: prompts must be an array of at most " + MAX_PROMPTS + " strings");
    const tok = new Tokenizer(JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8")));
    if (job.mode === "tokenize") {
        const out = job.prompts.map((p) => ({ prompt: p, ids: tok.encode(p) }));
        process.stdout.write(JSON.stringify(out) + "\n");
        return;
    }
    if (job.mode !== "generate") fail("job: mode must be generate or tokenize");
    const maxTokens = job.max_tokens ?? null;
    if (maxTokens !== null && !(Number.isInteger(maxTokens) && maxTokens >= 1))
        fail("job: max_tokens must be a positive integer");
    const gen = JSON.parse(readFileSync(join(dir, "generation.json"), "utf8"));
    if (gen.vocab_size !== tok.vocabSize || gen.eos_token_id !== tok.eos)
        fail("generation.json disagrees with tokenizer.json");
    const session = await ort.InferenceSession.create(join(dir, "model.onnx"), {
        intraOpNumThreads: 1,
        interOpNumThreads: 1,
        executionMode: "sequential",
        graphOptimizationLevel: "all",
    });
    const model = new Model(session, gen);
    const results = [];
    for (const p of job.prompts) results.push(await model.generate(tok, p, maxTokens, job.kv_cache ?? true));
    process.stdout.write(JSON.stringify(results) + "\n");
}

await main();
