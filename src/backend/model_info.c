#include "backend/backend.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

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

int model_io_check(const char *model_name, const struct model_io *io, const struct tensor *t,
                   struct error *err)
{
    if (t->dtype != io->dtype)
        return error_set(err, 400,
                         "inference input '%s' data-type is '%s', but model '%s' expects '%s'",
                         t->name, dtype_name(t->dtype), model_name, dtype_name(io->dtype));
    bool match = t->ndim == io->ndim;
    for (uint32_t i = 0; match && i < t->ndim; i++)
        if (io->dims[i] >= 0 && io->dims[i] != t->shape[i])
            match = false;
    if (!match) {
        char got[128], want[128];
        shape_format(t->shape, t->ndim, got, sizeof got);
        shape_format(io->dims, io->ndim, want, sizeof want);
        return error_set(err, 400,
                         "unexpected shape for input '%s' for model '%s'. Expected %s, got %s",
                         t->name, model_name, want, got);
    }
    return 0;
}

/* Room model_io_unknown keeps for the list of tensors in its message. */
#define IO_LIST_MAX 160

void model_io_list(const struct model_io *ios, uint32_t n, char *out, size_t size)
{
    static const char more[] = ", ...";
    size_t len = 0;
    out[0] = '\0';
    if (n == 0) {
        snprintf(out, size, "none");
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        char shape[128], item[ERROR_MSG_MAX];
        shape_format(ios[i].dims, ios[i].ndim, shape, sizeof shape);
        int w = snprintf(item, sizeof item, "%s'%s' (%s %s)", i ? ", " : "", ios[i].name,
                         dtype_name(ios[i].dtype), shape);
        /* The last tensor needs no room for the ellipsis after it. */
        size_t keep = i + 1 < n ? sizeof more - 1 : 0;
        if (w < 0 || (size_t)w >= sizeof item || len + (size_t)w + keep >= size) {
            const char *tail = i ? more : "...";
            if (len + strlen(tail) < size)
                memcpy(out + len, tail, strlen(tail) + 1);
            return;
        }
        memcpy(out + len, item, (size_t)w + 1);
        len += (size_t)w;
    }
}

int model_io_unknown(const struct model_info *info, bool input, const char *name,
                     const char *model_name, struct error *err)
{
    const char *what = input ? "input" : "output";
    uint32_t n = input ? info->ninputs : info->noutputs;
    if (n == 0)
        return error_set(err, 400, "unexpected inference %s '%s' for model '%s', which has no %ss",
                         what, name, model_name, what);
    char list[IO_LIST_MAX];
    model_io_list(input ? info->inputs : info->outputs, n, list, sizeof list);
    return error_set(err, 400, "unexpected inference %s '%s' for model '%s', which has %ss: %s",
                     what, name, model_name, what, list);
}
