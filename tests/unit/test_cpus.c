/* Unit tests of base/cpus: the usable CPU count from fake cgroup trees. */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/cpus.h"

/* A temporary directory holding "cgroup" (the fake /proc/self/cgroup)
 * and "fs/" (the fake /sys/fs/cgroup). */
struct tree {
    char dir[64];
    char proc[128];
    char root[128];
};

static int tree_setup(void **state)
{
    struct tree *t = calloc(1, sizeof *t);
    assert_non_null(t);
    strcpy(t->dir, "/tmp/inferd-cpus-XXXXXX");
    assert_non_null(mkdtemp(t->dir));
    snprintf(t->proc, sizeof t->proc, "%s/cgroup", t->dir);
    snprintf(t->root, sizeof t->root, "%s/fs", t->dir);
    assert_int_equal(mkdir(t->root, 0700), 0);
    *state = t;
    return 0;
}

static int tree_teardown(void **state)
{
    struct tree *t = *state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", t->dir);
    assert_int_equal(system(cmd), 0);
    free(t);
    return 0;
}

/* Writes text to <root>/<rel>, creating the directories on the way. */
static void put(const struct tree *t, const char *rel, const char *text)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", t->root, rel);
    for (char *s = path + strlen(t->root) + 1; (s = strchr(s, '/')); s++) {
        *s = '\0';
        assert_true(mkdir(path, 0700) == 0 || errno == EEXIST);
        *s = '/';
    }
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void put_proc(const struct tree *t, const char *text)
{
    FILE *f = fopen(t->proc, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* cpus_probe_in() over the tree, checking its parts against usable. */
static int probe(const struct tree *t, int affinity, int want_quota)
{
    struct cpus_limits l;
    int n = cpus_probe_in(t->proc, t->root, affinity, &l);
    assert_int_equal(n, l.usable);
    assert_int_equal(l.quota, want_quota);
    return n;
}

static void test_v2_quota_rounds_up(void **state)
{
    struct tree *t = *state;
    put_proc(t, "0::/app.slice/inferd.service\n");
    put(t, "app.slice/inferd.service/cpu.max", "150000 100000\n");
    assert_int_equal(probe(t, 8, 2), 2);
}

static void test_v2_quota_below_one_cpu_is_one(void **state)
{
    struct tree *t = *state;
    put_proc(t, "0::/a\n");
    put(t, "a/cpu.max", "50000 100000\n");
    assert_int_equal(probe(t, 8, 1), 1);
}

static void test_v2_max_is_the_affinity(void **state)
{
    struct tree *t = *state;
    put_proc(t, "0::/a\n");
    put(t, "a/cpu.max", "max 100000\n");
    assert_int_equal(probe(t, 6, 0), 6);
}

static void test_v2_affinity_below_quota(void **state)
{
    struct tree *t = *state;
    put_proc(t, "0::/a\n");
    put(t, "a/cpu.max", "400000 100000\n");
    assert_int_equal(probe(t, 3, 4), 3);
}

static void test_v2_parent_limit_applies(void **state)
{
    struct tree *t = *state;
    put_proc(t, "0::/outer/inner/leaf\n");
    put(t, "outer/cpu.max", "300000 100000\n");
    put(t, "outer/inner/cpu.max", "max 100000\n");
    put(t, "outer/inner/leaf/cpu.max", "500000 100000\n");
    assert_int_equal(probe(t, 16, 3), 3);
}

static void test_v2_child_limit_smaller_than_parent(void **state)
{
    struct tree *t = *state;
    put_proc(t, "0::/outer/inner\n");
    put(t, "outer/cpu.max", "800000 100000\n");
    put(t, "outer/inner/cpu.max", "200000 100000\n");
    assert_int_equal(probe(t, 16, 2), 2);
}

static void test_v2_namespace_root_limit(void **state)
{
    /* A container that sees its host path but has its own cgroup mounted
     * at the root: the path is absent, the root's cpu.max still counts. */
    struct tree *t = *state;
    put_proc(t, "0::/kubepods/pod1/abc\n");
    put(t, "cpu.max", "250000 100000\n");
    assert_int_equal(probe(t, 16, 3), 3);
}

static void test_v1_cpu_cpuacct(void **state)
{
    struct tree *t = *state;
    put_proc(t, "12:memory:/docker/x\n4:cpu,cpuacct:/docker/x\n1:name=systemd:/docker/x\n");
    put(t, "cpu,cpuacct/docker/x/cpu.cfs_quota_us", "250000\n");
    put(t, "cpu,cpuacct/docker/x/cpu.cfs_period_us", "100000\n");
    /* another controller's quota-like file is not read */
    put(t, "memory/docker/x/cpu.cfs_quota_us", "100000\n");
    put(t, "memory/docker/x/cpu.cfs_period_us", "100000\n");
    assert_int_equal(probe(t, 8, 3), 3);
}

static void test_v1_unlimited_and_parent(void **state)
{
    struct tree *t = *state;
    put_proc(t, "3:cpu:/a/b\n2:cpuacct:/a/b\n");
    put(t, "cpu/a/b/cpu.cfs_quota_us", "-1\n");
    put(t, "cpu/a/b/cpu.cfs_period_us", "100000\n");
    put(t, "cpu/a/cpu.cfs_quota_us", "-1\n");
    put(t, "cpu/a/cpu.cfs_period_us", "100000\n");
    assert_int_equal(probe(t, 4, 0), 4);
    put(t, "cpu/a/cpu.cfs_quota_us", "100000\n");
    assert_int_equal(probe(t, 4, 1), 1);
}

static void test_v1_through_cpu_directory(void **state)
{
    /* Mounted as <root>/cpu only (no "cpu,cpuacct" directory). */
    struct tree *t = *state;
    put_proc(t, "4:cpuacct,cpu:/x\n");
    put(t, "cpu/x/cpu.cfs_quota_us", "200000\n");
    put(t, "cpu/x/cpu.cfs_period_us", "100000\n");
    assert_int_equal(probe(t, 8, 2), 2);
}

static void test_missing_files_are_no_limit(void **state)
{
    struct tree *t = *state;
    assert_int_equal(probe(t, 5, 0), 5); /* no proc file at all */
    put_proc(t, "0::/nowhere\n4:cpu:/nowhere\n");
    assert_int_equal(probe(t, 5, 0), 5); /* no cgroup files */
    put_proc(t, "");
    assert_int_equal(probe(t, 5, 0), 5);
}

static void test_garbage_is_no_limit(void **state)
{
    struct tree *t = *state;
    static const char *const bad_cpu_max[] = {
        "",
        "max\n",
        "150000\n",
        "abc 100000\n",
        "150000 0\n",
        "-5 100000\n",
        "150000 100000 7\n",
        "150000 x\n",
        "99999999999999999999999 100000\n",
    };
    put_proc(t, "0::/a\n");
    for (size_t i = 0; i < sizeof bad_cpu_max / sizeof *bad_cpu_max; i++) {
        put(t, "a/cpu.max", bad_cpu_max[i]);
        assert_int_equal(probe(t, 7, 0), 7);
    }
    static const char *const bad_proc[] = {
        "garbage", "0:", "0::", "0::relative\n", ":::\n", "4:cpu\n", "\n\n\n",
    };
    put(t, "a/cpu.max", "100000 100000\n");
    put(t, "cpu.max", "100000 100000\n");
    for (size_t i = 0; i < sizeof bad_proc / sizeof *bad_proc; i++) {
        put_proc(t, bad_proc[i]);
        assert_int_equal(probe(t, 7, 0), 7);
    }
    /* v1 with a period that cannot be read */
    put_proc(t, "4:cpu:/b\n");
    put(t, "cpu/b/cpu.cfs_quota_us", "100000\n");
    assert_int_equal(probe(t, 7, 0), 7);
}

static void test_last_line_without_newline(void **state)
{
    struct tree *t = *state;
    put_proc(t, "1:name=systemd:/\n0::/a");
    put(t, "a/cpu.max", "200000 100000");
    assert_int_equal(probe(t, 8, 2), 2);
}

static void test_at_least_one(void **state)
{
    struct tree *t = *state;
    assert_int_equal(probe(t, 0, 0), 1);
    assert_int_equal(probe(t, -3, 0), 1);
}

static void test_this_process(void **state)
{
    (void)state;
    cpu_set_t set;
    assert_int_equal(sched_getaffinity(0, sizeof set, &set), 0);
    struct cpus_limits l;
    int n = cpus_probe(&l);
    assert_int_equal(l.affinity, CPU_COUNT(&set));
    assert_int_equal(n, l.quota > 0 && l.quota < l.affinity ? l.quota : l.affinity);
    assert_int_equal(cpus_usable(), n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, tree_setup, tree_teardown)
        T(test_v2_quota_rounds_up),          T(test_v2_quota_below_one_cpu_is_one),
        T(test_v2_max_is_the_affinity),      T(test_v2_affinity_below_quota),
        T(test_v2_parent_limit_applies),     T(test_v2_child_limit_smaller_than_parent),
        T(test_v2_namespace_root_limit),     T(test_v1_cpu_cpuacct),
        T(test_v1_unlimited_and_parent),     T(test_v1_through_cpu_directory),
        T(test_missing_files_are_no_limit),  T(test_garbage_is_no_limit),
        T(test_last_line_without_newline),   T(test_at_least_one),
#undef T
        cmocka_unit_test(test_this_process),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
