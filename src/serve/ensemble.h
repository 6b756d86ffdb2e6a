/*
 * ensemble: runs the versions of ensemble models (config.pbtxt's
 * platform "ensemble" with ensemble_scheduling, model/config.h), as Triton
 * does: a request's tensors flow through the steps, each a served model,
 * and the ensemble answers with the tensors its outputs name.
 *
 * ensemble_attach is the registry's attach_ensemble hook: the version's
 * engine (struct model_engine_ops) takes each request from the submit
 * stage. Every step is an internal call through the serving pipeline
 * (serve/call.h) on the request's own I/O thread, so a step may be any
 * model the server serves: ONNX, a backend plugin, a preprocessing model
 * (raw images, audio, text), a remote version behind the gateway, another
 * ensemble. A step runs as soon as every tensor its input_map takes is
 * there; independent steps run at once. A step's inputs point at the
 * ensemble's tensors (no copy); its outputs are copied once into the
 * request's memory.
 *
 * The steps carry the client's headers, so its API key must allow every
 * step's model too; each step is counted in its own model's statistics and
 * metrics, the whole request in the ensemble's. A step's failure fails
 * the request with the step's status and a message naming the step:
 * "in ensemble 'e', step 1 ('m'): <the step's error>" (for a nested
 * ensemble, the innermost one's message). Ensembles nest at
 * most ENSEMBLE_MAX_DEPTH deep (a deeper one, e.g. a cycle through two
 * ensembles, is refused with a 400).
 */
#ifndef INFERD_SERVE_ENSEMBLE_H
#define INFERD_SERVE_ENSEMBLE_H

#include "base/error.h"
#include "model/version.h"

#define ENSEMBLE_MAX_DEPTH 8

int ensemble_attach(struct model *m, struct error *err);

#endif
