/*
 * gen_outputs: the outputs of a generative model's text interface
 * (docs/openai.md; the model's four outputs text_output, finish_reason,
 * num_input_tokens and num_output_tokens, each [1]) as the front ends read
 * them from one response.
 *
 *   gen_model_is(m)              whether m serves the text interface: a
 *                                decoupled version with an engine (local
 *                                generative, or remote from one) and the
 *                                four outputs
 *   gen_output_names(m, names)   the four names, pointers to m's own (the
 *                                request's output_names), or ST_ERROR when m
 *                                lacks one (not a generative model)
 *   gen_outputs_read(outs, n, g) the values of one response, by name; an
 *                                absent or malformed output leaves its
 *                                field empty (text "", counts 0)
 */
#ifndef INFERD_API_GEN_OUTPUTS_H
#define INFERD_API_GEN_OUTPUTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/tensor.h"
#include "model/model.h"

#define GEN_OUTPUTS 4

struct gen_outputs {
    const char *text; /* the response's text (not NUL-terminated) */
    size_t text_len;
    const char *finish; /* "" until the final response */
    size_t finish_len;
    uint32_t prompt_tokens, completion_tokens;
};

bool gen_model_is(const struct model *m);
int gen_output_names(const struct model *m, const char *names[GEN_OUTPUTS]);
void gen_outputs_read(const struct tensor *outs, uint32_t n, struct gen_outputs *g);

#endif
