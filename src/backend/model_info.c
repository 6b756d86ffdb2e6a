#include "backend/backend.h"

#include <stdbool.h>

#include "base/mem.h"
#include "core/dtype.h"

static void free_ios(struct model_io *ios, uint32_t n)
{
    if (!ios)
        return;
    for (uint32_t i = 0; i < n; i++)
        mem_free(ios[i].name);
    mem_free(ios);
}

void model_info_free(struct model_info *info)
{
    free_ios(info->inputs, info->ninputs);
    free_ios(info->outputs, info->noutputs);
    info->inputs = info->outputs = NULL;
    info->ninputs = info->noutputs = 0;
}

int model_io_check(const struct model_io *io, const struct tensor *t, struct error *err)
{
    if (t->dtype != io->dtype)
        return error_set(err, 400, "input '%s': datatype %s does not match the model's %s",
                         t->name, dtype_name(t->dtype), dtype_name(io->dtype));
    bool match = t->ndim == io->ndim;
    for (uint32_t i = 0; match && i < t->ndim; i++)
        if (io->dims[i] >= 0 && io->dims[i] != t->shape[i])
            match = false;
    if (!match) {
        char got[128], want[128];
        shape_format(t->shape, t->ndim, got, sizeof got);
        shape_format(io->dims, io->ndim, want, sizeof want);
        return error_set(err, 400, "input '%s': shape %s does not match the model's %s",
                         t->name, got, want);
    }
    return 0;
}
