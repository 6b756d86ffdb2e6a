/*
 * config_arena: the lifecycle of a struct model_config and its memory (see
 * config.h, "Parsing"): model_config_init gives it Triton's defaults and
 * an empty arena, everything the parser and the checker allocate for it
 * comes from that arena, and model_config_free releases it whole.
 */
#include "model/config_parse.h"

#include <string.h>

#define CONFIG_ARENA_CHUNK 4096
#define CONFIG_ARENA_MAX (8u << 20)

char config_empty_string[] = "";

void model_config_init(struct model_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    arena_init(&cfg->_arena, CONFIG_ARENA_CHUNK, CONFIG_ARENA_MAX);
    cfg->name = cfg->platform = cfg->backend = config_empty_string;
    cfg->version_policy.kind = MODEL_VERSIONS_LATEST;
    cfg->version_policy.num_versions = 1;
}

void model_config_free(struct model_config *cfg)
{
    arena_free(&cfg->_arena);
    model_config_init(cfg);
}

/* ---- allocation from the config's arena ---- */

/* An allocation of n bytes failed: the arena's ceiling (a client-side
 * problem, 400) or the heap (500). */
static int fail_alloc(const struct model_config *cfg, size_t n, struct error *err)
{
    const struct arena *a = &cfg->_arena;
    if (a->max - a->used < n + 16)
        return error_set(err, 400, "the model configuration is too large");
    return error_set(err, 500, "out of memory while reading the model configuration");
}

void *model_config_alloc(struct model_config *cfg, size_t count, size_t size, struct error *err)
{
    void *p = arena_calloc(&cfg->_arena, count ? count : 1, size);
    if (!p)
        fail_alloc(cfg, count * size, err);
    return p;
}

char *model_config_strndup(struct model_config *cfg, const char *s, size_t n, struct error *err)
{
    char *d = arena_strndup(&cfg->_arena, s, n);
    if (!d)
        fail_alloc(cfg, n + 1, err);
    return d;
}

void *config_calloc(struct ctx *c, size_t count, size_t size)
{
    return model_config_alloc(c->cfg, count, size, c->err);
}

char *config_strdup(struct ctx *c, const char *s, size_t n)
{
    return model_config_strndup(c->cfg, s, n, c->err);
}
