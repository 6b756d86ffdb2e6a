#include "base/mem.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_uint_fast64_t alloc_count;
static atomic_long fail_countdown = -1;

/* Returns 1 when this allocation must fail because of fault injection. */
static int should_fail(void)
{
    long n = atomic_load_explicit(&fail_countdown, memory_order_relaxed);
    if (n < 0)
        return 0;
    if (n == 0)
        return 1;
    atomic_fetch_sub_explicit(&fail_countdown, 1, memory_order_relaxed);
    return 0;
}

static void *counted(void *p)
{
    if (p)
        atomic_fetch_add_explicit(&alloc_count, 1, memory_order_relaxed);
    return p;
}

void *mem_alloc(size_t n)
{
    if (should_fail())
        return NULL;
    return counted(malloc(n ? n : 1));
}

void *mem_calloc(size_t count, size_t size)
{
    if (should_fail())
        return NULL;
    if (size && count > SIZE_MAX / size)
        return NULL;
    return counted(calloc(count ? count : 1, size ? size : 1));
}

void *mem_realloc(void *p, size_t n)
{
    if (should_fail())
        return NULL;
    return counted(realloc(p, n ? n : 1));
}

void mem_free(void *p)
{
    free(p);
}

char *mem_strndup(const char *s, size_t n)
{
    char *d = mem_alloc(n + 1);
    if (!d)
        return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *mem_strdup(const char *s)
{
    return mem_strndup(s, strlen(s));
}

uint64_t mem_alloc_count(void)
{
    return atomic_load_explicit(&alloc_count, memory_order_relaxed);
}

void mem_fail_after(long n)
{
    atomic_store(&fail_countdown, n);
}

void mem_fail_reset(void)
{
    atomic_store(&fail_countdown, -1);
}
