#include "base/error.h"

#include <stdio.h>

#include "base/status.h"

int error_vset(struct error *err, int status, const char *fmt, va_list ap)
{
    if (err) {
        err->status = status;
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
