/*
 * detinfer_common.h — every helper header of the detinfer tool at once,
 * for tools/serve/ (serve.h includes it). The tool's own files include the
 * cli_*.h headers they use.
 */
#ifndef DETINFER_COMMON_H
#define DETINFER_COMMON_H

#include "cli_commands.h"
#include "cli_digest.h"
#include "cli_model.h"
#include "cli_options.h"
#include "cli_progress.h"
#include "cli_random.h"
#include "cli_text.h"

#endif /* DETINFER_COMMON_H */
