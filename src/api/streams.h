/*
 * streams: the resumable event streams of the OpenAI-compatible API
 * (api/openai/openai.h, docs/openai.md), in one process-wide registry with its
 * own mutex.
 *
 * A stream is the Server-Sent Event sequence of one streamed completion.
 * Its call (serve/call.h), on the I/O thread that received the POST,
 * appends every event (stream_append); the stream keeps them all, at most
 * STREAM_MAX_BYTES (beyond that the sequence is cancelled and the stream
 * ends with an error event), so that a client that lost its connection
 * reconnects and receives exactly the events after the last one it saw.
 * Every event has the id "<stream id>-<seq>": 32 random hex digits, a
 * dash, and the event's number from 0.
 *
 * Subscribers. At most one HTTP response follows a stream at a time: its
 * subscriber, which lives on the I/O thread of its connection (a struct
 * stream_thread). New events reach it on that thread: at once when
 * appended there, else through a task posted to its loop (loop_post); a
 * subscriber is reference-counted, so a task that arrives after it left
 * is harmless. A new subscriber replaces the old one, whose response ends.
 * The txn's cancel flag points at the subscriber's own flag, never at the
 * call's: the sequence outlives its client's connection.
 *
 * Grace period (--stream-resume-secs, streams_configure). A subscriber
 * leaves when its response ends: the stream's last event was sent, the
 * client went away (noticed by a failed write, or by stream_thread_tick
 * once a second), or another subscriber replaced it. A stream left without
 * a subscriber for resume_secs while its sequence still runs is cancelled
 * (the call's cancel flag: the engine ends the sequence with finish reason
 * "cancelled" at its next step, and those last events are kept); once its
 * call ended and resume_secs passed without a subscriber it is freed, and
 * its id goes to a ring of the STREAM_EXPIRED_RING ids freed last, which a
 * resume is told apart with (410 instead of 404). resume_secs 0: a
 * disconnect cancels at once, a stream is freed as soon as its call ended
 * and nobody follows it, and streams cannot be resumed.
 *
 * Resume (streams_resume): by stream id and the last event id the client
 * saw (or from the first event); only by the tenant that created the
 * stream (another tenant's stream is unknown: 404); a re-POST must carry
 * the original body (its SHA-256) to the same route (else 409). At most
 * STREAM_MAX_COUNT streams are held; stream_create refuses more (503).
 *
 * Threads: the stream_* functions of a call on the call's I/O thread; the
 * rest on the I/O thread of the request they serve; streams_write_metrics
 * on any thread.
 */
#ifndef INFERD_API_STREAMS_H
#define INFERD_API_STREAMS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/sha256.h"
#include "http/txn.h"
#include "net/loop.h"

#define STREAM_ID_LEN 32
#define STREAM_MAX_BYTES ((size_t)1 << 20)
#define STREAM_MAX_COUNT 4096
#define STREAM_EXPIRED_RING 4096
/* Longest tenant name a stream keeps (policy/auth.h's). */
#define STREAM_TENANT_MAX 64
/* Default of --stream-resume-secs. */
#define STREAM_RESUME_SECS 10
/* Longest Last-Event-ID value: the id, a dash, a number. */
#define STREAM_EVENT_ID_MAX (STREAM_ID_LEN + 1 + 20)

struct gen_stream;
struct stream_sub;

/* The subscribers of one I/O thread. */
struct stream_thread {
    struct loop *loop;
    struct stream_sub *subs; /* whose response is open */
    struct buf scratch;      /* events copied out for one write */
    uint64_t keepalive_ns;   /* a comment goes out on a response idle this long */
};

/* Process-wide, before the I/O threads start; 0 = not resumable. */
void streams_configure(uint32_t resume_secs);
uint32_t streams_resume_secs(void);
/* At exit, after every I/O thread stopped: frees every stream. */
void streams_shutdown(void);
/* inferd_gen_streams_active, inferd_gen_stream_resumes_total,
 * inferd_gen_streams_expired_total. */
void streams_write_metrics(struct buf *out);

void stream_thread_init(struct stream_thread *t, struct loop *loop, uint64_t keepalive_ms);
/* About once a second on the thread: ends the responses whose client went
 * away, sends keep-alive comments, applies the grace period. */
void stream_thread_tick(struct stream_thread *t, uint64_t now_ns);
/* After the thread's loop stopped: lets go of its subscribers. */
void stream_thread_free(struct stream_thread *t);

/* ---- a call's stream ------------------------------------------------------------- */

/* A new stream for a call of tenant (NULL: none) whose request body has
 * the given digest, on route `kind` (a number a re-POST must match);
 * cancel is the call's flag. 0 with *out, or ST_ERROR with err: 503 when
 * STREAM_MAX_COUNT streams are held, 500 out of memory. */
int stream_create(const char *tenant, const uint8_t digest[SHA256_DIGEST_SIZE], int kind,
                  atomic_bool *cancel, struct gen_stream **out, struct error *err);
/* The stream's id: STREAM_ID_LEN hex digits, NUL-terminated. */
const char *stream_id(const struct gen_stream *s);
/* The first event is coming: the POST's txn (still open) becomes the
 * first subscriber of thread t (its cancel flag is the subscriber's from
 * now on). Call once, before the first stream_append. */
void stream_attach_origin(struct gen_stream *s, struct stream_thread *t, struct http_txn *txn);
/* Appends one event whose data is data[0..len) (a JSON text or
 * "[DONE]"); last: no event follows. Returns 0, or ST_ERROR when the stream
 * holds STREAM_MAX_BYTES: the event is dropped, the sequence cancelled,
 * and the caller ends the stream with a last, short event (the room of a
 * few kilobytes left for it is never refused). */
int stream_append(struct gen_stream *s, const char *data, size_t len, bool last);
/* The POST's txn while it is still the subscriber (for its access log
 * line), else NULL. */
struct http_txn *stream_origin_txn(struct gen_stream *s);
/* The access log fields of the responses that follow the stream
 * (obsreq_set_generation); finish NULL or "" until it is known. */
void stream_set_generation(struct gen_stream *s, uint32_t prompt_tokens, uint32_t completion_tokens,
                           const char *finish);
/* The call ended: the stream forgets its cancel flag and the caller lets
 * go of s. A stream without any event is freed at once (its id was never
 * told). */
void stream_call_ended(struct gen_stream *s);

/* ---- resume and cancel ---------------------------------------------------------- */

/* Parses a Last-Event-ID value "<stream id>-<seq>": 0 with id (NUL-
 * terminated) and *seq, or ST_ERROR with a 400 in err. */
int stream_parse_event_id(const char *v, size_t len, char id[STREAM_ID_LEN + 1], uint64_t *seq,
                          struct error *err);

struct stream_resume {
    const char *id; /* the stream id */
    size_t id_len;
    bool has_last;      /* the client saw events up to last_seq */
    uint64_t last_seq;  /* else it wants them from the first */
    const char *tenant; /* the request's; NULL: none */
    /* A re-POST: the digest of its body and its route; NULL: GET. */
    const uint8_t *digest;
    int kind;
};

/* Makes txn the stream's subscriber on thread t: its response (Server-
 * Sent Events, begun at once) replays the events after the last one the
 * client saw and follows the stream to its end. 0, or ST_ERROR with err: 404
 * (unknown stream, another tenant's, or streams are not resumable), 410
 * (expired), 409 (a re-POST with another body or route), 400 (the client
 * cannot have seen that event). */
int streams_resume(struct stream_thread *t, struct http_txn *txn, const struct stream_resume *r,
                   struct error *err);
/* Explicit cancel by tenant: 0 with *was_running (false: the sequence had
 * already ended), or ST_ERROR with err 404/410 as streams_resume. */
int streams_cancel(const char *id, size_t id_len, const char *tenant, bool *was_running,
                   struct error *err);

#endif
