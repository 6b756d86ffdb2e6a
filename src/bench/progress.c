#include "bench/progress.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"

#define BAR_WIDTH 30

void progress_start(struct progress *p, FILE *f, const char *label)
{
    memset(p, 0, sizeof *p);
    p->f = f;
    const char *term = getenv("TERM");
    p->on = isatty(fileno(f)) && !(term && strcmp(term, "dumb") == 0);
    p->t0_ns = clock_now_ns();
    snprintf(p->label, sizeof p->label, "%s", label);
}

void progress_update(struct progress *p, double fraction, const char *detail)
{
    if (!p->on)
        return;
    char bar[BAR_WIDTH + 1];
    if (fraction >= 0) {
        if (fraction > 1)
            fraction = 1;
        int filled = (int)(fraction * BAR_WIDTH + 0.5);
        for (int i = 0; i < BAR_WIDTH; i++)
            bar[i] = i < filled ? '#' : '.';
    } else {
        /* a marker of three going back and forth */
        unsigned span = BAR_WIDTH - 3, pos = p->frame++ % (2 * span);
        if (pos > span)
            pos = 2 * span - pos;
        for (int i = 0; i < BAR_WIDTH; i++)
            bar[i] = (unsigned)i >= pos && (unsigned)i < pos + 3 ? '=' : ' ';
    }
    bar[BAR_WIDTH] = '\0';
    double secs = (double)(clock_now_ns() - p->t0_ns) / 1e9;
    if (fraction >= 0)
        fprintf(p->f, "\r%s [%s] %3d%% %.1fs%s%s\033[K", p->label, bar, (int)(fraction * 100), secs,
                detail ? "  " : "", detail ? detail : "");
    else
        fprintf(p->f, "\r%s [%s] %.1fs%s%s\033[K", p->label, bar, secs, detail ? "  " : "",
                detail ? detail : "");
    fflush(p->f);
}

void progress_end(struct progress *p)
{
    if (!p->on)
        return;
    fputs("\r\033[K", p->f);
    fflush(p->f);
    p->on = false;
}
