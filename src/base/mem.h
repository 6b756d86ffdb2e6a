/*
 * mem: every heap allocation of inferd goes through these wrappers (as
 * redis's zmalloc), so that the number of allocations on the request path
 * can be counted and so that tests can make the Nth allocation fail.
 *
 * The wrappers never abort: they return NULL and callers turn that into an
 * error (-ENOMEM, or a 500/503 for the client). mem_free(NULL) is a no-op.
 */
#ifndef INFERD_BASE_MEM_H
#define INFERD_BASE_MEM_H

#include <stddef.h>
#include <stdint.h>

void *mem_alloc(size_t n);
void *mem_calloc(size_t count, size_t size); /* NULL on count*size overflow */
void *mem_realloc(void *p, size_t n);
void mem_free(void *p);
char *mem_strdup(const char *s);
char *mem_strndup(const char *s, size_t n); /* always NUL-terminated */

/* Number of successful mem_alloc/calloc/realloc/strdup calls since start,
 * summed over all threads (relaxed atomic: a statistic, not a barrier). */
uint64_t mem_alloc_count(void);

/* Fault injection for tests: after `n` more successful allocations, every
 * allocation fails until mem_fail_reset(). n < 0 disables injection. */
void mem_fail_after(long n);
void mem_fail_reset(void);

#endif
