/*
 * prep_attach.c: preprocess.json, giving a model version its raw inputs
 * (prep.h), and the raw request body.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/file.h"
#include "base/json.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/path.h"
#include "base/status.h"
#include "model/model.h"
#include "preprocess/prep_int.h"

static const struct prep_modality *const *modalities;
static size_t nmodalities;

void prep_modalities_set(const struct prep_modality *const *list, size_t n)
{
    modalities = list;
    nmodalities = n;
}

static void prep_free(void *p)
{
    struct model_prep *mp = p;
    prep_obs_unregister(mp);
    for (uint32_t i = 0; i < mp->nraw; i++)
        if (mp->raw[i].cfg)
            mp->raw[i].mod->free(mp->raw[i].cfg);
    mem_free(mp);
}

static int find_run_input(const struct model *m, const char *name)
{
    for (uint32_t i = 0; i < m->run_info.ninputs; i++)
        if (strcmp(m->run_info.inputs[i].name, name) == 0)
            return (int)i;
    return NOT_FOUND;
}

/* Whether a row of shape out (one dim -1 at most: a text's length) fits
 * the fed input's dims without its batch dim (see modality.h). */
static bool row_fits(const struct prep_output *out, const int64_t *dims, uint32_t ndim)
{
    bool variable = false;
    int64_t n = 1;
    for (uint32_t d = 0; d < out->ndim; d++) {
        if (out->dims[d] < 0)
            variable = true;
        else
            n *= out->dims[d];
    }
    if (variable) { /* the same rank, the variable dim variable there too */
        if (out->ndim != ndim)
            return false;
        for (uint32_t d = 0; d < ndim; d++)
            if (out->dims[d] < 0 ? dims[d] != -1 : dims[d] != -1 && dims[d] != out->dims[d])
                return false;
        return true;
    }
    int64_t fixed = 1;
    uint32_t unknown = 0;
    for (uint32_t d = 0; d < ndim; d++) {
        if (dims[d] < 0)
            unknown++;
        else
            fixed *= dims[d];
    }
    return unknown == 0 ? fixed == n : unknown == 1 && fixed > 0 && n % fixed == 0;
}

static void dims_text(const int64_t *dims, uint32_t ndim, char *out, size_t size)
{
    shape_format(dims, ndim, out, size);
}

/* Checks output k of raw r against the graph input it feeds. */
static int check_feed(const struct model *m, struct prep_raw *r, uint32_t k, const char *feeds,
                      struct error *err)
{
    const struct prep_output *o = &r->outs[k];
    const char *target = o->name ? o->name : feeds;
    int idx = find_run_input(m, target);
    if (idx < 0)
        return error_set(err, 400, "%s: input '%s' feeds '%s', which the model does not have",
                         PREP_FILE, r->name, target);
    const struct model_io *io = &m->run_info.inputs[idx];
    if (io->dtype != o->dtype)
        return error_set(err, 400, "%s: input '%s' produces %s for '%s', which takes %s", PREP_FILE,
                         r->name, dtype_name(o->dtype), target, dtype_name(io->dtype));
    uint32_t skip = m->batched ? 1 : 0;
    if (io->ndim < skip || !row_fits(o, io->dims + skip, io->ndim - skip)) {
        char a[64], b[64];
        dims_text(o->dims, o->ndim, a, sizeof a);
        dims_text(io->dims + skip, io->ndim - skip, b, sizeof b);
        return error_set(err, 400,
                         "%s: input '%s' produces rows of shape %s for '%s', whose "
                         "rows are %s",
                         PREP_FILE, r->name, a, target, b);
    }
    r->feed[k] = (uint32_t)idx;
    return 0;
}

static int parse_input(const struct model *m, const struct json_value *v, const char *model_dir,
                       struct prep_raw *r, const char **feeds, struct error *err)
{
    if (v->type != JSON_OBJECT)
        return error_set(err, 400, "%s: each of \"inputs\" must be an object", PREP_FILE);
    const struct json_value *name = json_get(v, "name"), *fd = json_get(v, "feeds");
    if (!name || name->type != JSON_STRING || name->len == 0 || name->len > 255)
        return error_set(err, 400, "%s: an input needs a \"name\" (a string of 1 to 255 bytes)",
                         PREP_FILE);
    r->name = name->u.str;
    if (!fd || fd->type != JSON_STRING)
        return error_set(err, 400, "%s: input '%s' needs \"feeds\" (the model input it produces)",
                         PREP_FILE, r->name);
    *feeds = fd->u.str;
    const struct json_value *body = NULL;
    for (uint32_t i = 0; i < v->len; i++) {
        const char *key = v->u.members[i].key;
        if (!strcmp(key, "name") || !strcmp(key, "feeds"))
            continue;
        const struct prep_modality *mod = NULL;
        for (size_t k = 0; k < nmodalities && !mod; k++)
            if (!strcmp(modalities[k]->key, key))
                mod = modalities[k];
        if (!mod)
            return error_set(err, 400,
                             "%s: input '%s': unknown key '%s' (expected name, feeds and one of "
                             "image, audio, text)",
                             PREP_FILE, r->name, key);
        if (r->mod)
            return error_set(err, 400, "%s: input '%s' has both '%s' and '%s'", PREP_FILE, r->name,
                             r->mod->key, key);
        r->mod = mod;
        body = &v->u.members[i].value;
    }
    if (!r->mod)
        return error_set(err, 400, "%s: input '%s' needs one of image, audio, text", PREP_FILE,
                         r->name);
    if (body->type != JSON_OBJECT)
        return error_set(err, 400, "%s: input '%s': '%s' must be an object", PREP_FILE, r->name,
                         r->mod->key);
    if (r->mod->parse(body, model_dir, &r->cfg, err) != 0) {
        char msg[ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", err->msg);
        return error_set(err, 400, "%s: input '%s': %s", PREP_FILE, r->name, msg);
    }
    r->nout = r->mod->outputs(r->cfg, r->outs);
    for (uint32_t k = 0; k < r->nout; k++)
        if (check_feed(m, r, k, *feeds, err) != 0)
            return ST_ERROR;
    return 0;
}

/* No two raw inputs share a name, none is a graph input's name, and no
 * graph input is fed twice. */
static int check_names(const struct model *m, const struct model_prep *mp, struct error *err)
{
    for (uint32_t i = 0; i < mp->nraw; i++) {
        const struct prep_raw *r = &mp->raw[i];
        if (find_run_input(m, r->name) >= 0)
            return error_set(err, 400, "%s: input '%s' is already a model input", PREP_FILE,
                             r->name);
        for (uint32_t j = 0; j < i; j++) {
            if (!strcmp(mp->raw[j].name, r->name))
                return error_set(err, 400, "%s: input '%s' declared twice", PREP_FILE, r->name);
            for (uint32_t a = 0; a < r->nout; a++)
                for (uint32_t b = 0; b < mp->raw[j].nout; b++)
                    if (r->feed[a] == mp->raw[j].feed[b])
                        return error_set(err, 400, "%s: '%s' is fed by both '%s' and '%s'",
                                         PREP_FILE, m->run_info.inputs[r->feed[a]].name,
                                         mp->raw[j].name, r->name);
        }
    }
    return 0;
}

static int parse_file(struct model *m, const char *text, size_t len, const char *model_dir,
                      struct model_prep *mp, struct arena *a, struct error *err)
{
    struct json_value *root;
    const char *msg;
    size_t off;
    if (json_parse(a, text, len, NULL, &root, &msg, &off) != 0)
        return error_set(err, 400, "%s: %s at byte %zu", PREP_FILE, msg, off);
    if (root->type != JSON_OBJECT)
        return error_set(err, 400, "%s: expected an object", PREP_FILE);
    const struct json_value *inputs = NULL;
    for (uint32_t i = 0; i < root->len; i++) {
        if (strcmp(root->u.members[i].key, "inputs") != 0)
            return error_set(err, 400, "%s: unknown key '%s'", PREP_FILE, root->u.members[i].key);
        inputs = &root->u.members[i].value;
    }
    if (!inputs || inputs->type != JSON_ARRAY || inputs->len == 0 || inputs->len > PREP_MAX_INPUTS)
        return error_set(err, 400, "%s: \"inputs\" must be an array of 1 to %u inputs", PREP_FILE,
                         PREP_MAX_INPUTS);
    for (uint32_t i = 0; i < inputs->len; i++) {
        const char *feeds;
        struct prep_raw *r = &mp->raw[mp->nraw++];
        if (parse_input(m, &inputs->u.items[i], model_dir, r, &feeds, err) != 0)
            return ST_ERROR;
    }
    return check_names(m, mp, err);
}

/* Appends the raw inputs to m->info (BYTES, one element per batch row)
 * and marks them and what they feed optional. */
static int extend_info(struct model *m, struct model_prep *mp, struct error *err)
{
    uint32_t n = m->info.ninputs, total = n + mp->nraw;
    struct model_io *ios = mem_realloc(m->info.inputs, total * sizeof *ios);
    if (!ios)
        return error_set(err, 500, "out of memory");
    m->info.inputs = ios;
    m->input_optional = mem_calloc(total, sizeof *m->input_optional);
    if (!m->input_optional)
        return error_set(err, 500, "out of memory");
    for (uint32_t i = 0; i < mp->nraw; i++) {
        struct prep_raw *r = &mp->raw[i];
        struct model_io *io = &ios[n + i];
        memset(io, 0, sizeof *io);
        io->name = mem_strdup(r->name);
        if (!io->name)
            return error_set(err, 500, "out of memory");
        m->info.ninputs++;
        io->dtype = DT_BYTES;
        io->ndim = 0;
        if (m->batched)
            io->dims[io->ndim++] = -1;
        io->dims[io->ndim++] = 1;
        r->name = io->name;
        r->raw_index = n + i;
        m->input_optional[n + i] = true;
        for (uint32_t k = 0; k < r->nout; k++)
            m->input_optional[r->feed[k]] = true;
    }
    m->run_info.inputs = m->info.inputs; /* the graph's are still its first n */
    return 0;
}

int prep_attach(struct model *m, const char *model_dir, struct error *err)
{
    char path[4096];
    if (!path_fmt(path, sizeof path, "%s/%s", model_dir, PREP_FILE))
        return error_set(err, 400, "model directory path too long");
    char *text;
    size_t len;
    int rc = file_read(path, PREP_FILE_MAX, &text, &len);
    if (rc == -ENOENT)
        return 0;
    if (rc == 0 && m->engine) {
        mem_free(text);
        return error_set(err, 400,
                         "%s: a generative model takes text through its own interface "
                         "(docs/generative.md), not through preprocessing",
                         PREP_FILE);
    }
    if (rc)
        return error_set(err, 400, "cannot read %s: %s", path,
                         rc == -EFBIG ? "larger than 64 KiB" : strerror(-rc));
    struct model_prep *mp = mem_calloc(1, sizeof *mp);
    if (!mp) {
        mem_free(text);
        return error_set(err, 500, "out of memory");
    }
    mp->model = m;
    mp->batched = m->batched;
    mp->graph_ninputs = m->run_info.ninputs;
    struct arena a;
    arena_init(&a, 4096, PREP_FILE_MAX * 8);
    rc = parse_file(m, text, len, model_dir, mp, &a, err);
    mem_free(text);
    if (rc == 0)
        rc = extend_info(m, mp, err);
    arena_free(&a); /* the raw names were copied into m->info */
    if (rc) {
        prep_free(mp);
        return ST_ERROR;
    }
    m->prep = mp;
    m->prep_free = prep_free;
    prep_obs_register(mp);
    for (uint32_t i = 0; i < mp->nraw; i++)
        log_info("model %s version %s: input '%s' (%s) feeds '%s'", m->name, m->version_str,
                 mp->raw[i].name, mp->raw[i].mod->key, m->run_info.inputs[mp->raw[i].feed[0]].name);
    return 0;
}

bool prep_raw_info(const struct model *m, uint32_t i, struct prep_raw_info *out)
{
    const struct model_prep *mp = m->prep;
    for (uint32_t r = 0; mp && r < mp->nraw; r++) {
        if (mp->raw[r].raw_index != i)
            continue;
        out->modality = mp->raw[r].mod->key;
        out->content_types = mp->raw[r].mod->content_types;
        out->nfeeds = mp->raw[r].nout;
        for (uint32_t k = 0; k < mp->raw[r].nout; k++)
            out->feeds[k] = m->run_info.inputs[mp->raw[r].feed[k]].name;
        return true;
    }
    return false;
}

/* ---- the raw request body ------------------------------------------------------------- */

static bool media_type_is(const char *ctype, size_t len, const char *want)
{
    size_t n = 0;
    while (n < len && ctype[n] != ';' && ctype[n] != ' ' && ctype[n] != '\t')
        n++;
    return n == strlen(want) && strncasecmp(ctype, want, n) == 0;
}

static const struct prep_modality *modality_of(const char *ctype, size_t len)
{
    for (size_t k = 0; k < nmodalities; k++)
        for (const char *const *t = modalities[k]->content_types; *t; t++)
            if (media_type_is(ctype, len, *t))
                return modalities[k];
    return NULL;
}

int prep_decode_raw(struct infer_request *req, const struct model *m, const char *ctype,
                    size_t ctype_len, const char *body, size_t len, struct error *err)
{
    /* A KServe JSON body, by far the most common, is not a raw input: no
     * need to try every modality's media types. */
    if (!ctype || (ctype_len >= 16 && strncasecmp(ctype, "application/json", 16) == 0))
        return 0;
    const struct prep_modality *mod = modality_of(ctype, ctype_len);
    if (!mod)
        return 0;
    const struct model_prep *mp = m->prep;
    const struct prep_raw *found = NULL;
    for (uint32_t i = 0; mp && i < mp->nraw; i++) {
        if (mp->raw[i].mod != mod)
            continue;
        if (found)
            return error_set(err, 400,
                             "model '%s' has two %s inputs ('%s', '%s'): send a KServe request "
                             "naming one",
                             m->name, mod->key, found->name, mp->raw[i].name);
        found = &mp->raw[i];
    }
    if (!found) {
        char accepted[160] = "";
        size_t off = 0;
        for (uint32_t i = 0; mp && i < mp->nraw && off < sizeof accepted; i++)
            for (const char *const *t = mp->raw[i].mod->content_types; *t && off < sizeof accepted;
                 t++)
                off += (size_t)snprintf(accepted + off, sizeof accepted - off, "%s%s",
                                        off ? ", " : "", *t);
        return error_set(err, 415, "model '%s' takes no %s input%s%s%s", m->name, mod->key,
                         off ? " (raw bodies it takes: " : " (it declares no preprocessing",
                         accepted, ")");
    }
    struct tensor *t = arena_calloc(&req->arena, 1, sizeof *t);
    struct tensor_bytes *el = arena_calloc(&req->arena, 1, sizeof *el);
    if (!t || !el)
        return error_set(err, 413, "request too large");
    if (len > UINT32_MAX)
        return error_set(err, 413, "request body too large");
    el->ptr = body;
    el->len = (uint32_t)len;
    t->name = found->name;
    t->dtype = DT_BYTES;
    t->ndim = 0;
    if (mp->batched)
        t->shape[t->ndim++] = 1;
    t->shape[t->ndim++] = 1;
    t->data = el;
    t->nbytes = len;
    req->inputs = t;
    req->ninputs = 1;
    req->batch = 1;
    const char **names =
        arena_calloc(&req->arena, m->info.noutputs ? m->info.noutputs : 1, sizeof *names);
    if (!names)
        return error_set(err, 413, "request too large");
    for (uint32_t i = 0; i < m->info.noutputs; i++)
        names[i] = m->info.outputs[i].name;
    req->output_names = names;
    req->noutputs = m->info.noutputs;
    req->output_binary = NULL;
    return 1;
}
