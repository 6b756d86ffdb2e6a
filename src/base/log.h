/*
 * log: the server's own log lines (lifecycle events, warnings, errors) on
 * stderr, one line per event, written with a single write(2) so that lines
 * from different threads never interleave.
 *
 * Text format: "2026-11-30T03:52:50.123Z info  model loaded: simple v1 (12 ms)".
 */
#ifndef INFERD_BASE_LOG_H
#define INFERD_BASE_LOG_H

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

void log_set_level(enum log_level level);
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
