#include "api/gen_outputs.h"

#include <string.h>

#include "base/status.h"

static const char *const output_names[GEN_OUTPUTS] = {"text_output", "finish_reason",
                                                      "num_input_tokens", "num_output_tokens"};

bool gen_model_is(const struct model *m)
{
    const char *names[GEN_OUTPUTS];
    return m->engine && m->sched_cfg.decoupled && gen_output_names(m, names) == 0;
}

int gen_output_names(const struct model *m, const char *names[GEN_OUTPUTS])
{
    for (uint32_t k = 0; k < GEN_OUTPUTS; k++) {
        names[k] = NULL;
        for (uint32_t i = 0; i < m->info.noutputs && !names[k]; i++)
            if (strcmp(m->info.outputs[i].name, output_names[k]) == 0)
                names[k] = m->info.outputs[i].name;
        if (!names[k])
            return ST_ERROR;
    }
    return 0;
}

/* The one element of a BYTES [1] tensor. */
static void read_bytes(const struct tensor *t, const char **s, size_t *len)
{
    if (t->dtype != DT_BYTES || tensor_count(t, 2) != 1)
        return;
    const struct tensor_bytes *b = t->data;
    *s = b->ptr;
    *len = b->len;
}

/* The one element of an INT32 [1] tensor, negative values as 0. */
static uint32_t read_count(const struct tensor *t)
{
    int32_t v;
    if (t->dtype != DT_INT32 || tensor_count(t, 2) != 1)
        return 0;
    memcpy(&v, t->data, sizeof v);
    return v > 0 ? (uint32_t)v : 0;
}

void gen_outputs_read(const struct tensor *outs, uint32_t n, struct gen_outputs *g)
{
    memset(g, 0, sizeof *g);
    g->text = g->finish = "";
    for (uint32_t i = 0; i < n; i++) {
        const struct tensor *t = &outs[i];
        if (strcmp(t->name, output_names[0]) == 0)
            read_bytes(t, &g->text, &g->text_len);
        else if (strcmp(t->name, output_names[1]) == 0)
            read_bytes(t, &g->finish, &g->finish_len);
        else if (strcmp(t->name, output_names[2]) == 0)
            g->prompt_tokens = read_count(t);
        else if (strcmp(t->name, output_names[3]) == 0)
            g->completion_tokens = read_count(t);
    }
}
