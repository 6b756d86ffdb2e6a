/*
 * memory: what each loaded version takes in host memory, and the budget
 * (--model-memory-budget) a load must fit in.
 *
 * How a version is measured: the process's resident size
 * (base/procmem.h) just before its load and just after it is loaded,
 * warmed up and its scheduler started, malloc's free memory given back to
 * the kernel before each reading, so that the difference counts what the
 * version keeps: ONNX Runtime's copy of the weights and its arena as the
 * warm-up left it, the session's threads, inferd's own buffers (batch
 * arenas, the preprocessing pipeline). Loads run one at a time (at start
 * on the thread that opens the repository, then on its manager thread),
 * so two loads never share a window; ONNX Runtime's one-time state is
 * built before the first (backend/onnxruntime.h). Requests
 * served meanwhile add their transient buffers (small beside a model).
 * What the figure cannot see: an arena that grows later under larger
 * batches than the warm-up's, and a generative model's KV cache (its own
 * budget, --kv-cache-bytes). The process's whole resident size is the
 * inferd_process_resident_memory_bytes metric.
 *
 * The budget: before a version loads, its files' size (the model and what
 * is read beside it; ONNX Runtime holds at least the weights) is added to
 * what the loaded versions measured; over the budget, the load is refused
 * before it starts. A version a reload replaces still counts until it is
 * unloaded, so a reload needs room for both.
 *
 * Threads: model_memory_admit(), _sample() and _account() on the thread
 * that loads (one at a time); _release() where a version is freed;
 * model_memory_in_use() on any.
 */
#ifndef INFERD_MODEL_MEMORY_H
#define INFERD_MODEL_MEMORY_H

#include <stdint.h>

#include "base/error.h"
#include "model/version.h"

/* A reading for the start of a load window (trims malloc first). */
uint64_t model_memory_sample(void);

/* The version loaded since `before` (model_memory_sample): sets
 * m->memory_bytes to the growth (0 if the process shrank) and counts it as
 * in use until model_memory_release(m). */
void model_memory_account(struct model *m, uint64_t before);

/* m is unloaded: its bytes no longer count. */
void model_memory_release(const struct model *m);

/* Bytes the loaded versions measured, all together. */
uint64_t model_memory_in_use(void);

/* Whether version `version` of `name`, whose files are in version_dir,
 * fits in `budget` bytes (0: no budget, always). Returns ST_OK, or
 * ST_ERROR with err (400) saying what is in use, what the files need and
 * what to change. */
int model_memory_admit(const char *name, const char *version, const char *version_dir,
                       uint64_t budget, struct error *err);

#endif
