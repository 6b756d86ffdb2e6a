/*
 * route_kind: why a request was served by the model version that served it
 * (docs/traffic.md). The names are a fixed vocabulary: the
 * x-inferd-route response header, the access log's `route` field, the
 * request span's inferd.route attribute and the `route` label of
 * inferd_route_requests_total all use them.
 *
 *   default  no rule chose: the routing table's default version, or the
 *            newest loaded version (the version policy)
 *   url      the client named the version (URL /versions/{v}, gRPC
 *            model_version)
 *   pin      the pin header (x-model-version by default)
 *   ab       an experiment arm: the arm header, or the sticky bucket of
 *            the key header
 *   canary   the weighted canary split (either side of it)
 *   fallback the circuit breaker of the chosen version is open and its
 *            fallback version served (policy/breaker.h)
 */
#ifndef INFERD_OBS_ROUTE_KIND_H
#define INFERD_OBS_ROUTE_KIND_H

enum route_kind {
    ROUTE_DEFAULT,
    ROUTE_URL,
    ROUTE_PIN,
    ROUTE_AB,
    ROUTE_CANARY,
    ROUTE_FALLBACK,
    ROUTE_KINDS
};

static inline const char *route_kind_name(enum route_kind k)
{
    static const char *const names[ROUTE_KINDS] = {"default", "url",    "pin",
                                                   "ab",      "canary", "fallback"};
    return (unsigned)k < ROUTE_KINDS ? names[k] : "default";
}

#endif
