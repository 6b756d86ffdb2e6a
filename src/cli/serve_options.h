/*
 * serve_options: the settings of `inferd serve`, from its command line and
 * from the keys of a --config file (cli/config_file.h), validated by one
 * function so that both accept the same values with the same messages.
 *
 * Every flag `--name` is the file key `name`; serve_option_apply() applies
 * one (flag or key) to a struct serve_options. Precedence is the caller's
 * order: serve_options_defaults(), then the file's keys, then
 * serve_cmdline_apply() (a repeatable flag on the command line replaces the
 * file's values instead of adding to them), then serve_options_check() for
 * the rules between flags.
 *
 * Strings in struct serve_options point at the command line or at the
 * file's tree (cli/config_file.h), which must outlive them.
 */
#ifndef INFERD_CLI_SERVE_OPTIONS_H
#define INFERD_CLI_SERVE_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "api/cors.h"
#include "api/obs_sources.h"
#include "base/error.h"
#include "gen/engine.h"
#include "http/server.h"
#include "model/repository.h"
#include "net/tls.h"
#include "obs/accesslog.h"
#include "obs/otlp.h"
#include "obs/trace.h"
#include "obs/usage.h"

#define MAX_LOAD_MODELS 256

struct serve_options {
    struct repository_options repo;
    const char *load_models[MAX_LOAD_MODELS];
    struct http_server_config http;
    int io_threads;            /* 0: --io-threads not given, see default_io_threads() */
    int worker_threads;        /* 0: --worker-threads not given: one per usable CPU */
    uint64_t inline_budget_us; /* run to completion under this estimate */
    uint32_t exit_timeout_secs;
    struct tls_options tls; /* cert_file NULL: plaintext */
    bool http3;             /* --http3: HTTP/3 on UDP, the HTTP port's number */
    bool http3_0rtt;        /* --http3-0rtt: accept TLS early data */
    int metrics_port;       /* -1 = --no-metrics */
    struct obs_sources obs;
    uint64_t grpc_max_message_bytes;
    struct cors cors; /* --cors-allow-origin (api/cors.h) */
    const char *server_name; /* --server-name (api/server_info.h) */
    uint64_t sse_keepalive_ms;
    uint32_t stream_resume_secs; /* api/streams.h */
    /* Logging, access log and tracing (obs/). */
    int log_level;                      /* enum log_level */
    struct accesslog_config access_log; /* path NULL = off */
    int log_format;                     /* enum log_line_format; -1 = not given */
    struct trace_settings trace;
    struct otlp_config otlp;    /* endpoint NULL = no export */
    struct gen_settings gen;    /* generative models (gen/engine.h) */
    struct usage_options usage; /* token metering (obs/usage.h); path NULL: in memory */
    int preprocess_threads;     /* 0: --preprocess-threads not given: one per usable CPU */
    int preprocess_queue;       /* requests waiting for a preprocessing worker */
    /* Registration in etcd (cluster/registration.h); endpoints NULL: off. */
    struct {
        const char *endpoints;      /* --etcd-endpoints */
        const char *prefix;         /* --etcd-prefix */
        uint32_t lease_ttl_s;       /* --etcd-lease-ttl */
        const char *advertise_host; /* NULL: see cli/cluster_setup.h */
        const char *instance_id;    /* NULL: hostname:http-port */
    } etcd;
};

/* The flags; each is also a file key (but for help, config, check-config). */
enum serve_option_id {
    SERVE_OPT_REPO = 256,
    SERVE_OPT_CONTROL_MODE,
    SERVE_OPT_POLL_SECS,
    SERVE_OPT_LOAD_MODEL,
    SERVE_OPT_BACKEND_DIR,
    SERVE_OPT_HOST,
    SERVE_OPT_PORT,
    SERVE_OPT_IO_THREADS,
    SERVE_OPT_WORKER_THREADS,
    SERVE_OPT_INLINE_BUDGET,
    SERVE_OPT_MAX_REQUEST_LINE,
    SERVE_OPT_MAX_HEADER_BYTES,
    SERVE_OPT_MAX_HEADERS,
    SERVE_OPT_MAX_BODY,
    SERVE_OPT_MAX_CONNECTIONS,
    SERVE_OPT_HEADER_TIMEOUT,
    SERVE_OPT_IDLE_TIMEOUT,
    SERVE_OPT_QUEUE_LIMIT,
    SERVE_OPT_QUEUE_BUDGET,
    SERVE_OPT_MODEL_MEMORY_BUDGET,
    SERVE_OPT_EXIT_TIMEOUT,
    SERVE_OPT_WRITE_TIMEOUT,
    SERVE_OPT_INTRA,
    SERVE_OPT_INTER,
    SERVE_OPT_LOG_LEVEL,
    SERVE_OPT_LOG_FORMAT,
    SERVE_OPT_ACCESS_LOG,
    SERVE_OPT_ACCESS_LOG_SAMPLE,
    SERVE_OPT_TRACE_RATE,
    SERVE_OPT_OTLP_ENDPOINT,
    SERVE_OPT_OTLP_INTERVAL,
    SERVE_OPT_GRPC_PORT,
    SERVE_OPT_H2_STREAMS,
    SERVE_OPT_TLS_CERT,
    SERVE_OPT_TLS_KEY,
    SERVE_OPT_TLS_CLIENT_CA,
    SERVE_OPT_METRICS_PORT,
    SERVE_OPT_NO_METRICS,
    SERVE_OPT_GRPC_MAX_MESSAGE,
    SERVE_OPT_SSE_KEEPALIVE,
    SERVE_OPT_STREAM_RESUME,
    SERVE_OPT_KV_CACHE_BYTES,
    SERVE_OPT_MAX_RUNNING_SEQUENCES,
    SERVE_OPT_PREFILL_CHUNK,
    SERVE_OPT_USAGE_FILE,
    SERVE_OPT_USAGE_RETENTION,
    SERVE_OPT_PREPROCESS_THREADS,
    SERVE_OPT_PREPROCESS_QUEUE,
    SERVE_OPT_CORS_ORIGIN,
    SERVE_OPT_HTTP3,
    SERVE_OPT_HTTP3_0RTT,
    SERVE_OPT_ETCD_ENDPOINTS,
    SERVE_OPT_ETCD_PREFIX,
    SERVE_OPT_ETCD_LEASE_TTL,
    SERVE_OPT_ADVERTISE_HOST,
    SERVE_OPT_INSTANCE_ID,
    SERVE_OPT_SERVER_NAME,
    SERVE_OPT_NO_PREFIX_CACHE,
    SERVE_OPT_CONFIG,       /* command line only */
    SERVE_OPT_CHECK_CONFIG, /* command line only */
};

/* What a flag takes. */
enum serve_option_kind {
    SERVE_OPTION_VALUE,    /* --name VALUE */
    SERVE_OPTION_REPEATED, /* --name VALUE, repeatable (a sequence in the file) */
    SERVE_OPTION_SWITCH,   /* --name (true/false in the file) */
};

/* The flag `name` that a file may set (help, config and check-config are
 * not keys): 0 with *id and *kind set, or -1. */
int serve_option_find(const char *name, int *id, enum serve_option_kind *kind);
/* The name of a flag, without the dashes. */
const char *serve_option_name(int id);
/* True for the flags a SIGHUP reload applies (log-level, access-log-sample,
 * trace-rate); a change of any other needs a restart. */
bool serve_option_reloadable(int id);

void serve_options_defaults(struct serve_options *o);

/* Applies one flag: value is its argument, NULL for a switch. Returns 0, or
 * -1 with a 400 in err whose message says what was expected (without the
 * flag's name, which the caller puts in front), e.g. "expected a number
 * from 0 to 65535, got '70000'". Flag values are settings, not secrets, and
 * are echoed. Nothing else changes on error. */
int serve_option_apply(struct serve_options *o, int id, const char *value, struct error *err);

/* The rules between flags (--load-model needs explicit mode, --tls-cert
 * and --tls-key go together, ...). 0, or ST_ERROR with the message in err. Also
 * points o->repo.load_models at o->load_models. */
int serve_options_check(struct serve_options *o, struct error *err);

/* ---- the command line ----------------------------------------------------- */

struct serve_flag {
    int id;
    const char *value; /* into argv; NULL for a switch */
};

struct serve_cmdline {
    const char *config_path;  /* --config or --check-config FILE; NULL: none */
    bool check_only;          /* --check-config */
    struct serve_flag *flags; /* every other flag, in order (mem_ heap) */
    uint32_t nflags;
};

extern const char serve_usage_text[];

/* Reads argv (argv[0] = "serve") with getopt and checks every value as
 * serve_option_apply does. --help prints serve_usage_text and exits 0; an
 * unknown flag, a bad value or a stray argument prints "inferd: --flag:
 * ..." (as always) and exits 2, as does running out of memory. */
void serve_cmdline_parse(int argc, char **argv, struct serve_cmdline *out);
/* Applies the flags to o, after the file's keys (see the top comment).
 * Cannot fail: the values were checked by serve_cmdline_parse. */
void serve_cmdline_apply(const struct serve_cmdline *c, struct serve_options *o);
/* True when the command line sets flag id (its file value is overridden). */
bool serve_cmdline_has(const struct serve_cmdline *c, int id);
void serve_cmdline_free(struct serve_cmdline *c);

/* ---- settings a reload applies ---------------------------------------------- */

/* The reloadable settings as applied to the running process. */
struct serve_runtime {
    int log_level;
    double access_log_sample;
    double trace_rate;
};

void serve_runtime_of(const struct serve_options *o, struct serve_runtime *out);
/* Applies the settings of next that differ from *cur (and logs each as
 * "config: <key> is now <value>"), then *cur = *next. Settings changed at
 * run time through the logging and trace APIs stay as they are unless the
 * file changes them. Any thread. */
void serve_runtime_apply(struct serve_runtime *cur, const struct serve_runtime *next);

#endif
