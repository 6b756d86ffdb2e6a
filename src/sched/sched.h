/*
 * sched: the per-model request queue and the worker thread that runs the
 * backend.
 *
 * sched_submit() is called on an I/O thread and hands the request to the
 * worker; the worker runs the backend and calls req->complete(req) on its
 * own thread. The queue is bounded: when `queue_limit` requests are waiting,
 * submit fails with 503 and the request stays with the caller.
 *
 * Lifecycle: sched_start() after the model is loaded; sched_stop() once no
 * more requests will be submitted — it lets the worker finish everything
 * queued, then joins it.
 */
#ifndef INFERD_SCHED_SCHED_H
#define INFERD_SCHED_SCHED_H

#include <stdint.h>

#include "base/error.h"
#include "core/infer.h"

struct model;
struct sched;

int sched_start(struct model *m, uint32_t queue_limit, struct sched **out);
/* Returns 0, or -1 with err (503 when the queue is full or stopping). */
int sched_submit(struct sched *s, struct infer_request *req, struct error *err);
void sched_stop(struct sched *s);

#endif
