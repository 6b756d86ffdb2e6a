#include "backend/backend.h"
#include "base/mem.h"

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
