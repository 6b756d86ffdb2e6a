/*
 * backend_config: what a model's config.pbtxt tells its backend, for the
 * backend layer, which never parses a configuration itself: which backend
 * serves the model, and, for a plugin backend, the complete configuration
 * as a struct backend_config (backend/backend.h) for its load().
 *
 * Lifecycle: model_backend_config_prepare fills a struct
 * model_backend_config that owns the parsed configuration the `config`
 * pointer refers to; model_backend_config_free releases it, after the
 * last backend load() that used it. Any thread; not shared.
 */
#ifndef INFERD_MODEL_BACKEND_CONFIG_H
#define INFERD_MODEL_BACKEND_CONFIG_H

#include <stddef.h>

#include "backend/backend.h"
#include "base/error.h"
#include "model/config.h"

struct model_backend_config {
    /* The configuration a plugin backend loads with; NULL without
     * config.pbtxt or for ONNX Runtime (which ignores it). */
    const struct backend_config *config;

    struct backend_config _config;
    struct model_config _parsed;
    struct backend_tensor_decl *_tensors;
    struct backend_param *_params;
};

/*
 * Parses config.pbtxt text[0..len) (text NULL: no config) and, when its
 * `backend` is a plugin, requires it complete (model_config_require_complete)
 * and fills out->config. Returns 0 (free with model_backend_config_free,
 * also when out->config is NULL), or ST_ERROR with err: 400
 * "config.pbtxt:<parse error>" or the completeness error, 500 out of
 * memory; *out is then empty.
 */
int model_backend_config_prepare(const char *text, size_t len, struct model_backend_config *out,
                                 struct error *err);
void model_backend_config_free(struct model_backend_config *c);

/*
 * The backend for a model whose config.pbtxt text is cfg_text[0..cfg_len)
 * (NULL: no config, so ONNX Runtime): the config's `backend` decides, as
 * plugin_backend_resolve (backend/plugin.h) finds it. A config that does not
 * parse fails with 400 "config.pbtxt:<error>"; else as
 * plugin_backend_resolve.
 */
int model_backend_for_config(const char *cfg_text, size_t cfg_len, const char *version_dir,
                             const char *model_dir, const char *search_dir,
                             const struct backend_ops **ops, struct error *err);

#endif
