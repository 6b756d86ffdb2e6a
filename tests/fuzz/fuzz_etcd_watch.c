/*
 * Fuzz target for the etcd watch stream as inferd reads it
 * (cluster/etcd_proto.h, cluster/discovery.h): the input is a byte k, then
 * an HTTP response (head, chunked or Content-Length body). The response is
 * fed whole and in pieces of 1 + k % 64 bytes; every complete line is
 * parsed as a watch message, and every event's value as a registration
 * (cluster_instance_parse), as the discovery thread does. Properties:
 *   - both feedings end in the same status and yield the same lines;
 *   - the body held never exceeds its ceiling;
 *   - decoded keys and values are NUL-terminated at their lengths, and a
 *     parsed instance's id and host fit their arrays.
 * A violated property aborts, which libFuzzer and the replay driver report.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/status.h"
#include "cluster/discovery.h"
#include "cluster/etcd_proto.h"

#define MAX_INPUT (256 * 1024)
#define BODY_MAX (64 * 1024)

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_etcd_watch: %s\n", what);
        abort();
    }
}

static void parse_line(const char *p, size_t n)
{
    struct arena a;
    arena_init(&a, 4096, 4u << 20);
    struct etcd_watch_msg m;
    const char *err = NULL;
    if (etcd_parse_watch(&a, p, n, &m, &err) != 0) {
        check(err != NULL, "failure without a message");
    } else {
        for (uint32_t i = 0; i < m.n_events; i++) {
            const struct etcd_kv *kv = &m.events[i].kv;
            check(kv->key[kv->key_len] == '\0' && kv->value[kv->value_len] == '\0',
                  "decoded bytes not NUL-terminated");
            struct cluster_instance inst;
            if (!cluster_instance_parse(&a, kv->value, kv->value_len, &inst)) {
                check(strlen(inst.id) < CLUSTER_ID_MAX && strlen(inst.host) < CLUSTER_HOST_MAX,
                      "id or host too long");
                check(inst.n_models <= CLUSTER_MAX_MODELS, "too many models");
            }
        }
    }
    arena_free(&a);
}

/* Feeds s[0..n) in pieces of step; the lines (length-prefixed) into out.
 * Returns the final status. */
static int read_stream(const uint8_t *s, size_t n, size_t step, struct buf *out)
{
    struct etcd_resp r;
    etcd_resp_init(&r, BODY_MAX);
    struct buf line;
    buf_init(&line, BODY_MAX);
    int rc = ST_AGAIN;
    for (size_t off = 0; off < n && rc == ST_AGAIN;) {
        size_t len = n - off < step ? n - off : step, used;
        rc = etcd_resp_feed(&r, (const char *)s + off, len, &used);
        check(used <= len, "used more than given");
        check(r.body.len <= BODY_MAX, "body over its ceiling");
        off += used;
        while (rc != ST_ERROR && etcd_resp_take_line(&r, &line)) {
            uint32_t l = (uint32_t)line.len;
            buf_append(out, &l, sizeof l);
            buf_append(out, line.data, line.len);
            parse_line(line.data ? line.data : "", line.len);
        }
    }
    buf_free(&line);
    etcd_resp_free(&r);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > MAX_INPUT)
        return 0;
    size_t step = 1 + data[0] % 64;
    struct buf whole, pieces;
    buf_init(&whole, 8u << 20);
    buf_init(&pieces, 8u << 20);
    int a = read_stream(data + 1, size - 1, size, &whole);
    int b = read_stream(data + 1, size - 1, step, &pieces);
    check(a == b, "different status in pieces");
    if (a != ST_ERROR)
        check(whole.len == pieces.len &&
                  (whole.len == 0 || memcmp(whole.data, pieces.data, whole.len) == 0),
              "different lines in pieces");
    buf_free(&whole);
    buf_free(&pieces);
    return 0;
}
