#include "net/loop.h"

#include <errno.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/clock.h"

#define LOOP_MAX_EVENTS 128
#define LOOP_TICK_MS 1000

int loop_init(struct loop *l)
{
    l->stop = false;
    atomic_init(&l->posted, NULL);
    l->deferred = NULL;
    l->on_tick = NULL;
    l->tick_arg = NULL;
    l->last_tick_ms = clock_now_ms();
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (l->epfd < 0)
        return -errno;
    l->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (l->wakefd < 0) {
        int rc = -errno;
        close(l->epfd);
        return rc;
    }
    /* The wake fd is recognised by its data pointer being NULL. */
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->wakefd, &ev) != 0) {
        int rc = -errno;
        loop_close(l);
        return rc;
    }
    return 0;
}

void loop_close(struct loop *l)
{
    if (l->wakefd >= 0)
        close(l->wakefd);
    if (l->epfd >= 0)
        close(l->epfd);
    l->wakefd = l->epfd = -1;
}

int loop_add(struct loop *l, struct loop_watch *w, uint32_t events)
{
    struct epoll_event ev = {.events = events | EPOLLET, .data.ptr = w};
    w->_deferred = false;
    w->_next_deferred = NULL;
    return epoll_ctl(l->epfd, EPOLL_CTL_ADD, w->fd, &ev) == 0 ? 0 : -errno;
}

void loop_del(struct loop *l, struct loop_watch *w)
{
    epoll_ctl(l->epfd, EPOLL_CTL_DEL, w->fd, NULL);
    if (!w->_deferred)
        return;
    for (struct loop_watch **pp = &l->deferred; *pp; pp = &(*pp)->_next_deferred) {
        if (*pp == w) {
            *pp = w->_next_deferred;
            break;
        }
    }
    w->_deferred = false;
}

void loop_defer(struct loop *l, struct loop_watch *w)
{
    if (w->_deferred)
        return;
    w->_deferred = true;
    w->_next_deferred = l->deferred;
    l->deferred = w;
}

void loop_post(struct loop *l, struct loop_task *t)
{
    struct loop_task *old = atomic_load_explicit(&l->posted, memory_order_relaxed);
    do {
        t->_next = old;
    } while (!atomic_compare_exchange_weak_explicit(&l->posted, &old, t, memory_order_release,
                                                    memory_order_relaxed));
    /* Only the push onto an empty stack wakes the loop: the loop reads the
     * eventfd before it takes the stack, so a push that finds the stack
     * non-empty is always seen by a take that has not happened yet. */
    if (old == NULL) {
        uint64_t one = 1;
        ssize_t ignored = write(l->wakefd, &one, sizeof one);
        (void)ignored;
    }
}

static void drain_posted(struct loop *l)
{
    uint64_t count;
    ssize_t ignored = read(l->wakefd, &count, sizeof count);
    (void)ignored;
    struct loop_task *t = atomic_exchange_explicit(&l->posted, NULL, memory_order_acquire);
    /* Reverse into posting order. */
    struct loop_task *ordered = NULL;
    while (t) {
        struct loop_task *next = t->_next;
        t->_next = ordered;
        ordered = t;
        t = next;
    }
    while (ordered) {
        struct loop_task *next = ordered->_next;
        ordered->run(ordered);
        ordered = next;
    }
}

static void run_deferred(struct loop *l)
{
    /* Take the list first: callbacks may defer again for the next round. */
    struct loop_watch *w = l->deferred;
    l->deferred = NULL;
    while (w) {
        struct loop_watch *next = w->_next_deferred;
        w->_deferred = false;
        w->_next_deferred = NULL;
        w->on_events(w, 0);
        w = next;
    }
}

int loop_run(struct loop *l)
{
    struct epoll_event events[LOOP_MAX_EVENTS];
    while (!l->stop) {
        int timeout = l->deferred ? 0 : LOOP_TICK_MS;
        int n = epoll_wait(l->epfd, events, LOOP_MAX_EVENTS, timeout);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        for (int i = 0; i < n; i++) {
            struct loop_watch *w = events[i].data.ptr;
            if (!w)
                drain_posted(l);
            else
                w->on_events(w, events[i].events);
        }
        run_deferred(l);
        uint64_t now = clock_now_ms();
        if (l->on_tick && now - l->last_tick_ms >= LOOP_TICK_MS) {
            l->last_tick_ms = now;
            l->on_tick(l, l->tick_arg);
        }
    }
    return 0;
}

void loop_stop(struct loop *l)
{
    l->stop = true;
}
