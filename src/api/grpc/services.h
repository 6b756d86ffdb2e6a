/*
 * services: the gRPC services inferd answers, each a table of methods
 * (struct grpc_method in api/grpc/call.h) that the transport searches by
 * path; a path in no table is answered with gRPC status 12, the code
 * gRPC specifies for an unknown method.
 *
 *   grpc_infer_service    ModelInfer, ModelStreamInfer (infer.c)
 *   grpc_admin_service    the other inference.GRPCInferenceService RPCs:
 *                         health, metadata, configuration, statistics,
 *                         repository, trace and log settings (admin.c)
 *   grpc_health_service   grpc.health.v1.Health: Check, Watch (admin.c)
 *   grpc_shm_service      SystemSharedMemory* and CudaSharedMemory* (shm.c)
 *   grpc_routing_service  inferd.RoutingService (routing.c)
 *
 * grpc_services lists them all, for grpc_api_init. A new service defines
 * its table in its own file, declares it here and joins the list in
 * services.c; the transport does not change.
 */
#ifndef INFERD_API_GRPC_SERVICES_H
#define INFERD_API_GRPC_SERVICES_H

#include <stddef.h>

#include "api/grpc/call.h"

extern const struct grpc_service grpc_infer_service;
extern const struct grpc_service grpc_admin_service;
extern const struct grpc_service grpc_health_service;
extern const struct grpc_service grpc_shm_service;
extern const struct grpc_service grpc_routing_service;

extern const struct grpc_service *const grpc_services[];
extern const size_t grpc_nservices;

#endif
