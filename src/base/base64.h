/*
 * base64: the RFC 4648 codec (standard alphabet "+/", and the URL-safe
 * one "-_" for encoding), without I/O.
 *
 * Encoding: base64_encode() writes BASE64_LEN(n) characters (padded with
 * '=') or BASE64URL_LEN(n) (URL-safe, unpadded); base64_append() appends
 * the padded standard form to a buf.
 *
 * Decoding (standard alphabet only): base64_decode() takes one text whose
 * padding is optional and refuses a non-canonical end (leftover bits that
 * are not zero); base64_decode_chunks() takes padded texts one after the
 * other (each a whole number of 4-character quanta, as gRPC-Web's text
 * form sends them). Both refuse any character outside the alphabet, '='
 * other than at the end of a quantum, and a quantum cut short.
 *
 * Thread: any; nothing allocates outside the caller's buffers.
 */
#ifndef INFERD_BASE_BASE64_H
#define INFERD_BASE_BASE64_H

#include <stddef.h>

#include "base/buf.h"

#define BASE64_LEN(n) (((n) + 2) / 3 * 4)
#define BASE64URL_LEN(n) ((4 * (n) + 2) / 3)
/* Room base64_decode() needs for a text of n characters. */
#define BASE64_DECODED_MAX(n) ((n) / 4 * 3 + 2)

enum base64_form {
    BASE64_STD, /* "+/", padded */
    BASE64_URL, /* "-_", unpadded */
};

/* Writes data[0..n) encoded in the given form to dst (no NUL) and returns
 * the number of characters written. */
size_t base64_encode(char *dst, const void *data, size_t n, enum base64_form form);
/* Appends the standard padded base64 of data[0..n) to out. Returns 0 or a
 * buf error (-E2BIG, -ENOMEM). */
int base64_append(struct buf *out, const void *data, size_t n);
/* Decodes text[0..n) (padding optional) into dst, which has room for
 * BASE64_DECODED_MAX(n) bytes; returns the decoded length, or -1 on a bad
 * character, length or non-canonical end. */
long base64_decode(const char *text, size_t n, unsigned char *dst);
/* Appends the bytes of text[0..n), padded chunks one after the other, to
 * out. Returns 0, -1 when the text is not such base64, or a buf error when
 * out cannot take the bytes. */
int base64_decode_chunks(const char *text, size_t n, struct buf *out);

#endif
