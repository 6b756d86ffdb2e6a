/*
 * procmem: this process's memory as the kernel counts it (Linux).
 *
 * procmem_rss_bytes() reads /proc/self/statm: a small file read, for
 * scrapes and model loads, never the request path. procmem_trim() asks
 * glibc's malloc to give the free memory it holds back to the kernel
 * (malloc_trim), so that a resident size read next counts what is in use
 * rather than what was freed and kept; it walks every malloc arena under
 * its lock, so call it seldom (a model load), never per request.
 *
 * Threads: any.
 */
#ifndef INFERD_BASE_PROCMEM_H
#define INFERD_BASE_PROCMEM_H

#include <stdint.h>

/* Resident set size of this process in bytes; 0 if /proc cannot say. */
uint64_t procmem_rss_bytes(void);

/* Returns malloc's free memory to the kernel where it can (no-op off glibc). */
void procmem_trim(void);

#endif
