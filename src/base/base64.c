/*
 * base64: the RFC 4648 codec (base64.h).
 */
#include "base/base64.h"

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"

static const char alphabet[2][65] = {
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
};

size_t base64_encode(char *dst, const void *data, size_t n, enum base64_form form)
{
    const unsigned char *p = data;
    const char *a = alphabet[form == BASE64_URL];
    char *o = dst;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        *o++ = a[v >> 18];
        *o++ = a[(v >> 12) & 63];
        if (i + 1 < n)
            *o++ = a[(v >> 6) & 63];
        else if (form == BASE64_STD)
            *o++ = '=';
        if (i + 2 < n)
            *o++ = a[v & 63];
        else if (form == BASE64_STD)
            *o++ = '=';
    }
    return (size_t)(o - dst);
}

int base64_append(struct buf *out, const void *data, size_t n)
{
    if (n == 0)
        return 0;
    int rc = buf_reserve(out, BASE64_LEN(n));
    if (rc != 0)
        return rc;
    out->len += base64_encode(out->data + out->len, data, n, BASE64_STD);
    return 0;
}

static int value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return ST_ERROR;
}

/* Decodes the quantum q[0..len) (2 to 4 characters, padding removed) into
 * dst; returns the len - 1 bytes written, or -1 on a bad character or,
 * when canonical, bits left over that are not zero. */
static int decode_quantum(const char *q, size_t len, unsigned char *dst, bool canonical)
{
    uint32_t v = 0;
    for (size_t k = 0; k < len; k++) {
        int c = value((unsigned char)q[k]);
        if (c < 0)
            return ST_ERROR;
        v = v << 6 | (uint32_t)c;
    }
    v <<= 6 * (4 - len);
    if (canonical && (v & ((1u << (32 - 8 * len)) - 1)) != 0)
        return ST_ERROR;
    for (size_t k = 0; k + 1 < len; k++)
        dst[k] = (unsigned char)(v >> (16 - 8 * k));
    return (int)len - 1;
}

long base64_decode(const char *text, size_t n, unsigned char *dst)
{
    if (n % 4 == 0 && n >= 2 && text[n - 1] == '=')
        n -= text[n - 2] == '=' ? 2 : 1;
    if (n % 4 == 1)
        return ST_ERROR;
    long out = 0;
    for (size_t i = 0; i < n; i += 4) {
        int got = decode_quantum(text + i, n - i < 4 ? n - i : 4, dst + out, true);
        if (got < 0)
            return ST_ERROR;
        out += got;
    }
    return out;
}

int base64_decode_chunks(const char *text, size_t n, struct buf *out)
{
    /* The last quantum of a chunk may end in "=" or "==" (then a new chunk
     * may begin); a quantum cut short is invalid: every chunk is padded. */
    for (size_t i = 0; i < n; i += 4) {
        if (n - i < 4)
            return ST_ERROR;
        const char *q = text + i;
        size_t pad = q[3] == '=' ? (q[2] == '=' ? 2 : 1) : 0;
        unsigned char bytes[3];
        int got = decode_quantum(q, 4 - pad, bytes, false);
        if (got < 0)
            return ST_ERROR;
        int rc = buf_append(out, bytes, (size_t)got);
        if (rc != 0)
            return rc;
    }
    return 0;
}
