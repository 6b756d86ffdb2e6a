/*
 * error: the client-facing error detail that goes with the status
 * vocabulary of base/status.h.
 *
 * Functions return ST_OK (0) on success or a negative value on failure: a
 * negated errno for system failures (-ENOMEM, -EINVAL, ...). Functions that
 * can fail because of a client's input also take a `struct error *`, fill it
 * with the HTTP status the front end should answer (400, 404, 413, ...) and
 * a message for the client, and return ST_ERROR (-1). The message is copied
 * into the fixed buffer, so building an error never allocates.
 */
#ifndef INFERD_BASE_ERROR_H
#define INFERD_BASE_ERROR_H

#include <stdarg.h>

#define ERROR_MSG_MAX 512

struct error {
    int status;              /* HTTP status for the client; 0 = no error */
    /* 429 and 503: when the client may try again, in seconds; 0 = the
     * front end's default. error_set() clears it. */
    unsigned retry_after_s;
    char msg[ERROR_MSG_MAX]; /* NUL-terminated, truncated to fit */
};

/* Fills *err (if not NULL) and returns ST_ERROR (-1), so callers can write
 * `return error_set(err, 400, "bad %s", x);`. */
int error_set(struct error *err, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int error_vset(struct error *err, int status, const char *fmt, va_list ap);

static inline void error_clear(struct error *err)
{
    err->status = 0;
    err->retry_after_s = 0;
    err->msg[0] = '\0';
}

#endif
