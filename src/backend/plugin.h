/*
 * plugin: chooses a model's backend, the built-in ONNX Runtime one or a
 * plugin library (the public ABI of include/inferd/backend.h), and adapts
 * a plugin to the internal struct backend_ops.
 *
 * Finding a plugin: backend "<name>" is the file libinferd_<name>.so in the
 * model's directory, else in search_dir (--backend-directory). A name is 1
 * to PLUGIN_NAME_MAX letters, digits, '_' or '-'.
 *
 * Cache: a library is keyed by its canonical path (realpath). It is
 * dlopen'ed (RTLD_NOW | RTLD_LOCAL) and initialized once, then kept until
 * the process exits, never dlclose'd: models, their instances and every
 * later load of a model with the same library use it. So a library file
 * replaced on disk takes effect after a restart. At most
 * PLUGIN_MAX_LIBRARIES distinct libraries per process. A library that
 * fails its checks is closed and not cached (a later load tries again).
 *
 * The adapter (the ops returned for a plugin):
 *   load()     needs args->config (the model layer parses config.pbtxt and
 *              requires it complete: model/backend_config.h), and hands the
 *              plugin the model and version directories (those of
 *              args->path: the plugin chooses which files it reads), the
 *              config's parameters and inputs/outputs (with a leading -1
 *              batch dim when max_batch_size > 0) and the thread counts. The info the
 *              plugin returns is validated and copied; load errors read
 *              "backend '<name>': <plugin message>".
 *   execute()  zero-copy: struct tensor and struct inferd_tensor have the
 *              same layout (static_assert'ed, as are the dtype values).
 *              The arena is not used: output memory, BYTES included, is
 *              the plugin's until release(). Each output is checked against
 *              the declared outputs (data type, rank, fixed dims, data
 *              size, BYTES element pointers) before anyone reads it; a bad
 *              one fails the call with 500. The plugin's error message
 *              passes through unchanged; statuses other than 400 become
 *              500.
 *   release(), unload()  forwarded.
 * Threads: as backend.h; the plugin sees the same promises (documented in
 * include/inferd/backend.h).
 */
#ifndef INFERD_BACKEND_PLUGIN_H
#define INFERD_BACKEND_PLUGIN_H

#include <stddef.h>

#include "backend/backend.h"
#include "base/error.h"

#define PLUGIN_NAME_MAX 64
#define PLUGIN_MAX_LIBRARIES 32

/*
 * The backend called `backend_name` for a model in `model_dir`: "" and
 * "onnxruntime" are the built-in &backend_onnxruntime; any other name is a
 * plugin library, loaded (or taken from the cache) as described above.
 * search_dir may be NULL. On success *ops is set and stays valid until the
 * process exits. On failure returns ST_ERROR with err naming the library path and
 * the reason (dlerror(), a missing inferd_backend_init, a refused or wrong
 * ABI version, a NULL function): 400, or 500 for out of memory and a full
 * cache. Any thread.
 */
int plugin_backend_resolve(const char *backend_name, const char *version_dir,
                           const char *model_dir, const char *search_dir,
                           const struct backend_ops **ops, struct error *err);

#endif
