/*
 * loop: an epoll event loop owned by one thread.
 *
 * File descriptors are watched edge-triggered: a watcher's callback is told
 * which events happened and must read/write until EAGAIN (or remember that
 * it stopped early and ask for a retry with loop_defer()).
 *
 * Other threads hand work to the loop with loop_post(): the task is pushed
 * onto a lock-free stack and, when the stack was empty, the loop is woken
 * through an eventfd; the loop takes the whole stack at once and runs the
 * tasks in posting order on its own thread. This is the only cross-thread
 * entry point; everything else must be called on the loop thread.
 *
 * A watcher may also ask to be called back at the end of an iteration,
 * without a new event: at once (loop_defer()) or once a time has come
 * (loop_defer_at(), microsecond precision: the loop's wait is cut short).
 *
 * A tick callback runs about once per second for coarse timeouts.
 */
#ifndef INFERD_NET_LOOP_H
#define INFERD_NET_LOOP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct loop;

struct loop_watch {
    int fd;
    void (*on_events)(struct loop_watch *w, uint32_t events); /* EPOLL* bits */
    struct loop_watch *_next_deferred;
    uint64_t _due_ns; /* deferred: not before this time (0 = this iteration) */
    bool _deferred;
};

/* A unit of work posted from another thread; embedded in the poster's object. */
struct loop_task {
    void (*run)(struct loop_task *t);
    struct loop_task *_next;
};

struct loop {
    int epfd;
    int wakefd; /* eventfd */
    bool stop;
    _Atomic(struct loop_task *) posted; /* newest first; pushed by any thread */
    struct loop_watch *deferred; /* watchers to call again without a new event */
    void (*on_tick)(struct loop *l, void *arg);
    void *tick_arg;
    uint64_t last_tick_ms;
};

int loop_init(struct loop *l);
void loop_close(struct loop *l);

/* Starts watching w->fd for `events` (EPOLLIN, EPOLLOUT, ...; EPOLLET is
 * added). Returns 0 or -errno. */
int loop_add(struct loop *l, struct loop_watch *w, uint32_t events);
/* Stops watching; call before closing the fd. Drops a pending defer. */
void loop_del(struct loop *l, struct loop_watch *w);
/* Calls w->on_events(w, 0) again at the end of this iteration. */
void loop_defer(struct loop *l, struct loop_watch *w);
/* Calls w->on_events(w, 0) at the end of the first iteration at or after
 * due_ns (clock_now_ns). A watcher deferred twice is called once, at the
 * earlier of the two times. */
void loop_defer_at(struct loop *l, struct loop_watch *w, uint64_t due_ns);

/* Thread-safe: queue t to run on the loop thread. */
void loop_post(struct loop *l, struct loop_task *t);

/* The loop whose loop_run() is running on the calling thread, or NULL. */
struct loop *loop_current(void);

/* Runs until loop_stop() is called on the loop thread. Returns 0 or -errno. */
int loop_run(struct loop *l);
void loop_stop(struct loop *l);

#endif
