#include "obs/trace.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "base/clock.h"
#include "base/rand.h"
#include "base/status.h"
#include "obs/otlp.h"

/* ---- ids ---------------------------------------------------------------- */

/* xoshiro256** (Blackman & Vigna), one state per thread. */
static _Thread_local uint64_t rng_state[4];
static _Thread_local bool rng_seeded;

static void rng_seed(void)
{
    uint64_t seed[4] = {0, 0, 0, 0};
    if (getrandom(seed, sizeof seed, 0) != (ssize_t)sizeof seed) {
        /* No entropy source: mix the clock and the thread's address. */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed[0] = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32);
        seed[1] = (uint64_t)(uintptr_t)&rng_state;
        seed[2] = clock_now_ns();
        seed[3] = 0x9e3779b97f4a7c15ull;
    }
    /* splitmix64 over the seed so that no state word is zero. */
    for (int i = 0; i < 4; i++) {
        uint64_t x = seed[i] + 0x9e3779b97f4a7c15ull * (uint64_t)i;
        rng_state[i] = rand_splitmix64(&x);
    }
    rng_seeded = true;
}

static uint64_t rng_next(void)
{
    if (!rng_seeded)
        rng_seed();
    return rand_xoshiro256ss(rng_state);
}

void trace_random(uint8_t *out, size_t n)
{
    while (n) {
        uint64_t v = rng_next();
        size_t k = n < 8 ? n : 8;
        memcpy(out, &v, k);
        out += k;
        n -= k;
    }
}

double trace_random_unit(void)
{
    return rand_unit(rng_next());
}

bool trace_id_is_zero(const uint8_t *id, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (id[i])
            return false;
    return true;
}

void trace_new_trace_id(uint8_t id[TRACE_ID_BYTES])
{
    do
        trace_random(id, TRACE_ID_BYTES);
    while (trace_id_is_zero(id, TRACE_ID_BYTES));
}

void trace_new_span_id(uint8_t id[SPAN_ID_BYTES])
{
    do
        trace_random(id, SPAN_ID_BYTES);
    while (trace_id_is_zero(id, SPAN_ID_BYTES));
}

/* ---- traceparent ---------------------------------------------------------- */

static int lower_hex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return ST_ERROR;
}

/* Decodes 2n lower-case hex characters into n bytes. */
static int parse_hex(const char *s, uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int hi = lower_hex(s[2 * i]), lo = lower_hex(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return ST_ERROR;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

int trace_parse_traceparent(const char *s, size_t n, struct trace_parent *out)
{
    uint8_t version;
    if (n < TRACEPARENT_LEN || parse_hex(s, &version, 1) != 0 || version == 0xff)
        return ST_ERROR;
    /* Version 00 has exactly four fields; a later version may append more,
     * separated by '-', and is read as 00 (W3C forward compatibility). */
    if (version == 0 ? n != TRACEPARENT_LEN : n > TRACEPARENT_LEN && s[TRACEPARENT_LEN] != '-')
        return ST_ERROR;
    if (s[2] != '-' || s[35] != '-' || s[52] != '-')
        return ST_ERROR;
    if (parse_hex(s + 3, out->trace_id, TRACE_ID_BYTES) != 0 ||
        parse_hex(s + 36, out->span_id, SPAN_ID_BYTES) != 0 ||
        parse_hex(s + 53, &out->flags, 1) != 0)
        return ST_ERROR;
    if (trace_id_is_zero(out->trace_id, TRACE_ID_BYTES) ||
        trace_id_is_zero(out->span_id, SPAN_ID_BYTES))
        return ST_ERROR;
    return 0;
}

void trace_format_traceparent(char *out, const uint8_t trace_id[TRACE_ID_BYTES],
                              const uint8_t span_id[SPAN_ID_BYTES], uint8_t flags)
{
    memcpy(out, "00-", 3);
    span_hex(trace_id, TRACE_ID_BYTES, out + 3);
    out[35] = '-';
    span_hex(span_id, SPAN_ID_BYTES, out + 36);
    out[52] = '-';
    span_hex(&flags, 1, out + 53);
}

/* ---- tracestate ----------------------------------------------------------- */

#define TRACESTATE_MAX_MEMBERS 32
#define TRACESTATE_BIG_MEMBER 128

static bool is_lcalpha(char c)
{
    return c >= 'a' && c <= 'z';
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_key_char(char c)
{
    return is_lcalpha(c) || is_digit(c) || c == '_' || c == '-' || c == '*' || c == '/';
}

/* key = simple-key / multi-tenant-key (W3C Trace Context §3.3.1.3.1). */
static bool valid_key(const char *k, size_t n)
{
    const char *at = memchr(k, '@', n);
    if (!at) {
        if (n < 1 || n > 256 || !is_lcalpha(k[0]))
            return false;
        for (size_t i = 1; i < n; i++)
            if (!is_key_char(k[i]))
                return false;
        return true;
    }
    size_t tenant = (size_t)(at - k), system = n - tenant - 1;
    if (tenant < 1 || tenant > 241 || system < 1 || system > 14)
        return false;
    if (!is_lcalpha(k[0]) && !is_digit(k[0]))
        return false;
    for (size_t i = 1; i < tenant; i++)
        if (!is_key_char(k[i]))
            return false;
    if (!is_lcalpha(at[1]))
        return false;
    for (size_t i = 2; i <= system; i++)
        if (!is_key_char(at[i]))
            return false;
    return true;
}

/* value = 0*255(chr) nblk-chr; chr = %x20 / nblk-chr;
 * nblk-chr = %x21-2B / %x2D-3C / %x3E-7E. */
static bool valid_value(const char *v, size_t n)
{
    if (n < 1 || n > 256 || v[n - 1] == ' ')
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        if (c < 0x20 || c > 0x7e || c == ',' || c == '=')
            return false;
    }
    return true;
}

struct member {
    const char *p;
    size_t len, key_len;
};

int trace_parse_tracestate(const char *s, size_t n, char *out, size_t cap)
{
    struct member m[TRACESTATE_MAX_MEMBERS];
    size_t count = 0, i = 0;
    if (cap == 0)
        return ST_ERROR;
    while (i <= n) {
        size_t start = i;
        while (i < n && s[i] != ',')
            i++;
        size_t a = start, b = i;
        while (a < b && (s[a] == ' ' || s[a] == '\t'))
            a++;
        while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t'))
            b--;
        i++; /* past ',' (or the end) */
        if (a == b)
            continue; /* empty list member: allowed */
        if (count == TRACESTATE_MAX_MEMBERS)
            return ST_ERROR;
        const char *eq = memchr(s + a, '=', b - a);
        if (!eq)
            return ST_ERROR;
        size_t key_len = (size_t)(eq - (s + a));
        if (!valid_key(s + a, key_len) || !valid_value(eq + 1, b - a - key_len - 1))
            return ST_ERROR;
        for (size_t j = 0; j < count; j++)
            if (m[j].key_len == key_len && memcmp(m[j].p, s + a, key_len) == 0)
                return ST_ERROR;
        m[count++] = (struct member){.p = s + a, .len = b - a, .key_len = key_len};
    }
    /* Fit into cap - 1 bytes: first drop members over 128 bytes, then
     * members from the end. */
    size_t total = 0;
    for (size_t j = 0; j < count; j++)
        total += m[j].len + (j ? 1 : 0);
    for (size_t j = count; j-- > 0 && total > cap - 1;) {
        if (m[j].len > TRACESTATE_BIG_MEMBER) {
            total -= m[j].len + (count > 1 ? 1 : 0);
            memmove(&m[j], &m[j + 1], (count - j - 1) * sizeof *m);
            count--;
        }
    }
    while (count && total > cap - 1) {
        count--;
        total -= m[count].len + (count ? 1 : 0);
    }
    size_t len = 0;
    for (size_t j = 0; j < count; j++) {
        if (j)
            out[len++] = ',';
        memcpy(out + len, m[j].p, m[j].len);
        len += m[j].len;
    }
    out[len] = '\0';
    return (int)len;
}

/* ---- sampling settings ---------------------------------------------------- */

#define MAX_MODEL_OVERRIDES 64
#define MODEL_NAME_MAX 256

struct model_override {
    char name[MODEL_NAME_MAX];
    bool has_level, has_rate, has_count, has_freq, has_file;
    struct trace_settings s;
};

static pthread_mutex_t settings_lock = PTHREAD_MUTEX_INITIALIZER;
static struct trace_settings startup = {.level = TRACE_LEVEL_TIMESTAMPS, .rate = 0, .count = -1};
static struct trace_settings global = {.level = TRACE_LEVEL_TIMESTAMPS, .rate = 0, .count = -1};
static struct model_override overrides[MAX_MODEL_OVERRIDES];
static uint32_t noverrides;
/* Read without the lock on the hot path: whether anything may be traced,
 * whether models have settings of their own, and the global level, rate
 * (as double bits) and whether trace_count limits it. */
static atomic_bool any_enabled = true;
static atomic_uint noverrides_hint;
static atomic_bool global_on = true;
static atomic_bool global_counted;
static atomic_uint_fast64_t global_rate_bits;

static void refresh_enabled(void)
{
    bool on = global.level != TRACE_LEVEL_OFF;
    atomic_store(&global_on, on);
    for (uint32_t i = 0; i < noverrides && !on; i++)
        on = overrides[i].has_level && overrides[i].s.level != TRACE_LEVEL_OFF;
    atomic_store(&any_enabled, on);
    atomic_store(&noverrides_hint, noverrides);
    atomic_store(&global_counted, global.count >= 0);
    uint64_t bits;
    memcpy(&bits, &global.rate, sizeof bits);
    atomic_store(&global_rate_bits, bits);
}

void trace_settings_init(const struct trace_settings *g)
{
    pthread_mutex_lock(&settings_lock);
    startup = *g;
    global = *g;
    noverrides = 0;
    refresh_enabled();
    pthread_mutex_unlock(&settings_lock);
}

void trace_settings_reset_models(void)
{
    pthread_mutex_lock(&settings_lock);
    noverrides = 0;
    refresh_enabled();
    pthread_mutex_unlock(&settings_lock);
}

static struct model_override *find_override(const char *model)
{
    for (uint32_t i = 0; model && i < noverrides; i++)
        if (strcmp(overrides[i].name, model) == 0)
            return &overrides[i];
    return NULL;
}

/* The effective settings of a model (lock held). */
static void effective(const struct model_override *o, struct trace_settings *out)
{
    *out = global;
    if (!o)
        return;
    if (o->has_level)
        out->level = o->s.level;
    if (o->has_rate)
        out->rate = o->s.rate;
    if (o->has_count)
        out->count = o->s.count;
    if (o->has_freq)
        out->log_frequency = o->s.log_frequency;
    if (o->has_file)
        memcpy(out->file, o->s.file, sizeof out->file);
}

void trace_settings_get(const char *model, struct trace_settings *out)
{
    pthread_mutex_lock(&settings_lock);
    effective(find_override(model), out);
    pthread_mutex_unlock(&settings_lock);
}

bool trace_enabled(void)
{
    return atomic_load_explicit(&any_enabled, memory_order_relaxed);
}

bool trace_sample(const char *model, const struct trace_parent *parent, double *rate_out)
{
    if (!trace_enabled())
        return false;
    if (!atomic_load_explicit(&noverrides_hint, memory_order_relaxed) &&
        !atomic_load_explicit(&global_counted, memory_order_relaxed)) {
        /* Only global settings and no count to take from: no lock. */
        uint64_t bits = atomic_load_explicit(&global_rate_bits, memory_order_relaxed);
        double rate;
        memcpy(&rate, &bits, sizeof rate);
        if (rate_out)
            *rate_out = rate;
        if (!atomic_load_explicit(&global_on, memory_order_relaxed))
            return false;
        if (parent)
            return (parent->flags & 1) != 0;
        return rate >= 1.0 || (rate > 0 && trace_random_unit() < rate);
    }
    pthread_mutex_lock(&settings_lock);
    struct model_override *o =
        atomic_load_explicit(&noverrides_hint, memory_order_relaxed) ? find_override(model) : NULL;
    struct trace_settings s;
    effective(o, &s);
    bool sampled = false;
    if (s.level != TRACE_LEVEL_OFF && s.count != 0)
        sampled = parent ? (parent->flags & 1) != 0
                         : s.rate >= 1.0 || (s.rate > 0 && trace_random_unit() < s.rate);
    if (sampled && s.count > 0) {
        /* The count lives where it was set: the model's own, or the global. */
        if (o && o->has_count)
            o->s.count--;
        else
            global.count--;
    }
    pthread_mutex_unlock(&settings_lock);
    if (rate_out)
        *rate_out = s.rate;
    return sampled;
}

int trace_sample_model(const char *model, const struct trace_parent *parent, double *rate_out)
{
    if (!model || !trace_has_model_settings())
        return ST_ERROR;
    pthread_mutex_lock(&settings_lock);
    bool has = find_override(model) != NULL;
    pthread_mutex_unlock(&settings_lock);
    if (!has)
        return ST_ERROR;
    return trace_sample(model, parent, rate_out);
}

bool trace_has_model_settings(void)
{
    return atomic_load_explicit(&noverrides_hint, memory_order_relaxed) != 0;
}

int trace_settings_update(const char *model, const struct trace_update *u, struct error *err)
{
    if (model && strlen(model) >= MODEL_NAME_MAX)
        return error_set(err, 400, "model name too long");
    pthread_mutex_lock(&settings_lock);
    if (!model) {
        if (u->set[TRACE_FIELD_LEVEL] || u->clear[TRACE_FIELD_LEVEL])
            global.level = u->set[TRACE_FIELD_LEVEL] ? u->values.level : startup.level;
        if (u->set[TRACE_FIELD_RATE] || u->clear[TRACE_FIELD_RATE])
            global.rate = u->set[TRACE_FIELD_RATE] ? u->values.rate : startup.rate;
        if (u->set[TRACE_FIELD_COUNT] || u->clear[TRACE_FIELD_COUNT])
            global.count = u->set[TRACE_FIELD_COUNT] ? u->values.count : startup.count;
        if (u->set[TRACE_FIELD_LOG_FREQUENCY] || u->clear[TRACE_FIELD_LOG_FREQUENCY])
            global.log_frequency =
                u->set[TRACE_FIELD_LOG_FREQUENCY] ? u->values.log_frequency : startup.log_frequency;
        if (u->set[TRACE_FIELD_FILE] || u->clear[TRACE_FIELD_FILE])
            memcpy(global.file, u->set[TRACE_FIELD_FILE] ? u->values.file : startup.file,
                   sizeof global.file);
    } else {
        struct model_override *o = find_override(model);
        if (!o) {
            if (noverrides == MAX_MODEL_OVERRIDES) {
                pthread_mutex_unlock(&settings_lock);
                return error_set(err, 400, "trace settings for at most %d models",
                                 MAX_MODEL_OVERRIDES);
            }
            o = &overrides[noverrides++];
            memset(o, 0, sizeof *o);
            snprintf(o->name, sizeof o->name, "%s", model);
        }
        bool *has[TRACE_FIELDS] = {&o->has_level, &o->has_rate, &o->has_count, &o->has_freq,
                                   &o->has_file};
        for (int i = 0; i < TRACE_FIELDS; i++) {
            if (u->clear[i])
                *has[i] = false;
            if (u->set[i])
                *has[i] = true;
        }
        if (u->set[TRACE_FIELD_LEVEL])
            o->s.level = u->values.level;
        if (u->set[TRACE_FIELD_RATE])
            o->s.rate = u->values.rate;
        if (u->set[TRACE_FIELD_COUNT])
            o->s.count = u->values.count;
        if (u->set[TRACE_FIELD_LOG_FREQUENCY])
            o->s.log_frequency = u->values.log_frequency;
        if (u->set[TRACE_FIELD_FILE])
            memcpy(o->s.file, u->values.file, sizeof o->s.file);
        if (!o->has_level && !o->has_rate && !o->has_count && !o->has_freq && !o->has_file) {
            /* Nothing left to override: forget the model. */
            *o = overrides[--noverrides];
        }
    }
    refresh_enabled();
    pthread_mutex_unlock(&settings_lock);
    return 0;
}

void trace_batch_span(struct infer_request *const *members, uint32_t n, const char *model,
                      const char *version, int64_t batch_size, uint64_t start_ns, uint64_t end_ns,
                      const struct error *err)
{
    uint32_t sampled = 0;
    for (uint32_t j = 0; j < n; j++)
        sampled += members[j]->trace.sampled;
    if (!sampled)
        return;
    struct span_record r;
    uint8_t trace_id[TRACE_ID_BYTES], span_id[SPAN_ID_BYTES];
    trace_new_trace_id(trace_id);
    trace_new_span_id(span_id);
    static const char name[] = "batch execute";
    span_init(&r, trace_id, span_id, NULL, SPAN_KIND_INTERNAL, name, sizeof name - 1, start_ns,
              end_ns);
    span_attr_str(&r, "inferd.model.name", model, strlen(model));
    span_attr_str(&r, "inferd.model.version", version, strlen(version));
    span_attr_int(&r, "inferd.batch_size", batch_size);
    span_attr_int(&r, "inferd.batch.requests", n);
    if (err && err->status)
        span_set_error(&r, err->msg);
    for (uint32_t j = 0; j < n; j++) {
        struct infer_trace *t = &members[j]->trace;
        if (!t->sampled)
            continue;
        span_add_link(&r, t->trace_id, t->span_id);
        memcpy(t->batch_trace_id, trace_id, TRACE_ID_BYTES);
        memcpy(t->batch_span_id, span_id, SPAN_ID_BYTES);
        t->batch_linked = true;
    }
    otlp_submit(&r);
}
