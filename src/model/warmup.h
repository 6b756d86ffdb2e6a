/*
 * warmup: runs a model version's warm-up executions on each of its backend
 * instances before the version is published, so that the first requests do
 * not pay for ONNX Runtime's lazy allocations and kernel selection.
 *
 * Samples come from the config's model_warmup entries (Triton's
 * ModelWarmup). Each entry runs `count` times (0 = once, Triton's default)
 * on every instance, through m->backend->execute()/release() directly: the
 * scheduler is not involved and the model is not yet visible to clients.
 * Inputs of an entry:
 *   shape    the entry's dims, with the entry's batch_size prepended when
 *            the model has a batch dimension (max_batch_size > 0).
 *   zero_data      zeros; BYTES elements are empty strings.
 *   random_data    deterministic pseudo-random data (xorshift64*, a fixed
 *                  seed per input, so every load warms up identically):
 *                  FP16/BF16/FP32/FP64 in [0, 1), BOOL 0/1, integers in
 *                  [0, 128) (small non-negative values stay valid as
 *                  indices and fit every integer type), BYTES 1 to 8
 *                  printable ASCII characters.
 *   input_data_file  raw bytes from <repo>/<model>/warmup/<file>, holding
 *                  ONE sample (the entry's dims, row-major, little-endian)
 *                  which is repeated batch_size times along the batch
 *                  dimension, as Triton does. For fixed-size types the file
 *                  must hold exactly count*dtype_size bytes; for BYTES it
 *                  holds exactly `count` elements, each a 4-byte
 *                  little-endian length followed by that many bytes
 *                  (Triton's format), and nothing after them.
 * Every model input must be named by the entry (the backend needs them all;
 * Triton requires it too), and every model output is requested.
 *
 * Without model_warmup entries Triton warms nothing up; inferd instead runs
 * ONE zero-filled execution per distinct preferred batch size of the
 * dynamic batcher (config order), or one of batch 1 when the model has no
 * preferred sizes or dynamic batching is off; a model without a batch
 * dimension gets one execution with its own dims. Every variable non-batch
 * dimension is set to 1. The sizes are those of the effective config, so a
 * model without config.pbtxt, or with `dynamic_batching {}`, whose
 * preferred size model_config_check sets to max_batch_size, warms up at
 * max_batch_size (MODEL_CONFIG_DEFAULT_MAX_BATCH without a config). The
 * reason: a default warm-up at the batch sizes the batcher aims for moves
 * the first-request latency spike out of the serving path at the cost of
 * a few milliseconds of load time. Zeros are not valid inputs of every
 * model (a Resize with zero scales, a Slice with zero steps), so the caller
 * treats a failed default warm-up as a warning and serves the version
 * anyway, while a failed model_warmup entry fails the load (Triton's rule).
 *
 * Memory: each warm-up sample has its own arenas (input data, and the
 * backend's output memory, which is reset after every execution), freed
 * before the next sample; input data is bounded by WARMUP_MAX_BYTES.
 */
#ifndef INFERD_MODEL_WARMUP_H
#define INFERD_MODEL_WARMUP_H

#include <stdint.h>

#include "base/error.h"
#include "model/version.h"

/* Ceiling on the input data of one warm-up sample (all inputs, whole
 * batch), and on one input data file. */
#define WARMUP_MAX_BYTES ((size_t)1 << 30)

/*
 * Runs the warm-up of m on m->instances[0..m->ninstances). m must be fully
 * loaded (backend, instances, info and the checked config); it is only
 * read. Call on the repository thread before the version is published: the
 * instances must not be executing anything else.
 * Returns 0, or ST_ERROR with err->status 500 and err->msg "warm-up '<name>'
 * failed: <detail>", where <name> is the entry's name (for the default
 * warm-up "default_batch_<n>", or "default" without a batch dimension) and
 * <detail> names the input, the file with expected vs actual size, or the
 * instance and the backend's message. The first failure stops the warm-up.
 * *elapsed_us (if not NULL) receives the time spent, also on failure.
 */
int model_warmup(const struct model *m, uint64_t *elapsed_us, struct error *err);

#endif
