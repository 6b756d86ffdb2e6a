/*
 * progress: a one-line progress display on a terminal, for `inferd bench`
 * (the fraction of its run time elapsed) and the CLI's long requests
 * (`inferd models load`: the time waited so far).
 *
 * progress_start() turns the display on only when f is a terminal
 * (isatty) and $TERM is not "dumb"; otherwise every call is a no-op, so
 * piped or redirected output never holds control characters. The line is
 * redrawn in place ("\r", then erased to its end): the label, a bar of
 * the fraction (or a moving marker when the fraction is unknown, < 0),
 * the seconds elapsed, and a short detail. progress_end() erases it.
 * Thread: one thread owns a progress.
 */
#ifndef INFERD_BENCH_PROGRESS_H
#define INFERD_BENCH_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct progress {
    FILE *f;
    bool on;
    uint64_t t0_ns;
    unsigned frame; /* the marker's position when the fraction is unknown */
    char label[64];
};

void progress_start(struct progress *p, FILE *f, const char *label);
/* fraction in [0, 1], or < 0 when unknown; detail may be NULL. */
void progress_update(struct progress *p, double fraction, const char *detail);
void progress_end(struct progress *p);

#endif
