/*
 * route: one model's routing table (docs/traffic.md) — its JSON form, its
 * validation, and the choice of a version for one request.
 *
 * A table is immutable once built and reference counted: the routing store
 * (routing.h) publishes it, requests read it without a lock, a change
 * builds a new one. Its JSON form (the file <repo>/<model>/routing.json,
 * and the body of GET/PUT /v2/models/{m}/routing) is an object whose
 * members are all optional:
 *
 *   pin_header       header naming the version ("x-model-version")
 *   arm_header       header naming an experiment arm ("x-ab-group")
 *   arms             {"name": version, ...}: the arms the arm header names
 *   key_header       header whose value keys sticky A/B and the canary
 *                    draw (e.g. "x-user-id"); none: no sticky A/B, and the
 *                    request id draws
 *   sticky           [{"version": v, "percent": p, "buckets": [[lo, hi]...]}]:
 *                    the key's bucket (route_bucket(), 0..9999) picks the
 *                    arm that owns it; percents add up to at most 100 (the
 *                    buckets no arm owns fall through). Without `buckets`
 *                    the table is derived from the previous one, moving
 *                    only the buckets whose arm must change.
 *   canary           {"stable": v1, "version": v2, "weight": percent,
 *                    "guard": {...}}: `weight` percent of the remaining
 *                    traffic goes to `version`, the rest to `stable`
 *   default_version  the version when no rule chose; none: the newest
 *   shadow           {"model": m, "version": v, "percent": p,
 *                    "tolerance": t, "log_every": n}: a copy of p percent
 *                    of the requests goes to (m, v) too (shadow.h)
 *
 * The rules, in order: a version the client named (URL, gRPC
 * model_version: never reaches the table), the pin header, the arm header,
 * the sticky bucket, the canary split, the default.
 *
 * Percents have two decimals at most (10,000 buckets); versions are
 * decimal numbers of loaded versions (checked by route_check against a
 * repository snapshot).
 */
#ifndef INFERD_POLICY_ROUTE_H
#define INFERD_POLICY_ROUTE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/json.h"
#include "model/repository.h"
#include "obs/route_kind.h"

#define ROUTE_BUCKETS 10000u
/* The pin header of a table that names none, and of every model without a
 * table. */
#define ROUTE_DEFAULT_PIN_HEADER "x-model-version"
#define ROUTE_MAX_ARMS 16
#define ROUTE_HEADER_MAX 64
#define ROUTE_ARM_NAME_MAX 64
#define ROUTE_MODEL_MAX 256
#define ROUTE_REASON_MAX 256

/* A canary's automatic rollback (guard.h evaluates it). */
struct route_guard {
    double max_error_ratio; /* < 0: not checked */
    double max_p99_ratio;   /* 0: not checked */
    uint32_t window_s;      /* the sliding window */
    uint32_t min_requests;  /* on each side, in the window, before judging */
};

struct route_arm {
    char name[ROUTE_ARM_NAME_MAX];
    int64_t version;
};

struct route_split {
    int64_t version;
    uint32_t buckets; /* how many it owns */
};

struct route_table {
    atomic_uint refs;
    uint64_t generation; /* set by the store: 1, 2, ... per model */

    char pin_header[ROUTE_HEADER_MAX];
    char arm_header[ROUTE_HEADER_MAX];
    char key_header[ROUTE_HEADER_MAX]; /* "" = none */
    struct route_arm arms[ROUTE_MAX_ARMS];
    uint32_t narms;

    struct route_split sticky[ROUTE_MAX_ARMS];
    uint32_t nsticky;
    /* Owner of each bucket: an index into sticky[] plus 1; 0 = none.
     * Allocated only with sticky splits. */
    uint8_t *bucket_owner;

    bool canary;
    int64_t stable, canary_version;
    uint32_t weight_bp; /* basis points of 10,000 */
    bool has_guard;
    struct route_guard guard;
    /* The guard tripped: weight_bp is 0 and this says why. */
    bool rolled_back;
    int64_t rollback_ms; /* wall clock */
    uint32_t rollback_weight_bp; /* the weight it had */
    char rollback_reason[ROUTE_REASON_MAX];

    int64_t default_version; /* -1: the newest loaded version */

    bool shadow;
    char shadow_model[ROUTE_MODEL_MAX]; /* "" = the same model */
    int64_t shadow_version;
    uint32_t shadow_bp;
    double shadow_tolerance; /* a float difference above it is a mismatch */
    uint32_t shadow_log_every; /* log one in n compared requests that mismatch */

    /* A PUT's `generation`: the change applies only over that generation
     * (0: over any). Not part of the table. */
    uint64_t expect_generation;
};

/* Parses a table from JSON text. prev (may be NULL): the table it
 * replaces, whose bucket assignment sticky splits without `buckets` start
 * from. Returns 0 and a new table (refs 1; route_table_unref frees it), or
 * -1 with err (400, naming the field). Read-only members of the GET form
 * (model, generation, canary.rollback, sticky[].buckets when they agree)
 * are accepted. */
int route_parse(const char *text, size_t len, const struct route_table *prev,
                struct route_table **out, struct error *err);

/* Checks t against what is loaded: every version it names is a loaded
 * version of entry e (the model's, maybe not published yet), and a shadow
 * model of snapshot s exists and has the same inputs (names, datatypes,
 * shapes). 0, or ST_ERROR with err (400, naming the field). */
int route_check(const struct route_table *t, const struct model_entry *e,
                const struct model_snapshot *s, struct error *err);

/* The JSON form, as GET answers it and the file stores it. */
void route_write_json(const struct route_table *t, const char *model, struct json_writer *w);

/* A copy of t (refs 1) with the canary's weight at 0 and the rollback
 * recorded; NULL when out of memory. */
struct route_table *route_rolled_back(const struct route_table *t, int64_t now_ms,
                                      const char *reason);

struct route_table *route_table_ref(struct route_table *t);
void route_table_unref(struct route_table *t);

/* The bucket (0..9999) of a key: FNV-1a 64 of its bytes, mixed by
 * MurmurHash3's 64-bit finalizer, modulo 10,000 (docs/traffic.md, so that a
 * client can compute it). */
uint32_t route_bucket(const char *key, size_t len);

/* Reads a request header (case-insensitive name); NULL if absent. */
typedef const char *(*route_header_fn)(const void *ctx, const char *name, size_t *len);

struct route_choice {
    enum route_kind kind;
    int64_t version; /* -1: the newest loaded version */
    /* kind ROUTE_PIN: the pin header's value, not NUL-terminated (the
     * caller looks it up and answers 400/404 as for a URL version). */
    const char *pin;
    size_t pin_len;
};

/* The rule that applies to a request (see the top of the file), with
 * headers read through header(ctx, ...). draw: a uniform random number,
 * for the canary split of a request with neither a key header nor an
 * x-request-id. */
void route_choose(const struct route_table *t, route_header_fn header, const void *ctx,
                  uint64_t draw, struct route_choice *out);

#endif
