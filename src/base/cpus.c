#include "base/cpus.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/path.h"
#include "base/status.h"

#define CGROUP_MOUNT "/sys/fs/cgroup"

/* Reads at most size - 1 bytes of path into buf, NUL-terminated. Returns
 * the length, or -1 if the file cannot be opened or read. */
static ssize_t read_small_file(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ST_ERROR;
    size_t len = 0;
    while (len < size - 1) {
        ssize_t n = read(fd, buf + len, size - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            close(fd);
            return ST_ERROR;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    buf[len] = '\0';
    return (ssize_t)len;
}

/* One decimal integer at *p after optional blanks; *p moves past it.
 * Returns false if there is none or it overflows. */
static bool parse_i64(const char **p, int64_t *out)
{
    const char *s = *p + strspn(*p, " \t");
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || errno)
        return false;
    *out = v;
    *p = end;
    return true;
}

/* Only blanks and a newline left. */
static bool at_end(const char *p)
{
    return p[strspn(p, " \t\n")] == '\0';
}

/* ceil(quota / period) in whole CPUs; 0 (no limit) unless both are > 0. */
static int quota_cpus(int64_t quota, int64_t period)
{
    if (quota <= 0 || period <= 0)
        return 0;
    int64_t n = quota / period + (quota % period != 0);
    return n > INT_MAX ? INT_MAX : (int)n;
}

/* cgroup v2: <dir>/cpu.max is "max <period>" or "<quota> <period>". */
static int v2_limit(const char *dir)
{
    char path[PATH_MAX], text[128];
    if (!path_fmt(path, sizeof path, "%s/cpu.max", dir) ||
        read_small_file(path, text, sizeof text) < 0)
        return 0;
    const char *p = text;
    int64_t quota, period;
    if (!parse_i64(&p, &quota) || !parse_i64(&p, &period) || !at_end(p))
        return 0; /* "max ..." or garbage: no limit */
    return quota_cpus(quota, period);
}

/* cgroup v1: <dir>/cpu.cfs_quota_us (-1 = no limit) / cpu.cfs_period_us. */
static int v1_limit(const char *dir)
{
    char path[PATH_MAX], text[64];
    int64_t quota, period;
    const char *p = text;
    if (!path_fmt(path, sizeof path, "%s/cpu.cfs_quota_us", dir) ||
        read_small_file(path, text, sizeof text) < 0 || !parse_i64(&p, &quota) || !at_end(p))
        return 0;
    p = text;
    if (!path_fmt(path, sizeof path, "%s/cpu.cfs_period_us", dir) ||
        read_small_file(path, text, sizeof text) < 0 || !parse_i64(&p, &period) || !at_end(p))
        return 0;
    return quota_cpus(quota, period);
}

/* The smaller of two limits, 0 meaning none. */
static int min_limit(int a, int b)
{
    if (a == 0)
        return b;
    if (b == 0)
        return a;
    return a < b ? a : b;
}

/* The smallest limit that `read` finds in mount/cgroup and its ancestors up
 * to mount itself. cgroup is the path of /proc/self/cgroup (from '/'),
 * cgroup_len bytes long. 0 = none. */
static int walk_up(const char *mount, const char *cgroup, size_t cgroup_len,
                   int (*read)(const char *dir))
{
    char dir[PATH_MAX];
    if (cgroup_len > INT_MAX ||
        !path_fmt(dir, sizeof dir, "%s%.*s", mount, (int)cgroup_len, cgroup))
        return read(mount);
    size_t root_len = strlen(mount);
    int limit = 0;
    for (;;) {
        /* "<mount>/a/b/" (the path "/" itself, or a trailing slash) is
         * "<mount>/a/b". */
        size_t len = strlen(dir);
        while (len > root_len && dir[len - 1] == '/')
            dir[--len] = '\0';
        limit = min_limit(limit, read(dir));
        if (len <= root_len)
            return limit;
        char *slash = strrchr(dir + root_len, '/');
        if (!slash)
            return limit;
        *slash = '\0';
    }
}

/* True if the comma-separated controller list [list, list + len) names
 * "cpu" (v1 lists such as "cpu,cpuacct"). */
static bool has_cpu_controller(const char *list, size_t len)
{
    const char *end = list + len;
    while (list < end) {
        const char *comma = memchr(list, ',', (size_t)(end - list));
        size_t n = comma ? (size_t)(comma - list) : (size_t)(end - list);
        if (n == 3 && memcmp(list, "cpu", 3) == 0)
            return true;
        list += n + 1;
    }
    return false;
}

/* The quota of one line of /proc/self/cgroup ("id:controllers:path", no
 * newline, len bytes); 0 = none, or not a line about CPU time. */
static int line_limit(const char *line, size_t len, const char *cgroup_root)
{
    const char *end = line + len;
    const char *c1 = memchr(line, ':', len);
    if (!c1)
        return 0;
    const char *c2 = memchr(c1 + 1, ':', (size_t)(end - c1 - 1));
    if (!c2 || c2 + 1 >= end || c2[1] != '/')
        return 0;
    const char *cgroup = c2 + 1;
    size_t cgroup_len = (size_t)(end - cgroup);
    size_t controllers_len = (size_t)(c2 - c1 - 1);
    if (c1 - line == 1 && line[0] == '0' && controllers_len == 0)
        return walk_up(cgroup_root, cgroup, cgroup_len, v2_limit);
    if (!has_cpu_controller(c1 + 1, controllers_len))
        return 0;
    /* v1: the hierarchy is mounted at <root>/<controllers> ("cpu,cpuacct"),
     * usually with a "cpu" symlink beside it; either may be missing. */
    char mount[PATH_MAX];
    if (!path_fmt(mount, sizeof mount, "%s/%.*s", cgroup_root, (int)controllers_len, c1 + 1) ||
        access(mount, F_OK) != 0) {
        if (!path_fmt(mount, sizeof mount, "%s/cpu", cgroup_root) || access(mount, F_OK) != 0)
            return 0;
    }
    return walk_up(mount, cgroup, cgroup_len, v1_limit);
}

int cpus_probe_in(const char *proc_self_cgroup, const char *cgroup_root, int affinity,
                  struct cpus_limits *out)
{
    /* Every hierarchy's line, a few hundred bytes at most in practice; a
     * longer file is read up to its last whole line. */
    char text[8192];
    int quota = 0;
    ssize_t len = read_small_file(proc_self_cgroup, text, sizeof text);
    for (ssize_t pos = 0; pos < len;) {
        char *nl = memchr(text + pos, '\n', (size_t)(len - pos));
        if (!nl && (size_t)len == sizeof text - 1)
            break; /* a last line cut by the buffer */
        char *line_end = nl ? nl : text + len;
        size_t line_len = (size_t)(line_end - text - pos);
        quota = min_limit(quota, line_limit(text + pos, line_len, cgroup_root));
        pos = line_end - text + 1;
    }
    out->affinity = affinity < 1 ? 1 : affinity;
    out->quota = quota;
    out->usable = quota > 0 && quota < out->affinity ? quota : out->affinity;
    return out->usable;
}

int cpus_probe(struct cpus_limits *out)
{
    cpu_set_t set;
    int affinity;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        affinity = CPU_COUNT(&set);
    } else {
        /* More CPUs than a cpu_set_t holds (1024): the online count. */
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        affinity = n < 1 ? 1 : n > INT_MAX ? INT_MAX : (int)n;
    }
    return cpus_probe_in("/proc/self/cgroup", CGROUP_MOUNT, affinity, out);
}

int cpus_usable(void)
{
    struct cpus_limits limits;
    return cpus_probe(&limits);
}
