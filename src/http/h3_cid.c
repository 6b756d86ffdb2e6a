#include "http/h3_conn.h"

#include <string.h>

#include "base/mem.h"
#include "base/status.h"

struct cid_entry {
    ngtcp2_cid cid;
    struct h3_conn *conn;
    struct cid_entry *bucket_next;
    struct cid_entry *conn_next;
};

static uint32_t cid_hash(const uint8_t *d, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ d[i]) * 16777619u;
    return h % H3_CID_BUCKETS;
}

struct h3_conn *h3_cid_find(struct h3_server *s, const uint8_t *d, size_t n)
{
    for (struct cid_entry *e = s->cid_table[cid_hash(d, n)]; e; e = e->bucket_next)
        if (e->cid.datalen == n && memcmp(e->cid.data, d, n) == 0)
            return e->conn;
    return NULL;
}

int h3_cid_add(struct h3_conn *c, const ngtcp2_cid *cid)
{
    struct h3_server *s = c->server;
    struct cid_entry *e = mem_calloc(1, sizeof *e);
    if (!e)
        return ST_ERROR;
    e->cid = *cid;
    e->conn = c;
    uint32_t b = cid_hash(cid->data, cid->datalen);
    e->bucket_next = s->cid_table[b];
    s->cid_table[b] = e;
    e->conn_next = c->cids;
    c->cids = e;
    return 0;
}

static void cid_unlink_bucket(struct h3_server *s, struct cid_entry *e)
{
    struct cid_entry **pp = &s->cid_table[cid_hash(e->cid.data, e->cid.datalen)];
    for (; *pp; pp = &(*pp)->bucket_next)
        if (*pp == e) {
            *pp = e->bucket_next;
            return;
        }
}

void h3_cid_remove(struct h3_conn *c, const ngtcp2_cid *cid)
{
    for (struct cid_entry **pp = &c->cids; *pp; pp = &(*pp)->conn_next) {
        struct cid_entry *e = *pp;
        if (e->cid.datalen == cid->datalen && memcmp(e->cid.data, cid->data, cid->datalen) == 0) {
            *pp = e->conn_next;
            cid_unlink_bucket(c->server, e);
            mem_free(e);
            return;
        }
    }
}

void h3_cid_remove_all(struct h3_conn *c)
{
    while (c->cids) {
        struct cid_entry *e = c->cids;
        c->cids = e->conn_next;
        cid_unlink_bucket(c->server, e);
        mem_free(e);
    }
}
