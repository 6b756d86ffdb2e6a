/*
 * routing: inferd.RoutingService (proto/inferd_routing.proto), the
 * gRPC form of GET/PUT /v2/models/{m}/routing. The table travels as the
 * JSON text of policy/route.h both ways, validated by the same
 * routing_get/routing_put as REST; their errors (400, 404, 409, 500) become
 * gRPC codes through grpc_status_from_http like every other RPC's
 * (INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION, INTERNAL).
 *
 * ModelRoutingSet blocks the loop thread for one fsync, as the REST PUT
 * does: a table changes rarely, and routing_put may run on any thread.
 */
#include "api/grpc/services.h"

#include <string.h>

#include "base/buf.h"
#include "base/json.h"
#include "inferd_routing.pb-c.h"
#include "policy/routing.h"

/* Largest table answered (sticky bucket lists included). */
#define ROUTING_JSON_MAX ((size_t)16 << 20)

static void handle_routing(struct grpc_call *call, const uint8_t *data, size_t len, bool set)
{
    Inferd__ModelRoutingRequest *q =
        grpc_call_unpack(call, &inferd__model_routing_request__descriptor, data, len);
    if (!q)
        return;
    struct grpc_api *api = call->api;
    if (!api->routing) {
        grpc_call_fail(call, 501, "routing tables are not available on this server");
        return;
    }
    obsreq_set_model(call->obs, q->name, NULL, NULL);
    struct buf out;
    buf_init(&out, ROUTING_JSON_MAX);
    struct json_writer w;
    json_w_init(&w, &out);
    struct error err;
    int rc = set ? routing_put(api->routing, q->name, q->routing_json, strlen(q->routing_json),
                               &w, &err)
                 : routing_get(api->routing, q->name, &w, &err);
    if (rc != 0) {
        grpc_call_fail(call, err.status, err.msg);
    } else if (buf_putc(&out, '\0') != 0 || out.err) {
        /* A Set that got here did change the table; only its echo failed. */
        grpc_call_fail(call, 500, "out of memory writing the routing table");
    } else {
        Inferd__ModelRoutingResponse r = INFERD__MODEL_ROUTING_RESPONSE__INIT;
        r.routing_json = out.data;
        grpc_call_reply(call, &r.base);
    }
    buf_free(&out);
}

static void handle_get(struct grpc_call *call, const uint8_t *data, size_t len)
{
    handle_routing(call, data, len, false);
}

static void handle_set(struct grpc_call *call, const uint8_t *data, size_t len)
{
    handle_routing(call, data, len, true);
}

static const struct grpc_method routing_methods[] = {
    {.path = "/inferd.RoutingService/ModelRoutingGet",
     .auth = AUTH_ADMIN,
     .on_message = handle_get},
    {.path = "/inferd.RoutingService/ModelRoutingSet",
     .auth = AUTH_ADMIN,
     .on_message = handle_set},
};

const struct grpc_service grpc_routing_service = {
    .methods = routing_methods,
    .nmethods = sizeof routing_methods / sizeof routing_methods[0],
};
