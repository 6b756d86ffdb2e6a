/* The --config file: flag keys, policy sections, reload; see cli/config_file.h. */
#include "cli/config_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/arena.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/status.h"
#include "base/yaml.h"

/* The tree of a file: its strings and the arena that holds them. */
struct config_file {
    struct arena arena;
    const struct json_value *top; /* a mapping, or JSON_NULL for an empty file */
};

#define ARENA_CHUNK (64u << 10)
/* The tree of 1 MiB of YAML: at most 100,000 nodes of 40 bytes with their
 * vectors, and the text. */
#define ARENA_MAX (64u << 20)

/* Reads the whole file into a mem_ buffer. 0 or ST_ERROR with err. */
static int read_file(const char *path, char **out, size_t *len, struct error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return error_set(err, 400, "cannot open: %s", strerror(errno));
    int rc = ST_ERROR;
    char *text = NULL;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        error_set(err, 400, "cannot read: %s", strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        error_set(err, 400, "not a regular file");
        goto out;
    }
    /* One byte more than allowed: a file that grows meanwhile is caught. */
    text = mem_alloc(CONFIG_MAX_FILE_BYTES + 1);
    if (!text) {
        error_set(err, 400, "out of memory");
        goto out;
    }
    size_t n = 0;
    while (n <= CONFIG_MAX_FILE_BYTES) {
        ssize_t r = read(fd, text + n, CONFIG_MAX_FILE_BYTES + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            error_set(err, 400, "cannot read: %s", strerror(errno));
            goto out;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    if (n > CONFIG_MAX_FILE_BYTES) {
        error_set(err, 400, "larger than %u bytes", CONFIG_MAX_FILE_BYTES);
        goto out;
    }
    *out = text;
    *len = n;
    text = NULL;
    rc = 0;
out:
    mem_free(text);
    close(fd);
    return rc;
}

static bool is_section(const struct config_section *sections, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(sections[i].key, key) == 0)
            return true;
    return false;
}

/* The text of a scalar value for a flag; NULL (with err) for the rest. */
static const char *flag_text(const struct json_value *v, const char *key, struct error *err)
{
    switch (v->type) {
    case JSON_STRING:
        if (strlen(v->u.str) != v->len) {
            error_set(err, 400, "%s: contains a NUL character", key);
            return NULL;
        }
        return v->u.str;
    case JSON_NUMBER:
        return v->u.num;
    case JSON_NULL:
        error_set(err, 400, "%s: needs a value", key);
        return NULL;
    default:
        error_set(err, 400, "%s: expected a string or a number", key);
        return NULL;
    }
}

static int apply_text(struct serve_options *o, int id, const char *key, const char *value,
                      struct error *err)
{
    struct error e;
    error_clear(&e);
    if (serve_option_apply(o, id, value, &e) != 0)
        return error_set(err, 400, "%s: %s", key, e.msg);
    return 0;
}

static int apply_key(struct serve_options *o, const struct json_member *m, int id,
                     enum serve_option_kind kind, struct error *err)
{
    const struct json_value *v = &m->value;
    const char *text;
    switch (kind) {
    case SERVE_OPTION_SWITCH:
        if (v->type == JSON_FALSE)
            return 0;
        if (v->type != JSON_TRUE)
            return error_set(err, 400, "%s: expected true or false", m->key);
        return apply_text(o, id, m->key, NULL, err);
    case SERVE_OPTION_REPEATED:
        if (v->type == JSON_ARRAY) {
            for (uint32_t i = 0; i < v->len; i++) {
                char item[160];
                snprintf(item, sizeof item, "%s[%u]", m->key, i);
                if (!(text = flag_text(&v->u.items[i], item, err)) ||
                    apply_text(o, id, m->key, text, err) != 0)
                    return ST_ERROR;
            }
            return 0;
        }
        break;
    case SERVE_OPTION_VALUE:
        if (v->type == JSON_ARRAY)
            return error_set(err, 400, "%s: expected one value, not a sequence", m->key);
        break;
    }
    if (!(text = flag_text(v, m->key, err)))
        return ST_ERROR;
    return apply_text(o, id, m->key, text, err);
}

int config_apply_flags(const struct json_value *top, struct serve_options *o,
                       const struct config_section *sections, size_t n, struct error *err)
{
    if (top->type == JSON_NULL)
        return 0;
    if (top->type != JSON_OBJECT)
        return error_set(err, 400, "expected a mapping of settings (key: value) at the top level");
    for (uint32_t i = 0; i < top->len; i++) {
        const struct json_member *m = &top->u.members[i];
        if (strlen(m->key) != m->key_len)
            return error_set(err, 400, "a key contains a NUL character");
        if (is_section(sections, n, m->key))
            continue;
        int id;
        enum serve_option_kind kind;
        if (serve_option_find(m->key, &id, &kind) != 0)
            return error_set(err, 400, "unknown key '%s'", m->key);
        if (apply_key(o, m, id, kind, err) != 0)
            return ST_ERROR;
    }
    return 0;
}

int config_sections_defaults(const struct config_section *sections, size_t n, void **parsed,
                             struct error *err)
{
    for (size_t i = 0; i < n; i++)
        parsed[i] = NULL;
    for (size_t i = 0; i < n; i++) {
        if (sections[i].parse(NULL, &parsed[i], err) != 0) {
            config_sections_discard(sections, n, parsed);
            return ST_ERROR;
        }
    }
    return 0;
}

void config_sections_apply(const struct config_section *sections, size_t n, void **parsed)
{
    for (size_t i = 0; i < n; i++) {
        sections[i].apply(sections[i].store, parsed[i]);
        parsed[i] = NULL;
    }
}

void config_sections_discard(const struct config_section *sections, size_t n, void **parsed)
{
    for (size_t i = 0; i < n; i++) {
        if (parsed[i])
            sections[i].free_parsed(parsed[i]);
        parsed[i] = NULL;
    }
}

void config_file_free(struct config_file *f)
{
    if (!f)
        return;
    arena_free(&f->arena);
    mem_free(f);
}

/* Everything of config_file_load but the file's name in front of errors. */
static int load(const char *path, struct serve_options *o, const struct config_section *sections,
                size_t n, config_check_fn check, void **parsed, struct config_file *f,
                struct error *err)
{
    char *text = NULL;
    size_t len = 0;
    if (read_file(path, &text, &len, err) != 0)
        return ST_ERROR;
    struct json_value *top = NULL;
    int rc = yaml_parse(&f->arena, text, len, &top, err);
    mem_free(text);
    if (rc != 0)
        return ST_ERROR;
    f->top = top;
    if (config_apply_flags(top, o, sections, n, err) != 0)
        return ST_ERROR;
    for (size_t i = 0; i < n; i++)
        if (sections[i].parse(json_get(top, sections[i].key), &parsed[i], err) != 0)
            return ST_ERROR;
    return check ? check(parsed, err) : 0;
}

int config_file_load(const char *path, struct serve_options *o,
                     const struct config_section *sections, size_t n, config_check_fn check,
                     void **parsed, struct config_file **out, struct error *err)
{
    if (n > CONFIG_MAX_SECTIONS)
        return error_set(err, 400, "%s: more than %d sections registered", path,
                         CONFIG_MAX_SECTIONS);
    for (size_t i = 0; i < n; i++)
        parsed[i] = NULL;
    struct config_file *f = mem_calloc(1, sizeof *f);
    if (!f)
        return error_set(err, 400, "%s: out of memory", path);
    arena_init(&f->arena, ARENA_CHUNK, ARENA_MAX);
    struct error e;
    error_clear(&e);
    if (load(path, o, sections, n, check, parsed, f, &e) != 0) {
        config_sections_discard(sections, n, parsed);
        config_file_free(f);
        return error_set(err, 400, "%s: %s", path, e.msg);
    }
    *out = f;
    return 0;
}

/* ---- reload ------------------------------------------------------------------- */

/* The values a flag key stands for, as texts: none (absent or false),
 * "true" (a switch), one (a scalar) or a sequence's items; so that `8000`
 * and "8000", or `a` and `[a]`, are the same setting. */
static uint32_t setting_count(const struct json_value *v)
{
    if (!v || v->type == JSON_FALSE || v->type == JSON_NULL)
        return 0;
    return v->type == JSON_ARRAY ? v->len : 1;
}

static const char *setting_item(const struct json_value *v, uint32_t i)
{
    if (v->type == JSON_ARRAY)
        v = &v->u.items[i];
    switch (v->type) {
    case JSON_STRING:
        return v->u.str;
    case JSON_NUMBER:
        return v->u.num;
    case JSON_TRUE:
        return "true";
    default:
        return ""; /* not in a file that loaded */
    }
}

static bool same_setting(const struct json_value *a, const struct json_value *b)
{
    uint32_t n = setting_count(a);
    if (setting_count(b) != n)
        return false;
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(setting_item(a, i), setting_item(b, i)) != 0)
            return false;
    return true;
}

/* Logs every setting of the new file that needs a restart and differs
 * from the running one (the command line's flags hide the file's). */
static void log_restart_needed(const struct config_reloader *r, const struct json_value *next)
{
    const struct json_value *running = r->running->top;
    for (int pass = 0; pass < 2; pass++) {
        /* Keys of the new file, then keys only the running one has. */
        const struct json_value *from = pass == 0 ? next : running;
        const struct json_value *other = pass == 0 ? running : next;
        for (uint32_t i = 0; from->type == JSON_OBJECT && i < from->len; i++) {
            const struct json_member *m = &from->u.members[i];
            int id;
            enum serve_option_kind kind;
            if (serve_option_find(m->key, &id, &kind) != 0 || serve_option_reloadable(id) ||
                serve_cmdline_has(r->cmdline, id))
                continue;
            const struct json_value *o = json_get(other, m->key);
            if (pass == 1 && o)
                continue; /* compared in the first pass */
            if (!same_setting(&m->value, o))
                log_warn("config: %s changed, restart to apply", m->key);
        }
    }
}

void config_reload(struct config_reloader *r)
{
    struct serve_options next;
    serve_options_defaults(&next);
    void *parsed[CONFIG_MAX_SECTIONS];
    struct config_file *f = NULL;
    struct error err;
    error_clear(&err);
    if (config_file_load(r->path, &next, r->sections, r->nsections, r->check, parsed, &f, &err) !=
        0) {
        log_error("config: reload of %s failed, keeping the current configuration: %s", r->path,
                  err.msg);
        return;
    }
    serve_cmdline_apply(r->cmdline, &next);
    if (serve_options_check(&next, &err) != 0) {
        log_error("config: reload of %s failed, keeping the current configuration: %s", r->path,
                  err.msg);
        config_sections_discard(r->sections, r->nsections, parsed);
        config_file_free(f);
        return;
    }
    log_restart_needed(r, f->top);
    struct serve_runtime runtime;
    serve_runtime_of(&next, &runtime);
    serve_runtime_apply(&r->runtime, &runtime);
    config_sections_apply(r->sections, r->nsections, parsed);
    config_file_free(f); /* the reloadable settings keep no string of it */
    log_info("config: reloaded %s", r->path);
}
