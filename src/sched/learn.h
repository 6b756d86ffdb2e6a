/*
 * learn: which batch sizes of a model version run fastest per sample,
 * learned from the batches the scheduler runs, so that the batcher can
 * prefer them (sched.h, "Learned batch sizes").
 *
 * ONNX Runtime is not equally fast per sample at every batch size: the
 * cost per sample usually falls as batches grow, but often rises again
 * past a size where the working set leaves the caches (bench/ort_floor
 * shows it in process). The runs are kept by size class: bucket i holds
 * the batches of (2^(i-1), 2^i] samples, the last one ending at the
 * model's max_batch_size; a batch capped at the bucket's bound lands in
 * it. Per bucket:
 *   - low: a time per sample that follows a faster run at once and a
 *     slower one by 1/32 of the difference, at most 1/32 of itself a run.
 *     The noise of a shared machine only ever adds time, so this compares
 *     sizes by what they can do rather than by what a stall did to one of
 *     their runs;
 *   - typical: a moving average (1/8), to predict a run's duration.
 *
 * The preferred size is the bound of the largest bucket whose `low` is
 * within LEARN_TOLERANCE of the best bucket's, among the buckets with
 * LEARN_MIN_RUNS runs, and only when a larger bucket was measured too (and
 * so is slower per sample by more than the tolerance): the batcher never
 * caps batches on the guess that a size it has not seen is slower. Sizes
 * within the tolerance count as equally fast and the largest wins, so a
 * model whose cost per sample keeps falling (or flattens) gets no
 * preferred size and batches stay as large as the queue allows. A larger
 * class as fast replaces the preferred one at once; a smaller one only
 * once the preferred one is beyond twice the tolerance (hysteresis against
 * noise).
 *
 * Exploring: a bucket with fewer than LEARN_MIN_RUNS runs, or none for
 * LEARN_STALE_BATCHES batches, is measured by capping a batch at its bound
 * (learn_cap), at most every LEARN_EXPLORE_EVERY-th batch, and only when
 * the queued requests fill a whole batch: exploring never makes a batch
 * wait for requests, and changes nothing at light load (where the batch
 * size hardly matters: the instances have time to spare).
 *
 * Not thread-safe: the scheduler calls it under its lock. No allocation.
 */
#ifndef INFERD_SCHED_LEARN_H
#define INFERD_SCHED_LEARN_H

#include <stdbool.h>
#include <stdint.h>

/* Size classes: 1, 2, (2, 4], ... (2^31, 2^32 - 1]. */
#define LEARN_BUCKETS 33
/* Runs before a class is compared with the others. */
#define LEARN_MIN_RUNS 4
/* Equally fast: within 1/LEARN_TOLERANCE_DIV of the best time per sample. */
#define LEARN_TOLERANCE_DIV 8
/* A class not run for this many batches is measured again. */
#define LEARN_STALE_BATCHES 256
/* At most one exploring batch in this many. */
#define LEARN_EXPLORE_EVERY 2

struct learn_bucket {
    uint64_t low_x64;     /* ns per sample x 64; 0 = never run */
    uint64_t typical_x64; /* ns per sample x 64, moving average */
    uint32_t runs;        /* saturates */
    uint64_t last_run;    /* struct learn's `batches` at its last run */
};

struct learn {
    uint32_t max_batch; /* samples; the last class ends here */
    uint32_t nbuckets;
    uint32_t preferred; /* 0: none (batches as large as the queue allows) */
    uint64_t batches;   /* runs noted */
    uint64_t explored;  /* `batches` when learn_cap last explored */
    struct learn_bucket b[LEARN_BUCKETS];
};

/* A moving estimate: *est moves 1/2^shift of the way to x (the first x
 * is taken whole); never 0 once set. */
static inline void learn_ewma(uint64_t *est, uint64_t x, unsigned shift)
{
    if (!*est)
        *est = x;
    else if (x >= *est)
        *est += (x - *est) >> shift;
    else
        *est -= (*est - x) >> shift;
    if (!*est)
        *est = 1;
}

/* max_batch: the model's max_batch_size (> 1). */
void learn_init(struct learn *l, uint32_t max_batch);

/* A successful run of `samples` samples that took ns. Returns whether the
 * preferred size changed. Runs of more than max_batch samples (oversize
 * requests) are not counted. */
bool learn_note(struct learn *l, int64_t samples, uint64_t ns);

/* The number of samples to cap the next batch at (0: max_batch, no cap):
 * a class to explore (*exploring set), or the preferred size. `head`: the
 * samples of the request the batch starts with (no class below it can be
 * made); `full`: the queued requests fill a whole batch (max_batch
 * samples, or the next one does not fit), the only time a class is
 * explored. A batch may be planned and not run (another thread runs it):
 * the caller says when an exploring batch is taken (learn_explored). */
uint32_t learn_cap(const struct learn *l, int64_t head, bool full, bool *exploring);
void learn_explored(struct learn *l);

/* The typical run of a batch of `samples`, from its class once measured;
 * 0 when it is not. */
uint64_t learn_predict_ns(const struct learn *l, int64_t samples);

/* The size class of `samples` (>= 1), and the largest size in class i. */
uint32_t learn_bucket_of(int64_t samples);
uint32_t learn_bound(const struct learn *l, uint32_t i);

#endif
