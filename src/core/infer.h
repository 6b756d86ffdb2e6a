/*
 * infer: one inference request as it travels from a protocol front end
 * through the scheduler to a backend and back.
 *
 * Lifecycle:
 *   The front end creates the request, decodes inputs into it (memory from
 *   req->arena or pointing into its receive buffer), sets `complete`, and
 *   submits it to the model's scheduler. From then on the scheduler's worker
 *   thread owns it: it runs the backend, fills outputs/rc/err and calls
 *   complete(req) on the worker thread, which hands ownership back (the
 *   front end typically posts it to its I/O loop). The front end encodes the
 *   outputs, calls infer_request_release_outputs() and frees the request.
 */
#ifndef INFERD_CORE_INFER_H
#define INFERD_CORE_INFER_H

#include <stdint.h>

#include "base/arena.h"
#include "base/error.h"
#include "core/tensor.h"

struct model;

struct infer_request {
    struct arena arena;
    struct model *model;
    const char *id; /* client's request id, NUL-terminated, or NULL */
    uint32_t id_len;

    struct tensor *inputs;
    uint32_t ninputs;
    const char *const *output_names; /* outputs to compute, in response order */
    uint32_t noutputs;

    /* Filled by the worker before complete(). */
    int rc;                /* 0 or -1 with err set */
    struct error err;
    struct tensor *outputs; /* noutputs entries, valid until release */
    void *backend_state;
    uint64_t enqueue_ns, exec_start_ns, exec_end_ns;

    void (*complete)(struct infer_request *req); /* called on the worker thread */
    struct infer_request *next; /* scheduler queue link */
};

#endif
