/*
 * cli_progress.c — the stderr progress bar and the monotonic clock (see
 * cli_progress.h).
 */
#include "cli/cli_progress.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cli_progress_init(cli_progress *p, uint64_t total, int allowed)
{
    p->enabled = allowed && isatty(STDERR_FILENO);
    p->done = 0;
    p->total = total ? total : 1;
    p->last_draw = 0;
}

void cli_progress_add(cli_progress *p, uint64_t n, const char *label)
{
    p->done += n;
    if (!p->enabled)
        return;
    double t = cli_now();
    if (t - p->last_draw < 0.1 && p->done < p->total)
        return; /* redraw at most ten times a second */
    p->last_draw = t;
    const int width = 30;
    uint64_t done = p->done > p->total ? p->total : p->done;
    int filled = (int)(done * (uint64_t)width / p->total);
    fprintf(stderr, "\r[%.*s%*s] %3d%% %-28.28s", filled, "##############################", width - filled,
            "", (int)(done * 100 / p->total), label ? label : "");
    fflush(stderr);
}

void cli_progress_end(cli_progress *p)
{
    if (p->enabled)
        fprintf(stderr, "\r%*s\r", 70, "");
}
