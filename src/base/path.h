/*
 * path: filesystem paths in fixed buffers.
 *
 * path_fmt() formats like snprintf into out[0..size) and returns true if the
 * whole path fits (NUL included). If it does not, out is left as the empty
 * string and it returns false, so a truncated path can never be opened by
 * mistake. size must be > 0. Thread: any; nothing global.
 */
#ifndef INFERD_BASE_PATH_H
#define INFERD_BASE_PATH_H

#include <stdbool.h>
#include <stddef.h>

bool path_fmt(char *out, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
