#include "api/grpc/framing.h"

#include <string.h>
#include <strings.h>

enum grpc_read grpc_reader_feed(struct grpc_reader *r, struct buf *msg, uint64_t max,
                                const uint8_t **data, size_t *len)
{
    while (*len || (r->hdr_got == GRPC_FRAME_HEADER && msg->len == r->msg_len)) {
        if (r->hdr_got < GRPC_FRAME_HEADER) {
            size_t take = GRPC_FRAME_HEADER - r->hdr_got;
            take = take < *len ? take : *len;
            memcpy(r->hdr + r->hdr_got, *data, take);
            r->hdr_got += (uint32_t)take;
            *data += take;
            *len -= take;
            if (r->hdr_got < GRPC_FRAME_HEADER)
                return GRPC_READ_MORE;
            r->msg_len = (uint32_t)r->hdr[1] << 24 | (uint32_t)r->hdr[2] << 16 |
                         (uint32_t)r->hdr[3] << 8 | r->hdr[4];
            r->compressed = r->hdr[0] & 1;
            if (r->compressed && !r->compressed_ok)
                return GRPC_READ_COMPRESSED;
            if (r->hdr[0] & ~1)
                return GRPC_READ_BAD_FLAGS;
            if (r->msg_len > max)
                return GRPC_READ_TOO_LARGE;
            buf_reset(msg);
            continue;
        }
        size_t want = r->msg_len - msg->len;
        size_t take = want < *len ? want : *len;
        if (take && buf_append(msg, *data, take) != 0)
            return GRPC_READ_NO_MEMORY;
        *data += take;
        *len -= take;
        if (msg->len == r->msg_len) {
            r->hdr_got = 0;
            return GRPC_READ_MESSAGE;
        }
    }
    return GRPC_READ_MORE;
}

bool grpc_reader_inside(const struct grpc_reader *r)
{
    return r->hdr_got != 0;
}

enum grpc_web_encoding grpc_web_content_type(const char *ct, size_t len)
{
    /* Every request of the HTTP/1 port asks: the others are told apart by
     * the prefix all four share. */
    static const char prefix[] = "application/grpc-web";
    if (len < sizeof prefix - 1 || strncasecmp(ct, prefix, sizeof prefix - 1) != 0)
        return GRPC_WEB_NONE;
    size_t n = 0;
    while (n < len && ct[n] != ';' && ct[n] != ' ' && ct[n] != '\t')
        n++;
    static const struct {
        const char *name;
        enum grpc_web_encoding enc;
    } types[] = {
        {"application/grpc-web", GRPC_WEB_BINARY},
        {"application/grpc-web+proto", GRPC_WEB_BINARY},
        {"application/grpc-web-text", GRPC_WEB_TEXT},
        {"application/grpc-web-text+proto", GRPC_WEB_TEXT},
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (strlen(types[i].name) == n && strncasecmp(ct, types[i].name, n) == 0)
            return types[i].enc;
    return GRPC_WEB_NONE;
}

int grpc_web_trailer_frame(const struct h2_header *t, size_t n, struct buf *out)
{
    size_t start = out->len;
    uint8_t prefix[GRPC_FRAME_HEADER] = {GRPC_WEB_TRAILER_FLAG};
    int rc = buf_append(out, prefix, sizeof prefix);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = buf_append(out, t[i].name, t[i].name_len);
        if (rc == 0)
            rc = buf_append(out, ": ", 2);
        if (rc == 0)
            rc = buf_append(out, t[i].value, t[i].value_len);
        if (rc == 0)
            rc = buf_append(out, "\r\n", 2);
    }
    if (rc != 0) {
        out->len = start;
        return rc;
    }
    size_t body = out->len - start - GRPC_FRAME_HEADER;
    uint8_t *p = (uint8_t *)out->data + start;
    p[1] = (uint8_t)(body >> 24);
    p[2] = (uint8_t)(body >> 16);
    p[3] = (uint8_t)(body >> 8);
    p[4] = (uint8_t)body;
    return 0;
}
