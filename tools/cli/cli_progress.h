/*
 * cli_progress.h — a progress bar on stderr, drawn only when stderr is a
 * terminal, and the monotonic clock the subcommands time themselves with.
 */
#ifndef CLI_PROGRESS_H
#define CLI_PROGRESS_H

#include <stdint.h>

typedef struct dt_progress {
    int enabled;
    uint64_t done, total;
    double last_draw;
} dt_progress;

void dt_progress_init(dt_progress *p, uint64_t total, int allowed);
void dt_progress_add(dt_progress *p, uint64_t n, const char *label);
void dt_progress_end(dt_progress *p);

double dt_now(void); /* seconds, monotonic */

#endif /* CLI_PROGRESS_H */
