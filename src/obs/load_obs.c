#include "obs/load_obs.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/mem.h"
#include "obs/metrics.h"

struct load_record {
    char *name;
    uint64_t failures[MODEL_FAIL_KINDS];
    bool has_outcome; /* false once forgotten */
    bool last_ok;
};

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static struct load_record *records; /* unordered; the exposition sorts */
static uint32_t nrecords, cap_records;
static bool full_logged;

/* The record of `name`, made when missing (reusing a forgotten one when
 * the table is full); NULL when out of memory or room. Lock held. */
static struct load_record *record_get(const char *name)
{
    for (uint32_t i = 0; i < nrecords; i++)
        if (strcmp(records[i].name, name) == 0)
            return &records[i];
    char *copy = mem_strdup(name);
    if (!copy)
        return NULL;
    struct load_record *rec = NULL;
    if (nrecords == LOAD_OBS_MAX_MODELS) {
        for (uint32_t i = 0; i < nrecords && !rec; i++)
            if (!records[i].has_outcome)
                rec = &records[i];
        if (rec)
            mem_free(rec->name);
    } else {
        if (nrecords == cap_records) {
            uint32_t cap = cap_records ? cap_records * 2 : 16;
            struct load_record *grown = mem_realloc(records, cap * sizeof *grown);
            if (grown) {
                records = grown;
                cap_records = cap;
            }
        }
        if (nrecords < cap_records)
            rec = &records[nrecords++];
    }
    if (!rec) {
        mem_free(copy);
        if (!full_logged)
            log_warn("model %s: load outcomes of more than %d models are not counted", name,
                     LOAD_OBS_MAX_MODELS);
        full_logged = true;
        return NULL;
    }
    memset(rec, 0, sizeof *rec);
    rec->name = copy;
    return rec;
}

void load_obs_record(const char *name, const struct model_failure *failures,
                     uint32_t nfailures)
{
    pthread_mutex_lock(&load_lock);
    struct load_record *rec = record_get(name);
    if (rec) {
        for (uint32_t i = 0; i < nfailures; i++)
            if ((unsigned)failures[i].kind < MODEL_FAIL_KINDS)
                rec->failures[failures[i].kind]++;
        rec->has_outcome = true;
        rec->last_ok = nfailures == 0;
    }
    pthread_mutex_unlock(&load_lock);
}

void load_obs_forget(const char *name)
{
    pthread_mutex_lock(&load_lock);
    for (uint32_t i = 0; i < nrecords; i++)
        if (strcmp(records[i].name, name) == 0)
            records[i].has_outcome = false;
    pthread_mutex_unlock(&load_lock);
}

static int record_cmp(const void *a, const void *b)
{
    return strcmp(((const struct load_record *)a)->name, ((const struct load_record *)b)->name);
}

void load_obs_write(struct buf *b)
{
    metrics_write_header(b, "inferd_model_load_failures_total", "counter",
                         "Model loads that failed, by model and kind (config, layout, io, "
                         "backend, load, warmup); one per failed version");
    pthread_mutex_lock(&load_lock);
    if (nrecords > 1)
        qsort(records, nrecords, sizeof *records, record_cmp);
    for (uint32_t i = 0; i < nrecords; i++)
        for (int k = 0; k < MODEL_FAIL_KINDS; k++) {
            const char *labels[] = {"model", records[i].name, "reason",
                                    model_failure_kind_name(k)};
            metrics_write_u64(b, "inferd_model_load_failures_total", labels, 2,
                              records[i].failures[k]);
        }
    metrics_write_header(b, "inferd_model_last_load_success", "gauge",
                         "1 when the last load of the model loaded every version it selects "
                         "and nothing in its directory is unservable, else 0");
    for (uint32_t i = 0; i < nrecords; i++)
        if (records[i].has_outcome) {
            const char *labels[] = {"model", records[i].name};
            metrics_write_u64(b, "inferd_model_last_load_success", labels, 1,
                              records[i].last_ok);
        }
    pthread_mutex_unlock(&load_lock);
}
