/*
 * modality: what one kind of raw data (an image, a sound, a text) must
 * provide to turn one element of a raw BYTES input into tensors, the
 * contract between the preprocessing stage (prep.h) and image.c, audio.c
 * and text.c.
 *
 * A model declares its raw inputs in <model>/preprocess.json
 * (docs/preprocessing.md):
 *
 *   {"inputs": [{"name": "image", "feeds": "pixels", "image": {...}}]}
 *
 * The stage parses "name" and "feeds" and hands the object under the
 * modality's key ("image", "audio", "text") to that modality's parse().
 * Each element of the raw input (one per batch row) goes through run(),
 * which produces the modality's tensors for that row: its first tensor
 * feeds the input named by "feeds", the others (a text's attention mask)
 * the inputs their names say.
 *
 * Shapes. Every tensor of a modality has a shape for one row (no batch
 * dimension). Image and audio shapes are fixed by their configuration; a
 * text's are [L], L its token count (1..max_length), declared as [-1] by
 * outputs(). The stage fits them to the model: when the fed input's dims
 * differ but have the same element count (digits' [64] for a [8,8,1]
 * image), the data is reinterpreted in that shape (row-major order kept).
 *
 * Errors of run(): 400 for data that is not what the modality accepts
 * (not a PNG or JPEG, a truncated file, a WAV in an unsupported encoding,
 * invalid UTF-8), 413 for data over a configured limit (encoded bytes,
 * pixels read from the header before decoding, seconds of audio, text
 * bytes). The message names the problem, not the input (the stage
 * prefixes "input 'image': ").
 *
 * Threads: parse() and free() run on the repository manager thread;
 * run() on preprocessing workers, many at once over the same cfg (it must
 * only read it).
 */
#ifndef INFERD_PREPROCESS_MODALITY_H
#define INFERD_PREPROCESS_MODALITY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/error.h"
#include "base/json.h"
#include "core/dtype.h"
#include "core/tensor.h"

#define PREP_MAX_OUTPUTS 2 /* tensors one modality produces per row */
#define PREP_MAX_STAGES 8  /* timed steps of one run */

/* What one run spent, by step ("decode", "resize", "normalize",
 * "resample", "features", "tokenize", ...: static strings, at most
 * PREP_MAX_STAGES distinct names per modality). run() appends; the stage
 * turns them into the histogram inferd_preprocess_duration_seconds{stage}
 * and trace span events. */
struct prep_timings {
    struct {
        const char *stage;
        uint64_t ns;
    } t[PREP_MAX_STAGES];
    uint32_t n;
};

/* Appends one step's time (no-op when full). */
static inline void prep_timing_add(struct prep_timings *tm, const char *stage, uint64_t ns)
{
    if (tm->n < PREP_MAX_STAGES) {
        tm->t[tm->n].stage = stage;
        tm->t[tm->n].ns = ns;
        tm->n++;
    }
}

/* One tensor a modality produces per row. */
struct prep_output {
    const char *name; /* NULL for the first (it feeds "feeds"); else the input it feeds */
    enum dtype dtype;
    uint32_t ndim;
    int64_t dims[TENSOR_MAX_DIMS]; /* one row; -1: variable (text length) */
};

/* Sets *t to the tensor o describes (name, dtype, ndim, dims: the real
 * length for a variable dim) holding data, nbytes bytes: how run() fills
 * its outputs. */
static inline void prep_tensor_set(struct tensor *t, const struct prep_output *o, void *data,
                                   size_t nbytes)
{
    *t = (struct tensor){
        .name = o->name, .dtype = o->dtype, .ndim = o->ndim, .data = data, .nbytes = nbytes};
    memcpy(t->shape, o->dims, sizeof o->dims);
}

/* Memory for run()'s outputs (mem.c): blocks that live until the request
 * ends, within a byte limit. Scratch space a run needs only while it runs
 * is its own (malloc/free). One thread at a time. */
struct prep_mem {
    struct prep_block *blocks;
    size_t bytes, limit;
};
void prep_mem_init(struct prep_mem *mem, size_t limit);
/* 16-byte aligned, or NULL when out of memory or over the limit (run()
 * then fails with 500). */
void *prep_mem_alloc(struct prep_mem *mem, size_t n);
/* Frees every block; the mem may be used again. */
void prep_mem_release(struct prep_mem *mem);

struct prep_modality {
    const char *key; /* "image", "audio", "text": its key in preprocess.json */
    /* Media types a raw request body of this modality may carry
     * (POST /v2/models/{m}/infer with that Content-Type), NULL-ended. */
    const char *const *content_types;
    /* Parses the modality's object of preprocess.json; model_dir is where
     * files it names are read from (a tokenizer). 0 with *cfg, or ST_ERROR with
     * err (400; the message names the key: "image.resize.width must be an
     * integer from 1 to 16384"). Unknown keys are errors. */
    int (*parse)(const struct json_value *obj, const char *model_dir, void **cfg,
                 struct error *err);
    void (*free)(void *cfg);
    /* The tensors a row yields: fills out[0..n), returns n (1..PREP_MAX_OUTPUTS). */
    uint32_t (*outputs)(const void *cfg, struct prep_output *out);
    /* Turns one element (data, len bytes) into out[0..n) as outputs() said:
     * name, dtype, ndim and shape set (the real length for a variable
     * dim), data from prep_mem_alloc, nbytes. 0, or ST_ERROR with err (see
     * above). */
    int (*run)(const void *cfg, const uint8_t *data, size_t len, struct prep_mem *mem,
               struct tensor *out, struct prep_timings *tm, struct error *err);
};

extern const struct prep_modality prep_image; /* image.c */
extern const struct prep_modality prep_audio; /* audio.c */
extern const struct prep_modality prep_text;  /* text.c */

#endif
