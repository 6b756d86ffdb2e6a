/*
 * bad_backend: broken backend plugins for tests/unit/test_plugin.c, one
 * library per BAD_* definition (see CMakeLists.txt):
 *   BAD_ABI     the table says ABI version 99
 *   BAD_REFUSE  inferd_backend_init returns NULL
 *   BAD_NOSYM   no inferd_backend_init at all
 *   BAD_NULLFN  the table has no execute function
 *   BAD_OUTPUT  a working load (input x, output y: FP32 [-1]; with a
 *               parameter "fail_load" it fails with status 404 and "nope")
 *               whose execute returns an output with a wrong nbytes;
 *               bad_release_count counts release() calls
 */
#include <stddef.h>
#include <string.h>

#include <inferd/backend.h>

static const struct inferd_model_io bad_ios[2] = {
    {.name = "x", .dtype = INFERD_DTYPE_FP32, .ndim = 1, .dims = {-1}},
    {.name = "y", .dtype = INFERD_DTYPE_FP32, .ndim = 1, .dims = {-1}},
};
static float bad_data[2];

static int bad_load(const struct inferd_backend_load_args *args, void **instance,
                    struct inferd_model_info *info, struct inferd_error *err)
{
    for (uint32_t i = 0; i < args->nparameters; i++) {
        if (strcmp(args->parameters[i].key, "fail_load") == 0) {
            err->status = 404;
            strcpy(err->msg, "nope");
            return -1;
        }
    }
    *instance = (void *)bad_ios;
    *info = (struct inferd_model_info){
        .ninputs = 1, .noutputs = 1, .inputs = &bad_ios[0], .outputs = &bad_ios[1]};
    return 0;
}

static int bad_execute(void *instance, const struct inferd_tensor *inputs, uint32_t nin,
                       const char *const *output_names, uint32_t nout,
                       struct inferd_tensor *outputs, void **state, struct inferd_error *err)
{
    (void)instance, (void)inputs, (void)nin, (void)output_names, (void)nout, (void)err;
    outputs[0].dtype = INFERD_DTYPE_FP32;
    outputs[0].ndim = 1;
    outputs[0].shape[0] = 2;
    outputs[0].data = bad_data;
    outputs[0].nbytes = 4; /* should be 8 */
    *state = bad_data;
    return 0;
}

/* Read by the test (dlsym) to see that the adapter released a bad output. */
int bad_release_count;

static void bad_release(void *instance, void *state)
{
    (void)instance, (void)state;
    bad_release_count++;
}

static void bad_unload(void *instance)
{
    (void)instance;
}

static const struct inferd_backend_api bad_api = {
#ifdef BAD_ABI
    .abi_version = 99,
#else
    .abi_version = INFERD_BACKEND_ABI_VERSION,
#endif
    .name = "bad",
    .load = bad_load,
#ifndef BAD_NULLFN
    .execute = bad_execute,
#endif
    .release = bad_release,
    .unload = bad_unload,
};

#ifdef BAD_NOSYM
const struct inferd_backend_api *not_the_entry_point(uint32_t host_abi_version);
const struct inferd_backend_api *not_the_entry_point(uint32_t host_abi_version)
#else
const struct inferd_backend_api *inferd_backend_init(uint32_t host_abi_version)
#endif
{
    (void)host_abi_version;
    (void)bad_execute; /* unused with BAD_NULLFN */
#ifdef BAD_REFUSE
    return (void)&bad_api, NULL;
#else
    return &bad_api;
#endif
}
