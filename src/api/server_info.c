#include "api/server_info.h"

static const char *server_name = "inferd";

static const char *const extensions[] = {
    "binary_tensor_data",   "classification", "sequence",      "model_configuration",
    "model_repository",     "statistics",     "logging",       "trace",
    "system_shared_memory", "inferd_routing",
};

void server_info_set_name(const char *name)
{
    server_name = name;
}

const char *server_info_name(void)
{
    return server_name;
}

const char *const *server_info_extensions(size_t *n)
{
    *n = sizeof extensions / sizeof extensions[0];
    return extensions;
}
