#include "serve/repo_call.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "base/mem.h"
#include "base/status.h"

struct repo_call {
    struct repo_cmd cmd;
    struct serve_thread *thread;
    struct loop_task task;
    char *config; /* override text, owned */
    serve_repo_done_fn done;
    void *ctx;
};

static void call_free(struct repo_call *rc)
{
    mem_free(rc->config);
    mem_free(rc);
}

static void done_on_loop(struct loop_task *task)
{
    struct repo_call *rc = (struct repo_call *)((char *)task - offsetof(struct repo_call, task));
    struct serve_thread *t = rc->thread;
    rc->done(rc->ctx, rc->cmd.status, rc->cmd.msg);
    call_free(rc);
    if (--t->inflight == 0 && t->on_idle)
        t->on_idle(t->idle_arg);
}

/* Manager thread: bring the answer back to the caller's loop. */
static void done_on_manager(struct repo_cmd *cmd)
{
    struct repo_call *rc = (struct repo_call *)cmd;
    loop_post(rc->thread->loop, &rc->task);
}

static bool name_valid(const char *name, size_t len)
{
    return len > 0 && len < sizeof(((struct repo_cmd *)0)->name) && !memchr(name, '/', len) &&
           !memchr(name, '\0', len) && name[0] != '.';
}

/* Triton's wording first ("failed to load 'm'"), then why. */
static int refuse(struct error *err, bool load, const char *name, size_t name_len, int status,
                  const char *why)
{
    return error_set(err, status, "failed to %s '%.*s': %s", load ? "load" : "unload",
                     (int)(name_len > 200 ? 200 : name_len), name, why);
}

/* The longest component of path p[0..n) ('/'-separated). */
static size_t longest_component(const char *p, size_t n)
{
    size_t longest = 0, run = 0;
    for (size_t i = 0; i < n; i++) {
        run = p[i] == '/' ? 0 : run + 1;
        if (run > longest)
            longest = run;
    }
    return longest;
}

int serve_repo_refuse_param(const char *name, size_t name_len, const char *key, size_t key_len,
                            struct error *err)
{
    static const char file[] = "file:";
    const size_t file_len = sizeof file - 1;
    int shown = key_len > 64 ? 64 : (int)key_len; /* keys are the client's: cut */
    const char *more = key_len > 64 ? "..." : "";
    char why[ERROR_MSG_MAX];
    size_t longest;
    if (key_len < file_len || memcmp(key, file, file_len) != 0)
        snprintf(why, sizeof why, "Unrecognized load parameter '%.*s%s'", shown, key, more);
    else if ((longest = longest_component(key + file_len, key_len - file_len)) > NAME_MAX)
        snprintf(why, sizeof why,
                 "file parameter '%.*s%s' has a path component of %zu bytes (at most %d)", shown,
                 key, more, longest, NAME_MAX);
    else
        snprintf(why, sizeof why,
                 "model file overrides ('%.*s%s') are not supported by inferd: put the files "
                 "in the model repository and load without them",
                 shown, key, more);
    return error_set(err, 500, "failed to load '%.*s', failed to poll from model repository: %s",
                     (int)(name_len > 200 ? 200 : name_len), name, why);
}

int serve_repo_call(struct serve_thread *t, bool load, const char *name, size_t name_len,
                    const char *config_json, size_t config_len, serve_repo_done_fn done,
                    void *ctx, struct error *err)
{
    if (!name_valid(name, name_len))
        return refuse(err, load, name, name_len, 400,
                      "invalid model name: 1 to 255 bytes, no '/', not starting with '.'");
    if (config_json && !load)
        return refuse(err, load, name, name_len, 400, "'config' is only accepted by load");
    struct repo_call *rc = mem_calloc(1, sizeof *rc);
    if (!rc)
        return refuse(err, load, name, name_len, 503, "out of memory");
    struct error why;
    if (config_json &&
        model_config_text_from_json(config_json, config_len, &rc->config, &why) != 0) {
        refuse(err, load, name, name_len, why.status, why.msg);
        goto out_free;
    }
    rc->cmd.kind = load ? REPO_LOAD : REPO_UNLOAD;
    memcpy(rc->cmd.name, name, name_len);
    rc->cmd.name[name_len] = '\0';
    rc->cmd.config = rc->config;
    rc->cmd.done = done_on_manager;
    rc->thread = t;
    rc->task.run = done_on_loop;
    rc->done = done;
    rc->ctx = ctx;
    if (repository_submit(t->repo, &rc->cmd, err) != 0)
        goto out_free;
    t->inflight++;
    return 0;
out_free:
    call_free(rc);
    return ST_ERROR;
}
