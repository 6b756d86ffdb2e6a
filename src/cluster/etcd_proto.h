/*
 * etcd_proto: the byte-level parts of talking to etcd's v3 HTTP/JSON
 * gateway, without I/O (keys and values travel base64-encoded: base/base64.h):
 * an incremental HTTP/1.1 response reader, and the decoding of the JSON
 * messages etcd answers with (integers are JSON strings there: int64 in
 * the protobuf JSON mapping; absent members are zero).
 *
 * Response reader: etcd_resp_feed() takes the bytes received so far, in
 * any pieces, and appends the decoded body (Content-Length or chunked
 * transfer coding) to r->body, at most r->body.max bytes (a larger body is
 * an error). A streamed response (the watch) is read by taking complete
 * lines out of r->body as they arrive (etcd_resp_take_line): the gateway
 * writes one JSON message per line. Limits: the head is at most
 * ETCD_HEAD_MAX bytes, a chunk-size line at most 32 bytes, a chunk at
 * most the body ceiling.
 *
 * Nothing here allocates outside the arena and the body buf; thread: any
 * (one reader per connection).
 */
#ifndef INFERD_CLUSTER_ETCD_PROTO_H
#define INFERD_CLUSTER_ETCD_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/json.h"

#define ETCD_HEAD_MAX 8192

/* The end of a prefix range: prefix with its last byte that is not 0xff
 * incremented and the rest dropped (etcd's "range_end" for a prefix).
 * Writes it to dst (room for n bytes) and returns its length; 0 when
 * prefix is all 0xff (then the range end is "\0": every key). */
size_t etcd_prefix_end(const char *prefix, size_t n, char *dst);

enum etcd_resp_state {
    ETCD_RESP_HEAD,       /* status line and headers */
    ETCD_RESP_BODY,       /* Content-Length body */
    ETCD_RESP_CHUNK_SIZE, /* a chunk-size line */
    ETCD_RESP_CHUNK_DATA,
    ETCD_RESP_CHUNK_CRLF, /* the CRLF after a chunk's data */
    ETCD_RESP_TRAILER,    /* after the last chunk, up to the empty line */
    ETCD_RESP_DONE,
};

struct etcd_resp {
    enum etcd_resp_state state;
    int status; /* HTTP status, once the head is read */
    bool chunked;
    bool close;    /* Connection: close, or a body that ends at EOF */
    uint64_t left; /* BODY, CHUNK_DATA: bytes still to come */
    char line[ETCD_HEAD_MAX];
    size_t line_len; /* HEAD: the head so far; chunk lines: that line */
    struct buf body; /* decoded body bytes not yet taken */
    const char *err; /* static, after ST_ERROR */
};

/* body_max: the ceiling of body bytes held at once. */
void etcd_resp_init(struct etcd_resp *r, size_t body_max);
/* Ready for the next response on the same connection (keeps the buffer). */
void etcd_resp_reset(struct etcd_resp *r);
void etcd_resp_free(struct etcd_resp *r);
/* Consumes data[0..n) and sets *used in every case: ST_DONE when the
 * response is complete (*used says how many bytes belonged to it),
 * ST_AGAIN when more is needed (all n used), ST_ERROR on a malformed or
 * too large response (r->err). */
int etcd_resp_feed(struct etcd_resp *r, const char *data, size_t n, size_t *used);
/* Moves the first complete line of r->body (without its '\n') into line
 * (cleared first) and returns true; false when no complete line is there. */
bool etcd_resp_take_line(struct etcd_resp *r, struct buf *line);

/* An int64 member of an etcd message: a JSON string of digits or a number;
 * absent = 0. Returns 0, or ST_ERROR when present but not an integer. */
int etcd_json_i64(const struct json_value *obj, const char *key, int64_t *out);
/* A base64 member decoded into the arena (NUL-terminated); absent = "".
 * Returns 0, or ST_ERROR when not a string of base64 or out of arena. */
int etcd_json_b64(struct arena *a, const struct json_value *obj, const char *key, const char **out,
                  size_t *len);

/* An error answer: {"error": "...", "code": N, "message": "..."}. Returns
 * the message (in the tree) or NULL when v is not one. */
const char *etcd_json_error(const struct json_value *v);

enum etcd_event_type { ETCD_EVENT_PUT, ETCD_EVENT_DELETE };

struct etcd_kv {
    const char *key, *value; /* decoded, NUL-terminated, in the arena */
    size_t key_len, value_len;
    int64_t mod_revision, lease;
};

struct etcd_event {
    enum etcd_event_type type;
    struct etcd_kv kv;
};

/* One message of a watch stream ({"result": {...}} or an error). */
struct etcd_watch_msg {
    int64_t revision;         /* header.revision */
    int64_t compact_revision; /* > 0: the start revision was compacted */
    bool created, canceled;
    const char *cancel_reason; /* "" if none */
    struct etcd_event *events;
    uint32_t n_events;
};

/* Parses one line of a watch stream. Returns 0, or ST_ERROR with *err a static
 * or in-arena message (not JSON, an error answer, a malformed member). */
int etcd_parse_watch(struct arena *a, const char *text, size_t len, struct etcd_watch_msg *out,
                     const char **err);

/* Parses the answer to /v3/kv/range: its kvs and header.revision. Same
 * returns as etcd_parse_watch. */
int etcd_parse_range(struct arena *a, const char *text, size_t len, struct etcd_kv **kvs,
                     uint32_t *n, int64_t *revision, const char **err);

#endif
