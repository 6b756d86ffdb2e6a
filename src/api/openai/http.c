#include "api/openai/http.h"

#include <stdio.h>
#include <string.h>

#include "api/auth_http.h"
#include "api/limit_headers.h"

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
        e->type = "rate_limit_exceeded";
        e->code = "rate_limit_exceeded";
    } else if (st >= 500) {
        e->type = "server_error";
        e->code = st == 503 ? "overloaded" : st == 504 ? "timeout" : NULL;
    }
    if (code)
        e->code = code;
    snprintf(e->message, sizeof e->message, "%s", err->msg);
}

/* e as txn's answer, after the retry advice of tokens (NULL: none). */
static void send(struct http_txn *txn, const struct openai_error *e, unsigned retry_after_s,
                 const struct serve_tokens *tokens)
{
    if (e->status == 401) {
        struct error err;
        error_set(&err, 401, "%s", e->message);
        auth_http_challenge(txn, &err);
    }
    limit_headers_retry(txn, e->status, retry_after_s, tokens);
    buf_reset(&txn->body);
    openai_error_json(&txn->body, e);
    txn->error = e->message;
    http_txn_respond(txn, e->status, "application/json");
}

void openai_http_send(struct http_txn *txn, const struct openai_error *e, unsigned retry_after_s)
{
    send(txn, e, retry_after_s, NULL);
}

void openai_http_error(struct http_txn *txn, const struct error *err, const char *code)
{
    struct openai_error e;
    openai_error_from(&e, err, code);
    send(txn, &e, err->retry_after_s, NULL);
}

void openai_http_call_error(struct http_txn *txn, const struct infer_call *call,
                            const struct error *err, const char *code)
{
    struct openai_error e;
    openai_error_from(&e, err, code);
    if (e.status == 429 && call->tokens.refusal == SERVE_QUOTA_EXHAUSTED)
        e.type = e.code = "insufficient_quota";
    limit_headers_add(txn, &call->ratelimit, &call->tokens);
    send(txn, &e, err->retry_after_s, &call->tokens);
}
