#include "model/labels.h"

#include <errno.h>
#include <string.h>

#include "base/file.h"
#include "base/mem.h"
#include "base/path.h"
#include "base/status.h"

#define PATH_MAX_LEN 4096

/* A label file name stays inside the model directory: relative, without
 * ".." components. */
static bool name_ok(const char *name)
{
    if (!name[0] || name[0] == '/')
        return false;
    for (const char *p = name; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return false;
        p += n;
        if (*p == '/')
            p++;
    }
    return true;
}

/* Splits text[0..len) into lines (see the header); -1 with err when there
 * are more than MODEL_LABELS_MAX_LINES. */
static int split_lines(struct model_labels *l, size_t len, const char *output, const char *file,
                       struct error *err)
{
    uint64_t count = 0;
    for (size_t i = 0; i < len; i++)
        count += l->text[i] == '\n';
    if (len && l->text[len - 1] != '\n')
        count++;
    if (count > MODEL_LABELS_MAX_LINES)
        return error_set(err, 400, "output '%s': label file '%s' has more than %u lines", output,
                         file, MODEL_LABELS_MAX_LINES);
    if (count == 0)
        return 0;
    struct tensor_bytes *lines = mem_alloc(count * sizeof *lines);
    if (!lines)
        return error_set(err, 500, "out of memory");
    const char *p = l->text, *end = l->text + len;
    for (uint64_t k = 0; k < count; k++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl ? nl : end;
        size_t n = (size_t)(stop - p);
        if (n && p[n - 1] == '\r')
            n--;
        lines[k] = (struct tensor_bytes){.ptr = p, .len = (uint32_t)n};
        p = nl ? nl + 1 : end;
    }
    l->lines = lines;
    l->count = (uint32_t)count;
    return 0;
}

static int load_one(const char *model_dir, const char *output, const char *file,
                    struct model_labels *l, struct error *err)
{
    if (!name_ok(file))
        return error_set(err, 400,
                         "output '%s': label_filename '%s' must be a relative path inside the "
                         "model directory",
                         output, file);
    char path[PATH_MAX_LEN];
    if (!path_fmt(path, sizeof path, "%s/%s", model_dir, file))
        return error_set(err, 400, "output '%s': label_filename '%s' is too long", output, file);
    size_t len;
    int rc = file_read(path, MODEL_LABELS_MAX_BYTES, &l->text, &len);
    if (rc == -EFBIG)
        return error_set(err, 400, "output '%s': label file '%s' is larger than %u bytes", output,
                         file, MODEL_LABELS_MAX_BYTES);
    if (rc)
        return error_set(err, rc == -ENOMEM ? 500 : 400,
                         "output '%s': cannot read label file %s: %s", output, path, strerror(-rc));
    return split_lines(l, len, output, file, err);
}

int model_labels_load(const char *model_dir, const struct model_config *cfg,
                      const struct model_info *info, struct model_labels **out, struct error *err)
{
    *out = NULL;
    struct model_labels *labels = NULL;
    for (uint32_t i = 0; i < cfg->noutputs; i++) {
        const struct model_config_io *io = &cfg->outputs[i];
        if (!io->label_filename || !io->label_filename[0])
            continue;
        uint32_t k = 0;
        while (k < info->noutputs && strcmp(info->outputs[k].name, io->name) != 0)
            k++;
        if (k == info->noutputs)
            continue; /* the check refused configured outputs the model lacks */
        if (!labels && !(labels = mem_calloc(info->noutputs, sizeof *labels)))
            return error_set(err, 500, "out of memory");
        if (load_one(model_dir, io->name, io->label_filename, &labels[k], err) != 0) {
            model_labels_free(labels, info->noutputs);
            return ST_ERROR;
        }
    }
    *out = labels;
    return 0;
}

void model_labels_free(struct model_labels *labels, uint32_t n)
{
    if (!labels)
        return;
    for (uint32_t i = 0; i < n; i++) {
        mem_free((void *)labels[i].lines);
        mem_free(labels[i].text);
    }
    mem_free(labels);
}
