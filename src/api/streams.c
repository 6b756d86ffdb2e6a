#include "api/streams.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/hex.h"
#include "base/mem.h"
#include "base/probe.h"
#include "base/status.h"
#include "http/sse.h"
#include "obs/request.h"

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* Room kept past STREAM_MAX_BYTES for the events that end a stream. */
#define STREAM_TAIL_BYTES 8192
#define FINISH_MAX 15

/* The access log fields of a stream (obsreq_set_generation). */
struct gen_fields {
    uint32_t prompt_tokens, completion_tokens;
    char finish[FINISH_MAX + 1];
};

struct gen_stream {
    struct gen_stream *prev, *next; /* the registry's list */
    char id[STREAM_ID_LEN + 1];
    char tenant[STREAM_TENANT_MAX + 1]; /* "" = none */
    uint8_t digest[SHA256_DIGEST_SIZE];
    int kind;
    struct buf events; /* the SSE text of every event, in order */
    uint32_t *ends;    /* ends[i]: where event i ends in events */
    uint32_t nevents, cap_ends;
    bool started;           /* the first subscriber came: the id is known */
    bool last;              /* the last event is in */
    bool full;              /* over STREAM_MAX_BYTES: the sequence was cancelled */
    bool grace_cancelled;   /* nobody came back in time */
    atomic_bool *cancel;    /* the call's flag; NULL once the call ended */
    struct stream_sub *sub; /* one reference */
    uint64_t idle_since_ns; /* when the last subscriber left (sub NULL) */
    uint64_t ended_ns;      /* when the call ended */
    struct gen_fields gen;
};

struct stream_sub {
    atomic_uint refs;
    struct stream_thread *owner;
    /* Owner thread only. */
    struct http_txn *txn; /* NULL once the response ended */
    struct stream_sub *prev, *next;
    bool begun; /* the event stream's head went out */
    uint64_t last_write_ns;
    struct gen_fields gen; /* as of the last delivery */
    /* Under the registry's mutex. */
    struct gen_stream *stream; /* NULL once it left or was replaced */
    uint32_t next_event;       /* the first event not sent yet */
    bool posted;               /* a wake-up task is queued */
    atomic_bool cancel;        /* the txn's cancel flag: the client is gone */
    struct loop_task task;
};

struct expired_id {
    char id[STREAM_ID_LEN + 1];
    char tenant[STREAM_TENANT_MAX + 1];
};

static struct {
    pthread_mutex_t lock;
    struct gen_stream *list;
    uint32_t count;
    uint32_t resume_secs;
    struct expired_id expired[STREAM_EXPIRED_RING];
    uint32_t expired_next, expired_count;
    uint64_t resumes, expirations;
} reg = {.lock = PTHREAD_MUTEX_INITIALIZER, .resume_secs = STREAM_RESUME_SECS};

static void lock(void)
{
    pthread_mutex_lock(&reg.lock);
}

static void unlock(void)
{
    pthread_mutex_unlock(&reg.lock);
}

static void copy_text(char *dst, size_t cap, const char *s)
{
    size_t n = s ? strnlen(s, cap - 1) : 0;
    memcpy(dst, s ? s : "", n);
    dst[n] = '\0';
}

void streams_configure(uint32_t resume_secs)
{
    lock();
    reg.resume_secs = resume_secs;
    unlock();
}

uint32_t streams_resume_secs(void)
{
    lock();
    uint32_t s = reg.resume_secs;
    unlock();
    return s;
}

/* ---- streams ------------------------------------------------------------------- */

static void sub_unref(struct stream_sub *sub)
{
    if (atomic_fetch_sub_explicit(&sub->refs, 1, memory_order_acq_rel) == 1)
        mem_free(sub);
}

static void sub_ref(struct stream_sub *sub)
{
    atomic_fetch_add_explicit(&sub->refs, 1, memory_order_relaxed);
}

static void stream_free_locked(struct gen_stream *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        reg.list = s->next;
    if (s->next)
        s->next->prev = s->prev;
    reg.count--;
    if (s->started) {
        struct expired_id *e = &reg.expired[reg.expired_next];
        memcpy(e->id, s->id, sizeof e->id);
        memcpy(e->tenant, s->tenant, sizeof e->tenant);
        reg.expired_next = (reg.expired_next + 1) % STREAM_EXPIRED_RING;
        if (reg.expired_count < STREAM_EXPIRED_RING)
            reg.expired_count++;
    }
    buf_free(&s->events);
    mem_free(s->ends);
    mem_free(s);
}

/* No subscriber, the call ended, and the grace period passed since both
 * (a client that comes back just after a cancel still gets the end):
 * freed. */
static bool stream_expire_locked(struct gen_stream *s, uint64_t now_ns)
{
    if (s->sub || s->cancel || !s->started)
        return false;
    uint64_t since = s->idle_since_ns > s->ended_ns ? s->idle_since_ns : s->ended_ns;
    if (since > now_ns || now_ns - since < (uint64_t)reg.resume_secs * 1000000000u)
        return false;
    stream_free_locked(s);
    return true;
}

int stream_create(const char *tenant, const uint8_t digest[SHA256_DIGEST_SIZE], int kind,
                  atomic_bool *cancel, struct gen_stream **out, struct error *err)
{
    struct gen_stream *s = mem_calloc(1, sizeof *s);
    if (!s)
        return error_set(err, 500, "out of memory");
    char hex[REQUEST_ID_MAX + 1];
    request_id_resolve(NULL, 0, hex); /* STREAM_ID_LEN random hex digits */
    _Static_assert(STREAM_ID_LEN == 32, "request_id_resolve makes 32 digits");
    memcpy(s->id, hex, STREAM_ID_LEN);
    copy_text(s->tenant, sizeof s->tenant, tenant);
    memcpy(s->digest, digest, SHA256_DIGEST_SIZE);
    s->kind = kind;
    s->cancel = cancel;
    buf_init(&s->events, STREAM_MAX_BYTES + STREAM_TAIL_BYTES);
    lock();
    if (reg.count >= STREAM_MAX_COUNT) {
        unlock();
        mem_free(s);
        error_set(err, 503, "too many streams (%d) are held: try again shortly", STREAM_MAX_COUNT);
        err->retry_after_s = 1;
        return ST_ERROR;
    }
    s->next = reg.list;
    if (reg.list)
        reg.list->prev = s;
    reg.list = s;
    reg.count++;
    unlock();
    *out = s;
    return 0;
}

const char *stream_id(const struct gen_stream *s)
{
    return s->id;
}

/* ---- delivery ------------------------------------------------------------------ */

static void sub_end(struct stream_sub *sub);

/* Sends what sub has not seen yet; ends its response after the last event
 * or when it was replaced. Owner thread. */
static void deliver(struct stream_sub *sub)
{
    struct stream_thread *t = sub->owner;
    struct http_txn *txn = sub->txn;
    if (!txn)
        return;
    if (atomic_load_explicit(&sub->cancel, memory_order_relaxed)) {
        sub_end(sub); /* the client went away: noticed at the next event */
        return;
    }
    buf_reset(&t->scratch);
    bool end = true;
    char id[STREAM_ID_LEN + 1] = "";
    lock();
    struct gen_stream *s = sub->stream;
    if (s) {
        memcpy(id, s->id, sizeof id);
        if (sub->next_event < s->nevents) {
            uint32_t from = sub->next_event ? s->ends[sub->next_event - 1] : 0;
            buf_append(&t->scratch, s->events.data + from, s->ends[s->nevents - 1] - from);
            sub->next_event = s->nevents;
        }
        end = s->last && sub->next_event == s->nevents;
        sub->gen = s->gen;
    }
    unlock();
    if (!sub->begun) {
        sub->begun = true;
        if (id[0])
            http_txn_add_header(txn, "x-inferd-stream-id", id);
        if (sse_begin(txn) != 0)
            end = true;
    }
    if (t->scratch.err ||
        (t->scratch.len && http_txn_stream_write(txn, t->scratch.data, t->scratch.len) != 0))
        end = true; /* the client is gone, or does not read: it may come back */
    sub->last_write_ns = clock_now_ns();
    if (end)
        sub_end(sub);
}

static void wake_task(struct loop_task *task)
{
    struct stream_sub *sub = container_of(task, struct stream_sub, task);
    lock();
    sub->posted = false;
    unlock();
    deliver(sub);
    sub_unref(sub);
}

/* Under the lock: sub has something new. Returns sub (with a reference)
 * when it lives on this thread and the caller delivers after unlocking. */
static struct stream_sub *wake_locked(struct stream_sub *sub)
{
    sub_ref(sub);
    if (sub->owner->loop == loop_current())
        return sub;
    if (sub->posted) {
        sub_unref(sub); /* the queued task will see it */
        return NULL;
    }
    sub->posted = true;
    sub->task.run = wake_task;
    loop_post(sub->owner->loop, &sub->task);
    return NULL;
}

static void deliver_and_unref(struct stream_sub *sub)
{
    if (!sub)
        return;
    deliver(sub);
    sub_unref(sub);
}

/* The response of sub ends (its last event went out, its client left, or
 * another subscriber took its place). Owner thread. */
static void sub_end(struct stream_sub *sub)
{
    struct stream_thread *t = sub->owner;
    struct http_txn *txn = sub->txn;
    bool drop = false;
    lock();
    struct gen_stream *s = sub->stream;
    if (s) {
        s->sub = NULL;
        sub->stream = NULL;
        drop = true;
        s->idle_since_ns = clock_now_ns();
        if (reg.resume_secs == 0 && s->cancel && !s->last)
            atomic_store_explicit(s->cancel, true, memory_order_relaxed);
        if (reg.resume_secs == 0)
            stream_expire_locked(s, s->idle_since_ns);
    }
    unlock();
    if (drop)
        sub_unref(sub); /* the stream's reference; the list's is still held */
    if (txn) {
        sub->txn = NULL;
        txn->cancel = NULL;
        obsreq_set_generation(txn->obs, sub->gen.prompt_tokens, sub->gen.completion_tokens,
                              sub->gen.finish);
        if (sub->begun)
            http_txn_stream_end(txn);
        else
            http_txn_respond(txn, 0, NULL); /* never begun: the client is gone */
        if (sub->prev)
            sub->prev->next = sub->next;
        else
            t->subs = sub->next;
        if (sub->next)
            sub->next->prev = sub->prev;
        sub_unref(sub);
    }
}

/* A new subscriber of thread t for txn, on the list, with the list's
 * reference and one for the stream; NULL when out of memory. */
static struct stream_sub *sub_new(struct stream_thread *t, struct http_txn *txn)
{
    struct stream_sub *sub = mem_calloc(1, sizeof *sub);
    if (!sub)
        return NULL;
    atomic_init(&sub->refs, 2);
    atomic_init(&sub->cancel, txn->aborted);
    sub->owner = t;
    sub->txn = txn;
    sub->last_write_ns = clock_now_ns();
    txn->cancel = &sub->cancel;
    sub->next = t->subs;
    if (t->subs)
        t->subs->prev = sub;
    t->subs = sub;
    return sub;
}

void stream_attach_origin(struct gen_stream *s, struct stream_thread *t, struct http_txn *txn)
{
    struct stream_sub *sub = sub_new(t, txn);
    lock();
    s->started = true;
    s->idle_since_ns = clock_now_ns();
    if (sub) {
        s->sub = sub;
        sub->stream = s;
    }
    unlock();
    if (!sub) {
        /* Out of memory: nobody follows the stream; a client may resume. */
        txn->cancel = NULL;
        http_txn_error(txn, 503, "out of memory");
    }
}

int stream_append(struct gen_stream *s, const char *data, size_t len, bool last)
{
    char id[STREAM_EVENT_ID_MAX + 1];
    struct stream_sub *wake = NULL;
    int rc = 0;
    lock();
    size_t mark = s->events.len;
    int n = snprintf(id, sizeof id, "%s-%" PRIu32, s->id, s->nevents);
    if (!last && s->events.len + len + 64 > STREAM_MAX_BYTES)
        s->events.err = -E2BIG;
    else
        sse_format(&s->events, id, (size_t)n, data, len);
    if (!s->events.err && s->nevents == s->cap_ends) {
        uint32_t cap = s->cap_ends ? s->cap_ends * 2 : 64;
        uint32_t *ends = mem_realloc(s->ends, cap * sizeof *ends);
        if (ends) {
            s->ends = ends;
            s->cap_ends = cap;
        } else {
            s->events.err = -ENOMEM;
        }
    }
    if (s->events.err) {
        s->events.len = mark;
        s->events.err = 0;
        if (!s->full && s->cancel)
            atomic_store_explicit(s->cancel, true, memory_order_relaxed);
        s->full = true;
        rc = ST_ERROR;
        if (last) {
            s->last = true; /* nothing more can come; the subscriber ends */
            wake = s->sub ? wake_locked(s->sub) : NULL;
        }
    } else {
        s->ends[s->nevents++] = (uint32_t)s->events.len;
        s->last = last;
        if (s->sub)
            wake = wake_locked(s->sub);
    }
    unlock();
    deliver_and_unref(wake);
    return rc;
}

struct http_txn *stream_origin_txn(struct gen_stream *s)
{
    lock();
    struct stream_sub *sub = s->sub;
    bool origin = sub && sub->owner->loop == loop_current();
    unlock();
    /* Only the POST's subscriber can be on the call's thread before a
     * resume; a resume on that same thread is as good for the log. */
    return origin ? sub->txn : NULL;
}

void stream_set_generation(struct gen_stream *s, uint32_t prompt_tokens, uint32_t completion_tokens,
                           const char *finish)
{
    lock();
    s->gen.prompt_tokens = prompt_tokens;
    s->gen.completion_tokens = completion_tokens;
    copy_text(s->gen.finish, sizeof s->gen.finish, finish);
    unlock();
}

void stream_call_ended(struct gen_stream *s)
{
    struct stream_sub *wake = NULL;
    lock();
    s->cancel = NULL;
    s->ended_ns = clock_now_ns();
    if (!s->started) {
        stream_free_locked(s);
    } else {
        if (!s->last) {
            s->last = true;
            wake = s->sub ? wake_locked(s->sub) : NULL;
        }
        if (reg.resume_secs == 0)
            stream_expire_locked(s, clock_now_ns());
    }
    unlock();
    deliver_and_unref(wake);
}

/* ---- resume and cancel ----------------------------------------------------------- */

int stream_parse_event_id(const char *v, size_t len, char id[STREAM_ID_LEN + 1], uint64_t *seq,
                          struct error *err)
{
    bool ok = len > STREAM_ID_LEN + 1 && len <= STREAM_EVENT_ID_MAX && v[STREAM_ID_LEN] == '-';
    for (size_t i = 0; ok && i < STREAM_ID_LEN; i++)
        ok = hex_value(v[i]) >= 0;
    uint64_t n = 0;
    for (size_t i = STREAM_ID_LEN + 1; ok && i < len; i++) {
        ok = v[i] >= '0' && v[i] <= '9' && n <= (UINT32_MAX - 9) / 10;
        n = n * 10 + (uint64_t)(v[i] - '0');
    }
    if (!ok)
        return error_set(err, 400,
                         "malformed Last-Event-ID: expected <stream id>-<event number>, the id "
                         "of an event of the stream");
    memcpy(id, v, STREAM_ID_LEN);
    id[STREAM_ID_LEN] = '\0';
    *seq = n;
    return 0;
}

static bool id_is(const char *a, const char *id, size_t id_len)
{
    return id_len == STREAM_ID_LEN && memcmp(a, id, STREAM_ID_LEN) == 0;
}

/* The live stream `id` of tenant, or NULL with err 404 or 410. */
static struct gen_stream *find_locked(const char *id, size_t id_len, const char *tenant,
                                      struct error *err)
{
    const char *who = tenant ? tenant : "";
    for (struct gen_stream *s = reg.list; s; s = s->next)
        if (s->started && id_is(s->id, id, id_len) &&
            strncmp(s->tenant, who, sizeof s->tenant) == 0)
            return s;
    for (uint32_t i = 0; i < reg.expired_count; i++) {
        const struct expired_id *e = &reg.expired[i];
        if (id_is(e->id, id, id_len) && strncmp(e->tenant, who, sizeof e->tenant) == 0) {
            error_set(err, 410, "stream '%.*s' has expired (its grace period passed)", (int)id_len,
                      id);
            return NULL;
        }
    }
    error_set(err, 404, "no stream '%.*s'", (int)(id_len > 64 ? 64 : id_len), id);
    return NULL;
}

int streams_resume(struct stream_thread *t, struct http_txn *txn, const struct stream_resume *r,
                   struct error *err)
{
    struct stream_sub *sub = sub_new(t, txn);
    if (!sub)
        return error_set(err, 500, "out of memory");
    struct stream_sub *old_wake = NULL, *old = NULL;
    lock();
    struct gen_stream *s = NULL;
    if (reg.resume_secs == 0)
        error_set(err, 404, "streams cannot be resumed on this server (--stream-resume-secs is 0)");
    else
        s = find_locked(r->id, r->id_len, r->tenant, err);
    if (s && r->digest &&
        (r->kind != s->kind || memcmp(r->digest, s->digest, SHA256_DIGEST_SIZE) != 0)) {
        error_set(err, 409,
                  "the request differs from the one that started stream '%s': resume with "
                  "the same body and path, or with GET /v1/streams/%s",
                  s->id, s->id);
        s = NULL;
    }
    if (s && r->has_last && r->last_seq >= s->nevents) {
        error_set(err, 400,
                  "Last-Event-ID names event %" PRIu64 " but stream '%s' has sent %" PRIu32
                  " events so far",
                  r->last_seq, s->id, s->nevents);
        s = NULL;
    }
    if (s) {
        old = s->sub;
        if (old) {
            old->stream = NULL;
            old_wake = wake_locked(old);
        }
        s->sub = sub;
        sub->stream = s;
        sub->next_event = r->has_last ? (uint32_t)r->last_seq + 1 : 0;
        reg.resumes++;
        INFERD_PROBE_3(stream_resumed, s->id, sub->next_event, s->nevents);
    }
    unlock();
    if (!s) {
        /* Not a subscriber after all: undo sub_new. */
        txn->cancel = NULL;
        sub->txn = NULL;
        t->subs = sub->next;
        if (sub->next)
            sub->next->prev = NULL;
        mem_free(sub);
        return ST_ERROR;
    }
    deliver_and_unref(old_wake);
    if (old)
        sub_unref(old); /* the stream's reference */
    deliver(sub);
    return 0;
}

int streams_cancel(const char *id, size_t id_len, const char *tenant, bool *was_running,
                   struct error *err)
{
    lock();
    struct gen_stream *s = find_locked(id, id_len, tenant, err);
    if (s) {
        *was_running = s->cancel && !s->last;
        if (*was_running)
            atomic_store_explicit(s->cancel, true, memory_order_relaxed);
    }
    unlock();
    return s ? ST_OK : ST_ERROR;
}

/* ---- threads ------------------------------------------------------------------- */

void stream_thread_init(struct stream_thread *t, struct loop *loop, uint64_t keepalive_ms)
{
    memset(t, 0, sizeof *t);
    t->loop = loop;
    t->keepalive_ns = keepalive_ms * 1000000u;
    buf_init(&t->scratch, STREAM_MAX_BYTES + STREAM_TAIL_BYTES);
}

/* The grace period of every stream. */
static void sweep(void)
{
    lock();
    uint64_t now_ns = clock_now_ns(); /* not before any time stored under the lock */
    uint64_t grace_ns = (uint64_t)reg.resume_secs * 1000000000u;
    struct gen_stream *next;
    for (struct gen_stream *s = reg.list; s; s = next) {
        next = s->next;
        if (!s->started || s->sub)
            continue;
        if (s->cancel && !s->last && !s->grace_cancelled && now_ns - s->idle_since_ns >= grace_ns) {
            atomic_store_explicit(s->cancel, true, memory_order_relaxed);
            s->grace_cancelled = true;
            reg.expirations++;
        }
        stream_expire_locked(s, now_ns);
    }
    unlock();
}

void stream_thread_tick(struct stream_thread *t, uint64_t now_ns)
{
    struct stream_sub *next;
    for (struct stream_sub *sub = t->subs; sub; sub = next) {
        next = sub->next;
        if (atomic_load_explicit(&sub->cancel, memory_order_relaxed)) {
            sub_end(sub);
        } else if (sub->begun && now_ns >= sub->last_write_ns + t->keepalive_ns) {
            sub->last_write_ns = now_ns;
            if (sse_comment(sub->txn, "keep-alive") != 0)
                sub_end(sub);
        }
    }
    sweep();
}

void stream_thread_free(struct stream_thread *t)
{
    struct stream_sub *next;
    for (struct stream_sub *sub = t->subs; sub; sub = next) {
        next = sub->next;
        lock();
        struct gen_stream *s = sub->stream;
        if (s) {
            s->sub = NULL;
            sub->stream = NULL;
        }
        unlock();
        if (s)
            sub_unref(sub);
        sub->txn = NULL;
        sub_unref(sub);
    }
    t->subs = NULL;
    buf_free(&t->scratch);
}

void streams_shutdown(void)
{
    lock();
    while (reg.list)
        stream_free_locked(reg.list);
    reg.expired_count = reg.expired_next = 0;
    unlock();
}

void streams_write_metrics(struct buf *out)
{
    lock();
    uint32_t active = reg.count;
    uint64_t resumes = reg.resumes, expired = reg.expirations;
    unlock();
    buf_printf(out,
               "# HELP inferd_gen_streams_active Resumable event streams held (generating, or "
               "waiting for a client to resume them).\n"
               "# TYPE inferd_gen_streams_active gauge\n"
               "inferd_gen_streams_active %" PRIu32 "\n"
               "# HELP inferd_gen_stream_resumes_total Responses that resumed a stream "
               "(Last-Event-ID or GET /v1/streams/{id}).\n"
               "# TYPE inferd_gen_stream_resumes_total counter\n"
               "inferd_gen_stream_resumes_total %" PRIu64 "\n"
               "# HELP inferd_gen_streams_expired_total Streams whose sequence was cancelled "
               "because no client followed them for the grace period.\n"
               "# TYPE inferd_gen_streams_expired_total counter\n"
               "inferd_gen_streams_expired_total %" PRIu64 "\n",
               active, resumes, expired);
}
