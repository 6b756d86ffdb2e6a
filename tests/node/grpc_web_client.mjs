// An independent gRPC-Web client for tests/integration/test_grpc_web_clients.py:
// Connect's gRPC-Web transport for Node.js (@connectrpc/connect-node) with
// message classes that protoc-gen-es generated from proto/grpc_service.proto
// (at test time, into --gen DIR).
//
//   node grpc_web_client.mjs --base-url URL --http 1.1|2 --gen DIR [--stall-url URL]
//
// Prints one JSON object: for each call its response messages (binary,
// base64, for the test to compare with native gRPC's) or its error
// {code, message} (Connect's codes are gRPC's).
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-node";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

const { values: args } = parseArgs({
  options: {
    "base-url": { type: "string" },
    http: { type: "string", default: "1.1" },
    gen: { type: "string" },
    "stall-url": { type: "string" },
  },
});
const pb = await import(pathToFileURL(path.join(args.gen, "grpc_service_pb.js")).href);

function client(baseUrl) {
  const transport = createGrpcWebTransport({ baseUrl, httpVersion: args.http });
  return createClient(pb.GRPCInferenceService, transport);
}

const b64 = (schema, msg) => Buffer.from(toBinary(schema, msg)).toString("base64");

async function outcome(fn) {
  try {
    return await fn();
  } catch (e) {
    const err = ConnectError.from(e);
    return { error: { code: err.code, name: Code[err.code], message: err.rawMessage } };
  }
}

function simpleRequest(model, id) {
  const ints = (k) => Array.from({ length: 16 }, (_, i) => i * k);
  return create(pb.ModelInferRequestSchema, {
    modelName: model,
    id,
    inputs: ["INPUT0", "INPUT1"].map((name, k) => ({
      name,
      datatype: "INT32",
      shape: [1n, 16n],
      contents: { intContents: ints(k + 1) },
    })),
  });
}

function digitsRequest() {
  return create(pb.ModelInferRequestSchema, {
    modelName: "digits",
    inputs: [
      {
        name: "pixels",
        datatype: "FP32",
        shape: [1n, 64n],
        contents: { fp32Contents: Array.from({ length: 64 }, (_, i) => i % 16) },
      },
    ],
  });
}

function kjvRequest(prompt, maxTokens, id) {
  return create(pb.ModelInferRequestSchema, {
    modelName: "kjv",
    id,
    inputs: [
      { name: "text_input", datatype: "BYTES", shape: [1n], contents: { bytesContents: [new TextEncoder().encode(prompt)] } },
      { name: "max_tokens", datatype: "INT32", shape: [1n], contents: { intContents: [maxTokens] } },
      { name: "temperature", datatype: "FP32", shape: [1n], contents: { fp32Contents: [0] } },
    ],
  });
}

async function* once(...msgs) {
  for (const m of msgs) yield m;
}

const c = client(args["base-url"]);
const out = {};
out.serverLive = await outcome(async () => {
  const r = await c.serverLive({});
  return { live: r.live, messages: [b64(pb.ServerLiveResponseSchema, r)] };
});
out.modelMetadata = await outcome(async () => ({
  messages: [b64(pb.ModelMetadataResponseSchema, await c.modelMetadata({ name: "simple" }))],
}));
out.simple = await outcome(async () => {
  let header;
  const r = await c.modelInfer(simpleRequest("simple", "node-1"), {
    onHeader: (h) => (header = Object.fromEntries(h.entries())),
  });
  return { messages: [b64(pb.ModelInferResponseSchema, r)], header };
});
out.digits = await outcome(async () => ({
  messages: [b64(pb.ModelInferResponseSchema, await c.modelInfer(digitsRequest()))],
}));
out.notFound = await outcome(() => c.modelInfer(simpleRequest("no-such-model", "")));
if (args.http === "2") {
  // ModelStreamInfer is bidirectional: over gRPC-Web the requests go in the
  // body (ended), the responses come back one by one as a server stream.
  out.stream = await outcome(async () => {
    const messages = [];
    const arrivals = [];
    const t0 = performance.now();
    for await (const r of c.modelStreamInfer(once(kjvRequest("In the beginning", 12, "node-s1")))) {
      messages.push(b64(pb.ModelStreamInferResponseSchema, r));
      arrivals.push(performance.now() - t0);
    }
    return { messages, arrivals };
  });
}
if (args["stall-url"]) {
  const slow = client(args["stall-url"]);
  const echo = create(pb.ModelInferRequestSchema, {
    modelName: "echo",
    inputs: [{ name: "IN", datatype: "INT32", shape: [1n, 4n], contents: { intContents: [1, 2, 3, 4] } }],
  });
  // The first call fills the model; the second's deadline passes while it waits.
  const first = outcome(() => slow.modelInfer(echo));
  await new Promise((r) => setTimeout(r, 200));
  out.deadline = await outcome(() => slow.modelInfer(echo, { timeoutMs: 300 }));
  out.deadlineFirst = await first;
  if (out.deadlineFirst.error === undefined) out.deadlineFirst = { ok: true };
}
process.stdout.write(JSON.stringify(out));
