#include "obs/accesslog.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/thread.h"
#include "obs/trace.h"

#define MAX_PRODUCERS 256
#define DEFAULT_THREAD_BUFFER (256 * 1024)
#define FLUSH_EVERY_MS 100
#define CLOSE_GRACE_MS 2000
#define PATH_MAX_LEN 4096
/* The writer's line buffer: written out whenever less than a line at its
 * longest is left. */
#define OUT_BYTES (1024 * 1024)
_Static_assert(OUT_BYTES > 2 * (ACCESSLOG_LINE_MAX + 1), "the line buffer holds lines");

/* How a record is held in a producer's buffer: this head (copied in and
 * out with memcpy: the buffer has no alignment), then its len bytes. */
struct entry {
    uint32_t len;
    accesslog_format_fn fmt;
};

struct producer {
    pthread_mutex_t lock;
    char *active, *spare; /* each cap bytes */
    size_t len, cap;      /* bytes in active */
    uint64_t lines;       /* records in active */
    bool woke;            /* the writer was signalled for this buffer */
};

struct accesslog {
    struct accesslog_config cfg;
    char path[PATH_MAX_LEN];
    int fd;
    bool own_fd;   /* opened by us (not stdout) */
    size_t chunk;  /* largest write: PIPE_BUF for pipes and terminals */
    char *out;     /* OUT_BYTES: the writer's formatted lines */
    pthread_t tid;
    pthread_mutex_t lock; /* producers[], stopping, cond */
    pthread_cond_t cond;
    struct producer *producers[MAX_PRODUCERS];
    uint32_t nproducers;
    bool stopping;
    uint64_t stop_deadline_ms;
};

static struct accesslog *alog;
static atomic_bool enabled;
static atomic_uint generation; /* bumped by every open, invalidates thread slots */
static atomic_bool reopen_wanted;
static atomic_uint_fast64_t st_written, st_dropped;
/* The sampling ratio's bits (a double): accesslog_set_sample changes it
 * while producers read it. */
static _Atomic uint64_t sample_bits;

static _Thread_local struct producer *tls_producer;
static _Thread_local unsigned tls_generation;

/* ---- output ------------------------------------------------------------- */

static int open_output(const char *path, int *fd_out, bool *own, size_t *chunk)
{
    int fd;
    if (strcmp(path, "-") == 0) {
        fd = STDOUT_FILENO;
        *own = false;
    } else {
        /* O_NONBLOCK: a FIFO with no reader fails instead of hanging, and
         * writes to a full pipe return instead of blocking the writer. */
        fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644);
        if (fd < 0)
            return -errno;
        *own = true;
    }
    struct stat st;
    *chunk = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? 1u << 20 : PIPE_BUF;
    *fd_out = fd;
    return 0;
}

static size_t count_lines(const char *p, size_t n)
{
    size_t lines = 0;
    for (const char *q = p; (q = memchr(q, '\n', (size_t)(p + n - q))) != NULL; q++)
        lines++;
    return lines;
}

/* Writes p[0..n); waits for a full pipe with poll so that a shutdown is
 * noticed. Returns the bytes not written (0 = all). */
static size_t write_out(struct accesslog *a, const char *p, size_t n)
{
    while (n) {
        pthread_mutex_lock(&a->lock);
        bool give_up = a->stopping && clock_now_ms() >= a->stop_deadline_ms;
        pthread_mutex_unlock(&a->lock);
        if (give_up)
            return n;
        struct pollfd pfd = {.fd = a->fd, .events = POLLOUT};
        int rc = poll(&pfd, 1, FLUSH_EVERY_MS);
        if (rc < 0 && errno != EINTR)
            return n;
        if (rc <= 0)
            continue;
        if (pfd.revents & (POLLERR | POLLNVAL))
            return n;
        ssize_t w = write(a->fd, p, n < a->chunk ? n : a->chunk);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
            return n;
        }
    }
    return 0;
}

static void do_reopen(struct accesslog *a)
{
    if (!a->own_fd)
        return;
    int fd;
    bool own;
    size_t chunk;
    int rc = open_output(a->path, &fd, &own, &chunk);
    if (rc) {
        log_warn("access log: cannot reopen %s: %s (still writing to the old file)", a->path,
                 strerror(-rc));
        return;
    }
    close(a->fd);
    a->fd = fd;
    a->chunk = chunk;
    log_info("access log reopened: %s", a->path);
}

/* Writes the first n bytes of a->out (whole lines); returns the lines
 * lost. */
static uint64_t write_lines(struct accesslog *a, size_t n)
{
    size_t left = n ? write_out(a, a->out, n) : 0;
    return left ? count_lines(a->out + n - left, left) : 0;
}

/* Formats the records of one producer's buffer into lines and writes them
 * out; returns the lines lost. */
static uint64_t emit(struct accesslog *a, const char *data, size_t len)
{
    uint64_t lost = 0;
    size_t n = 0;
    for (size_t at = 0; at < len;) {
        struct entry e;
        memcpy(&e, data + at, sizeof e);
        at += sizeof e;
        if (OUT_BYTES - n < ACCESSLOG_LINE_MAX + 1) {
            lost += write_lines(a, n);
            n = 0;
        }
        n += e.fmt(data + at, e.len, a->out + n);
        a->out[n++] = '\n';
        at += e.len;
    }
    return lost + write_lines(a, n);
}

/* Swaps every producer's buffer and writes it out. */
static void flush_all(struct accesslog *a)
{
    pthread_mutex_lock(&a->lock);
    uint32_t n = a->nproducers;
    pthread_mutex_unlock(&a->lock);
    for (uint32_t i = 0; i < n; i++) {
        struct producer *p = a->producers[i];
        pthread_mutex_lock(&p->lock);
        char *data = p->active;
        size_t len = p->len;
        uint64_t lines = p->lines;
        p->active = p->spare;
        p->spare = data;
        p->len = 0;
        p->lines = 0;
        p->woke = false;
        pthread_mutex_unlock(&p->lock);
        if (!len)
            continue;
        uint64_t lost = emit(a, data, len);
        atomic_fetch_add_explicit(&st_written, lines - lost, memory_order_relaxed);
        atomic_fetch_add_explicit(&st_dropped, lost, memory_order_relaxed);
    }
}

static void *writer_main(void *arg)
{
    struct accesslog *a = arg;
    for (;;) {
        pthread_mutex_lock(&a->lock);
        if (!a->stopping) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            uint64_t until = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec +
                             FLUSH_EVERY_MS * 1000000ull;
            ts.tv_sec = (time_t)(until / 1000000000ull);
            ts.tv_nsec = (long)(until % 1000000000ull);
            pthread_cond_timedwait(&a->cond, &a->lock, &ts);
        }
        bool stopping = a->stopping;
        pthread_mutex_unlock(&a->lock);
        if (atomic_exchange(&reopen_wanted, false))
            do_reopen(a);
        flush_all(a);
        if (stopping)
            break;
    }
    return NULL;
}

/* ---- producers ---------------------------------------------------------- */

static struct producer *producer_get(void)
{
    struct accesslog *a = alog;
    unsigned gen = atomic_load_explicit(&generation, memory_order_acquire);
    if (tls_producer && tls_generation == gen)
        return tls_producer;
    struct producer *p = mem_calloc(1, sizeof *p);
    if (p) {
        p->cap = a->cfg.thread_buffer_bytes;
        p->active = mem_alloc(p->cap);
        p->spare = mem_alloc(p->cap);
        pthread_mutex_init(&p->lock, NULL);
    }
    pthread_mutex_lock(&a->lock);
    bool ok = p && p->active && p->spare && a->nproducers < MAX_PRODUCERS;
    if (ok)
        a->producers[a->nproducers++] = p;
    pthread_mutex_unlock(&a->lock);
    if (!ok) {
        if (p) {
            mem_free(p->active);
            mem_free(p->spare);
            pthread_mutex_destroy(&p->lock);
            mem_free(p);
        }
        return NULL;
    }
    tls_producer = p;
    tls_generation = gen;
    return p;
}

void accesslog_write(accesslog_format_fn fmt, const void *record, size_t len)
{
    if (!atomic_load_explicit(&enabled, memory_order_acquire))
        return;
    struct producer *p = producer_get();
    size_t need = sizeof(struct entry) + len;
    if (!p || need > p->cap || len > UINT32_MAX) {
        atomic_fetch_add_explicit(&st_dropped, 1, memory_order_relaxed);
        return;
    }
    struct entry e = {.len = (uint32_t)len, .fmt = fmt};
    pthread_mutex_lock(&p->lock);
    bool fits = p->len + need <= p->cap;
    if (fits) {
        memcpy(p->active + p->len, &e, sizeof e);
        memcpy(p->active + p->len + sizeof e, record, len);
        p->len += need;
        p->lines++;
    }
    /* Wake the writer once per buffer, when it passes half full. */
    bool half = p->len > p->cap / 2 && !p->woke;
    if (half)
        p->woke = true;
    pthread_mutex_unlock(&p->lock);
    if (!fits)
        atomic_fetch_add_explicit(&st_dropped, 1, memory_order_relaxed);
    else if (half)
        pthread_cond_signal(&alog->cond);
}

/* ---- lifecycle ------------------------------------------------------------ */

int accesslog_open(const struct accesslog_config *cfg, struct error *err)
{
    if (strlen(cfg->path) >= PATH_MAX_LEN)
        return error_set(err, 400, "--access-log: path too long");
    struct accesslog *a = mem_calloc(1, sizeof *a);
    if (!a)
        return error_set(err, 500, "out of memory");
    a->cfg = *cfg;
    accesslog_set_sample(cfg->sample);
    if (!a->cfg.thread_buffer_bytes)
        a->cfg.thread_buffer_bytes = DEFAULT_THREAD_BUFFER;
    snprintf(a->path, sizeof a->path, "%s", cfg->path);
    a->out = mem_alloc(OUT_BYTES);
    if (!a->out) {
        mem_free(a);
        return error_set(err, 500, "out of memory");
    }
    int rc = open_output(a->path, &a->fd, &a->own_fd, &a->chunk);
    if (rc) {
        mem_free(a->out);
        mem_free(a);
        return error_set(err, 400, "--access-log: cannot open %s: %s", cfg->path,
                         rc == -ENXIO ? "a FIFO with no reader" : strerror(-rc));
    }
    pthread_mutex_init(&a->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&a->cond, &ca);
    pthread_condattr_destroy(&ca);
    alog = a;
    atomic_fetch_add(&generation, 1);
    rc = thread_start(&a->tid, "accesslog", writer_main, a);
    if (rc) {
        alog = NULL;
        if (a->own_fd)
            close(a->fd);
        pthread_cond_destroy(&a->cond);
        pthread_mutex_destroy(&a->lock);
        mem_free(a->out);
        mem_free(a);
        return error_set(err, 500, "cannot start the access log writer: %s", strerror(rc));
    }
    atomic_store_explicit(&enabled, true, memory_order_release);
    return 0;
}

void accesslog_close(void)
{
    struct accesslog *a = alog;
    if (!a)
        return;
    atomic_store(&enabled, false);
    pthread_mutex_lock(&a->lock);
    a->stopping = true;
    a->stop_deadline_ms = clock_now_ms() + CLOSE_GRACE_MS;
    pthread_cond_signal(&a->cond);
    pthread_mutex_unlock(&a->lock);
    pthread_join(a->tid, NULL);
    for (uint32_t i = 0; i < a->nproducers; i++) {
        struct producer *p = a->producers[i];
        /* Lines appended after the final flush (none once producers have
         * stopped) are counted as dropped. */
        atomic_fetch_add(&st_dropped, p->lines);
        mem_free(p->active);
        mem_free(p->spare);
        pthread_mutex_destroy(&p->lock);
        mem_free(p);
    }
    if (a->own_fd)
        close(a->fd);
    log_info("access log closed: %llu lines written, %llu dropped",
             (unsigned long long)atomic_load(&st_written), (unsigned long long)atomic_load(&st_dropped));
    pthread_cond_destroy(&a->cond);
    pthread_mutex_destroy(&a->lock);
    alog = NULL;
    mem_free(a->out);
    mem_free(a);
}

void accesslog_reopen(void)
{
    atomic_store(&reopen_wanted, true);
}

bool accesslog_enabled(void)
{
    return atomic_load_explicit(&enabled, memory_order_relaxed);
}

enum log_line_format accesslog_format(void)
{
    return alog ? alog->cfg.format : LOG_LINE_JSON;
}

bool accesslog_sample(void)
{
    if (!accesslog_enabled())
        return false;
    uint64_t bits = atomic_load_explicit(&sample_bits, memory_order_relaxed);
    double s;
    memcpy(&s, &bits, sizeof s);
    return s >= 1.0 || (s > 0 && trace_random_unit() < s);
}

void accesslog_set_sample(double sample)
{
    uint64_t bits;
    memcpy(&bits, &sample, sizeof bits);
    atomic_store_explicit(&sample_bits, bits, memory_order_relaxed);
}

void accesslog_stats(struct accesslog_stats *out)
{
    out->lines_written = atomic_load(&st_written);
    out->lines_dropped = atomic_load(&st_dropped);
}
