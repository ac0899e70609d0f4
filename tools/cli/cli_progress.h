/*
 * cli_progress.h — a progress bar on stderr, drawn only when stderr is a
 * terminal, and the monotonic clock the subcommands time themselves with.
 */
#ifndef CLI_PROGRESS_H
#define CLI_PROGRESS_H

#include <stdint.h>

typedef struct cli_progress {
    int enabled;
    uint64_t done, total;
    double last_draw;
} cli_progress;

void cli_progress_init(cli_progress *p, uint64_t total, int allowed);
void cli_progress_add(cli_progress *p, uint64_t n, const char *label);
void cli_progress_end(cli_progress *p);

double cli_now(void); /* seconds, monotonic */

#endif /* CLI_PROGRESS_H */
