#include "model/memory.h"

#include <dirent.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/stat.h>

#include "base/procmem.h"
#include "base/status.h"

/* PATH_MAX of Linux; a longer name is skipped. */
#define MEMORY_PATH_MAX 4096

static atomic_uint_fast64_t in_use;

uint64_t model_memory_sample(void)
{
    procmem_trim();
    return procmem_rss_bytes();
}

void model_memory_account(struct model *m, uint64_t before)
{
    uint64_t after = model_memory_sample();
    m->memory_bytes = after > before ? after - before : 0;
    atomic_fetch_add(&in_use, m->memory_bytes);
}

void model_memory_release(const struct model *m)
{
    atomic_fetch_sub(&in_use, m->memory_bytes);
}

uint64_t model_memory_in_use(void)
{
    return atomic_load(&in_use);
}

/* Bytes of the regular files directly in dir (hidden ones too: an
 * external-data file may be named so). */
static uint64_t files_bytes(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    uint64_t sum = 0;
    char path[MEMORY_PATH_MAX];
    struct stat st;
    const struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        int n = snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (n > 0 && (size_t)n < sizeof path && stat(path, &st) == 0 && S_ISREG(st.st_mode))
            sum += (uint64_t)st.st_size;
    }
    closedir(d);
    return sum;
}

static double mib(uint64_t bytes)
{
    return (double)bytes / (1024.0 * 1024.0);
}

int model_memory_admit(const char *name, const char *version, const char *version_dir,
                       uint64_t budget, struct error *err)
{
    if (!budget)
        return ST_OK;
    uint64_t used = model_memory_in_use(), need = files_bytes(version_dir);
    if (used <= budget && need <= budget - used)
        return ST_OK;
    return error_set(err, 400,
                     "model '%s' version %s was not loaded: its files take %.1f MiB and the "
                     "loaded versions use %.1f MiB of the %.1f MiB --model-memory-budget; "
                     "unload a model or raise the budget",
                     name, version, mib(need), mib(used), mib(budget));
}
