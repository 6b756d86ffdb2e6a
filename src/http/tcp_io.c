#include "http/tcp_io.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/status.h"

ssize_t tcp_io_recv(int fd, struct tls_conn *tls, void *p, size_t len, bool *emptied)
{
    *emptied = false;
    if (tls) {
        ssize_t n = tls_conn_read(tls, p, len);
        if (n > 0 || n == ST_AGAIN)
            return n;
        return ST_ERROR;
    }
    for (;;) {
        ssize_t n = read(fd, p, len);
        if (n > 0) {
            *emptied = (size_t)n < len;
            return n;
        }
        if (n == 0)
            return ST_ERROR;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return ST_AGAIN;
        return ST_ERROR;
    }
}

static int send_tls(struct tls_conn *tls, const struct buf *head, const struct buf *body,
                    size_t *off)
{
    for (;;) {
        if (*off >= head->len + body->len)
            return ST_OK;
        const char *p;
        size_t n;
        if (*off < head->len) {
            p = head->data + *off;
            n = head->len - *off;
        } else {
            p = body->data + (*off - head->len);
            n = head->len + body->len - *off;
        }
        ssize_t w = tls_conn_write(tls, p, n);
        if (w > 0) {
            *off += (size_t)w;
            continue;
        }
        return w == ST_AGAIN ? ST_AGAIN : ST_ERROR;
    }
}

int tcp_io_send(int fd, struct tls_conn *tls, const struct buf *head, const struct buf *body,
                size_t *off)
{
    if (tls)
        return send_tls(tls, head, body, off);
    for (;;) {
        if (*off >= head->len + body->len)
            return ST_OK;
        struct iovec iov[2];
        int n = 0;
        if (*off < head->len) {
            iov[n].iov_base = head->data + *off;
            iov[n++].iov_len = head->len - *off;
        }
        if (body->len) {
            size_t boff = *off > head->len ? *off - head->len : 0;
            iov[n].iov_base = body->data + boff;
            iov[n++].iov_len = body->len - boff;
        }
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(fd, &msg, MSG_NOSIGNAL);
        if (w > 0) {
            *off += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return ST_AGAIN;
        return ST_ERROR;
    }
}
