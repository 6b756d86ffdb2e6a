#include "obs/span.h"

#include <endian.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"

/* Four bytes to their eight hex digits, as eight ASCII bytes in one word
 * (the first digit in the lowest byte): each byte's nibbles are spread
 * into bytes of their own, then '0' is added, and 'a' - '0' - 10 more to
 * those of 10 and over (n + 6 carries into bit 4 exactly then). */
static uint64_t hex4(const uint8_t *in)
{
    const uint64_t nibble = UINT64_C(0x0f0f0f0f0f0f0f0f), ones = UINT64_C(0x0101010101010101);
    uint64_t u = (uint64_t)in[0] | (uint64_t)in[1] << 16 | (uint64_t)in[2] << 32 |
                 (uint64_t)in[3] << 48;
    uint64_t n = (u >> 4 & nibble) | (u & nibble) << 8;
    uint64_t letter = (n + 6 * ones) >> 4 & ones;
    return n + '0' * ones + letter * ('a' - '0' - 10);
}

void span_hex(const uint8_t *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        uint64_t w = htole64(hex4(in + i));
        memcpy(out + 2 * i, &w, 8);
    }
    for (; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

static int64_t mono_to_unix_offset(void)
{
    static atomic_llong offset;
    static atomic_bool known;
    if (!atomic_load_explicit(&known, memory_order_acquire)) {
        struct timespec rt;
        uint64_t mono = clock_now_ns();
        clock_gettime(CLOCK_REALTIME, &rt);
        int64_t unix_ns = (int64_t)rt.tv_sec * 1000000000ll + rt.tv_nsec;
        atomic_store(&offset, unix_ns - (int64_t)mono);
        atomic_store_explicit(&known, true, memory_order_release);
    }
    return atomic_load(&offset);
}

uint64_t span_unix_ns(uint64_t mono_ns)
{
    return (uint64_t)((int64_t)mono_ns + mono_to_unix_offset());
}

/* Copies text into the record; returns false when it does not fit. */
static bool add_text(struct span_record *r, const char *s, size_t n, uint16_t *off, uint16_t *len)
{
    if (n > (size_t)(SPAN_TEXT_MAX - r->text_len))
        return false;
    memcpy(r->text + r->text_len, s, n);
    *off = r->text_len;
    *len = (uint16_t)n;
    r->text_len = (uint16_t)(r->text_len + n);
    return true;
}

void span_init(struct span_record *r, const uint8_t trace_id[TRACE_ID_BYTES],
               const uint8_t span_id[SPAN_ID_BYTES], const uint8_t *parent_span_id,
               enum span_kind kind, const char *name, size_t name_len, uint64_t start_ns,
               uint64_t end_ns)
{
    memcpy(r->trace_id, trace_id, TRACE_ID_BYTES);
    memcpy(r->span_id, span_id, SPAN_ID_BYTES);
    r->has_parent = parent_span_id != NULL;
    if (parent_span_id)
        memcpy(r->parent_span_id, parent_span_id, SPAN_ID_BYTES);
    else
        memset(r->parent_span_id, 0, SPAN_ID_BYTES);
    r->kind = (uint8_t)kind;
    r->flags = 1;
    r->nattrs = 0;
    r->nlinks = 0;
    r->dropped_attrs = r->dropped_links = 0;
    r->start_unix_ns = span_unix_ns(start_ns);
    r->end_unix_ns = span_unix_ns(end_ns < start_ns ? start_ns : end_ns);
    r->status_code = 0;
    r->text_len = 0;
    r->state_len = r->msg_len = 0;
    r->state_off = r->msg_off = 0;
    if (name_len > 128)
        name_len = 128;
    add_text(r, name, name_len, &r->name_off, &r->name_len);
}

static struct span_attr *new_attr(struct span_record *r, const char *key)
{
    size_t key_len = strnlen(key, SPAN_KEY_MAX + 1);
    if (r->nattrs == SPAN_MAX_ATTRS || key_len > SPAN_KEY_MAX) {
        r->dropped_attrs++;
        return NULL;
    }
    struct span_attr *a = &r->attrs[r->nattrs++];
    a->key = key;
    a->key_len = (uint8_t)key_len;
    return a;
}

void span_attr_str(struct span_record *r, const char *key, const char *s, size_t n)
{
    struct span_attr *a = new_attr(r, key);
    if (!a)
        return;
    a->type = SPAN_ATTR_STRING;
    if (!add_text(r, s, n, &a->str_off, &a->str_len)) {
        r->nattrs--;
        r->dropped_attrs++;
    }
}

void span_attr_int(struct span_record *r, const char *key, int64_t v)
{
    struct span_attr *a = new_attr(r, key);
    if (a) {
        a->type = SPAN_ATTR_INT;
        a->v.i = v;
    }
}

void span_attr_double(struct span_record *r, const char *key, double v)
{
    struct span_attr *a = new_attr(r, key);
    if (a) {
        a->type = SPAN_ATTR_DOUBLE;
        a->v.d = v;
    }
}

void span_attr_bool(struct span_record *r, const char *key, bool v)
{
    struct span_attr *a = new_attr(r, key);
    if (a) {
        a->type = SPAN_ATTR_BOOL;
        a->v.b = v;
    }
}

void span_add_link(struct span_record *r, const uint8_t trace_id[TRACE_ID_BYTES],
                   const uint8_t span_id[SPAN_ID_BYTES])
{
    if (r->nlinks == SPAN_MAX_LINKS) {
        r->dropped_links++;
        return;
    }
    struct span_link *l = &r->links[r->nlinks++];
    memcpy(l->trace_id, trace_id, TRACE_ID_BYTES);
    memcpy(l->span_id, span_id, SPAN_ID_BYTES);
}

void span_set_state(struct span_record *r, const char *s, size_t n)
{
    if (!add_text(r, s, n, &r->state_off, &r->state_len))
        r->state_len = 0;
}

void span_set_error(struct span_record *r, const char *msg)
{
    r->status_code = 2;
    size_t n = strlen(msg);
    if (n > 256)
        n = 256;
    if (!add_text(r, msg, n, &r->msg_off, &r->msg_len))
        r->msg_len = 0;
}
