/* The JSON writer of base/json.h: values appended to a bounded buf, in
 * order, with the separators and nesting checked; the reader is json.c. */
#include "base/json.h"

#include <errno.h>
#include <string.h>

#include "base/numfmt.h"

/* The two-character escapes: the letter after the backslash, and the byte
 * it stands for. The writer never uses "\\/" ('/' needs no escape). */
static const char short_escapes[] = "\"\\/bfnrt";
static const char short_escaped[] = "\"\\/\b\f\n\r\t";
#define SHORT_ESCAPES (sizeof short_escapes - 1)

/* ------------------------------------------------------------------------ */
/* Writer                                                                   */
/* ------------------------------------------------------------------------ */

void json_w_init(struct json_writer *w, struct buf *b)
{
    memset(w, 0, sizeof *w);
    w->b = b;
}

static void w_fail(struct json_writer *w, int rc)
{
    if (!w->b->err)
        w->b->err = rc;
}

/*
 * Called before every value and key: writes the separating comma and marks
 * the container non-empty. Returns false once the buffer has failed, so
 * that nothing more is written (the output is discarded anyway).
 */
static bool w_begin_value(struct json_writer *w)
{
    if (w->b->err)
        return false;
    if (w->after_key) {
        w->after_key = false;
        return true;
    }
    if (w->depth > 0 && w->nonempty[w->depth])
        buf_putc(w->b, ',');
    w->nonempty[w->depth] = true;
    return !w->b->err;
}

static void w_open(struct json_writer *w, char c)
{
    if (!w_begin_value(w))
        return;
    if (w->depth == JSON_WRITER_MAX_DEPTH) {
        w_fail(w, -E2BIG);
        return;
    }
    w->depth++;
    w->nonempty[w->depth] = false;
    buf_putc(w->b, c);
}

static void w_close(struct json_writer *w, char c)
{
    if (w->b->err)
        return;
    if (w->depth == 0) { /* unbalanced end: a bug in the caller */
        w_fail(w, -EINVAL);
        return;
    }
    w->depth--;
    buf_putc(w->b, c);
}

void json_w_obj_begin(struct json_writer *w)
{
    w_open(w, '{');
}

void json_w_obj_end(struct json_writer *w)
{
    w_close(w, '}');
}

void json_w_arr_begin(struct json_writer *w)
{
    w_open(w, '[');
}

void json_w_arr_end(struct json_writer *w)
{
    w_close(w, ']');
}

/* Writes s as a quoted JSON string. Runs of bytes that need no escaping are
 * appended in one call; invalid UTF-8 bytes become \u00XX one by one. */
void json_write_quoted(struct buf *b, const char *str, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t plain = json_plain_run(str, n);
    if (plain == n && buf_reserve(b, n + 2) == 0) {
        /* The common case, nothing to escape: one piece. */
        char *p = b->data + b->len;
        p[0] = '"';
        memcpy(p + 1, str, n);
        p[n + 1] = '"';
        b->len += n + 2;
        return;
    }
    const unsigned char *s = (const unsigned char *)str + plain, *end = s + (n - plain);
    const unsigned char *run = (const unsigned char *)str;

    buf_putc(b, '"');
    while (s < end) {
        unsigned char c = *s;
        if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
            s++;
            continue;
        }
        if (c >= 0x80) {
            size_t k = json_utf8_seq_len(s, (size_t)(end - s));
            if (k) {
                s += k;
                continue;
            }
        }
        buf_append(b, run, (size_t)(s - run));
        /* The table's own NUL terminator is outside SHORT_ESCAPES, so c == 0
         * gets \u0000; '/' never gets this far. */
        const char *hit = memchr(short_escaped, c, SHORT_ESCAPES);
        char esc[6] = {'\\',        hit ? short_escapes[hit - short_escaped] : 'u',
                       '0',         '0',
                       hex[c >> 4], hex[c & 0xF]};
        size_t esc_len = hit ? 2 : 6;
        buf_append(b, esc, esc_len);
        s++;
        run = s;
    }
    buf_append(b, run, (size_t)(s - run));
    buf_putc(b, '"');
}

void json_w_keyn(struct json_writer *w, const char *key, size_t n)
{
    if (!w_begin_value(w))
        return;
    json_write_quoted(w->b, key, n);
    buf_putc(w->b, ':');
    w->after_key = true;
}

void json_w_key_raw(struct json_writer *w, const char *quoted, size_t n)
{
    if (!w_begin_value(w))
        return;
    buf_append(w->b, quoted, n);
    w->after_key = true;
}

void json_w_key(struct json_writer *w, const char *key)
{
    json_w_keyn(w, key, strlen(key));
}

void json_w_str(struct json_writer *w, const char *s, size_t n)
{
    if (w_begin_value(w))
        json_write_quoted(w->b, s, n);
}

void json_w_cstr(struct json_writer *w, const char *s)
{
    json_w_str(w, s, strlen(s));
}

/* Numbers go through numfmt: exact shortest round-trip text for floats
 * (NaN, Infinity, -Infinity for the non-finite ones), plain digits for
 * integers; integers are formatted in place when the buffer has room for
 * the longest, else on the stack and appended in one piece. */
void json_w_int(struct json_writer *w, int64_t v)
{
    char tmp[NUMFMT_MAX];
    if (!w_begin_value(w))
        return;
    if (w->b->len <= w->b->max && buf_fits(w->b, NUMFMT_MAX))
        w->b->len += numfmt_i64(w->b->data + w->b->len, v);
    else
        buf_append(w->b, tmp, numfmt_i64(tmp, v));
}

void json_w_uint(struct json_writer *w, uint64_t v)
{
    char tmp[NUMFMT_MAX];
    if (!w_begin_value(w))
        return;
    if (w->b->len <= w->b->max && buf_fits(w->b, NUMFMT_MAX))
        w->b->len += numfmt_u64(w->b->data + w->b->len, v);
    else
        buf_append(w->b, tmp, numfmt_u64(tmp, v));
}

void json_w_f32(struct json_writer *w, float v)
{
    char tmp[NUMFMT_MAX];
    if (w_begin_value(w))
        buf_append(w->b, tmp, numfmt_f32(tmp, v));
}

void json_w_f64(struct json_writer *w, double v)
{
    char tmp[NUMFMT_MAX];
    if (w_begin_value(w))
        buf_append(w->b, tmp, numfmt_f64(tmp, v));
}

void json_w_bool(struct json_writer *w, bool v)
{
    if (w_begin_value(w))
        buf_puts(w->b, v ? "true" : "false");
}

void json_w_null(struct json_writer *w)
{
    if (w_begin_value(w))
        buf_puts(w->b, "null");
}

void json_w_raw(struct json_writer *w, const char *json, size_t n)
{
    if (w_begin_value(w))
        buf_append(w->b, json, n);
}

struct buf *json_w_value_buf(struct json_writer *w)
{
    return w_begin_value(w) ? w->b : NULL;
}

struct buf *json_w_members_buf(struct json_writer *w)
{
    return w_begin_value(w) ? w->b : NULL;
}
