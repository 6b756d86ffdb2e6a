/*
 * config_file: the `inferd serve --config FILE` file (YAML, base/yaml.h;
 * docs/configuration.md): its flag keys and its policy sections, at
 * startup and on SIGHUP.
 *
 * The file is one mapping. A top-level key is either the name of a flag
 * without its dashes (cli/serve_options.h: `http-port: 8000`; a sequence or
 * a scalar for a repeatable flag, `load-model: [a, b]`; true or false for a
 * switch, false meaning not given), or the key of a registered policy
 * section (struct config_section). Any other key is refused by name. An
 * empty file is an empty mapping.
 *
 * A section is parsed by its module from the JSON value tree (absent: NULL,
 * the module's defaults). The parser must copy what it keeps: the tree is
 * freed after loading. Sections are applied only when the whole file is
 * valid, so a bad file changes nothing.
 *
 * Errors name the file and what is wrong, "FILE: http-port: expected a
 * number from 0 to 65535, got '70000'", "FILE: unknown key 'htp-port'",
 * "FILE: line 3, column 7: ...", "FILE: rate-limits[1].burst: ..." (a
 * section's message after the file's name). Values of sections are never
 * in them (YAML errors describe, flag values are settings, not secrets).
 *
 * Thread: the main thread (startup and its signal loop).
 */
#ifndef INFERD_CLI_CONFIG_FILE_H
#define INFERD_CLI_CONFIG_FILE_H

#include <stddef.h>

#include "base/error.h"
#include "base/json.h"
#include "cli/serve_options.h"

#define CONFIG_MAX_SECTIONS 16
#define CONFIG_MAX_FILE_BYTES (1u << 20)

struct config_section {
    const char *key; /* top-level key, e.g. "rate-limits" */
    /* v NULL: the section is absent. 0 with *out set, or ST_ERROR with err. */
    int (*parse)(const struct json_value *v, void **out, struct error *err);
    void (*apply)(void *store, void *parsed); /* takes ownership of parsed */
    void (*free_parsed)(void *parsed);        /* NULL is a no-op */
    void *store;
};

/*
 * The adapters of a policy module X that follows the contract
 *   int X_config_parse(const struct json_value *, struct X_config **, struct error *);
 *   void X_config_free(struct X_config *);
 *   void X_apply(struct X *, struct X_config *);
 * CONFIG_SECTION_ADAPTERS(X) at file scope defines them; CONFIG_SECTION("key",
 * X, store) is then the module's entry of a section table.
 */
#define CONFIG_SECTION_ADAPTERS(X)                                                                 \
    static int X##_section_parse(const struct json_value *v, void **out, struct error *err)        \
    {                                                                                              \
        struct X##_config *c = NULL;                                                               \
        int rc = X##_config_parse(v, &c, err);                                                     \
        *out = c;                                                                                  \
        return rc;                                                                                 \
    }                                                                                              \
    static void X##_section_apply(void *store, void *parsed)                                       \
    {                                                                                              \
        X##_apply(store, parsed);                                                                  \
    }                                                                                              \
    static void X##_section_free(void *parsed)                                                     \
    {                                                                                              \
        X##_config_free(parsed);                                                                   \
    }
#define CONFIG_SECTION(key, X, store)                                                              \
    (struct config_section)                                                                        \
    {                                                                                              \
        key, X##_section_parse, X##_section_apply, X##_section_free, store                         \
    }

/* A check across sections (e.g. rate-limit rules that name tenants of the
 * auth section), run when every section of the file parsed: parsed[i]
 * for sections[i]. 0, or ST_ERROR with err (the file is then refused). */
typedef int (*config_check_fn)(void *const *parsed, struct error *err);

/* A loaded file: its tree, which the strings of the options applied from
 * it point into. */
struct config_file;

/*
 * Reads path (at most CONFIG_MAX_FILE_BYTES), applies its flag keys to o
 * with serve_option_apply() and parses every one of the n sections,
 * parsed[i] for sections[i] (n <= CONFIG_MAX_SECTIONS), then runs check
 * (NULL: none). Returns 0 with *out (config_file_free() it
 * after the last use of o), or ST_ERROR with a 400 in err; then nothing is kept
 * (parsed[] all NULL) and o is partly changed (the caller exits or drops it).
 */
int config_file_load(const char *path, struct serve_options *o,
                     const struct config_section *sections, size_t n, config_check_fn check,
                     void **parsed, struct config_file **out, struct error *err);
void config_file_free(struct config_file *f); /* NULL is a no-op */

/* Without a file: every section parsed as absent (its module's defaults)
 * into parsed[i]. 0, or ST_ERROR with err (nothing kept). */
int config_sections_defaults(const struct config_section *sections, size_t n, void **parsed,
                             struct error *err);

/* Applies (which takes) or frees every parsed[i]; each is NULL afterwards. */
void config_sections_apply(const struct config_section *sections, size_t n, void **parsed);
void config_sections_discard(const struct config_section *sections, size_t n, void **parsed);

/*
 * SIGHUP: config_reload() reads the file again, with the command line on
 * top as at startup. A file that does not load or check logs "config:
 * reload of FILE failed, keeping the current configuration: <error>" and
 * changes nothing. Otherwise: every changed setting that needs a restart
 * (flags that are not serve_option_reloadable, given in the file and not
 * on the command line) logs "config: <key> changed, restart to apply"
 * and keeps its running value; the reloadable settings that changed are
 * applied (serve_runtime_apply); every section is applied; "config:
 * reloaded FILE" is logged.
 */
struct config_reloader {
    const char *path;
    const struct serve_cmdline *cmdline;
    const struct config_section *sections;
    size_t nsections;
    config_check_fn check;
    const struct config_file *running; /* what the process started with */
    struct serve_runtime runtime;      /* the reloadable settings as applied */
};

void config_reload(struct config_reloader *r);

/* Applies the flag keys of an already parsed top-level value (a mapping,
 * or NULL for an empty file) to o, skipping section keys; errors as
 * config_file_load's without the file's name. For config_file_load and
 * the fuzz target. */
int config_apply_flags(const struct json_value *top, struct serve_options *o,
                       const struct config_section *sections, size_t n, struct error *err);

#endif
