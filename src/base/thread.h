/*
 * thread: starting a named thread. The name (at most 15 bytes, the
 * kernel's limit; longer is cut) is what `top -H`, `ps -L` and
 * /proc/<pid>/task/<tid>/comm show. It is set by the starting thread
 * before thread_start returns, so anyone who can see the new thread after
 * that sees its name (a thread naming itself leaves a window in which it
 * is listed under the process's name). Thread: any.
 */
#ifndef INFERD_BASE_THREAD_H
#define INFERD_BASE_THREAD_H

#include <pthread.h>
#include <string.h>

/* pthread_create(t, NULL, fn, arg), then the name: 0 or the positive
 * errno pthread_create returned (no thread started). */
static inline int thread_start(pthread_t *t, const char *name, void *(*fn)(void *), void *arg)
{
    int rc = pthread_create(t, NULL, fn, arg);
    if (rc == 0) {
        char cut[16];
        size_t n = strnlen(name, sizeof cut - 1);
        memcpy(cut, name, n);
        cut[n] = '\0';
        pthread_setname_np(*t, cut);
    }
    return rc;
}

#endif
