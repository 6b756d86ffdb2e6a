#include "api/auth_http.h"

#include "obs/request.h"

static const char *txn_header(const void *ctx, const char *name, size_t *len)
{
    const struct http_header *h = http1_header(&((const struct http_txn *)ctx)->req, name);
    if (!h)
        return NULL;
    *len = h->value_len;
    return h->value;
}

void auth_http_challenge(struct http_txn *txn, const struct error *err)
{
    if (err->status == 401)
        http_txn_add_header(txn, "WWW-Authenticate", auth_challenge(err));
}

bool auth_http_allow(struct auth *a, enum auth_class cls, struct http_txn *txn)
{
    struct auth_result res;
    struct error err;
    int rc = auth_check(a, cls, NULL, txn_header, txn, &res, &err);
    if (res.tenant[0])
        obsreq_set_tenant(txn->obs, res.tenant);
    if (rc == 0)
        return true;
    auth_http_challenge(txn, &err);
    http_txn_error(txn, err.status, err.msg);
    return false;
}
