#include "base/error.h"

#include <stdio.h>

#include "base/status.h"

int error_vset(struct error *err, int status, const char *fmt, va_list ap)
{
    if (err) {
        err->status = status;
        err->retry_after_s = 0;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    }
    return ST_ERROR;
}

int error_set(struct error *err, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vset(err, status, fmt, ap);
    va_end(ap);
    return ST_ERROR;
}
