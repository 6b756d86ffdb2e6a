/*
 * gen_floor: `inferd bench --generate-floor`, the in-process generation loop
 * that the server's single-stream tokens/s is compared with (make bench,
 * experiment 12).
 *
 * It loads a generative model version directory (generation.json,
 * tokenizer.json, model.onnx: the interface of models/kjv) through the ONNX
 * Runtime backend (backend/onnxruntime.h) and runs the ideal single-stream
 * loop: encode the prompt, one prefill step over the whole prompt, then
 * greedy decode steps of one token each, feeding each step's present.* outputs
 * back as the next step's past_key_values.* inputs where ONNX Runtime left
 * them (no copy, no block pool, no batching), until the end-of-text token,
 * max tokens, or a full context (prompt + generated = max_context).
 * Greedy = the argmax of the logits, the lowest id on ties (gen/sample.h's
 * rule), so the text equals the server's greedy output for the same prompt.
 *
 * --batch B runs B copies of the prompt as one batch, every row decoding the
 * same tokens (row 0 decides when to stop): the ideal batched loop, B tokens
 * per step, for comparison with the server's aggregate rate at B streams.
 *
 * Counting: every sampled token is generated, the end-of-text token too
 * (it cost a forward pass; it adds no text). Time of a run: from before the
 * prompt is encoded to after the last token is chosen; TTFT: to the first
 * token; TPOT: (run - TTFT) / (tokens - 1); tokens/s counts every row's
 * tokens. A warm-up run comes first and is
 * not measured; --repeat runs are; the report gives each and their median.
 *
 * Exit status: 0 measured, 1 a model that cannot be loaded or run, 2 usage.
 */
#ifndef INFERD_BENCH_GEN_FLOOR_H
#define INFERD_BENCH_GEN_FLOOR_H

/* argv[0] is "bench"; argv holds --generate-floor somewhere. Prints the
 * report on stdout (text, or JSON with --json), diagnostics on stderr. */
int gen_floor_main(int argc, char **argv);

#endif
