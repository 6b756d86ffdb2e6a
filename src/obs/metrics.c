#include "obs/metrics.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "base/numfmt.h"

/* ---- shard indexes ------------------------------------------------------ */

static pthread_mutex_t shard_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t shard_once = PTHREAD_ONCE_INIT;
static pthread_key_t shard_key;
/* Free indexes, a stack; indexes never handed out yet start at next_fresh. */
static int free_stack[METRICS_MAX_SHARDS];
static int nfree;
static int next_fresh;
static _Thread_local int my_shard = -1;

static void shard_release(void *value)
{
    int idx = (int)(intptr_t)value - 1;
    if (idx < 0 || idx >= METRICS_MAX_SHARDS)
        return;
    pthread_mutex_lock(&shard_lock);
    free_stack[nfree++] = idx;
    pthread_mutex_unlock(&shard_lock);
}

static void shard_key_create(void)
{
    pthread_key_create(&shard_key, shard_release);
}

int metrics_shard_index(void)
{
    if (my_shard >= 0)
        return my_shard;
    pthread_once(&shard_once, shard_key_create);
    int idx = METRICS_SHARED_SHARD;
    pthread_mutex_lock(&shard_lock);
    if (nfree)
        idx = free_stack[--nfree];
    else if (next_fresh < METRICS_MAX_SHARDS)
        idx = next_fresh++;
    pthread_mutex_unlock(&shard_lock);
    /* The key's destructor gives the index back when the thread exits; the
     * shared index is never given back. */
    if (idx != METRICS_SHARED_SHARD && pthread_setspecific(shard_key, (void *)(intptr_t)(idx + 1)))
        idx = METRICS_SHARED_SHARD; /* cannot be given back: keep it out of the pool */
    my_shard = idx;
    return idx;
}

/* ---- histograms --------------------------------------------------------- */

uint32_t metrics_hist_bucket(const struct metrics_hist_spec *spec, uint64_t v)
{
    uint32_t lo = 0, hi = spec->nbounds;
    while (lo < hi) { /* first bound >= v */
        uint32_t mid = (lo + hi) / 2;
        if (spec->bounds[mid] >= v)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

void metrics_hist_accumulate(struct metrics_hist_snapshot *out, const struct metrics_hist *h)
{
    for (uint32_t i = 0; i <= METRICS_HIST_MAX_BOUNDS; i++)
        out->buckets[i] += metrics_load(&h->buckets[i]);
    out->count += metrics_load(&h->count);
    out->sum += metrics_load(&h->sum);
}

double metrics_hist_quantile(const struct metrics_hist_spec *spec,
                             const struct metrics_hist_snapshot *h, double q)
{
    uint64_t total = 0;
    for (uint32_t i = 0; i <= spec->nbounds; i++)
        total += h->buckets[i];
    if (total == 0 || spec->nbounds == 0)
        return 0;
    double rank = q * (double)total;
    uint64_t below = 0;
    for (uint32_t i = 0; i < spec->nbounds; i++) {
        uint64_t in = h->buckets[i];
        if (in && (double)(below + in) >= rank) {
            double lower = i ? (double)spec->bounds[i - 1] : 0;
            double upper = (double)spec->bounds[i];
            double frac = (rank - (double)below) / (double)in;
            return lower + (upper - lower) * (frac < 0 ? 0 : frac);
        }
        below += in;
    }
    return (double)spec->bounds[spec->nbounds - 1];
}

/* ---- HTTP counters ------------------------------------------------------ */

static const int status_codes[METRICS_STATUSES] = {
    200, 204, 400, 401, 403, 404, 405, 408, 409, 413,
    414, 415, 417, 429, 431, 500, 501, 503, 504, 505,
};

uint32_t metrics_status_index(int status)
{
    for (uint32_t i = 0; i < METRICS_STATUSES; i++)
        if (status_codes[i] == status)
            return i;
    return METRICS_STATUSES;
}

int metrics_status_code(uint32_t index)
{
    return index < METRICS_STATUSES ? status_codes[index] : 0;
}

const char *metrics_endpoint_name(enum metrics_endpoint e)
{
    static const char *const names[METRICS_ENDPOINTS] = {
        "infer", "health", "model", "stats", "repository", "server", "dashboard",
        "playground", "metrics", "other",
    };
    return (unsigned)e < METRICS_ENDPOINTS ? names[e] : "other";
}

/* Path segment i (0-based) of p as [*s, *s + *n); false if there is none. */
static bool path_segment(const char *p, size_t len, int i, const char **s, size_t *n)
{
    size_t pos = 0;
    for (int k = 0;; k++) {
        if (pos >= len || p[pos] != '/')
            return false;
        size_t start = ++pos;
        while (pos < len && p[pos] != '/')
            pos++;
        if (k == i) {
            *s = p + start;
            *n = pos - start;
            return true;
        }
    }
}

static bool segment_is(const char *p, size_t len, int i, const char *want)
{
    const char *s;
    size_t n;
    return path_segment(p, len, i, &s, &n) && n == strlen(want) && memcmp(s, want, n) == 0;
}

static int segment_count(const char *p, size_t len)
{
    int n = 0;
    for (size_t i = 0; i < len; i++)
        n += p[i] == '/';
    if (len > 1 && p[len - 1] == '/')
        n--; /* a trailing slash adds no segment */
    return n;
}

enum metrics_endpoint metrics_endpoint_of(const char *path, size_t len)
{
    if (!path)
        return METRICS_EP_OTHER;
    /* The hot path first: /v2/models/{m}[/versions/{v}]/infer. */
    if (len > 17 && memcmp(path, "/v2/models/", 11) == 0 && memcmp(path + len - 6, "/infer", 6) == 0)
        return METRICS_EP_INFER;
    if (segment_is(path, len, 0, "metrics"))
        return METRICS_EP_METRICS;
    if (segment_is(path, len, 0, "dashboard"))
        return METRICS_EP_DASHBOARD;
    if (segment_is(path, len, 0, "playground"))
        return METRICS_EP_PLAYGROUND;
    if (!segment_is(path, len, 0, "v2"))
        return METRICS_EP_OTHER;
    int n = segment_count(path, len);
    if (n == 1)
        return METRICS_EP_SERVER;
    if (segment_is(path, len, 1, "health"))
        return METRICS_EP_HEALTH;
    if (segment_is(path, len, 1, "repository"))
        return METRICS_EP_REPOSITORY;
    if (!segment_is(path, len, 1, "models") || n < 3)
        return METRICS_EP_OTHER;
    if (segment_is(path, len, n - 1, "infer"))
        return METRICS_EP_INFER;
    if (segment_is(path, len, n - 1, "stats"))
        return METRICS_EP_STATS;
    return METRICS_EP_MODEL;
}

struct http_shard {
    _Alignas(METRICS_CACHE_LINE) _Atomic uint64_t responses[METRICS_ENDPOINTS][METRICS_STATUSES + 1];
    _Atomic uint64_t bytes_in, bytes_out;
};

static struct http_shard http_shards[METRICS_NSHARDS];

void metrics_http_response(const char *path, size_t path_len, int status, uint64_t bytes_in,
                           uint64_t bytes_out)
{
    int shard = metrics_shard_index();
    struct http_shard *h = &http_shards[shard];
    enum metrics_endpoint e = metrics_endpoint_of(path, path_len);
    metrics_add(&h->responses[e][metrics_status_index(status)], 1, shard);
    metrics_add(&h->bytes_in, bytes_in, shard);
    metrics_add(&h->bytes_out, bytes_out, shard);
}

void metrics_http_read(struct metrics_http_totals *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < METRICS_NSHARDS; i++) {
        const struct http_shard *h = &http_shards[i];
        for (int e = 0; e < METRICS_ENDPOINTS; e++)
            for (int s = 0; s <= METRICS_STATUSES; s++)
                out->responses[e][s] += metrics_load(&h->responses[e][s]);
        out->bytes_in += metrics_load(&h->bytes_in);
        out->bytes_out += metrics_load(&h->bytes_out);
    }
}

/* ---- exposition ---------------------------------------------------------- */

void metrics_write_header(struct buf *b, const char *name, const char *type, const char *help)
{
    buf_printf(b, "# HELP %s ", name);
    for (const char *p = help; *p; p++) {
        if (*p == '\\')
            buf_puts(b, "\\\\");
        else if (*p == '\n')
            buf_puts(b, "\\n");
        else
            buf_putc(b, *p);
    }
    buf_printf(b, "\n# TYPE %s %s\n", name, type);
}

static void write_label_value(struct buf *b, const char *v)
{
    for (const char *p = v; *p; p++) {
        if (*p == '\\')
            buf_puts(b, "\\\\");
        else if (*p == '"')
            buf_puts(b, "\\\"");
        else if (*p == '\n')
            buf_puts(b, "\\n");
        else
            buf_putc(b, *p);
    }
}

/* name{k="v",...[,le="x"]} — le may be NULL. */
static void write_series(struct buf *b, const char *name, const char *suffix,
                         const char *const *labels, uint32_t nlabels, const char *le)
{
    buf_puts(b, name);
    buf_puts(b, suffix);
    if (nlabels == 0 && !le)
        return;
    buf_putc(b, '{');
    for (uint32_t i = 0; i < nlabels; i++) {
        buf_printf(b, "%s%s=\"", i ? "," : "", labels[2 * i]);
        write_label_value(b, labels[2 * i + 1]);
        buf_putc(b, '"');
    }
    if (le)
        buf_printf(b, "%sle=\"%s\"", nlabels ? "," : "", le);
    buf_putc(b, '}');
}

static void write_double(struct buf *b, double v)
{
    char num[NUMFMT_MAX];
    if (isnan(v))
        buf_puts(b, "NaN");
    else if (isinf(v))
        buf_puts(b, v > 0 ? "+Inf" : "-Inf");
    else {
        numfmt_f64(num, v);
        buf_puts(b, num);
    }
}

void metrics_write_u64(struct buf *b, const char *name, const char *const *labels,
                       uint32_t nlabels, uint64_t value)
{
    write_series(b, name, "", labels, nlabels, NULL);
    buf_printf(b, " %llu\n", (unsigned long long)value);
}

void metrics_write_f64(struct buf *b, const char *name, const char *const *labels,
                       uint32_t nlabels, double value)
{
    write_series(b, name, "", labels, nlabels, NULL);
    buf_putc(b, ' ');
    write_double(b, value);
    buf_putc(b, '\n');
}

void metrics_write_hist(struct buf *b, const char *name, const char *const *labels,
                        uint32_t nlabels, const struct metrics_hist_spec *spec,
                        const struct metrics_hist_snapshot *h)
{
    uint64_t cumulative = 0;
    char le[NUMFMT_MAX];
    for (uint32_t i = 0; i <= spec->nbounds; i++) {
        cumulative += h->buckets[i];
        if (i < spec->nbounds)
            numfmt_f64(le, (double)spec->bounds[i] / spec->divisor);
        else
            memcpy(le, "+Inf", 5);
        write_series(b, name, "_bucket", labels, nlabels, le);
        buf_printf(b, " %llu\n", (unsigned long long)cumulative);
    }
    write_series(b, name, "_sum", labels, nlabels, NULL);
    buf_putc(b, ' ');
    write_double(b, (double)h->sum / spec->divisor);
    buf_putc(b, '\n');
    /* The count is the buckets' total so that +Inf == _count always holds
     * in one exposition, even while observations are being recorded. */
    write_series(b, name, "_count", labels, nlabels, NULL);
    buf_printf(b, " %llu\n", (unsigned long long)cumulative);
}
