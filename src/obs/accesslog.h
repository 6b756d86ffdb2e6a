/*
 * accesslog: one line per request to a file or stdout, formatted and
 * written by a background thread, so that neither a slow disk nor the
 * line's formatting (JSON escaping, numbers, the timestamp) costs the
 * thread that served the request.
 *
 * Each producing thread (I/O threads, whichever front end) appends a
 * binary record of its request to its own bounded buffer (registered on
 * its first record), with the function that turns that record into a
 * line; the writer thread swaps each buffer with a spare under that
 * buffer's lock (held only for a pointer swap or a memcpy) every 100 ms,
 * or sooner when one fills past half, formats the records and writes the
 * lines out. A record that does not fit in its thread's buffer is dropped
 * and counted: requests never wait for the log. Writes use poll(2) with a
 * timeout so that the writer notices a shutdown even when the reader of a
 * pipe has stopped reading.
 *
 * Lifecycle: accesslog_open() once at start; accesslog_reopen() (any
 * thread, e.g. on SIGHUP) makes the writer reopen the path (logrotate);
 * accesslog_close() writes what is buffered (giving up after 2 s when the
 * output does not drain, counting the rest as dropped) and joins the
 * writer. Producers must have stopped before accesslog_close().
 */
#ifndef INFERD_OBS_ACCESSLOG_H
#define INFERD_OBS_ACCESSLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

enum log_line_format { LOG_LINE_JSON, LOG_LINE_TEXT };

struct accesslog_config {
    const char *path;            /* file (appended, created 0644) or "-" for stdout */
    enum log_line_format format;
    double sample;               /* fraction of requests logged, 0..1 */
    size_t thread_buffer_bytes;  /* per producing thread (default 256 KiB) */
};

/* Opens the output and starts the writer. Returns 0 or ST_ERROR with err. */
int accesslog_open(const struct accesslog_config *cfg, struct error *err);
void accesslog_close(void);
void accesslog_reopen(void);

/* True when the access log is on (cheap; the hot-path guard). */
bool accesslog_enabled(void);
enum log_line_format accesslog_format(void);
/* The sampling decision for one request (true when on and sampled). */
bool accesslog_sample(void);
/* Any thread: a new sampling ratio (0..1) for the next requests (the
 * --config file's reload); accesslog_open sets cfg->sample. */
void accesslog_set_sample(double sample);

/* The longest line a record's format function may write. */
#define ACCESSLOG_LINE_MAX 16384

/* Turns one record (the bytes given to accesslog_write, possibly
 * unaligned) into one line, without the newline (which is added) and
 * without any '\n' in it: writes at most ACCESSLOG_LINE_MAX bytes to out
 * and returns their count. Runs on the writer thread, in the order the
 * thread that wrote the records wrote them, so it may keep thread-local
 * caches; whatever the record points to must outlive it (static data). */
typedef size_t (*accesslog_format_fn)(const void *record, size_t len, char *out);

/* Appends one record of len bytes from the calling thread, to be formatted
 * by fmt on the writer thread. Never blocks on I/O; drops and counts when
 * the thread's buffer is full. */
void accesslog_write(accesslog_format_fn fmt, const void *record, size_t len);

struct accesslog_stats {
    uint64_t lines_written; /* handed to write(2) */
    uint64_t lines_dropped; /* buffer full, or lost at close/write error */
};
/* Any thread: counters since start (for the metrics exporter). */
void accesslog_stats(struct accesslog_stats *out);

#endif
