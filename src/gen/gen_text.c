#include "gen/gen_text.h"

#include <errno.h>
#include <string.h>

#include "base/status.h"

static const char replacement[] = "\xEF\xBF\xBD"; /* U+FFFD */

int gen_text_init(struct gen_text *t, const char *const *stops, const size_t *stop_lens,
                  uint32_t nstops)
{
    memset(t, 0, sizeof *t);
    buf_init(&t->_pending, GEN_TEXT_MAX_PENDING);
    if (nstops > GEN_MAX_STOPS)
        return -EINVAL;
    for (uint32_t k = 0; k < nstops; k++) {
        if (stop_lens[k] == 0 || stop_lens[k] > GEN_MAX_STOP_LEN)
            return -EINVAL;
        memcpy(t->_stops[k], stops[k], stop_lens[k]);
        t->_stop_lens[k] = (uint8_t)stop_lens[k];
    }
    t->_nstops = nstops;
    return 0;
}

void gen_text_free(struct gen_text *t)
{
    buf_free(&t->_pending);
}

int gen_text_append(struct gen_text *t, const char *bytes, size_t n)
{
    if (t->_stopped)
        return 1;
    size_t old = t->_pending.len;
    if (n && buf_append(&t->_pending, bytes, n) != 0)
        return ST_ERROR;
    const char *d = t->_pending.data;
    size_t len = t->_pending.len, cut = len + 1;
    /* The text before these bytes held no complete stop, so an occurrence
     * must end among the new bytes. */
    for (uint32_t k = 0; k < t->_nstops; k++) {
        size_t sl = t->_stop_lens[k];
        for (size_t s = old + 1 > sl ? old + 1 - sl : 0; s + sl <= len && s < cut; s++) {
            if (memcmp(d + s, t->_stops[k], sl) == 0) {
                cut = s;
                break;
            }
        }
    }
    if (cut > len)
        return 0;
    t->_pending.len = cut;
    t->_stopped = true;
    return 1;
}

/* Bytes at the end of the pending text that may begin a stop sequence. */
static size_t stop_holdback(const struct gen_text *t)
{
    const char *d = t->_pending.data;
    size_t len = t->_pending.len;
    size_t from = len >= GEN_MAX_STOP_LEN ? len - (GEN_MAX_STOP_LEN - 1) : 0;
    for (size_t i = from; i < len; i++)
        for (uint32_t k = 0; k < t->_nstops; k++)
            if (t->_stop_lens[k] > len - i && memcmp(d + i, t->_stops[k], len - i) == 0)
                return len - i;
    return 0;
}

enum utf8_unit {
    UNIT_CHAR,       /* a well-formed character */
    UNIT_BAD,        /* a maximal subpart or one bad byte: one U+FFFD */
    UNIT_INCOMPLETE, /* a well-formed prefix cut by the end of the bytes */
};

/* The unit at s[0..n), n > 0, and its length in *len (Unicode table 3-7). */
static enum utf8_unit utf8_unit(const unsigned char *s, size_t n, size_t *len)
{
    unsigned char c = s[0];
    unsigned char lo = 0x80, hi = 0xBF;
    size_t need;
    *len = 1;
    if (c < 0x80)
        return UNIT_CHAR;
    if (c < 0xC2 || c > 0xF4)
        return UNIT_BAD;
    if (c < 0xE0) {
        need = 2;
    } else if (c < 0xF0) {
        need = 3;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else {
        need = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    }
    for (size_t i = 1; i < need; i++, *len = i) {
        if (i >= n)
            return UNIT_INCOMPLETE;
        if (s[i] < lo || s[i] > hi)
            return UNIT_BAD;
        lo = 0x80;
        hi = 0xBF;
    }
    *len = need;
    return UNIT_CHAR;
}

void gen_text_take(struct gen_text *t, bool final, struct buf *out)
{
    if (t->_pending.len == 0)
        return;
    bool all = final || t->_stopped;
    const unsigned char *d = (const unsigned char *)t->_pending.data;
    size_t decided = t->_pending.len - (all ? 0 : stop_holdback(t));
    size_t i = 0, run = 0; /* d[run..i): well-formed characters not written yet */
    while (i < decided) {
        size_t n;
        enum utf8_unit u = utf8_unit(d + i, decided - i, &n);
        if (u == UNIT_CHAR) {
            i += n;
            continue;
        }
        if (u == UNIT_INCOMPLETE && !all)
            break;
        buf_append(out, d + run, i - run);
        buf_append(out, replacement, sizeof replacement - 1);
        i += n;
        run = i;
    }
    buf_append(out, d + run, i - run);
    if (i)
        buf_consume(&t->_pending, i);
}
