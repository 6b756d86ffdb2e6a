/*
 * sysinfo: host and process figures from /proc for the metrics (Linux).
 * Every function reads a small file; call them at scrape time, never on
 * the request path. Values a file cannot give are 0. (The process's
 * resident size is base/procmem.h's.)
 */
#ifndef INFERD_OBS_SYSINFO_H
#define INFERD_OBS_SYSINFO_H

#include <stdbool.h>
#include <stdint.h>

/* A /proc/stat sample (jiffies over all CPUs). */
struct sysinfo_cpu {
    uint64_t busy, total;
};

/* Share of CPU time (all cores, 0..1) spent busy since *prev, which is
 * replaced by the current sample. The first call (prev all zero) gives the
 * share since boot. */
double sysinfo_cpu_utilization(struct sysinfo_cpu *prev);

/* /proc/meminfo: MemTotal, and MemTotal - MemAvailable. */
void sysinfo_memory(uint64_t *total_bytes, uint64_t *used_bytes);

/* The C heap (glibc malloc, every arena): bytes handed out and not freed
 * (in_use), and bytes malloc holds free (free_bytes; some of it may already
 * be returned to the kernel with madvise). Walks the arenas' free lists
 * under their locks: call it from a signal handler thread or a scrape,
 * never per request. Both are 0 where mallinfo2() is missing. */
void sysinfo_heap(uint64_t *in_use, uint64_t *free_bytes);

/* Parses the first "cpu " line of /proc/stat text; false if malformed. */
bool sysinfo_parse_cpu_line(const char *line, struct sysinfo_cpu *out);

#endif
