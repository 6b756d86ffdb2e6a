/*
 * auth: API keys, tenants and scopes (docs/security.md) — the `auth`
 * section of the configuration file, the store that publishes it, the
 * check every front end makes before it handles a request, and the
 * serving-pipeline stage of infer calls.
 *
 * Section (policy/auth_config.h parses it; YAML, tested as JSON):
 *
 *   auth:
 *     open: [health, metrics]      # served without a key; default
 *                                  # [health, metrics]; [] = nothing;
 *                                  # names: health, metrics, metadata, dashboard
 *     tenants:
 *       - name: team-a             # [A-Za-z0-9._-]{1,64}, unique
 *         keys: ["inferd-sha256$<salt hex>$<digest hex>"]  # auth_key.h; 1 or more
 *         scopes: [infer, read]    # infer (every model), infer:<model>, read, admin
 *
 * At most AUTH_MAX_KEYS keys in all; a key hash appears once. No tenant
 * (no section, or no `tenants`): nothing is checked, every endpoint is
 * open, and auth_apply() logs a warning saying so.
 *
 * What each request needs (enum auth_class): health (REST /v2/health/...,
 * gRPC ServerLive, ServerReady, grpc.health.v1), metrics (the metrics
 * port), metadata (GET /v2, ServerMetadata) and dashboard (/dashboard,
 * /dashboard/data) need `read` unless `open` names them; model metadata, readiness,
 * configuration and statistics need `read`; repository, routing, logging
 * and trace settings need `admin`; shared-memory regions need an `infer`
 * scope (any model); an infer call needs `infer` or `infer:<its model>`,
 * checked by auth_stage.
 *
 * The key: `Authorization: Bearer <key>` or `x-api-key: <key>` (gRPC
 * metadata alike); both present and different → 401. It is hashed with
 * the salt of each configured hash until one matches (constant-time
 * compare); a per-thread hint (a direct-mapped table from a seeded 64-bit
 * hash of the presented key to the configured key that matched it last,
 * tagged with the configuration's generation) makes that one SHA-256 in
 * the common case. A hint is only a hint: the digest is always verified.
 * A wrong key costs one SHA-256 per configured key the first time (0.4 to
 * 0.7 ms with 1024 keys, measured; a right key 0.5 to 1 us); each thread
 * remembers the wrong keys it refused last (MISS_SLOTS, by their digest
 * under a zero salt, compared whole, tagged with the generation), so a
 * client that repeats one costs about what a right key does. A presented
 * key that cannot be one (shorter than 16 or longer than 256 bytes, or
 * with characters outside 0x21-0x7e) is refused without hashing.
 *
 * Answers: 401 "missing API key" / "invalid API key" / "the Authorization
 * and x-api-key headers carry different keys" (REST adds WWW-Authenticate:
 * auth_challenge()), 403 "API key of tenant 'x' lacks scope 'admin'";
 * gRPC UNAUTHENTICATED and PERMISSION_DENIED. Nothing here logs, formats
 * or returns a presented key or a stored hash, and error messages never
 * hold one (configuration errors name the path only).
 *
 * Publication: the configuration is an immutable, reference-counted
 * snapshot replaced under a short mutex (auth_apply, any thread). A check
 * runs under the snapshot it took; an infer call keeps its snapshot from
 * auth_stage to auth_stage_done, so call->tenant (the tenant's name in
 * it) stays valid for the whole call.
 */
#ifndef INFERD_POLICY_AUTH_H
#define INFERD_POLICY_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "base/buf.h"
#include "base/error.h"
#include "policy/auth_config.h"
#include "serve/call.h"

/* The 401 messages (auth_challenge() tells them apart). */
#define AUTH_MSG_MISSING "missing API key"
#define AUTH_MSG_INVALID "invalid API key"
#define AUTH_MSG_CONFLICT "the Authorization and x-api-key headers carry different keys"

struct auth;

/* ---- the store ------------------------------------------------------------------ */

/* A store with no tenant (nothing checked) until the first auth_apply().
 * NULL when out of memory. */
struct auth *auth_new(void);
/* After every I/O thread stopped. NULL is a no-op. */
void auth_free(struct auth *a);
/* Publishes c (ownership taken) for the checks that start from now on and
 * logs what is enforced: "auth: N tenants, M keys; open without a key:
 * health, metrics", or the warning that everything is open. Any thread. */
void auth_apply(struct auth *a, struct auth_config *c);
/* inferd_auth_refusals_total{reason="missing"|"invalid"|"scope"}. */
void auth_write_metrics(struct auth *a, struct buf *out);

/* ---- checks ---------------------------------------------------------------------- */

enum auth_class {
    AUTH_IN_PIPELINE, /* nothing checked here: the infer call's auth_stage does */
    AUTH_HEALTH,      /* `read`, unless `health` is open */
    AUTH_METRICS,     /* `read`, unless `metrics` is open */
    AUTH_METADATA,    /* `read`, unless `metadata` is open */
    AUTH_DASHBOARD,   /* `read`, unless `dashboard` is open */
    AUTH_READ,
    AUTH_ADMIN,
    AUTH_INFER,  /* `infer` for the model given, or any infer scope (model NULL) */
    AUTH_ANY_KEY /* any valid key (a ModelStreamInfer stream; each message is an infer call) */
};

/* Reads a request header or metadata entry (case-insensitive name) of the
 * request ctx; NULL when absent. The value need not be NUL-terminated. */
typedef const char *(*auth_header_fn)(const void *ctx, const char *name, size_t *len);

struct auth_result {
    char tenant[AUTH_TENANT_MAX + 1]; /* the key's tenant; "" = no key checked */
};

/* Decides whether the request (its headers through header(ctx, ...)) may
 * use an endpoint of class cls. a NULL, or no tenant configured: 0 and
 * tenant "". 0 when allowed; else -1 with err: 401 (AUTH_MSG_*) or 403
 * (naming the tenant and the scope). res->tenant is set whenever a key
 * was recognized, on a 403 too. Counts refusals. Any thread. */
int auth_check(struct auth *a, enum auth_class cls, const char *model, auth_header_fn header,
               const void *ctx, struct auth_result *res, struct error *err);

/* The WWW-Authenticate value of a 401 that auth produced: Bearer
 * realm="inferd", with error="invalid_token" when the key was wrong and
 * error="invalid_request" when two different keys were sent. */
const char *auth_challenge(const struct error *err);

/* ---- the stage (serve/call.h), cfg = the struct auth ---------------------------- */

/* First policy stage, after resolve: checks the `infer` scope for
 * call->model_name with the key of call->header and sets call->tenant
 * (NULL when no tenant is configured); answers 401/403 itself. */
enum stage_result auth_stage(struct infer_call *call, const void *cfg);
/* Releases the snapshot call->tenant lives in; call->tenant becomes NULL. */
void auth_stage_done(struct infer_call *call, const void *cfg);

#endif
