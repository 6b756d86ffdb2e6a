#include "api/rest/shm.h"

#include <string.h>

#include "base/json.h"
#include "base/mem.h"

/* A register body is three small fields. */
#define REGISTER_BODY_MAX 4096

static bool no_registry(struct shm_registry *reg, struct http_txn *txn)
{
    if (!reg)
        http_txn_error(txn, 400, "system shared memory is not available on this server");
    return !reg;
}

static int u64_field(const struct json_value *body, const char *key, bool required, uint64_t *out,
                     struct error *err)
{
    const struct json_value *v = json_get(body, key);
    if (!v)
        return required ? error_set(err, 400, "register needs '%s'", key) : 0;
    if (json_num_u64(v, out) != 0)
        return error_set(err, 400, "'%s' must be a non-negative integer", key);
    return 0;
}

void rest_shm_register(struct shm_registry *reg, struct http_txn *txn, const char *name)
{
    if (no_registry(reg, txn))
        return;
    struct error err;
    struct arena a;
    arena_init(&a, 4096, 64 * 1024);
    struct json_value *body;
    const char *msg;
    size_t off;
    uint64_t offset = 0, byte_size = 0;
    const char *key = NULL;
    if (txn->req.body_len > REGISTER_BODY_MAX) {
        error_set(&err, 400, "a register body is limited to %d bytes", REGISTER_BODY_MAX);
        goto out_error;
    }
    if (json_parse(&a, txn->req.body ? txn->req.body : "", (size_t)txn->req.body_len, NULL, &body,
                   &msg, &off) != 0) {
        error_set(&err, 400, "malformed JSON at byte %zu: %s", off, msg);
        goto out_error;
    }
    if (body->type != JSON_OBJECT) {
        error_set(&err, 400, "request body must be a JSON object");
        goto out_error;
    }
    const struct json_value *k = json_get(body, "key");
    if (!k || k->type != JSON_STRING || strlen(k->u.str) != k->len) {
        error_set(&err, 400, "register needs 'key', a string without NUL bytes");
        goto out_error;
    }
    key = k->u.str;
    if (u64_field(body, "offset", false, &offset, &err) != 0 ||
        u64_field(body, "byte_size", true, &byte_size, &err) != 0 ||
        shm_register(reg, name, key, offset, byte_size, &err) != 0)
        goto out_error;
    arena_free(&a);
    http_txn_respond(txn, 200, NULL);
    return;
out_error:
    arena_free(&a);
    http_txn_error(txn, err.status, err.msg);
}

void rest_shm_status(struct shm_registry *reg, struct http_txn *txn, const char *name)
{
    if (no_registry(reg, txn))
        return;
    struct error err;
    uint32_t n;
    struct shm_info *info = mem_alloc(SHM_MAX_REGIONS * sizeof *info);
    if (!info) {
        http_txn_error(txn, 503, "out of memory");
        return;
    }
    if (shm_status(reg, name, info, SHM_MAX_REGIONS, &n, &err) != 0) {
        mem_free(info);
        http_txn_error(txn, err.status, err.msg);
        return;
    }
    struct json_writer w;
    json_w_init(&w, &txn->body);
    json_w_arr_begin(&w);
    for (uint32_t i = 0; i < n; i++) {
        json_w_obj_begin(&w);
        json_w_key(&w, "name");
        json_w_cstr(&w, info[i].name);
        json_w_key(&w, "key");
        json_w_cstr(&w, info[i].key);
        json_w_key(&w, "offset");
        json_w_uint(&w, info[i].offset);
        json_w_key(&w, "byte_size");
        json_w_uint(&w, info[i].byte_size);
        json_w_obj_end(&w);
    }
    json_w_arr_end(&w);
    mem_free(info);
    http_txn_respond(txn, 200, "application/json");
}

void rest_shm_unregister(struct shm_registry *reg, struct http_txn *txn, const char *name)
{
    if (no_registry(reg, txn))
        return;
    shm_unregister(reg, name);
    http_txn_respond(txn, 200, NULL);
}

void rest_shm_cuda(struct shm_registry *reg, struct http_txn *txn, const char *action,
                   const char *name)
{
    struct error err;
    int rc = 0;
    if (strcmp(action, "status") == 0)
        rc = shm_cuda_status(reg, name, &err);
    else if (strcmp(action, "register") == 0)
        rc = shm_cuda_register(name, &err);
    if (rc != 0) {
        http_txn_error(txn, err.status, err.msg);
        return;
    }
    if (strcmp(action, "status") == 0) {
        buf_append(&txn->body, "[]", 2);
        http_txn_respond(txn, 200, "application/json");
        return;
    }
    http_txn_respond(txn, 200, NULL);
}
