/*
 * etcd_proto: the HTTP/1.1 response reader and etcd's JSON
 * messages (etcd_proto.h).
 */
#include "cluster/etcd_proto.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/base64.h"
#include "base/status.h"

size_t etcd_prefix_end(const char *prefix, size_t n, char *dst)
{
    memcpy(dst, prefix, n);
    while (n > 0) {
        if ((unsigned char)dst[n - 1] != 0xff) {
            dst[n - 1] = (char)((unsigned char)dst[n - 1] + 1);
            return n;
        }
        n--;
    }
    return 0;
}

void etcd_resp_init(struct etcd_resp *r, size_t body_max)
{
    memset(r, 0, sizeof *r);
    buf_init(&r->body, body_max);
}

void etcd_resp_reset(struct etcd_resp *r)
{
    r->state = ETCD_RESP_HEAD;
    r->status = 0;
    r->chunked = false;
    r->close = false;
    r->left = 0;
    r->line_len = 0;
    r->err = NULL;
    buf_reset(&r->body);
}

void etcd_resp_free(struct etcd_resp *r)
{
    buf_free(&r->body);
}

static int fail(struct etcd_resp *r, const char *msg)
{
    r->err = msg;
    return ST_ERROR;
}

/* The value of header line l (len bytes) named name, or NULL. */
static const char *header_value(const char *l, size_t len, const char *name, size_t *vlen)
{
    size_t nl = strlen(name);
    if (len <= nl || strncasecmp(l, name, nl) != 0 || l[nl] != ':')
        return NULL;
    const char *v = l + nl + 1, *end = l + len;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    *vlen = (size_t)(end - v);
    return v;
}

/* Parses the head in r->line (ending with CRLF CRLF). */
static int parse_head(struct etcd_resp *r)
{
    const char *p = r->line, *end = r->line + r->line_len;
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (r->line_len < 12 || memcmp(p, "HTTP/1.", 7) != 0 || p[8] != ' ' || !eol)
        return fail(r, "not an HTTP/1.x response");
    int status = 0;
    for (int i = 9; i < 12; i++) {
        if (p[i] < '0' || p[i] > '9')
            return fail(r, "bad HTTP status");
        status = status * 10 + (p[i] - '0');
    }
    r->status = status;
    bool have_len = false;
    uint64_t clen = 0;
    r->close = p[7] == '0';
    for (p = eol + 1; p < end; p = eol + 1) {
        eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            break;
        size_t len = (size_t)(eol - p);
        if (len > 0 && p[len - 1] == '\r')
            len--;
        size_t vlen;
        const char *v;
        if ((v = header_value(p, len, "content-length", &vlen))) {
            if (vlen == 0 || vlen > 18)
                return fail(r, "bad Content-Length");
            clen = 0;
            for (size_t i = 0; i < vlen; i++) {
                if (v[i] < '0' || v[i] > '9')
                    return fail(r, "bad Content-Length");
                clen = clen * 10 + (uint64_t)(v[i] - '0');
            }
            have_len = true;
        } else if ((v = header_value(p, len, "transfer-encoding", &vlen))) {
            if (vlen != 7 || strncasecmp(v, "chunked", 7) != 0)
                return fail(r, "unsupported Transfer-Encoding");
            r->chunked = true;
        } else if ((v = header_value(p, len, "connection", &vlen))) {
            if (vlen == 5 && strncasecmp(v, "close", 5) == 0)
                r->close = true;
        }
    }
    r->line_len = 0;
    if (r->chunked) {
        r->state = ETCD_RESP_CHUNK_SIZE;
    } else if (have_len) {
        if (clen > r->body.max)
            return fail(r, "response body too large");
        r->left = clen;
        r->state = clen ? ETCD_RESP_BODY : ETCD_RESP_DONE;
    } else if (status == 204 || status == 304 || status / 100 == 1) {
        r->state = ETCD_RESP_DONE;
    } else {
        return fail(r, "response without Content-Length or chunked coding");
    }
    return ST_OK;
}

static int append_body(struct etcd_resp *r, const char *p, size_t n)
{
    return buf_append(&r->body, p, n) == 0 ? ST_OK : fail(r, "response body too large");
}

/* Parses the chunk-size line in r->line (no CRLF). */
static int parse_chunk_size(struct etcd_resp *r)
{
    uint64_t size = 0;
    size_t i = 0, digits = 0;
    for (; i < r->line_len; i++) {
        char c = r->line[i];
        int v = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (v < 0)
            break;
        if (++digits > 15)
            return fail(r, "chunk too large");
        size = size * 16 + (uint64_t)v;
    }
    if (digits == 0 || (i < r->line_len && r->line[i] != ';' && r->line[i] != ' '))
        return fail(r, "bad chunk size");
    if (size > r->body.max)
        return fail(r, "chunk too large");
    r->line_len = 0;
    r->left = size;
    r->state = size ? ETCD_RESP_CHUNK_DATA : ETCD_RESP_TRAILER;
    return ST_OK;
}

int etcd_resp_feed(struct etcd_resp *r, const char *data, size_t n, size_t *used)
{
    size_t i = 0;
    int rc = ST_OK;
    while (i < n && r->state != ETCD_RESP_DONE && rc == ST_OK) {
        switch (r->state) {
        case ETCD_RESP_HEAD:
            if (r->line_len == sizeof r->line) {
                rc = fail(r, "response head too large");
                break;
            }
            r->line[r->line_len++] = data[i++];
            if (r->line_len >= 4 && memcmp(r->line + r->line_len - 4, "\r\n\r\n", 4) == 0)
                rc = parse_head(r);
            break;
        case ETCD_RESP_BODY:
        case ETCD_RESP_CHUNK_DATA: {
            size_t take = n - i < r->left ? n - i : (size_t)r->left;
            rc = append_body(r, data + i, take);
            i += take;
            r->left -= take;
            if (r->left == 0)
                r->state = r->state == ETCD_RESP_BODY ? ETCD_RESP_DONE : ETCD_RESP_CHUNK_CRLF;
            break;
        }
        case ETCD_RESP_CHUNK_SIZE:
        case ETCD_RESP_CHUNK_CRLF:
        case ETCD_RESP_TRAILER: {
            char c = data[i++];
            if (c != '\n') {
                if (r->line_len == 32) {
                    rc = fail(r, "chunk line too long");
                    break;
                }
                r->line[r->line_len++] = c;
                break;
            }
            if (r->line_len > 0 && r->line[r->line_len - 1] == '\r')
                r->line_len--;
            if (r->state == ETCD_RESP_CHUNK_SIZE) {
                rc = parse_chunk_size(r);
            } else if (r->state == ETCD_RESP_CHUNK_CRLF) {
                if (r->line_len != 0) {
                    rc = fail(r, "chunk data longer than its size");
                    break;
                }
                r->state = ETCD_RESP_CHUNK_SIZE;
            } else if (r->line_len == 0) {
                r->state = ETCD_RESP_DONE; /* the empty line after the trailers */
            } else {
                r->line_len = 0; /* a trailer field: ignored */
            }
            break;
        }
        case ETCD_RESP_DONE:
            break;
        }
    }
    *used = i;
    if (rc != ST_OK)
        return rc;
    return r->state == ETCD_RESP_DONE ? ST_DONE : ST_AGAIN;
}

bool etcd_resp_take_line(struct etcd_resp *r, struct buf *line)
{
    char *nl = r->body.len ? memchr(r->body.data, '\n', r->body.len) : NULL;
    if (!nl)
        return false;
    size_t n = (size_t)(nl - r->body.data);
    buf_reset(line);
    buf_append(line, r->body.data, n);
    buf_consume(&r->body, n + 1);
    return true;
}

int etcd_json_i64(const struct json_value *obj, const char *key, int64_t *out)
{
    *out = 0;
    const struct json_value *v = json_get(obj, key);
    if (!v)
        return 0;
    if (v->type == JSON_NUMBER)
        return json_num_i64(v, out) == 0 ? ST_OK : ST_ERROR;
    if (v->type != JSON_STRING || v->len == 0 || v->len > 20)
        return ST_ERROR;
    char *end;
    errno = 0;
    long long n = strtoll(v->u.str, &end, 10);
    if (errno || end != v->u.str + v->len ||
        !(v->u.str[0] == '-' || (v->u.str[0] >= '0' && v->u.str[0] <= '9')))
        return ST_ERROR;
    *out = n;
    return 0;
}

int etcd_json_b64(struct arena *a, const struct json_value *obj, const char *key, const char **out,
                  size_t *len)
{
    *out = "";
    *len = 0;
    const struct json_value *v = json_get(obj, key);
    if (!v)
        return 0;
    if (v->type != JSON_STRING)
        return ST_ERROR;
    unsigned char *dst = arena_alloc(a, BASE64_DECODED_MAX((size_t)v->len) + 1);
    if (!dst)
        return ST_ERROR;
    long n = base64_decode(v->u.str, v->len, dst);
    if (n < 0)
        return ST_ERROR;
    dst[n] = '\0';
    *out = (const char *)dst;
    *len = (size_t)n;
    return 0;
}

const char *etcd_json_error(const struct json_value *v)
{
    const struct json_value *e = json_get(v, "error");
    if (!e)
        return NULL;
    const struct json_value *m = json_get(v, "message");
    if (m && m->type == JSON_STRING)
        return m->u.str;
    return e->type == JSON_STRING ? e->u.str : "etcd answered with an error";
}

static int parse_kv(struct arena *a, const struct json_value *o, struct etcd_kv *kv)
{
    if (!o || o->type != JSON_OBJECT)
        return ST_ERROR;
    if (etcd_json_b64(a, o, "key", &kv->key, &kv->key_len) != 0 ||
        etcd_json_b64(a, o, "value", &kv->value, &kv->value_len) != 0 ||
        etcd_json_i64(o, "mod_revision", &kv->mod_revision) != 0 ||
        etcd_json_i64(o, "lease", &kv->lease) != 0)
        return ST_ERROR;
    return 0;
}

static int parse_text(struct arena *a, const char *text, size_t len, struct json_value **v,
                      const char **err)
{
    const char *jerr = NULL;
    size_t off;
    if (json_parse(a, text, len, NULL, v, &jerr, &off) != ST_OK) {
        *err = "etcd's answer is not JSON";
        return ST_ERROR;
    }
    if ((*v)->type != JSON_OBJECT) {
        *err = "etcd's answer is not a JSON object";
        return ST_ERROR;
    }
    const char *e = etcd_json_error(*v);
    if (e) {
        *err = e;
        return ST_ERROR;
    }
    return 0;
}

int etcd_parse_watch(struct arena *a, const char *text, size_t len, struct etcd_watch_msg *out,
                     const char **err)
{
    memset(out, 0, sizeof *out);
    out->cancel_reason = "";
    struct json_value *v;
    if (parse_text(a, text, len, &v, err) != 0)
        return ST_ERROR;
    const struct json_value *res = json_get(v, "result");
    if (!res || res->type != JSON_OBJECT) {
        *err = "watch message without a result";
        return ST_ERROR;
    }
    const struct json_value *t;
    const struct json_value *h = json_get(res, "header");
    if ((h && etcd_json_i64(h, "revision", &out->revision) != 0) ||
        etcd_json_i64(res, "compact_revision", &out->compact_revision) != 0) {
        *err = "watch message with a bad revision";
        return ST_ERROR;
    }
    out->created = (t = json_get(res, "created")) && t->type == JSON_TRUE;
    out->canceled = (t = json_get(res, "canceled")) && t->type == JSON_TRUE;
    if ((t = json_get(res, "cancel_reason")) && t->type == JSON_STRING)
        out->cancel_reason = t->u.str;
    const struct json_value *evs = json_get(res, "events");
    if (!evs)
        return 0;
    if (evs->type != JSON_ARRAY) {
        *err = "watch events are not an array";
        return ST_ERROR;
    }
    out->events = arena_calloc(a, evs->len ? evs->len : 1, sizeof *out->events);
    if (!out->events) {
        *err = "watch message too large";
        return ST_ERROR;
    }
    for (uint32_t i = 0; i < evs->len; i++) {
        const struct json_value *e = &evs->u.items[i];
        struct etcd_event *ev = &out->events[i];
        const struct json_value *type = json_get(e, "type");
        if (e->type != JSON_OBJECT || (type && type->type != JSON_STRING) ||
            parse_kv(a, json_get(e, "kv"), &ev->kv) != 0) {
            *err = "malformed watch event";
            return ST_ERROR;
        }
        if (!type || strcmp(type->u.str, "PUT") == 0) {
            ev->type = ETCD_EVENT_PUT;
        } else if (strcmp(type->u.str, "DELETE") == 0) {
            ev->type = ETCD_EVENT_DELETE;
        } else {
            *err = "unknown watch event type";
            return ST_ERROR;
        }
    }
    out->n_events = evs->len;
    return 0;
}

int etcd_parse_range(struct arena *a, const char *text, size_t len, struct etcd_kv **kvs,
                     uint32_t *n, int64_t *revision, const char **err)
{
    *kvs = NULL;
    *n = 0;
    struct json_value *v;
    if (parse_text(a, text, len, &v, err) != 0)
        return ST_ERROR;
    const struct json_value *h = json_get(v, "header");
    if (!h || etcd_json_i64(h, "revision", revision) != 0) {
        *err = "range answer without a revision";
        return ST_ERROR;
    }
    const struct json_value *arr = json_get(v, "kvs");
    if (!arr)
        return 0;
    if (arr->type != JSON_ARRAY) {
        *err = "range kvs are not an array";
        return ST_ERROR;
    }
    *kvs = arena_calloc(a, arr->len ? arr->len : 1, sizeof **kvs);
    if (!*kvs) {
        *err = "range answer too large";
        return ST_ERROR;
    }
    for (uint32_t i = 0; i < arr->len; i++)
        if (parse_kv(a, &arr->u.items[i], &(*kvs)[i]) != 0) {
            *err = "malformed range kv";
            return ST_ERROR;
        }
    *n = arr->len;
    return 0;
}
