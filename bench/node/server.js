'use strict';
/*
 * make bench, experiment 9: "what users build instead" of a model server.
 *
 * A Node.js HTTP server (the plain `http` module, no framework, one process)
 * serving one ONNX model through the npm package onnxruntime-node with the
 * KServe v2 JSON protocol inferd speaks:
 *
 *   GET  /v2/health/ready             200 once the model is loaded
 *   POST /v2/models/<model>/infer     {"inputs":[{"name","shape","datatype":"FP32","data"}]}
 *                                     -> {"model_name","model_version","id"?,
 *                                         "outputs":[{"name","datatype","shape","data"}]}
 *
 * Each request is one session.run() of its own (no batching across
 * requests): the straightforward server a team writes around the library.
 * Only FP32 inputs and outputs, flat or nested "data"; errors are 400/404
 * with {"error": "..."} like inferd's.
 *
 *   node bench/node/server.js --model FILE [--name mlp] [--host 127.0.0.1] [--port 8000]
 *                             [--intra-op-threads 1]
 *
 * Session options match inferd's ONNX Runtime backend
 * (src/backend/onnxruntime.c): intra-op threads as given (scripts/bench.sh
 * passes the server core count, 1 on a 2-CPU machine), 1 inter-op thread,
 * all graph optimizations, sequential execution. onnxruntime-node is found
 * through NODE_PATH (scripts/bench.sh points it at the copy scripts/deps.sh
 * --bench installed).
 */
const http = require('http');
const ort = require('onnxruntime-node');

function parseArgs(argv) {
    const o = {model: null, name: 'mlp', host: '127.0.0.1', port: 8000, intraOpThreads: 1};
    for (let i = 0; i < argv.length; i += 2) {
        const k = argv[i], v = argv[i + 1];
        if (v === undefined) throw new Error('missing value for ' + k);
        if (k === '--model') o.model = v;
        else if (k === '--name') o.name = v;
        else if (k === '--host') o.host = v;
        else if (k === '--port') o.port = Number(v);
        else if (k === '--intra-op-threads') o.intraOpThreads = Number(v);
        else throw new Error('unknown option ' + k);
    }
    if (!o.model) throw new Error('--model FILE is required');
    return o;
}

class BadRequest extends Error {}

function shapeSize(shape) {
    return shape.reduce((n, d) => n * d, 1);
}

// One KServe v2 input -> an ort.Tensor of the model's input.
function toTensor(input, wantName) {
    if (!input || typeof input !== 'object') throw new BadRequest('input must be an object');
    if (input.name !== wantName) throw new BadRequest("unknown input '" + input.name + "'");
    if (input.datatype !== 'FP32') throw new BadRequest('only FP32 inputs are served');
    const shape = input.shape;
    if (!Array.isArray(shape) || !shape.every((d) => Number.isInteger(d) && d >= 0))
        throw new BadRequest("input '" + input.name + "': bad shape");
    const flat = Array.isArray(input.data) ? input.data.flat(Infinity) : null;
    if (!flat || flat.length !== shapeSize(shape))
        throw new BadRequest("input '" + input.name + "': data does not match shape");
    return new ort.Tensor('float32', Float32Array.from(flat), shape);
}

function send(res, status, doc) {
    const body = JSON.stringify(doc);
    res.writeHead(status, {'Content-Type': 'application/json',
                           'Content-Length': Buffer.byteLength(body)});
    res.end(body);
}

async function infer(session, name, body) {
    let req;
    try {
        req = JSON.parse(body);
    } catch (e) {
        throw new BadRequest('malformed JSON: ' + e.message);
    }
    if (!req || !Array.isArray(req.inputs) || req.inputs.length !== session.inputNames.length)
        throw new BadRequest('expected ' + session.inputNames.length + ' input(s)');
    const feeds = {};
    session.inputNames.forEach((n, i) => { feeds[n] = toTensor(req.inputs[i], n); });
    const results = await session.run(feeds);
    const resp = {model_name: name, model_version: '1'};
    if (typeof req.id === 'string') resp.id = req.id;
    resp.outputs = session.outputNames.map((n) => ({
        name: n,
        datatype: 'FP32',
        shape: results[n].dims,
        data: Array.from(results[n].data),
    }));
    return resp;
}

async function main() {
    const o = parseArgs(process.argv.slice(2));
    const session = await ort.InferenceSession.create(o.model, {
        intraOpNumThreads: o.intraOpThreads,
        interOpNumThreads: 1,
        graphOptimizationLevel: 'all',
        executionMode: 'sequential',
    });
    const inferPath = '/v2/models/' + o.name + '/infer';
    const server = http.createServer((req, res) => {
        if (req.method === 'GET' && req.url === '/v2/health/ready') {
            res.writeHead(200, {'Content-Length': 0});
            res.end();
            return;
        }
        if (req.method !== 'POST' || req.url !== inferPath) {
            send(res, 404, {error: 'not found: ' + req.method + ' ' + req.url});
            req.resume();
            return;
        }
        const chunks = [];
        req.on('data', (c) => chunks.push(c));
        req.on('end', () => {
            infer(session, o.name, Buffer.concat(chunks).toString('utf8')).then(
                (doc) => send(res, 200, doc),
                (e) => send(res, e instanceof BadRequest ? 400 : 500, {error: e.message}));
        });
    });
    // The load generator keeps its connections for the whole run.
    server.keepAliveTimeout = 120000;
    server.headersTimeout = 121000;
    server.listen(o.port, o.host, () => {
        process.stderr.write('node server: ' + o.name + ' on http://' + o.host + ':' + o.port +
                             ' (onnxruntime-node ' + ort.env.versions.node + ', node ' +
                             process.versions.node + ', intra-op threads ' + o.intraOpThreads +
                             ')\n');
    });
    process.on('SIGTERM', () => process.exit(0));
}

main().catch((e) => {
    process.stderr.write('node server: ' + (e && e.stack ? e.stack : e) + '\n');
    process.exit(1);
});
