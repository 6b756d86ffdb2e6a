/*
 * repeat: an example decoupled inferd backend plugin (include/inferd/
 * backend.h, ABI version 2), in the spirit of Triton's `repeat` example:
 * one request, many responses, sent as they are made.
 *
 * For each element IN[i] of its input it waits DELAY[i] milliseconds, then
 * sends a response with OUT = [IN[i]] and IDX = [i]; the last one is
 * flagged final. An empty IN sends nothing (inferd then ends the request
 * with an empty final response where the protocol has one). When the
 * request is cancelled (the client went away), send() says so and the
 * model stops before its next response.
 *
 *   backend: "repeat"
 *   max_batch_size: 0
 *   model_transaction_policy { decoupled: true }
 *   input [
 *     { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] },
 *     { name: "DELAY" data_type: TYPE_UINT32 dims: [ -1 ] }
 *   ]
 *   output [
 *     { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] },
 *     { name: "IDX" data_type: TYPE_UINT32 dims: [ 1 ] }
 *   ]
 *
 * IN and DELAY must have the same number of elements; a DELAY above one
 * minute is refused (400). The model has no parameters. execute() (the
 * one-response entry point) refuses to run: the model must be configured
 * as decoupled.
 *
 * Build: cc -std=c11 -O2 -shared -fPIC -I<inferd>/include \
 *           -o libinferd_repeat.so repeat.c
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <inferd/backend.h>

#define DELAY_MS_MAX 60000u

static const struct inferd_model_io repeat_inputs[] = {
    {"IN", INFERD_DTYPE_INT32, 1, {-1}},
    {"DELAY", INFERD_DTYPE_UINT32, 1, {-1}},
};
static const struct inferd_model_io repeat_outputs[] = {
    {"OUT", INFERD_DTYPE_INT32, 1, {1}},
    {"IDX", INFERD_DTYPE_UINT32, 1, {1}},
};

static int fail(struct inferd_error *err, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct inferd_error *err, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    err->status = status;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return -1;
}

static int repeat_load(const struct inferd_backend_load_args *args, void **instance,
                       struct inferd_model_info *info, struct inferd_error *err)
{
    if (args->max_batch_size != 0)
        return fail(err, 400, "repeat takes no batch dimension (max_batch_size: 0)");
    if (args->nparameters)
        return fail(err, 400, "repeat has no parameters ('%s' given)", args->parameters[0].key);
    *info = (struct inferd_model_info){.ninputs = 2, .noutputs = 2, .inputs = repeat_inputs,
                                       .outputs = repeat_outputs};
    *instance = (void *)repeat_inputs; /* stateless: any non-NULL pointer */
    return 0;
}

static int repeat_execute(void *instance, const struct inferd_tensor *inputs, uint32_t nin,
                          const char *const *output_names, uint32_t nout,
                          struct inferd_tensor *outputs, void **state, struct inferd_error *err)
{
    (void)instance, (void)inputs, (void)nin, (void)output_names, (void)nout, (void)outputs;
    (void)state;
    return fail(err, 400,
                "repeat is a decoupled model: its config.pbtxt needs "
                "model_transaction_policy { decoupled: true }");
}

static void sleep_ms(uint32_t ms)
{
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000u), .tv_nsec = (long)(ms % 1000u) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static const struct inferd_tensor *find(const struct inferd_tensor *inputs, uint32_t nin,
                                        const char *name)
{
    for (uint32_t i = 0; i < nin; i++)
        if (strcmp(inputs[i].name, name) == 0)
            return &inputs[i];
    return NULL;
}

static int repeat_execute_decoupled(void *instance, const struct inferd_tensor *inputs,
                                    uint32_t nin, const char *const *output_names, uint32_t nout,
                                    const struct inferd_response_sink *sink,
                                    struct inferd_error *err)
{
    (void)instance;
    const struct inferd_tensor *in = find(inputs, nin, "IN"), *delay = find(inputs, nin, "DELAY");
    if (!in || !delay)
        return fail(err, 400, "repeat needs the inputs IN and DELAY");
    size_t n = in->nbytes / sizeof(int32_t);
    if (delay->nbytes / sizeof(uint32_t) != n)
        return fail(err, 400, "IN has %zu elements, DELAY %zu: they must match", n,
                    delay->nbytes / sizeof(uint32_t));
    const int32_t *values = in->data;
    const uint32_t *delays = delay->data;
    for (size_t i = 0; i < n; i++)
        if (delays[i] > DELAY_MS_MAX)
            return fail(err, 400, "DELAY[%zu] = %u ms is above %u", i, delays[i], DELAY_MS_MAX);

    for (size_t i = 0; i < n; i++) {
        sleep_ms(delays[i]);
        int32_t out = values[i];
        uint32_t idx = (uint32_t)i;
        struct inferd_tensor resp[2];
        for (uint32_t k = 0; k < nout; k++) {
            bool is_out = strcmp(output_names[k], "OUT") == 0;
            resp[k] = (struct inferd_tensor){
                .name = output_names[k],
                .dtype = is_out ? INFERD_DTYPE_INT32 : INFERD_DTYPE_UINT32,
                .ndim = 1,
                .shape = {1},
                .data = is_out ? (void *)&out : (void *)&idx,
                .nbytes = 4,
            };
        }
        if (sink->send(sink->ctx, resp, nout, i + 1 == n ? INFERD_RESPONSE_FINAL : 0) !=
            INFERD_SEND_OK)
            return 0; /* cancelled: stop here */
    }
    return 0;
}

static void repeat_release(void *instance, void *state)
{
    (void)instance, (void)state;
}

static void repeat_unload(void *instance)
{
    (void)instance;
}

static const struct inferd_backend_api repeat_api = {
    .abi_version = INFERD_BACKEND_ABI_VERSION,
    .name = "repeat",
    .load = repeat_load,
    .execute = repeat_execute,
    .release = repeat_release,
    .unload = repeat_unload,
    .execute_decoupled = repeat_execute_decoupled,
};

const struct inferd_backend_api *inferd_backend_init(uint32_t host_abi_version)
{
    return host_abi_version >= INFERD_BACKEND_ABI_VERSION ? &repeat_api : NULL;
}
