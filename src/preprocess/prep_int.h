/*
 * prep_int.h: what prep_attach.c, prep_stage.c and prep_obs.c share: the
 * preprocessing of one model version (m->prep) and its statistics.
 */
#ifndef INFERD_PREPROCESS_PREP_INT_H
#define INFERD_PREPROCESS_PREP_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "obs/metrics.h"
#include "preprocess/modality.h"
#include "preprocess/prep.h"

/* One raw input of preprocess.json. */
struct prep_raw {
    const char *name;   /* m->info.inputs[raw_index].name */
    uint32_t raw_index; /* in m->info.inputs */
    const struct prep_modality *mod;
    void *cfg;
    uint32_t nout;
    struct prep_output outs[PREP_MAX_OUTPUTS];
    uint32_t feed[PREP_MAX_OUTPUTS]; /* the fed input, in m->run_info.inputs */
};

/* Statuses counted by inferd_preprocess_errors_total. */
enum prep_error_kind {
    PREP_ERR_400,
    PREP_ERR_413,
    PREP_ERR_499,
    PREP_ERR_503,
    PREP_ERR_500,
    PREP_ERR_KINDS
};

/* Histogram slots: 0 is "queue", the others the modalities' steps as they
 * first occur (names are static strings, compared by content). */
#define PREP_STAT_SLOTS (PREP_MAX_STAGES * PREP_MAX_INPUTS + 1)

struct prep_stats {
    _Atomic(const char *) stage[PREP_STAT_SLOTS];
    struct metrics_hist hist[PREP_STAT_SLOTS];
    _Atomic uint64_t errors[PREP_ERR_KINDS];
};

struct model_prep {
    struct prep_raw raw[PREP_MAX_INPUTS];
    uint32_t nraw;
    uint32_t graph_ninputs; /* m->run_info.ninputs */
    bool batched;
    const struct model *model; /* its version (names, run_info) */
    struct prep_stats stats;
    struct model_prep *next; /* prep_obs.c's list */
};

extern const struct metrics_hist_spec prep_duration_spec;

/* prep_obs.c: the list the metrics are written from. */
void prep_obs_register(struct model_prep *mp);
void prep_obs_unregister(struct model_prep *mp);
/* One step's time (ns) into its histogram. */
void prep_obs_step(struct model_prep *mp, const char *stage, uint64_t ns);
void prep_obs_error(struct model_prep *mp, int status);

#endif
