/*
 * server_info: what the server says it is in KServe's server metadata
 * (REST GET /v2, gRPC ServerMetadata): its name, its version and the
 * protocol extensions it implements, the same list over both protocols (as
 * Triton's).
 *
 * The name is "inferd" unless --server-name says otherwise: clients that
 * insist on Triton's name (Triton's health-metadata examples check for
 * "triton") can be given it.
 */
#ifndef INFERD_API_SERVER_INFO_H
#define INFERD_API_SERVER_INFO_H

#include <stddef.h>

/* Startup, before any thread serves; name must outlive the server. */
void server_info_set_name(const char *name);
const char *server_info_name(void);
/* The extensions, in the order they are listed. */
const char *const *server_info_extensions(size_t *n);

#endif
