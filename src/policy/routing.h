/*
 * routing: the process's routing tables (route.h), one per model that has
 * one, and the two serving-pipeline stages that apply them
 * (docs/traffic.md).
 *
 * Publication. The tables are published as one immutable, reference
 * counted snapshot (name → table + the model's long-lived state: canary
 * guard, shadow statistics), replaced by one pointer swap under a short
 * mutex. A call takes the snapshot in the routing stage and lets it go
 * when it ends, so a change never fails or drops a request: calls already
 * routed finish under the table that routed them, the next one sees the
 * new table.
 *
 * Sources of a table, all serialized by one writer mutex:
 *   - the file <repo>/<model>/routing.json, read when the model (re)loads
 *     (repository hooks: a file that does not parse, or names versions
 *     that did not load, fails the load like a bad config.pbtxt; no file,
 *     no table);
 *   - routing_put() (REST PUT /v2/models/{m}/routing, gRPC): validated
 *     against the loaded versions, written back to the file atomically
 *     (temporary file, fsync, rename) before it is published;
 *   - a canary guard that trips (guard.h): the canary's weight goes to 0,
 *     recorded in the table and the file.
 *
 * Stages (serve/call.h), cfg = the struct routing:
 *   routing_stage_route   after resolve, before decode: picks the version
 *                         (the rules of route.h; a version the client
 *                         named keeps it), sets call->route, and decides
 *                         whether the call gets a shadow copy; its done()
 *                         records canary outcomes for the guard.
 *   routing_stage_shadow  after decode: sends the shadow copy (shadow.h).
 */
#ifndef INFERD_POLICY_ROUTING_H
#define INFERD_POLICY_ROUTING_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/json.h"
#include "model/repository.h"
#include "serve/call.h"

struct routing;

/* A store for the models of repository directory repo_dir (the tables'
 * files live there). NULL when out of memory. */
struct routing *routing_new(const char *repo_dir);
/* The repository whose loaded versions PUTs are checked against (set once
 * it is open). */
void routing_set_repository(struct routing *rt, struct repository *repo);
/* After every I/O thread stopped. NULL is a no-op. */
void routing_free(struct routing *rt);

/* The repository_options hooks that read the file at each load. */
struct repository_hooks routing_repository_hooks(struct routing *rt);

/* Writes model's table as JSON (route.h's form; `{}` with only model and
 * generation 0 when it has none). 0, or ST_ERROR with err (404 unknown model). */
int routing_get(struct routing *rt, const char *model, struct json_writer *w,
                struct error *err);
/* Replaces model's table by the JSON text body (validated; `{}` removes
 * every rule), writes the file, publishes, and writes the new table as
 * routing_get does. 0, or ST_ERROR with err: 400 (naming the field), 404
 * (unknown model), 409 (the body's generation is not the current one),
 * 500 (the file could not be written: nothing changed). Blocking (one
 * fsync); any thread. */
int routing_put(struct routing *rt, const char *model, const char *body, size_t len,
                struct json_writer *w, struct error *err);

/* Prometheus text of the routing metrics: inferd_route_rollbacks_total and
 * the shadow metrics (shadow.h). */
void routing_write_metrics(struct routing *rt, struct buf *out);
/* The dashboard's view, a JSON array: per model with a table, {"model",
 * "table" (routing_get's form), "window" (the canary guard's counts now),
 * "shadow_stats" (shadow.h's summary)}. */
void routing_write_summary(struct routing *rt, struct json_writer *w);

enum stage_result routing_stage_route(struct infer_call *call, const void *cfg);
void routing_route_done(struct infer_call *call, const void *cfg);
enum stage_result routing_stage_shadow(struct infer_call *call, const void *cfg);
void routing_shadow_done(struct infer_call *call, const void *cfg);

#endif
