#include "base/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

/* Bit i set: level i is logged. */
static atomic_uint level_mask = (1u << LOG_ERROR) | (1u << LOG_WARN) | (1u << LOG_INFO);
static atomic_int current_format = LOG_FORMAT_TEXT;

static const char *const level_names[] = {"error", "warn ", "info ", "debug"};
static const char *const json_level_names[] = {"error", "warn", "info", "debug"};

void log_set_level(enum log_level level)
{
    atomic_store(&level_mask, (2u << level) - 1);
}

void log_set_enabled(enum log_level level, bool on)
{
    if (on)
        atomic_fetch_or(&level_mask, 1u << level);
    else
        atomic_fetch_and(&level_mask, ~(1u << level));
}

bool log_enabled(enum log_level level)
{
    return atomic_load_explicit(&level_mask, memory_order_relaxed) & (1u << level);
}

void log_set_format(enum log_format format)
{
    atomic_store(&current_format, format);
}

enum log_format log_get_format(void)
{
    return atomic_load(&current_format);
}

/* Escapes msg[0..n) as JSON string content into out (cap bytes); whole
 * escapes only. Returns the bytes written. */
static size_t json_escape(char *out, size_t cap, const char *msg, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 6 < cap; i++) {
        unsigned char c = (unsigned char)msg[i];
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c < 0x20 || c >= 0x80) {
            /* Non-ASCII bytes too: a message may hold any bytes, and the
             * line must stay valid JSON. */
            o += (size_t)snprintf(out + o, cap - o, "\\u%04x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    return o;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
    if (!log_enabled(level))
        return;
    char line[1024];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    char stamp[40];
    size_t sn = strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(stamp + sn, sizeof stamp - sn, ".%03ldZ", ts.tv_nsec / 1000000L);
    bool json = atomic_load_explicit(&current_format, memory_order_relaxed) == LOG_FORMAT_JSON;
    size_t n;
    va_list ap;
    va_start(ap, fmt);
    if (json) {
        char msg[768];
        int m = vsnprintf(msg, sizeof msg, fmt, ap);
        size_t mlen = m < 0 ? 0 : (size_t)m < sizeof msg ? (size_t)m : sizeof msg - 1;
        n = (size_t)snprintf(line, sizeof line, "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":\"", stamp,
                             json_level_names[level]);
        n += json_escape(line + n, sizeof line - n - 3, msg, mlen);
        line[n++] = '"';
        line[n++] = '}';
    } else {
        n = (size_t)snprintf(line, sizeof line, "%s %s ", stamp, level_names[level]);
        int m = vsnprintf(line + n, sizeof line - n - 1, fmt, ap);
        if (m < 0)
            m = 0;
        n += (size_t)m;
        if (n > sizeof line - 2)
            n = sizeof line - 2;
    }
    va_end(ap);
    line[n++] = '\n';
    ssize_t ignored = write(STDERR_FILENO, line, n);
    (void)ignored;
}
