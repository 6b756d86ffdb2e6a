/*
 * cpus: how many CPUs this process may use, which sizes its thread pools
 * (I/O threads, model workers, ONNX Runtime intra-op threads).
 *
 * Two limits apply and the smaller wins:
 *   - the affinity mask (sched_getaffinity: taskset, cpuset cgroups,
 *     Kubernetes static CPU manager);
 *   - the cgroup CPU quota, rounded up to whole CPUs (Docker --cpus,
 *     Kubernetes CPU limits, systemd CPUQuota=). cgroup v2: cpu.max
 *     ("<quota> <period>", or "max <period>" for no limit); cgroup v1: the
 *     cpu controller's cpu.cfs_quota_us (-1 for no limit) / cpu.cfs_period_us.
 *     The process's cgroup and every ancestor up to the hierarchy's root
 *     are read, since a parent's limit bounds its children too; the
 *     smallest limit applies.
 * The machine's core count is never used: a container on a 64-core host
 * with --cpus 2 gets 2, not 64.
 *
 * Reading never fails: a file that is missing, unreadable or not in the
 * expected form sets no limit, and the result is at least 1.
 * Thread: any; nothing global is kept (each call reads the files again, so
 * call at startup or at load time, not per request).
 */
#ifndef INFERD_BASE_CPUS_H
#define INFERD_BASE_CPUS_H

/* The number of CPUs this process may use: min(affinity mask, cgroup
 * quota), at least 1. */
int cpus_usable(void);

/* Where the number came from, for a startup log line. */
struct cpus_limits {
    int affinity; /* CPUs in the affinity mask (if it cannot be read: online CPUs) */
    int quota;    /* ceil(cgroup quota / period); 0 = no quota */
    int usable;   /* min(affinity, quota if any), at least 1 */
};

/* cpus_usable() with its parts: reads /proc/self/cgroup under the
 * cgroup mount /sys/fs/cgroup. Returns out->usable. */
int cpus_probe(struct cpus_limits *out);

/* The testable core of cpus_probe(): proc_self_cgroup is the path of a file
 * in the form of /proc/self/cgroup ("0::/a/b" for v2, "4:cpu,cpuacct:/a/b"
 * for v1); cgroup_root the directory where the hierarchies are mounted (v2:
 * the unified hierarchy itself; v1: one directory per controller set named
 * as in the file, e.g. <root>/cpu,cpuacct). A cgroup directory that does not
 * exist under the root (a container that sees the host's path but has its
 * own cgroup mounted at the root) sets no limit; the root's own files still
 * do. affinity is the affinity mask's CPU count. Returns out->usable. */
int cpus_probe_in(const char *proc_self_cgroup, const char *cgroup_root, int affinity,
                  struct cpus_limits *out);

#endif
