/*
 * gen_text: the text of one generated sequence, released piece by piece:
 * stop sequences found across token boundaries, and output that is always
 * valid UTF-8.
 *
 * Stops: after each append, the text so far is searched for the stop
 * sequences; when one occurs, the text ends before the earliest-starting
 * occurrence (of any stop) and the sequence is done. Bytes that may be the
 * start of a stop sequence (a suffix of the text that is a proper prefix of
 * one) are held back until the next bytes decide.
 *
 * UTF-8: the released text is the final byte text decoded as Python's
 * bytes.decode("utf-8", "replace") and JavaScript's TextDecoder do (the
 * Unicode "maximal subpart" practice): a well-formed character is kept, and
 * each maximal prefix of a character that cannot be completed, or else a
 * single bad byte, becomes one U+FFFD. A character cut by the end of the
 * decided text is held back; at the end (final, or after a stop) an
 * incomplete one becomes U+FFFD. So the concatenation of everything taken
 * is the same however the text was split into tokens and takes.
 *
 * Limits: GEN_MAX_STOPS stops of 1..GEN_MAX_STOP_LEN bytes each (init
 * refuses others with -EINVAL); at most GEN_TEXT_MAX_PENDING bytes appended
 * and not yet taken (beyond: append fails as out of memory).
 *
 * Lifecycle: the caller owns the struct (embedded in its sequence);
 * gen_text_init, appends and takes, gen_text_free (after which init may be
 * called again). One thread at a time. Fields are private.
 */
#ifndef INFERD_GEN_GEN_TEXT_H
#define INFERD_GEN_GEN_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

#define GEN_MAX_STOPS 4
#define GEN_MAX_STOP_LEN 64
#define GEN_TEXT_MAX_PENDING (16u << 20)

struct gen_text {
    char _stops[GEN_MAX_STOPS][GEN_MAX_STOP_LEN];
    uint8_t _stop_lens[GEN_MAX_STOPS];
    uint32_t _nstops;
    struct buf _pending; /* appended and not taken yet */
    bool _stopped;       /* a stop sequence ended the text */
};

/* Copies the stops. 0, or -EINVAL for more than GEN_MAX_STOPS stops or one of 0 or more than
 * GEN_MAX_STOP_LEN bytes (allocates nothing: -ENOMEM cannot happen). */
int gen_text_init(struct gen_text *t, const char *const *stops, const size_t *stop_lens,
                  uint32_t nstops);
/* Appends one token's bytes. Returns 1 when a stop sequence is now complete (the text ends before
 * it; further appends are not allowed: they are ignored and return 1 again), 0 otherwise, -1 out of
 * memory. */
int gen_text_append(struct gen_text *t, const char *bytes, size_t n);
/* The text that is safe to release and was not released yet (valid UTF-8; invalid bytes → U+FFFD),
 * written into out (a struct buf, base/buf.h); `final` releases everything left (an incomplete
 * character at the end → U+FFFD). After a stop every take is final. A failed write into out shows
 * in out->err (the text is consumed). */
void gen_text_take(struct gen_text *t, bool final, struct buf *out);
void gen_text_free(struct gen_text *t);

#endif
