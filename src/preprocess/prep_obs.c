/*
 * prep_obs.c: the preprocessing metrics (prep.h, docs/metrics.md).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "preprocess/prep_int.h"

/* Nanoseconds, shown as seconds: 10 us .. 10 s. */
const struct metrics_hist_spec prep_duration_spec = {
    .nbounds = 16,
    .bounds = {10000u, 25000u, 50000u, 100000u, 250000u, 500000u, 1000000u, 2500000u, 5000000u,
               10000000u, 25000000u, 50000000u, 100000000u, 250000000u, 1000000000u, 10000000000u},
    .divisor = 1e9,
};

static pthread_mutex_t list_mu = PTHREAD_MUTEX_INITIALIZER;
static struct model_prep *list;

void prep_obs_register(struct model_prep *mp)
{
    pthread_mutex_lock(&list_mu);
    mp->next = list;
    list = mp;
    pthread_mutex_unlock(&list_mu);
}

void prep_obs_unregister(struct model_prep *mp)
{
    pthread_mutex_lock(&list_mu);
    struct model_prep **p = &list;
    while (*p && *p != mp)
        p = &(*p)->next;
    if (*p)
        *p = mp->next;
    pthread_mutex_unlock(&list_mu);
}

void prep_obs_step(struct model_prep *mp, const char *stage, uint64_t ns)
{
    struct prep_stats *st = &mp->stats;
    for (uint32_t i = 0; i < PREP_STAT_SLOTS; i++) {
        const char *have = atomic_load_explicit(&st->stage[i], memory_order_acquire);
        if (!have) {
            const char *expected = NULL;
            if (atomic_compare_exchange_strong_explicit(&st->stage[i], &expected, stage,
                                                        memory_order_acq_rel, memory_order_acquire))
                have = stage;
            else
                have = expected;
        }
        if (have == stage || strcmp(have, stage) == 0) {
            metrics_hist_observe(&st->hist[i], &prep_duration_spec, ns, METRICS_SHARED_SHARD);
            return;
        }
    }
}

static const int error_status[PREP_ERR_KINDS] = {400, 413, 499, 503, 500};

void prep_obs_error(struct model_prep *mp, int status)
{
    uint32_t k = PREP_ERR_500;
    for (uint32_t i = 0; i < PREP_ERR_KINDS; i++)
        if (error_status[i] == status)
            k = i;
    metrics_add(&mp->stats.errors[k], 1, METRICS_SHARED_SHARD);
}

void prep_write_metrics(struct buf *out)
{
    pthread_mutex_lock(&list_mu);
    if (!list) {
        pthread_mutex_unlock(&list_mu);
        return;
    }
    static const char dur[] = "inferd_preprocess_duration_seconds";
    metrics_write_header(out, dur, "histogram",
                         "Time of each preprocessing step of a request (summed over its elements), "
                         "and its wait for a worker (stage=\"queue\").");
    for (const struct model_prep *mp = list; mp; mp = mp->next)
        for (uint32_t i = 0; i < PREP_STAT_SLOTS; i++) {
            const char *stage = atomic_load_explicit(&mp->stats.stage[i], memory_order_acquire);
            if (!stage)
                break;
            const char *labels[] = {
                "model", mp->model->name, "version", mp->model->version_str, "stage", stage};
            struct metrics_hist_snapshot snap = {0};
            metrics_hist_accumulate(&snap, &mp->stats.hist[i]);
            metrics_write_hist(out, dur, labels, 3, &prep_duration_spec, &snap);
        }
    static const char errs[] = "inferd_preprocess_errors_total";
    metrics_write_header(out, errs, "counter",
                         "Requests whose preprocessing failed, by the status they were answered "
                         "with.");
    for (const struct model_prep *mp = list; mp; mp = mp->next)
        for (uint32_t k = 0; k < PREP_ERR_KINDS; k++) {
            char status[8];
            snprintf(status, sizeof status, "%d", error_status[k]);
            const char *labels[] = {"model",  mp->model->name, "version", mp->model->version_str,
                                    "status", status};
            metrics_write_u64(out, errs, labels, 3, metrics_load(&mp->stats.errors[k]));
        }
    pthread_mutex_unlock(&list_mu);
}
