/*
 * nearest: which of a set of names a mistyped one most likely meant, for
 * error messages ("did you mean 'simple'?").
 *
 * Distance is the optimal string alignment distance (Levenshtein plus the
 * transposition of two neighbours, so "simpel" is 1 from "simple"),
 * compared byte by byte, case-sensitively. A candidate is near when its
 * distance is at most 1 for names of up to 4 bytes and at most 2 for
 * longer ones, and smaller than the name itself (a two-letter name is not
 * "near" every other two-letter name). Names longer than NEAREST_MAX_LEN
 * are never near. No allocation; any thread.
 */
#ifndef INFERD_BASE_NEAREST_H
#define INFERD_BASE_NEAREST_H

#include <stdbool.h>
#include <stddef.h>

#define NEAREST_MAX_LEN 128

/* The OSA distance of a[0..na) and b[0..nb), or NEAREST_MAX_LEN + 1 when
 * either is longer than NEAREST_MAX_LEN. */
size_t nearest_distance(const char *a, size_t na, const char *b, size_t nb);

/* A search over candidates offered one by one: init, then offer each
 * candidate; best is the nearest near one offered so far (the first of
 * equally near ones), or NULL. */
struct nearest {
    const char *name;
    size_t name_len;
    const char *best;
    size_t best_distance;
};

void nearest_init(struct nearest *n, const char *name, size_t name_len);
void nearest_offer(struct nearest *n, const char *candidate);

#endif
