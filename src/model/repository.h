/*
 * repository: the repository manager — which models are loaded, published
 * as immutable snapshots, and a manager thread that loads, reloads and
 * unloads them without ever blocking a request.
 *
 * Readers (I/O threads) take the current snapshot with repository_acquire(),
 * look a model up, take a reference on the version they use (model_ref) and
 * release the snapshot. A snapshot is replaced by one pointer swap under a
 * short mutex; the old one lives until its last reader releases it, and a
 * version lives until its last request is answered (see model.h).
 *
 * Control modes (Triton's):
 *   none      every model of the repository is loaded at start; the
 *             repository API cannot load or unload.
 *   poll      the same, and the manager rescans the repository every
 *             poll_secs: new models load, changed ones reload, removed ones
 *             unload. A new or changed model loads only once its files
 *             are the same at two polls in a row (a copy in progress is
 *             never loaded); the scan at start loads at once. A reload
 *             that fails keeps the old versions serving; the entry then
 *             carries the attempt's failures and fingerprint, so the same
 *             files are not tried again at every poll.
 *   explicit  only the models named by load_models ("*" = all) load at
 *             start; the repository API loads, reloads and unloads.
 * A (re)load happens on the manager thread: the new versions are loaded
 * and warmed up while the old ones keep serving, then the snapshot is
 * swapped.
 */
#ifndef INFERD_MODEL_REPOSITORY_H
#define INFERD_MODEL_REPOSITORY_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "base/json.h"
#include "model/model.h"

enum control_mode { CONTROL_NONE, CONTROL_POLL, CONTROL_EXPLICIT };

struct model_snapshot;

struct repository_options {
    struct registry_options load;
    enum control_mode mode;
    uint32_t poll_secs;
    const char *const *load_models; /* explicit mode: names to load at start */
    uint32_t nload_models;
    /* Told the outcome of every load of a model — at start, by poll mode,
     * by the repository API — and of a model directory found unservable
     * (one failure): failures[0..nfailures), none when every selected
     * version loaded and nothing in the directory is unservable. Manager
     * thread (repository_open's caller at start). Filled by the layer
     * above (src/cli/main.c: obs/load_obs.h); NULL: nobody is told. */
    void (*observe_load)(const char *name, const struct model_failure *failures,
                         uint32_t nfailures);
    /* The model left the repository (poll mode) or was unloaded: its last
     * outcome no longer describes anything. Same thread; NULL allowed. */
    void (*observe_gone)(const char *name);
    /* Files of a model that a layer above reads with it (the routing
     * table, policy/routing.h). Manager thread; all NULL allowed.
     *   check      a model whose versions loaded, before it is published;
     *              `current` is the snapshot it will replace its entry in.
     *              Non-zero (err set) fails the load like a bad config
     *              (kind CONFIG; a reload keeps the previous versions).
     *   published  after its entry was published (e READY or not), or
     *              removed (e NULL: unloaded, or gone from the repository). */
    struct repository_hooks {
        void *ctx;
        int (*check)(void *ctx, const char *name, const struct model_entry *e,
                     const struct model_snapshot *current, struct error *err);
        void (*published)(void *ctx, const char *name, const struct model_entry *e);
    } hooks;
};

struct model_snapshot {
    atomic_uint refs;
    uint32_t count;
    struct model_entry *entries; /* sorted by name */
};

struct repository;

/* A load or unload asked through the repository API. The caller owns the
 * struct; done() is called on the manager thread when the command has been
 * carried out (status 0, or an HTTP status with msg). */
enum repo_cmd_kind { REPO_LOAD, REPO_UNLOAD };
struct repo_cmd {
    enum repo_cmd_kind kind;
    char name[256];
    const char *config; /* REPO_LOAD: config.pbtxt text override, or NULL; caller-owned */
    int status;
    char msg[ERROR_MSG_MAX];
    void (*done)(struct repo_cmd *cmd);
    struct repo_cmd *next;
};

/* Loads the initial set of models (blocking) and starts the manager
 * thread. Fails (-1 with err) only if the repository cannot be read. */
int repository_open(const struct repository_options *opts, struct repository **out,
                    struct error *err);
/* Stops the manager thread and unloads everything. Call after every I/O
 * thread has stopped (no snapshot or model reference is held any more). */
void repository_close(struct repository *r);

struct model_snapshot *repository_acquire(struct repository *r);
void repository_release(struct repository *r, struct model_snapshot *s);
const struct model_entry *snapshot_find(const struct model_snapshot *s, const char *name,
                                        size_t len);
/* Every model that should be loaded is ready (all its selected versions). */
bool snapshot_all_ready(const struct model_snapshot *s);

/* Queues a load/unload (any thread). Returns 0, or ST_ERROR with err when the
 * control mode does not allow it (400) or the manager is stopping (503). */
int repository_submit(struct repository *r, struct repo_cmd *cmd, struct error *err);

/* Triton's repository index, one row {name, version, state, reason} per
 * model version: every loaded version READY (reason empty, or why a reload
 * of its files failed while they keep serving); every version that failed
 * to load or has no model file UNAVAILABLE with its reason; a row without
 * a version for a model that failed as a whole, a directory that cannot be
 * served, or (explicit mode) a model not loaded ("unloaded"). ready_only
 * keeps only READY rows. Any thread; reads the repository directory. */
void repository_index(struct repository *r, bool ready_only, struct json_writer *w);

#endif
