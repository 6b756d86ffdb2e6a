/*
 * file: reading a whole small file into memory.
 *
 * file_read() reads path into *text (mem_alloc'd, NUL-terminated; the
 * caller frees it with mem_free) and its size into *len. Returns 0,
 * -EFBIG when the file has more than max bytes, -ENOMEM, or the -errno of
 * open/read. Thread: any.
 */
#ifndef INFERD_BASE_FILE_H
#define INFERD_BASE_FILE_H

#include <stddef.h>

int file_read(const char *path, size_t max, char **text, size_t *len);

#endif
