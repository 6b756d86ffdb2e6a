#include "base/nearest.h"

#include <string.h>

size_t nearest_distance(const char *a, size_t na, const char *b, size_t nb)
{
    if (na > NEAREST_MAX_LEN || nb > NEAREST_MAX_LEN)
        return NEAREST_MAX_LEN + 1;
    /* Three rows of the dynamic programme: i-2, i-1, i. */
    size_t rows[3][NEAREST_MAX_LEN + 1];
    size_t *before = rows[0], *prev = rows[1], *cur = rows[2];
    for (size_t j = 0; j <= nb; j++)
        prev[j] = j;
    for (size_t i = 1; i <= na; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t d = prev[j - 1] + cost;                 /* substitution */
            if (prev[j] + 1 < d)
                d = prev[j] + 1;                           /* deletion */
            if (cur[j - 1] + 1 < d)
                d = cur[j - 1] + 1;                        /* insertion */
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                before[j - 2] + 1 < d)
                d = before[j - 2] + 1;                     /* transposition */
            cur[j] = d;
        }
        size_t *t = before;
        before = prev;
        prev = cur;
        cur = t;
    }
    return prev[nb];
}

void nearest_init(struct nearest *n, const char *name, size_t name_len)
{
    n->name = name;
    n->name_len = name_len;
    n->best = NULL;
    n->best_distance = NEAREST_MAX_LEN + 1;
}

void nearest_offer(struct nearest *n, const char *candidate)
{
    size_t len = strlen(candidate);
    size_t d = nearest_distance(n->name, n->name_len, candidate, len);
    size_t shorter = n->name_len < len ? n->name_len : len;
    size_t limit = shorter <= 4 ? 1 : 2;
    if (d == 0 || d > limit || d >= shorter || d >= n->best_distance)
        return;
    n->best = candidate;
    n->best_distance = d;
}
