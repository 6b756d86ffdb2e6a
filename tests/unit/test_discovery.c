/*
 * cluster/discovery against a real etcd (Debian's etcd-server, started
 * here on free loopback ports with a temp data dir; skipped when
 * /usr/bin/etcd is missing), written to with cluster/etcd's client: the
 * first range, puts and deletes through the watch, a bad value skipped,
 * snapshots that outlive changes and the discovery itself, etcd down at
 * start, and an etcd restart on the same data dir (the watch resumes and
 * the instances are kept meanwhile).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "cluster/discovery.h"
#include "cluster/etcd.h"

#define ETCD_BIN "/usr/bin/etcd"

struct etcd_proc {
    pid_t pid;
    int client_port, peer_port;
    char dir[64];
    char url[64];
};

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void etcd_spawn(struct etcd_proc *e)
{
    char listen[64], peer[64], cluster[96], data[96];
    snprintf(listen, sizeof listen, "http://127.0.0.1:%d", e->client_port);
    snprintf(peer, sizeof peer, "http://127.0.0.1:%d", e->peer_port);
    snprintf(cluster, sizeof cluster, "t=%s", peer);
    snprintf(data, sizeof data, "%s/data", e->dir);
    e->pid = fork();
    assert_true(e->pid >= 0);
    if (e->pid == 0) {
        char log[96];
        snprintf(log, sizeof log, "%s/etcd.log", e->dir);
        FILE *f = freopen(log, "a", stdout);
        if (f)
            dup2(fileno(f), 2);
        execl(ETCD_BIN, "etcd", "--name", "t", "--data-dir", data, "--listen-client-urls", listen,
              "--advertise-client-urls", listen, "--listen-peer-urls", peer,
              "--initial-advertise-peer-urls", peer, "--initial-cluster", cluster, (char *)NULL);
        _exit(127);
    }
    /* Ready when a put goes through. */
    struct etcd_client c;
    struct error err;
    assert_int_equal(etcd_client_init(&c, e->url, 500, NULL, &err), 0);
    uint64_t deadline = clock_now_ms() + 20000;
    while (etcd_put(&c, "/ready", "1", 1, 0) != 0) {
        assert_true(clock_now_ms() < deadline);
        sleep_ms(100);
    }
    etcd_client_free(&c);
}

static void etcd_kill(struct etcd_proc *e)
{
    if (e->pid > 0) {
        kill(e->pid, SIGKILL);
        waitpid(e->pid, NULL, 0);
        e->pid = 0;
    }
}

static void put(const struct etcd_proc *e, const char *key, const char *value)
{
    struct etcd_client c;
    struct error err;
    assert_int_equal(etcd_client_init(&c, e->url, 2000, NULL, &err), 0);
    if (value)
        assert_int_equal(etcd_put(&c, key, value, strlen(value), 0), 0);
    else
        assert_int_equal(etcd_delete(&c, key, false, NULL), 0);
    etcd_client_free(&c);
}

static char *instance_json(const char *id, int grpc_port, bool ready)
{
    static char buf[512];
    snprintf(buf, sizeof buf,
             "{\"id\":\"%s\",\"host\":\"127.0.0.1\",\"http_port\":1,\"grpc_port\":%d,"
             "\"ready\":%s,\"draining\":false,\"models\":[{\"name\":\"digits\","
             "\"versions\":[\"1\"],\"ready_versions\":[\"1\"]}]}",
             id, grpc_port, ready ? "true" : "false");
    return buf;
}

struct seen {
    atomic_uint calls;
    atomic_uint last_n;
};

static void on_change(void *ctx, const struct cluster_snapshot *s)
{
    struct seen *seen = ctx;
    atomic_store(&seen->last_n, s->n_instances);
    atomic_fetch_add(&seen->calls, 1);
}

/* Waits until the discovery shows n instances; returns that snapshot. */
static const struct cluster_snapshot *wait_n(struct discovery *d, uint32_t n)
{
    uint64_t deadline = clock_now_ms() + 10000;
    for (;;) {
        const struct cluster_snapshot *s = discovery_snapshot(d);
        if (s->n_instances == n && s->generation > 0)
            return s;
        cluster_snapshot_release(s);
        if (clock_now_ms() > deadline)
            fail_msg("discovery did not reach %u instances", n);
        sleep_ms(20);
    }
}

static void test_discovery(void **state)
{
    (void)state;
    if (access(ETCD_BIN, X_OK) != 0)
        skip();
    struct etcd_proc e = {0};
    snprintf(e.dir, sizeof e.dir, "/tmp/inferd-test-discovery-XXXXXX");
    assert_non_null(mkdtemp(e.dir));
    e.client_port = free_port();
    e.peer_port = free_port();
    snprintf(e.url, sizeof e.url, "http://127.0.0.1:%d", e.client_port);

    /* etcd down at start: an empty snapshot, generation 0. */
    struct seen seen = {0};
    struct discovery_config cfg = {.endpoints = e.url,
                                   .prefix = "/t/",
                                   .timeout_ms = 500,
                                   .on_change = on_change,
                                   .on_change_ctx = &seen};
    struct discovery *d;
    struct error err;
    assert_int_equal(discovery_start(&cfg, &d, &err), 0);
    sleep_ms(300);
    const struct cluster_snapshot *s0 = discovery_snapshot(d);
    assert_int_equal(s0->n_instances, 0);
    assert_int_equal(s0->generation, 0);
    assert_int_equal(discovery_generation(d), 0);

    etcd_spawn(&e);
    put(&e, "/t/instances/b", instance_json("b", 9002, true));
    put(&e, "/t/instances/a", instance_json("a", 9001, false));
    put(&e, "/t/instances/bad", "{not json");
    put(&e, "/t/other", instance_json("x", 1, true)); /* outside instances/ */
    const struct cluster_snapshot *s = wait_n(d, 2);
    assert_string_equal(s->instances[0].id, "a"); /* sorted by id */
    assert_string_equal(s->instances[1].id, "b");
    assert_false(cluster_instance_serves(&s->instances[0], "digits", NULL));
    assert_true(cluster_instance_serves(&s->instances[1], "digits", "1"));
    assert_int_equal(s->instances[1].grpc_port, 9002);
    assert_true(s->instances[1].mod_revision > 0);
    assert_int_equal(discovery_generation(d), s->generation);
    assert_true(atomic_load(&seen.calls) >= 1);

    /* A delete and an update through the watch; the old snapshot stays
     * as it was for whoever holds it. */
    put(&e, "/t/instances/a", NULL);
    put(&e, "/t/instances/b", instance_json("b", 9003, true));
    uint64_t deadline = clock_now_ms() + 10000;
    const struct cluster_snapshot *s2;
    for (;;) {
        s2 = discovery_snapshot(d);
        if (s2->n_instances == 1 && s2->instances[0].grpc_port == 9003)
            break;
        cluster_snapshot_release(s2);
        assert_true(clock_now_ms() < deadline);
        sleep_ms(20);
    }
    assert_true(s2->generation > s->generation);
    assert_int_equal(s->n_instances, 2);
    assert_int_equal(s->instances[1].grpc_port, 9002);
    assert_int_equal(atomic_load(&seen.last_n), 1);

    /* etcd killed: the instances are kept; restarted on the same data
     * dir: the watch resumes and sees what changed. */
    etcd_kill(&e);
    sleep_ms(700);
    const struct cluster_snapshot *s3 = discovery_snapshot(d);
    assert_int_equal(s3->n_instances, 1);
    cluster_snapshot_release(s3);
    etcd_spawn(&e);
    put(&e, "/t/instances/c", instance_json("c", 9004, true));
    s3 = wait_n(d, 2);
    assert_string_equal(s3->instances[1].id, "c");

    discovery_stop(d);
    /* Snapshots outlive the discovery. */
    assert_string_equal(s3->instances[0].id, "b");
    cluster_snapshot_release(s3);
    cluster_snapshot_release(s2);
    cluster_snapshot_release(s);
    cluster_snapshot_release(s0);
    etcd_kill(&e);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", e.dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_discovery),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
