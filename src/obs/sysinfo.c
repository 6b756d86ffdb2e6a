#include "obs/sysinfo.h"

#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

bool sysinfo_parse_cpu_line(const char *line, struct sysinfo_cpu *out)
{
    /* cpu user nice system idle iowait irq softirq steal [guest guest_nice]
     * (guest time is already included in user and nice). */
    unsigned long long v[8] = {0};
    int n = sscanf(line, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                   &v[3], &v[4], &v[5], &v[6], &v[7]);
    if (n < 4)
        return false;
    uint64_t total = 0;
    for (int i = 0; i < 8; i++)
        total += v[i];
    out->total = total;
    out->busy = total - v[3] - v[4]; /* minus idle and iowait */
    return true;
}

double sysinfo_cpu_utilization(struct sysinfo_cpu *prev)
{
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return 0;
    char line[512];
    struct sysinfo_cpu now;
    bool ok = fgets(line, sizeof line, f) && sysinfo_parse_cpu_line(line, &now);
    fclose(f);
    if (!ok)
        return 0;
    double util = 0;
    if (now.total > prev->total && now.busy >= prev->busy)
        util = (double)(now.busy - prev->busy) / (double)(now.total - prev->total);
    *prev = now;
    return util > 1 ? 1 : util;
}

void sysinfo_memory(uint64_t *total_bytes, uint64_t *used_bytes)
{
    *total_bytes = *used_bytes = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return;
    char line[256];
    unsigned long long total_kb = 0, avail_kb = 0, v;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "MemTotal: %llu kB", &v) == 1)
            total_kb = v;
        else if (sscanf(line, "MemAvailable: %llu kB", &v) == 1)
            avail_kb = v;
    }
    fclose(f);
    *total_bytes = (uint64_t)total_kb * 1024u;
    *used_bytes = total_kb > avail_kb ? (uint64_t)(total_kb - avail_kb) * 1024u : 0;
}

void sysinfo_heap(uint64_t *in_use, uint64_t *free_bytes)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 mi = mallinfo2();
    *in_use = (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd; /* arenas + mmapped chunks */
    *free_bytes = (uint64_t)mi.fordblks;
#else
    *in_use = *free_bytes = 0;
#endif
}
