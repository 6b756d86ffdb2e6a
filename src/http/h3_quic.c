#include "http/h3_conn.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

void h3_quic_random(void *p, size_t n)
{
    uint8_t *b = p;
    while (n > 0) {
        ssize_t r = getrandom(b, n, 0);
        if (r <= 0) {
            if (r < 0 && errno == EINTR)
                continue;
            /* getrandom() cannot fail once the pool is initialized; keep a
             * defined value rather than stack garbage. */
            memset(b, 0, n);
            return;
        }
        b += r;
        n -= (size_t)r;
    }
}

/* ---- ngtcp2 callbacks ---- */

static void q_rand(uint8_t *dest, size_t len, const ngtcp2_rand_ctx *ctx)
{
    (void)ctx;
    h3_quic_random(dest, len);
}

static int q_new_cid(ngtcp2_conn *q, ngtcp2_cid *cid, uint8_t *token, size_t cidlen, void *user)
{
    (void)q;
    struct h3_conn *c = user;
    h3_quic_random(cid->data, cidlen);
    cid->datalen = cidlen;
    if (ngtcp2_crypto_generate_stateless_reset_token(token, c->server->secret, H3_SECRET_LEN,
                                                     cid) != 0 ||
        h3_cid_add(c, cid) != 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    return 0;
}

static int q_remove_cid(ngtcp2_conn *q, const ngtcp2_cid *cid, void *user)
{
    (void)q;
    h3_cid_remove(user, cid);
    return 0;
}

static int q_recv_stream_data(ngtcp2_conn *q, uint32_t flags, int64_t id, uint64_t offset,
                              const uint8_t *data, size_t len, void *user, void *stream_user)
{
    (void)q;
    (void)offset;
    (void)stream_user;
    struct h3_conn *c = user;
    if (h3_http_setup(c) != 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    nghttp3_ssize n =
        nghttp3_conn_read_stream(c->h, id, data, len, (flags & NGTCP2_STREAM_DATA_FLAG_FIN) != 0);
    if (n < 0) {
        ngtcp2_connection_close_error_set_application_error(
            &c->ccerr, nghttp3_err_infer_quic_app_error_code((int)n), NULL, 0);
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    h3_conn_consume(c, id, (size_t)n);
    return 0;
}

static int q_acked_stream_data(ngtcp2_conn *q, int64_t id, uint64_t offset, uint64_t len,
                               void *user, void *stream_user)
{
    (void)q;
    (void)offset;
    (void)stream_user;
    struct h3_conn *c = user;
    if (c->h && nghttp3_conn_add_ack_offset(c->h, id, len) != 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    return 0;
}

static int q_stream_close(ngtcp2_conn *q, uint32_t flags, int64_t id, uint64_t app_error_code,
                          void *user, void *stream_user)
{
    (void)q;
    (void)stream_user;
    struct h3_conn *c = user;
    if (!(flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET))
        app_error_code = NGHTTP3_H3_NO_ERROR;
    if (!c->h)
        return 0;
    int rv = nghttp3_conn_close_stream(c->h, id, app_error_code);
    if (rv != 0 && rv != NGHTTP3_ERR_STREAM_NOT_FOUND) {
        ngtcp2_connection_close_error_set_application_error(
            &c->ccerr, nghttp3_err_infer_quic_app_error_code(rv), NULL, 0);
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    return 0;
}

static int q_stream_reset(ngtcp2_conn *q, int64_t id, uint64_t final_size, uint64_t app_error_code,
                          void *user, void *stream_user)
{
    (void)q;
    (void)final_size;
    (void)app_error_code;
    (void)stream_user;
    struct h3_conn *c = user;
    if (c->h && nghttp3_conn_shutdown_stream_read(c->h, id) != 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    return 0;
}

static int q_stream_stop_sending(ngtcp2_conn *q, int64_t id, uint64_t app_error_code, void *user,
                                 void *stream_user)
{
    return q_stream_reset(q, id, 0, app_error_code, user, stream_user);
}

static int q_extend_max_remote_streams_bidi(ngtcp2_conn *q, uint64_t max_streams, void *user)
{
    (void)q;
    struct h3_conn *c = user;
    if (c->h)
        nghttp3_conn_set_max_client_streams_bidi(c->h, max_streams);
    return 0;
}

static int q_extend_max_stream_data(ngtcp2_conn *q, int64_t id, uint64_t max_data, void *user,
                                    void *stream_user)
{
    (void)q;
    (void)max_data;
    (void)stream_user;
    struct h3_conn *c = user;
    if (c->h && nghttp3_conn_unblock_stream(c->h, id) != 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    return 0;
}

static int q_handshake_completed(ngtcp2_conn *q, void *user)
{
    (void)q;
    return h3_http_setup(user) == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

ngtcp2_conn *h3_quic_get_conn(ngtcp2_crypto_conn_ref *ref)
{
    struct h3_conn *c = ref->user_data;
    return c->q;
}

const ngtcp2_callbacks h3_quic_callbacks = {
    .recv_client_initial = ngtcp2_crypto_recv_client_initial_cb,
    .recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb,
    .handshake_completed = q_handshake_completed,
    .encrypt = ngtcp2_crypto_encrypt_cb,
    .decrypt = ngtcp2_crypto_decrypt_cb,
    .hp_mask = ngtcp2_crypto_hp_mask_cb,
    .recv_stream_data = q_recv_stream_data,
    .acked_stream_data_offset = q_acked_stream_data,
    .stream_close = q_stream_close,
    .rand = q_rand,
    .get_new_connection_id = q_new_cid,
    .remove_connection_id = q_remove_cid,
    .update_key = ngtcp2_crypto_update_key_cb,
    .stream_reset = q_stream_reset,
    .extend_max_remote_streams_bidi = q_extend_max_remote_streams_bidi,
    .extend_max_stream_data = q_extend_max_stream_data,
    .delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb,
    .delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb,
    .get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb,
    .stream_stop_sending = q_stream_stop_sending,
    .version_negotiation = ngtcp2_crypto_version_negotiation_cb,
};
