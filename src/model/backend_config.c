#include "model/backend_config.h"

#include <string.h>

#include "backend/plugin.h"
#include "base/mem.h"
#include "base/status.h"

static void tensor_decl(const struct model_config_io *io, struct backend_tensor_decl *out)
{
    out->name = io->name;
    out->dtype = io->dtype;
    out->dims = io->has_reshape ? io->reshape : io->dims;
    out->ndim = io->has_reshape ? io->reshape_ndim : io->ndim;
}

int model_backend_config_prepare(const char *text, size_t len, struct model_backend_config *out,
                                 struct error *err)
{
    struct error perr;
    memset(out, 0, sizeof *out);
    if (!text)
        return 0;
    if (model_config_parse(text, len, &out->_parsed, &perr) != 0)
        return error_set(err, perr.status, "config.pbtxt:%s", perr.msg);
    const struct model_config *cfg = &out->_parsed;
    if (!model_config_plugin_backend(cfg))
        return 0;
    if (model_config_require_complete(cfg, err) != 0)
        goto out_free;
    out->_tensors = mem_calloc((size_t)cfg->ninputs + cfg->noutputs + 1, sizeof *out->_tensors);
    out->_params = mem_calloc((size_t)cfg->nparameters + 1, sizeof *out->_params);
    if (!out->_tensors || !out->_params) {
        error_set(err, 500, "out of memory");
        goto out_free;
    }
    for (uint32_t i = 0; i < cfg->ninputs; i++)
        tensor_decl(&cfg->inputs[i], &out->_tensors[i]);
    for (uint32_t i = 0; i < cfg->noutputs; i++)
        tensor_decl(&cfg->outputs[i], &out->_tensors[cfg->ninputs + i]);
    uint32_t nparams = 0;
    for (uint32_t i = 0; i < cfg->nparameters; i++) {
        if (model_config_server_parameter(cfg->parameters[i].key))
            continue; /* the server's own, not the backend's */
        out->_params[nparams].key = cfg->parameters[i].key;
        out->_params[nparams++].value = cfg->parameters[i].string_value;
    }
    out->_config = (struct backend_config){
        .max_batch_size = cfg->max_batch_size,
        .inputs = out->_tensors,
        .outputs = out->_tensors + cfg->ninputs,
        .ninputs = cfg->ninputs,
        .noutputs = cfg->noutputs,
        .parameters = out->_params,
        .nparameters = nparams,
    };
    out->config = &out->_config;
    return 0;
out_free:
    model_backend_config_free(out);
    return ST_ERROR;
}

void model_backend_config_free(struct model_backend_config *c)
{
    mem_free(c->_tensors);
    mem_free(c->_params);
    model_config_free(&c->_parsed);
    memset(c, 0, sizeof *c);
}

int model_backend_for_config(const char *cfg_text, size_t cfg_len, const char *version_dir,
                             const char *model_dir, const char *search_dir,
                             const struct backend_ops **ops, struct error *err)
{
    struct model_config cfg;
    struct error perr;

    *ops = NULL;
    if (!cfg_text)
        return plugin_backend_resolve(NULL, version_dir, model_dir, search_dir, ops, err);
    if (model_config_parse(cfg_text, cfg_len, &cfg, &perr) != 0)
        return error_set(err, perr.status, "config.pbtxt:%s", perr.msg);
    int rc = plugin_backend_resolve(cfg.backend, version_dir, model_dir, search_dir, ops, err);
    model_config_free(&cfg);
    return rc;
}
