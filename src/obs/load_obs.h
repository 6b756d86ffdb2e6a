/*
 * load_obs: what obs/ records about model loads — failures counted by
 * model and kind (model_failure_kind_name: config, layout, io, backend,
 * load, warmup; never the free text, so the label set stays small) and the
 * outcome of each model's last load — for /metrics
 * (inferd_model_load_failures_total, inferd_model_last_load_success).
 *
 * The repository manager sits below obs/: it reports through
 * repository_options.observe_load and observe_gone (repository.h), which
 * the program (src/cli/main.c) sets to load_obs_record and load_obs_forget.
 * Loads are rare and off the hot path, so one mutex guards the table.
 *
 * The table holds at most LOAD_OBS_MAX_MODELS models. A model that is
 * forgotten keeps its counters (a counter never goes backwards) until its
 * slot is needed by a new model when the table is full; a new model that
 * finds no free slot is not recorded (logged once).
 */
#ifndef INFERD_OBS_LOAD_OBS_H
#define INFERD_OBS_LOAD_OBS_H

#include <stdint.h>

#include "base/buf.h"
#include "model/model.h"

#define LOAD_OBS_MAX_MODELS 4096

/* A load of `name` ended with failures[0..nfailures) (none: success): each
 * failure counts once under its kind; the last outcome becomes success
 * exactly when nfailures is 0. Any thread; matches
 * repository_options.observe_load. */
void load_obs_record(const char *name, const struct model_failure *failures,
                     uint32_t nfailures);
/* `name` left the repository or was unloaded: its last-outcome gauge goes
 * away; its counters stay. Any thread; matches repository_options.observe_gone. */
void load_obs_forget(const char *name);

/* Appends both families (text format 0.0.4) to b, models in name order. */
void load_obs_write(struct buf *b);

#endif
