#include "preprocess/tokenizer.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "base/arena.h"
#include "base/file.h"
#include "base/json.h"
#include "base/mem.h"
#include "base/status.h"

#define BYTE_IDS 256u
/* The parsed JSON of 65535 merges takes about 7 MB; this bounds a hostile file's. */
#define TREE_MAX (64u << 20)

/* Open addressing: pair key (a << 32 | b) -> merge rank; rank -1 = empty. */
struct merge_slot {
    uint64_t key;
    int32_t rank;
};

struct tokenizer {
    uint32_t vocab; /* BYTE_IDS + nmerges + 1 */
    uint32_t nmerges;
    int32_t (*pairs)[2];      /* pairs[k]: the ids merge k joins */
    struct merge_slot *table; /* 2^table_bits slots, at most half used */
    uint32_t table_bits;
    uint32_t *off; /* token id's bytes: bytes[off[id] .. off[id + 1]) */
    char *bytes;
};

static uint64_t pair_key(int32_t a, int32_t b)
{
    return (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
}

static uint32_t slot_of(const struct tokenizer *t, uint64_t key)
{
    return (uint32_t)((key * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - t->table_bits));
}

/* The rank of the merge of (a, b), or ST_ERROR when the pair is not a merge. */
static int32_t merge_rank(const struct tokenizer *t, int32_t a, int32_t b)
{
    uint64_t key = pair_key(a, b);
    uint32_t mask = (1u << t->table_bits) - 1;
    for (uint32_t i = slot_of(t, key);; i = (i + 1) & mask) {
        const struct merge_slot *s = &t->table[i];
        if (s->rank < 0 || s->key == key)
            return s->rank;
    }
}

/* Inserts merge `rank`; returns the rank already holding the pair, or -1. */
static int32_t merge_insert(struct tokenizer *t, int32_t a, int32_t b, int32_t rank)
{
    uint64_t key = pair_key(a, b);
    uint32_t mask = (1u << t->table_bits) - 1;
    for (uint32_t i = slot_of(t, key);; i = (i + 1) & mask) {
        struct merge_slot *s = &t->table[i];
        if (s->rank < 0) {
            s->key = key;
            s->rank = rank;
            return NOT_FOUND;
        }
        if (s->key == key)
            return s->rank;
    }
}

void tokenizer_free(struct tokenizer *t)
{
    if (!t)
        return;
    mem_free(t->pairs);
    mem_free(t->table);
    mem_free(t->off);
    mem_free(t->bytes);
    mem_free(t);
}

uint32_t tokenizer_vocab_size(const struct tokenizer *t)
{
    return t->vocab;
}

int32_t tokenizer_eos(const struct tokenizer *t)
{
    return (int32_t)t->vocab - 1;
}

const char *tokenizer_token(const struct tokenizer *t, int32_t id, size_t *len)
{
    if (id < 0 || (uint32_t)id >= t->vocab - 1) {
        *len = 0;
        return NULL;
    }
    *len = t->off[id + 1] - t->off[id];
    return t->bytes + t->off[id];
}

/* ---- parsing ------------------------------------------------------------ */

static int get_int(const struct json_value *root, const char *key, int64_t *v, struct error *err)
{
    const struct json_value *n = json_get(root, key);
    if (!n)
        return error_set(err, 400, "tokenizer.json: \"%s\" is missing", key);
    if (json_num_i64(n, v) != 0)
        return error_set(err, 400, "tokenizer.json: \"%s\" must be an integer", key);
    return 0;
}

/* One merge [a, b] of rank k: both ids below 256 + k. */
static int get_pair(const struct json_value *m, uint32_t k, int32_t pair[2], struct error *err)
{
    if (m->type != JSON_ARRAY || m->len != 2)
        return error_set(err, 400, "tokenizer.json: \"merges\"[%u] must be a pair [a, b]", k);
    for (int i = 0; i < 2; i++) {
        int64_t v;
        if (json_num_i64(&m->u.items[i], &v) != 0 || v < 0 || v >= (int64_t)BYTE_IDS + k)
            return error_set(err, 400,
                             "tokenizer.json: \"merges\"[%u] must be a pair of ids below %u "
                             "(bytes and earlier merges)",
                             k, BYTE_IDS + k);
        pair[i] = (int32_t)v;
    }
    return 0;
}

/* Sizes and allocates the tables for t->nmerges merges. */
static int alloc_tables(struct tokenizer *t, struct error *err)
{
    t->table_bits = 4;
    while ((1u << t->table_bits) < 2 * t->nmerges)
        t->table_bits++;
    t->pairs = mem_calloc(t->nmerges ? t->nmerges : 1, sizeof *t->pairs);
    t->table = mem_alloc(((size_t)1 << t->table_bits) * sizeof *t->table);
    t->off = mem_calloc((size_t)t->vocab + 1, sizeof *t->off);
    if (!t->pairs || !t->table || !t->off)
        return error_set(err, 500, "out of memory");
    for (uint32_t i = 0; i < (1u << t->table_bits); i++)
        t->table[i].rank = -1;
    return 0;
}

/* Reads the merges into pairs and the hash; computes every token's length
 * into off[] (as end offsets, checked against the limits). */
static int read_merges(struct tokenizer *t, const struct json_value *merges, struct error *err)
{
    uint64_t total = BYTE_IDS;
    for (uint32_t i = 0; i <= BYTE_IDS; i++)
        t->off[i] = i;
    for (uint32_t k = 0; k < t->nmerges; k++) {
        int32_t *p = t->pairs[k];
        if (get_pair(&merges->u.items[k], k, p, err) != 0)
            return ST_ERROR;
        int32_t prev = merge_insert(t, p[0], p[1], (int32_t)k);
        if (prev >= 0)
            return error_set(err, 400, "tokenizer.json: \"merges\"[%u] repeats \"merges\"[%d]", k,
                             prev);
        uint32_t id = BYTE_IDS + k;
        uint32_t n = (t->off[p[0] + 1] - t->off[p[0]]) + (t->off[p[1] + 1] - t->off[p[1]]);
        if (n > TOKENIZER_MAX_TOKEN)
            return error_set(err, 400,
                             "tokenizer.json: \"merges\"[%u] makes a token longer than %u bytes", k,
                             TOKENIZER_MAX_TOKEN);
        total += n;
        if (total > TOKENIZER_MAX_BYTES)
            return error_set(err, 400, "tokenizer.json: the tokens are longer than %u bytes in all",
                             TOKENIZER_MAX_BYTES);
        t->off[id + 1] = (uint32_t)total;
    }
    t->off[t->vocab] = (uint32_t)total; /* eos: no bytes */
    return 0;
}

/* Writes every token's bytes (the offsets are known). */
static int fill_bytes(struct tokenizer *t, struct error *err)
{
    t->bytes = mem_alloc(t->off[t->vocab] ? t->off[t->vocab] : 1);
    if (!t->bytes)
        return error_set(err, 500, "out of memory");
    for (uint32_t i = 0; i < BYTE_IDS; i++)
        t->bytes[i] = (char)i;
    for (uint32_t k = 0; k < t->nmerges; k++) {
        char *dst = t->bytes + t->off[BYTE_IDS + k];
        for (int s = 0; s < 2; s++) {
            int32_t id = t->pairs[k][s];
            uint32_t n = t->off[id + 1] - t->off[id];
            memcpy(dst, t->bytes + t->off[id], n);
            dst += n;
        }
    }
    return 0;
}

static int parse_tree(const struct json_value *root, struct tokenizer *t, struct error *err)
{
    if (root->type != JSON_OBJECT)
        return error_set(err, 400, "tokenizer.json: not a JSON object");
    const struct json_value *type = json_get(root, "type");
    if (!type || type->type != JSON_STRING || strcmp(type->u.str, "byte-bpe") != 0)
        return error_set(err, 400, "tokenizer.json: \"type\" must be \"byte-bpe\"");
    int64_t vocab, eos;
    if (get_int(root, "vocab_size", &vocab, err) != 0)
        return ST_ERROR;
    if (vocab < BYTE_IDS + 1 || vocab > TOKENIZER_MAX_VOCAB)
        return error_set(err, 400, "tokenizer.json: \"vocab_size\" must be from %u to %u",
                         BYTE_IDS + 1, TOKENIZER_MAX_VOCAB);
    if (get_int(root, "eos_token_id", &eos, err) != 0)
        return ST_ERROR;
    if (eos != vocab - 1)
        return error_set(err, 400,
                         "tokenizer.json: \"eos_token_id\" must be the last id, vocab_size - 1");
    const struct json_value *name = json_get(root, "eos_token");
    if (name && name->type != JSON_STRING)
        return error_set(err, 400, "tokenizer.json: \"eos_token\" must be a string");
    const struct json_value *merges = json_get(root, "merges");
    if (!merges || merges->type != JSON_ARRAY)
        return error_set(err, 400, "tokenizer.json: \"merges\" must be an array of pairs");
    t->vocab = (uint32_t)vocab;
    t->nmerges = t->vocab - BYTE_IDS - 1;
    if (merges->len != t->nmerges)
        return error_set(err, 400,
                         "tokenizer.json: \"merges\" has %u pairs; vocab_size %u needs %u "
                         "(256 bytes + merges + eos)",
                         merges->len, t->vocab, t->nmerges);
    if (alloc_tables(t, err) != 0 || read_merges(t, merges, err) != 0)
        return ST_ERROR;
    return fill_bytes(t, err);
}

int tokenizer_parse(const char *json, size_t len, struct tokenizer **out, struct error *err)
{
    *out = NULL;
    if (len > TOKENIZER_MAX_FILE)
        return error_set(err, 400, "tokenizer.json is larger than %u bytes", TOKENIZER_MAX_FILE);
    struct arena a;
    arena_init(&a, 64u << 10, TREE_MAX);
    struct json_value *root;
    const char *msg;
    size_t off;
    int rc = ST_ERROR;
    struct tokenizer *t = NULL;
    if (json_parse(&a, json, len, NULL, &root, &msg, &off) != ST_OK) {
        if (!strcmp(msg, "out of memory"))
            error_set(err, 500, "tokenizer.json: out of memory (its JSON tree may take %u MiB)",
                      TREE_MAX >> 20);
        else
            error_set(err, 400, "tokenizer.json: %s at byte %zu", msg, off);
        goto out_arena;
    }
    t = mem_calloc(1, sizeof *t);
    if (!t) {
        error_set(err, 500, "out of memory");
        goto out_arena;
    }
    if (parse_tree(root, t, err) != 0) {
        tokenizer_free(t);
        goto out_arena;
    }
    *out = t;
    rc = 0;
out_arena:
    arena_free(&a);
    return rc;
}

int tokenizer_load(const char *path, struct tokenizer **out, struct error *err)
{
    *out = NULL;
    char *text;
    size_t n;
    int rc = file_read(path, TOKENIZER_MAX_FILE, &text, &n);
    if (rc == -ENOMEM)
        return error_set(err, 500, "out of memory");
    if (rc == -EFBIG)
        return error_set(err, 400, "%s is larger than %u bytes", path, TOKENIZER_MAX_FILE);
    if (rc)
        return error_set(err, 400, "cannot read %s: %s", path, strerror(-rc));
    struct error perr;
    rc = tokenizer_parse(text, n, out, &perr);
    if (rc != 0)
        error_set(err, perr.status, "%s: %s", path, perr.msg);
    mem_free(text);
    return rc;
}

/* ---- encoding ------------------------------------------------------------ */

/* Pieces up to this length are merged in stack memory. */
#define STACK_PIECE 256u

/* Working memory for one piece of n bytes: the ids as a linked list (id -1
 * = merged into its left neighbour) and a min-heap of (rank << 32 | left
 * position) candidates. Each merge pushes at most 2, so 3n entries do. */
struct piece_mem {
    int32_t *id;
    uint32_t *next, *prev;
    uint64_t *heap;
    size_t cap;  /* bytes of piece the arrays hold */
    void *block; /* heap block when cap > STACK_PIECE, else NULL */
};

static int piece_reserve(struct piece_mem *m, size_t n)
{
    if (n <= m->cap)
        return 0;
    if (n >= UINT32_MAX / 3)
        return -ENOMEM;
    size_t cap = n < 2 * m->cap ? 2 * m->cap : n;
    if (cap >= UINT32_MAX / 3)
        cap = n;
    void *block = mem_alloc(cap * (sizeof(int32_t) + 2 * sizeof(uint32_t) + 3 * sizeof(uint64_t)));
    if (!block)
        return -ENOMEM;
    mem_free(m->block);
    m->block = block;
    m->heap = block;
    m->id = (int32_t *)(m->heap + 3 * cap);
    m->next = (uint32_t *)(m->id + cap);
    m->prev = m->next + cap;
    m->cap = cap;
    return 0;
}

static void heap_push(uint64_t *h, size_t *n, uint64_t v)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (h[parent] <= v)
            break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = v;
}

static uint64_t heap_pop(uint64_t *h, size_t *n)
{
    uint64_t top = h[0], v = h[--*n];
    size_t i = 0, len = *n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= len)
            break;
        if (c + 1 < len && h[c + 1] < h[c])
            c++;
        if (v <= h[c])
            break;
        h[i] = h[c];
        i = c;
    }
    if (len)
        h[i] = v;
    return top;
}

static void push_pair(const struct tokenizer *t, struct piece_mem *m, size_t *nheap, uint32_t i)
{
    int32_t r = merge_rank(t, m->id[i], m->id[m->next[i]]);
    if (r >= 0)
        heap_push(m->heap, nheap, (uint64_t)r << 32 | i);
}

/* Merges piece p[0..n) and appends its ids (see the header's rule). */
static void encode_piece(const struct tokenizer *t, const unsigned char *p, uint32_t n,
                         struct piece_mem *m, int32_t *ids, size_t max, size_t *count)
{
    size_t nheap = 0;
    for (uint32_t i = 0; i < n; i++) {
        m->id[i] = p[i];
        m->next[i] = i + 1;
        m->prev[i] = i - 1; /* UINT32_MAX for the first */
    }
    for (uint32_t i = 0; i + 1 < n; i++)
        push_pair(t, m, &nheap, i);
    while (nheap) {
        uint64_t top = heap_pop(m->heap, &nheap);
        uint32_t rank = (uint32_t)(top >> 32), i = (uint32_t)top;
        uint32_t j = m->next[i];
        /* Stale entries: the left id was merged away, or the pair changed. */
        if (m->id[i] < 0 || j >= n || m->id[i] != t->pairs[rank][0] ||
            m->id[j] != t->pairs[rank][1])
            continue;
        m->id[i] = (int32_t)(BYTE_IDS + rank);
        m->id[j] = -1;
        m->next[i] = m->next[j];
        if (m->next[i] < n) {
            m->prev[m->next[i]] = i;
            push_pair(t, m, &nheap, i);
        }
        if (m->prev[i] != UINT32_MAX)
            push_pair(t, m, &nheap, m->prev[i]);
    }
    for (uint32_t i = 0; i < n; i = m->next[i]) {
        if (*count < max)
            ids[*count] = m->id[i];
        (*count)++;
    }
}

static bool starts_piece(unsigned char c)
{
    return c == ' ' || c == '\n';
}

int64_t tokenizer_encode(const struct tokenizer *t, const char *text, size_t len, int32_t *ids,
                         size_t max)
{
    int32_t id[STACK_PIECE];
    uint32_t next[STACK_PIECE], prev[STACK_PIECE];
    uint64_t heap[3 * STACK_PIECE];
    struct piece_mem m = {id, next, prev, heap, STACK_PIECE, NULL};
    const unsigned char *s = (const unsigned char *)text;
    size_t count = 0;
    int64_t rc = 0;

    for (size_t start = 0; start < len;) {
        size_t end = start + 1;
        while (end < len && !starts_piece(s[end]))
            end++;
        if (end - start == 1) {
            if (count < max)
                ids[count] = s[start];
            count++;
        } else {
            if (piece_reserve(&m, end - start) != 0) {
                rc = ST_ERROR;
                goto out_free;
            }
            encode_piece(t, s + start, (uint32_t)(end - start), &m, ids, max, &count);
        }
        start = end;
    }
    rc = (int64_t)count;
out_free:
    mem_free(m.block);
    return rc;
}
