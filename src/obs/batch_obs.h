/*
 * batch_obs: what obs/ records about a model version's backend runs, as the
 * observer of its scheduler (sched.h: struct sched_observer).
 *
 * The scheduler sits below obs/ and does not know statistics or traces: the
 * model layer asks, through registry_options.observe_version (model.h), for
 * an observer before it starts a version's scheduler, and the program
 * (src/cli/main.c) answers with batch_obs_attach. Per backend run the
 * observer records the execution into the version's statistics (stats.h,
 * on success) and the batch span (trace.h, when a member is sampled); per
 * request the scheduler refuses, the reason (stats_record_queue_refusal).
 */
#ifndef INFERD_OBS_BATCH_OBS_H
#define INFERD_OBS_BATCH_OBS_H

#include <stdint.h>

#include "sched/sched.h"

/* Fills *out with the observer of version `version` of model `name`: it
 * holds a reference to stats_model_get(name, version) until its on_stop
 * (none when that is out of memory: then only trace spans are recorded).
 * Manager thread, before sched_start; matches
 * registry_options.observe_version. */
void batch_obs_attach(const char *name, int64_t version, struct sched_observer *out);

#endif
