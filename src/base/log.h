/*
 * log: the server's own log lines (lifecycle events, warnings, errors) on
 * stderr, one line per event, written with a single write(2) so that lines
 * from different threads never interleave.
 *
 * Text format: "2026-11-30T03:52:50.123Z info  model loaded: simple v1 (12 ms)".
 * Levels and format may change at run time (any thread).
 */
#ifndef INFERD_BASE_LOG_H
#define INFERD_BASE_LOG_H

#include <stdbool.h>

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

/* TEXT as above; JSON: {"ts":"...","level":"info","msg":"..."} per line. */
enum log_format { LOG_FORMAT_TEXT, LOG_FORMAT_JSON };

/* Enables every level up to `level` and disables the others. */
void log_set_level(enum log_level level);
/* One level on or off (Triton's logging API switches them one by one). */
void log_set_enabled(enum log_level level, bool on);
bool log_enabled(enum log_level level);
void log_set_format(enum log_format format);
enum log_format log_get_format(void);
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
