#include "api/grpc/services.h"

const struct grpc_service *const grpc_services[] = {
    &grpc_infer_service, &grpc_admin_service,   &grpc_health_service,
    &grpc_shm_service,   &grpc_routing_service,
};
const size_t grpc_nservices = sizeof grpc_services / sizeof grpc_services[0];
