#include "api/openai_http.h"

#include <stdio.h>
#include <string.h>

#include "api/auth_http.h"

void openai_error_from(struct openai_error *e, const struct error *err, const char *code)
{
    int st = err->status ? err->status : 500;
    memset(e, 0, sizeof *e);
    e->status = st;
    e->type = "invalid_request_error";
    if (st == 401) {
        e->type = "authentication_error";
        e->code = "invalid_api_key";
    } else if (st == 403) {
        e->type = "permission_error";
    } else if (st == 429) {
        e->type = "rate_limit_error";
        e->code = "rate_limit_exceeded";
    } else if (st >= 500) {
        e->type = "server_error";
        e->code = st == 503 ? "overloaded" : st == 504 ? "timeout" : NULL;
    }
    if (code)
        e->code = code;
    snprintf(e->message, sizeof e->message, "%s", err->msg);
}

void openai_http_send(struct http_txn *txn, const struct openai_error *e, unsigned retry_after_s)
{
    if (e->status == 401) {
        struct error err;
        error_set(&err, 401, "%s", e->message);
        auth_http_challenge(txn, &err);
    }
    if (e->status == 429 || e->status == 503) {
        char secs[16];
        snprintf(secs, sizeof secs, "%u", retry_after_s ? retry_after_s : 1);
        http_txn_add_header(txn, "Retry-After", secs);
    }
    buf_reset(&txn->body);
    openai_error_json(&txn->body, e);
    txn->error = e->message;
    http_txn_respond(txn, e->status, "application/json");
}

void openai_http_error(struct http_txn *txn, const struct error *err, const char *code)
{
    struct openai_error e;
    openai_error_from(&e, err, code);
    openai_http_send(txn, &e, err->retry_after_s);
}
