/*
 * prep: preprocessing inside the server. A model declares raw inputs in
 * <model>/preprocess.json (docs/preprocessing.md); clients send images,
 * sounds or texts as BYTES elements of those inputs (or as the body of
 * POST /v2/models/{m}/infer with the modality's Content-Type), and the
 * preprocessing stage turns them into the tensors the graph takes before
 * the request reaches the scheduler.
 *
 *   {"inputs": [{"name": "image", "feeds": "pixels", "image": {...}}]}
 *
 * "name" is the raw input clients see (BYTES, one element per batch row:
 * dims [-1,1] for a batched model, [1] otherwise); "feeds" the graph input
 * its modality's first tensor feeds (modality.h; a text's attention mask
 * names its own). A request gives either a raw input or the tensors it
 * feeds (400 when both or neither): both paths reach the same graph.
 *
 * Attaching (prep_attach, the registry's attach_preprocess hook, manager
 * thread): parses the file, checks every fed input against the graph
 * (datatype; a row shape that equals the input's dims, or has as many
 * elements, or fills its one variable dim), appends the raw inputs to
 * m->info and marks them and the fed inputs optional. A model without the
 * file is left alone; a generative model cannot have one.
 *
 * The stage (prep_stage, after decode): a request without raw inputs goes
 * on at once (its fed tensors must all be there). Otherwise the call is
 * deferred to the preprocessing pool (pool.h): each element runs through
 * its modality on a worker, the rows are stacked into one tensor per fed
 * input (a text's rows padded with zeros to the request's longest), and
 * the request's inputs become the graph's, in its order. The call resumes
 * on its loop; an error answers it (400/413 from the modality, prefixed
 * with the input's name; 503 with Retry-After when the pool's waiting line
 * is full; 499 when the client left before its turn). The tensors live
 * until the call ends (the stage's done()).
 *
 * Observability: inferd_preprocess_duration_seconds{model,version,stage}
 * (each modality step, and "queue": the wait for a worker),
 * inferd_preprocess_errors_total{model,version,status}; a sampled request
 * gets a child span "preprocess" with one attribute per step
 * (inferd.preprocess.<stage>_us).
 */
#ifndef INFERD_PREPROCESS_PREP_H
#define INFERD_PREPROCESS_PREP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/error.h"
#include "core/infer.h"
#include "model/version.h"
#include "preprocess/modality.h"
#include "preprocess/pool.h"
#include "serve/call.h"

#define PREP_FILE "preprocess.json"
#define PREP_FILE_MAX (64u << 10)
#define PREP_MAX_INPUTS 8
/* Output memory of one request's preprocessing, all rows together. */
#define PREP_MAX_REQUEST_BYTES (256u << 20)

/* The modalities preprocess.json may use (modality.h), set once at start
 * by main before any model loads; list must outlive every model. */
void prep_modalities_set(const struct prep_modality *const *list, size_t n);

/* The registry's attach_preprocess hook (model.h). */
int prep_attach(struct model *m, const char *model_dir, struct error *err);

/* The stage's configuration: the pool it defers to. */
struct prep_stage_cfg {
    struct prep_pool *pool;
};
enum stage_result prep_stage(struct infer_call *call, const void *cfg);
void prep_stage_done(struct infer_call *call, const void *cfg);

/* A raw request body (POST .../infer with a media type of a modality,
 * e.g. "image/png"; parameters such as "; charset=utf-8" allowed): when
 * m has a raw input of that modality, fills req->inputs with that one
 * input (the body as its single element, pointing into body) and returns
 * 1; all outputs are returned. 0 when the media type is no modality's
 * (the body is KServe JSON). -1 with err: 415 when m has no raw input for
 * it (the message lists what m accepts), 400 when it has two. */
int prep_decode_raw(struct infer_request *req, const struct model *m, const char *ctype,
                    size_t ctype_len, const char *body, size_t len, struct error *err);

/* What input i of m->info is when it is a raw input (true): its
 * modality's key and media types, and the graph inputs it feeds. false for
 * a graph input or a model without preprocessing. For metadata. */
struct prep_raw_info {
    const char *modality;
    const char *const *content_types; /* NULL-ended */
    const char *feeds[PREP_MAX_OUTPUTS];
    uint32_t nfeeds;
};
bool prep_raw_info(const struct model *m, uint32_t i, struct prep_raw_info *out);

/* Writes the metrics above (Prometheus text). */
void prep_write_metrics(struct buf *out);

#endif
