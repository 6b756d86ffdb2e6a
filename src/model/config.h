/*
 * config: a model's configuration, Triton's ModelConfig as inferd uses it.
 *
 * Sources: `<repo>/<model>/config.pbtxt` (protobuf text format, parsed by
 * model_config_parse), completed and checked against the ONNX model's own
 * inputs and outputs by model_config_check; or, without a config.pbtxt,
 * derived from the ONNX model alone by model_config_from_onnx. The result is
 * the model's effective configuration: the scheduler reads dynamic_batching
 * and instance_groups, the registry reads version_policy, and GET
 * /v2/models/{m}/config returns model_config_write_json.
 *
 * Three parts, one responsibility each, in the sections below: parsing
 * (config_parse.c, with one file per section of config.pbtxt, see
 * config_parse.h; the struct's lifecycle in config_arena.c), checking and
 * completing (config_check.c), and the JSON forms (config_json.c).
 *
 * Lifecycle: a struct model_config is filled by model_config_parse or
 * model_config_from_onnx, completed in place by model_config_check, and
 * released by model_config_free. All its strings and arrays live in its own
 * arena (`_arena`): they stay valid until model_config_free, and pointers to
 * them must not outlive it. A struct model_config may be moved with memcpy
 * (the source is then forgotten, not freed). Not thread-safe while it is
 * being filled; read-only afterwards, from any thread.
 *
 * Dims: `dims` are the shape clients see, without the batch dimension when
 * max_batch_size > 0 (the model's tensors are then [-1] + dims); -1 is a
 * variable dimension. When `has_reshape`, the model itself sees `reshape`
 * (again without the batch dimension) and the server reshapes between the
 * two; their element counts agree.
 */
#ifndef INFERD_MODEL_CONFIG_H
#define INFERD_MODEL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "base/arena.h"
#include "base/error.h"
#include "base/json.h"
#include "core/dtype.h"
#include "core/tensor.h"

/* Largest config.pbtxt accepted, in bytes. */
#define MODEL_CONFIG_MAX_TEXT (1u << 20)
/* max_batch_size given to a batchable model that has no config.pbtxt. */
#define MODEL_CONFIG_DEFAULT_MAX_BATCH 64
/* max_queue_delay_microseconds given with it: none, as Triton's
 * `dynamic_batching { }`. Batches still form from the requests that queue
 * while an instance is busy or arrive together; a timed wait would cost a
 * lone request its length and a timer wake-up (measured: 286 us instead
 * of 83 us for `simple` with 100). */
#define MODEL_CONFIG_DEFAULT_QUEUE_DELAY_US 0

enum model_io_format { MODEL_IO_FORMAT_NONE, MODEL_IO_FORMAT_NHWC, MODEL_IO_FORMAT_NCHW };

struct model_config_io {
    char *name;
    enum dtype dtype; /* DT_INVALID only between parse and check */
    uint32_t ndim;
    int64_t dims[TENSOR_MAX_DIMS]; /* without the batch dim; -1 = variable */
    bool has_dims;                 /* false only between parse and check */
    bool has_reshape;
    uint32_t reshape_ndim; /* 0 with has_reshape: a scalar per batch row */
    int64_t reshape[TENSOR_MAX_DIMS];
    enum model_io_format format; /* inputs only; informational */
    bool optional;               /* inputs only: requests may omit it */
    char *label_filename;        /* outputs only; "" if none */
    bool autocompleted;          /* taken from the ONNX model, not config.pbtxt */
};

enum model_timeout_action { MODEL_TIMEOUT_REJECT, MODEL_TIMEOUT_DELAY };

struct model_queue_policy {
    enum model_timeout_action timeout_action;
    uint64_t default_timeout_us; /* 0 = requests do not time out in the queue */
    bool allow_timeout_override; /* a request's `timeout` may shorten it */
    uint32_t max_queue_size;     /* 0 = no per-policy limit (the server's applies) */
};

struct model_priority_policy {
    uint64_t level; /* 1 .. priority_levels */
    struct model_queue_policy policy;
};

struct model_dynamic_batching {
    bool enabled;
    uint32_t npreferred;
    int32_t *preferred_batch_size; /* each 1 .. max_batch_size */
    /* The text gave none: the check filled in max_batch_size, as Triton's
     * autocomplete does (the scheduler learns its own then). */
    bool _preferred_autocompleted;
    uint64_t max_queue_delay_us;
    bool preserve_ordering;
    uint64_t priority_levels;        /* 0 = no priorities */
    uint64_t default_priority_level; /* 1 .. priority_levels, or 0 without levels */
    struct model_queue_policy default_queue_policy;
    /* The text has default_queue_policy or priority_queue_policy: the
     * model has a queue policy of its own (no server queue budget). */
    bool _queue_policy_set;
    uint32_t npriority_policies;
    struct model_priority_policy *priority_queue_policy; /* distinct levels */
};

/* sequence_batching (Triton's ModelSequenceBatching): a stateful model.
 * Requests carry a correlation id and start/end flags; the server feeds
 * the model's control inputs and keeps its implicit state between the
 * requests of a sequence (serve/sequence.h). Control and state tensors are
 * inputs and outputs of the ONNX model but not of the config: clients
 * neither send nor see them. */
enum model_seq_control_kind { /* Triton's Control.Kind, in its order */
    MODEL_SEQ_START,  /* CONTROL_SEQUENCE_START: true on a sequence's first request */
    MODEL_SEQ_READY,  /* CONTROL_SEQUENCE_READY: true on every request */
    MODEL_SEQ_END,    /* CONTROL_SEQUENCE_END: true on its last */
    MODEL_SEQ_CORRID, /* CONTROL_SEQUENCE_CORRID: the correlation id */
};
/* The config.pbtxt spelling of a control kind ("CONTROL_SEQUENCE_START"). */
const char *model_seq_control_name(enum model_seq_control_kind k);
struct model_seq_control {
    char *input; /* the model input it feeds (control_input.name) */
    enum model_seq_control_kind kind;
    /* INT32 (int32_false_true), FP32 (fp32_false_true), BOOL
     * (bool_false_true); CORRID: its data_type (UINT64, INT64, UINT32,
     * INT32 or BYTES for TYPE_STRING). */
    enum dtype dtype;
    int32_t int32_false_true[2];
    float fp32_false_true[2];
    bool bool_false_true[2];
};
struct model_seq_state {
    char *input_name, *output_name;
    enum dtype dtype;
    uint32_t ndim;
    int64_t dims[TENSOR_MAX_DIMS]; /* without the batch dim; the initial state's shape */
};
struct model_sequence_batching {
    bool enabled;
    bool oldest;                   /* the oldest strategy (else direct) */
    uint64_t max_sequence_idle_us; /* default 1000000, as Triton */
    uint32_t max_candidate_sequences; /* oldest; informational */
    uint64_t max_queue_delay_us;      /* of the strategy: batching across sequences */
    uint32_t npreferred;
    int32_t *preferred_batch_size;
    uint32_t ncontrols;
    struct model_seq_control *controls; /* distinct inputs */
    uint32_t nstates;
    struct model_seq_state *states;     /* distinct inputs and outputs */
};
#define MODEL_SEQ_DEFAULT_IDLE_US 1000000

/* ensemble_scheduling (Triton's ModelEnsembling), with platform
 * "ensemble": a pipeline of other served models (serve/ensemble.h). Each
 * step runs model_name (model_version -1: the version the model serves by
 * default), its inputs taken from the ensemble's tensors (input_map: the
 * step model's input -> the ensemble tensor) and its outputs giving
 * ensemble tensors (output_map: the step model's output -> the ensemble
 * tensor). */
struct model_map_entry {
    char *key, *value;
};
struct model_ensemble_step {
    char *model_name;
    int64_t model_version; /* -1: the model's default version */
    uint32_t ninputs, noutputs;
    struct model_map_entry *input_map, *output_map; /* distinct keys */
};
#define MODEL_ENSEMBLE_MAX_STEPS 64
struct model_ensemble {
    bool enabled;
    uint32_t nsteps;
    struct model_ensemble_step *steps;
};

/* KIND_GPU is rejected at parse time; KIND_AUTO becomes KIND_CPU in check. */
enum model_instance_kind { MODEL_INSTANCE_AUTO, MODEL_INSTANCE_CPU, MODEL_INSTANCE_MODEL };

struct model_instance_group {
    char *name; /* "" between parse and check, then "<model>_<index>" if unnamed */
    enum model_instance_kind kind;
    int32_t count; /* instances in the group, >= 1 */
};

enum model_version_policy_kind {
    MODEL_VERSIONS_LATEST,   /* the num_versions highest versions */
    MODEL_VERSIONS_ALL,      /* every version directory */
    MODEL_VERSIONS_SPECIFIC, /* exactly the listed versions */
};

struct model_version_policy {
    enum model_version_policy_kind kind;
    uint32_t num_versions; /* LATEST: >= 1 */
    uint32_t nversions;    /* SPECIFIC: >= 1 */
    int64_t *versions;     /* SPECIFIC: each >= 0, in config order */
};

enum model_warmup_source { MODEL_WARMUP_ZERO, MODEL_WARMUP_RANDOM, MODEL_WARMUP_FILE };

struct model_warmup_input {
    char *name;
    enum dtype dtype;
    uint32_t ndim;
    int64_t dims[TENSOR_MAX_DIMS]; /* without the batch dim; all >= 1 */
    enum model_warmup_source source;
    char *input_data_file; /* FILE: a file name in <model>/warmup/; else "" */
};

struct model_warmup {
    char *name;
    uint32_t batch_size; /* 1 .. max(1, max_batch_size) */
    uint32_t count;      /* executions; 0 means once (Triton's default) */
    uint32_t ninputs;
    struct model_warmup_input *inputs; /* distinct names */
};

struct model_parameter {
    char *key;
    char *string_value;
};

/* A field Triton knows that inferd does not use: reported as a warning. */
struct model_config_ignored {
    char *path;         /* e.g. "optimization", "instance_group.rate_limiter" */
    uint32_t line, col; /* first occurrence in config.pbtxt */
};

struct model_config {
    char *name;             /* "" until check fills in the directory name */
    char *platform;         /* "" or "onnxruntime_onnx" (check fills it in; "" with a plugin) */
    char *backend;          /* "", "onnxruntime" (check fills it in) or a plugin's name */
    int32_t max_batch_size; /* 0 = no batch dimension */
    uint32_t ninputs, noutputs;
    struct model_config_io *inputs, *outputs;
    struct model_dynamic_batching dynamic_batching;
    struct model_sequence_batching sequence_batching;
    struct model_ensemble ensemble; /* platform "ensemble" */
    uint32_t ninstance_groups;
    struct model_instance_group *instance_groups; /* >= 1 after check */
    struct model_version_policy version_policy;   /* default: latest 1 */
    /* model_transaction_policy { decoupled: true }: the model sends zero or
     * more responses per request (backend execute_stream). */
    bool decoupled;
    uint32_t nwarmups;
    struct model_warmup *warmups;
    uint32_t nparameters;
    struct model_parameter *parameters; /* distinct keys, config order */
    /* parameters { key: "padding_budget" } (an inferd extension): the
     * zeros variable-length batching may add, as a fraction of a batch's
     * input elements; 0 = off. Set by model_config_check. */
    double padding_budget;
    uint32_t nignored;
    struct model_config_ignored *ignored; /* distinct paths */

    bool _max_batch_size_set; /* the text set max_batch_size */
    struct arena _arena;
};

/* ==== Parsing (config_parse.c), and the struct's lifecycle (config_arena.c) */

/*
 * Parses config.pbtxt text[0..len) into *cfg (which need not be
 * initialized; previous contents are overwritten, not freed). On success
 * returns 0 and cfg owns its memory (free with model_config_free); fields
 * the text does not set have Triton's defaults (version_policy latest 1,
 * no dynamic batching, no instance groups yet). Fields Triton knows but
 * inferd does not use are listed in cfg->ignored for the caller to log.
 * On error returns ST_ERROR with err->status 400 and err->msg
 * "line:col: field.path: message" (syntax errors, unknown fields, values
 * of the wrong kind or range, duplicated singular fields, GPU instance
 * groups, inconsistent batching settings), or 500 if memory ran
 * out; cfg is then left empty (model_config_free is allowed, not needed).
 */
int model_config_parse(const char *text, size_t len, struct model_config *cfg, struct error *err);

/* Releases everything cfg owns and leaves it empty. Idempotent. */
void model_config_free(struct model_config *cfg);

/* An empty config with Triton's defaults (name, platform and backend "",
 * version_policy latest 1), owning an empty arena: what the parser and
 * model_config_from_onnx start from. Free with model_config_free. */
void model_config_init(struct model_config *cfg);

/* count * size zeroed bytes, or a NUL-terminated copy of s[0..n), from
 * cfg's arena (freed with cfg). NULL with err set when that fails: 400
 * "the model configuration is too large" at the arena's ceiling, else 500. */
void *model_config_alloc(struct model_config *cfg, size_t count, size_t size, struct error *err);
char *model_config_strndup(struct model_config *cfg, const char *s, size_t n, struct error *err);

/* The config.pbtxt spelling of an enum value ("FORMAT_NHWC", "REJECT"). */
const char *model_io_format_name(enum model_io_format f);
const char *model_timeout_action_name(enum model_timeout_action a);

/* ==== Checking and completing against the model (config_check.c) ======== */

/*
 * Checks a parsed config against the model directory name and the ONNX
 * model's inputs and outputs, and completes it in place the way Triton's
 * autocomplete does: name, platform and backend are filled in; inputs and
 * outputs the config does not list (or lists without data_type / dims) are
 * taken from the ONNX model; an unnamed instance group is named
 * "<model>_<index>", KIND_AUTO becomes KIND_CPU, and a config without
 * instance groups gets one KIND_CPU group of 1 instance; dynamic batching
 * without preferred sizes prefers max_batch_size. A config that sets neither
 * max_batch_size nor any input's or output's dims (it may list tensors
 * without dims, e.g. only for a label_filename) is completed as
 * model_config_from_onnx does.
 * A backend other than "onnxruntime" is a plugin (backend/plugin.h): its
 * name and an empty platform are kept, and nothing is autocompleted, so the
 * config must list every input and output with data_type and dims (see
 * model_config_require_complete); `onnx` is then what the plugin's load
 * reported.
 * Errors (-1, err->status 400, message naming the field and both values):
 * name differs from model_name; unsupported platform, or a platform with a
 * plugin backend; an incomplete config for a plugin backend, or a tensor
 * the plugin reports that the config does not list; a configured
 * input/output the model does not have; data_type or dims that disagree
 * with the model; max_batch_size > 0 with a model tensor whose leading dim
 * is not variable, or with a model without inputs (nothing would carry a
 * request's batch size); warmup samples that do not fit the inputs. `cfg` may be
 * partly completed after an error; free it. `onnx` is only read.
 */
int model_config_check(struct model_config *cfg, const char *model_name,
                       const struct model_info *onnx, struct error *err);

/*
 * The check of an ensemble's config (platform "ensemble", which has no
 * ONNX model): ensemble_scheduling is there; every input and output is
 * complete (data_type, dims), without reshape; no batching section, no
 * warm-up, no step naming the ensemble itself; and the steps form a
 * pipeline: no ensemble tensor produced twice or produced while it is an
 * ensemble input, every step input an ensemble input or some step's
 * output, no cycle, every ensemble output produced. Fills in the name.
 * Whether each step's model has the tensors its maps name is checked when
 * a request runs (the step models load on their own). Returns 0 or
 * ST_ERROR with err (400, naming the step or tensor).
 */
int model_config_check_ensemble(struct model_config *cfg, const char *model_name,
                                struct error *err);
/* Parameters the server reads itself (inferd extensions, e.g.
 * "padding_budget"); they are not passed to plugin backends. */
bool model_config_server_parameter(const char *key);

/* True when cfg names a backend other than the built-in "onnxruntime"
 * (a plugin library, see backend/plugin.h). */
bool model_config_plugin_backend(const struct model_config *cfg);

/* For a plugin backend: 0 when cfg lists at least one output and gives
 * every input and output a data_type and dims; else -1 with err (400)
 * naming the first tensor that lacks one. */
int model_config_require_complete(const struct model_config *cfg, struct error *err);

/*
 * The configuration of a model without config.pbtxt. Every input and output
 * comes from the ONNX model. If the model has inputs and all inputs and
 * outputs have a variable leading dimension, the model is batched:
 * max_batch_size = MODEL_CONFIG_DEFAULT_MAX_BATCH, dims exclude that
 * dimension, and dynamic batching is on with max_queue_delay_microseconds =
 * MODEL_CONFIG_DEFAULT_QUEUE_DELAY_US; otherwise max_batch_size = 0 and dims
 * are the model's. One KIND_CPU instance. Returns 0, or -ENOMEM (cfg is then
 * empty). cfg owns its memory (model_config_free).
 */
int model_config_from_onnx(const char *model_name, const struct model_info *onnx,
                           struct model_config *cfg);

/* Whether `name` is a control or state input (state output) of the
 * config's sequence_batching: fed (kept) by the server, not by clients. */
bool model_config_sequence_input(const struct model_config *cfg, const char *name);
bool model_config_sequence_output(const struct model_config *cfg, const char *name);

/* Index of the config input/output named `name`, or NOT_FOUND. */
int model_config_input_index(const struct model_config *cfg, const char *name);
int model_config_output_index(const struct model_config *cfg, const char *name);

/* ==== JSON (config_json.c) ================================================ */

/*
 * Writes the config as JSON in the shape of Triton's GET
 * /v2/models/{m}/config (protobuf JSON mapping with the proto field names,
 * every scalar field printed, 64-bit integers as numbers). Errors are
 * sticky in the writer's buf.
 */
void model_config_write_json(const struct model_config *cfg, struct json_writer *w);

/*
 * Converts the JSON form of a configuration (Triton's load API
 * `parameters.config`, protobuf JSON mapping) into config.pbtxt text for
 * model_config_parse. On success *text is mem_alloc'd (NUL-terminated; the
 * caller frees it with mem_free); on error -1 with err (400).
 */
int model_config_text_from_json(const char *json, size_t len, char **text, struct error *err);

#endif
