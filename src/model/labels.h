/*
 * labels: the class labels of a model's outputs, read from the files its
 * configuration names (Triton's `label_filename`), for the classification
 * extension (serve/classify.h).
 *
 * An output's `label_filename` is a file in the model directory (next to
 * config.pbtxt), given as a relative path without ".." components. It holds
 * one label per line: line i (from 0) is the label of class index i. Lines
 * end at '\n'; a '\r' before it is dropped (CRLF files); a last line without
 * '\n' counts, an empty file has no labels. An empty line means "no label"
 * for its index, as does an index past the last line.
 *
 * model_labels_load() reads every output's file when a version loads and
 * returns them in m->info output order; a missing, unreadable, oversized
 * (MODEL_LABELS_MAX_BYTES, MODEL_LABELS_MAX_LINES) or misnamed file fails
 * the load with a reason naming the output and the file. The labels are
 * immutable afterwards and read by any thread while the version lives.
 */
#ifndef INFERD_MODEL_LABELS_H
#define INFERD_MODEL_LABELS_H

#include <stdint.h>

#include "backend/backend.h"
#include "base/error.h"
#include "core/tensor.h"
#include "model/config.h"

/* Largest label file, in bytes, and most lines in one. */
#define MODEL_LABELS_MAX_BYTES (16u << 20)
#define MODEL_LABELS_MAX_LINES (1u << 20)

/* One output's labels; count 0: none. */
struct model_labels {
    uint32_t count;
    const struct tensor_bytes *lines; /* count entries, pointing into text */
    char *text;                       /* the file's contents */
};

/* Reads the label files cfg names for the outputs of info (matched by
 * name) from model_dir. *out: info->noutputs entries (mem_alloc'd), or
 * NULL when no output has a label file. Returns 0, or ST_ERROR with err (400
 * for a bad file or name, 500 out of memory). */
int model_labels_load(const char *model_dir, const struct model_config *cfg,
                      const struct model_info *info, struct model_labels **out, struct error *err);
/* Frees what model_labels_load returned (n = info->noutputs); NULL is fine. */
void model_labels_free(struct model_labels *labels, uint32_t n);

#endif
