/*
 * doctor.c — `detinfer doctor`: the environment fingerprint of
 * docs/DETERMINISM.md, each fact checked with an OK/INFO/WARN line.
 *
 * The facts and their digest are the tool's (cli/cli_fingerprint.c: serve
 * reports the same digest); the checks are doctor_checks.c, --save and
 * --compare doctor_file.c, the text and --json doctor_print.c. This file
 * holds the options and runs them in order.
 */
#include <stdlib.h>

#include "cli/cli_commands.h"
#include "commands/doctor.h"

enum { OPT_PROFILE, OPT_JSON, OPT_SAVE, OPT_COMPARE, OPT_STRICT, OPT_MODEL, OPT_BACKEND, OPT_DEVICE };

static const cli_option options[] = {
    [OPT_PROFILE] = {"--profile", "NAME", "the profile to fingerprint: portable (default), device or integer"},
    [OPT_JSON] = {"--json", NULL, "checks, facts and fingerprint as one JSON object"},
    [OPT_SAVE] = {"--save", "FILE", "write the fingerprint (every fact) to FILE"},
    [OPT_COMPARE] = {"--compare", "FILE", "compare with a fingerprint saved elsewhere; exit 1 unless equal digests are promised"},
    [OPT_STRICT] = {"--strict", NULL, "exit 1 when any check warns"},
    [OPT_MODEL] = {"--model", "FILE", "also open a session on FILE and report di_session_backend_info"},
    [OPT_BACKEND] = {"--backend", "NAME", "the session's backend with --model: cpu (default) or cuda"},
    [OPT_DEVICE] = {"--device", "N", "the session's CUDA device with --model (default 0)"},
    {NULL, NULL, NULL},
};

const cli_command doctor_command = {
    "doctor",
    "[--profile portable|device] [--json] [--save FILE] [--compare FILE] [--strict]\n"
    "       [--model FILE [--backend cpu|cuda] [--device N]]",
    "Prints the environment fingerprint: library version and build flags, CPU\n"
    "model and SIMD path, OS and libc, the host's floating-point state (for\n"
    "information: the library pins its own), and where\n"
    "present the CUDA driver and runtime, cuBLAS and cuDNN versions and GPUs, with\n"
    "OK/INFO/WARN checks and a digest of the facts the profile's digests depend on.\n"
    "In the portable profile hardware does not matter; in the device profile it does.\n"
    "Runs without CUDA (its libraries are loaded only if present).",
    options,
};

typedef struct doctor_opts {
    const char *save_path, *compare_path, *model_path;
    int json, strict;
    di_profile profile;
    cli_session_opts session; /* with --model */
} doctor_opts;

static int apply_option(int k, const char *v, void *opts)
{
    doctor_opts *o = opts;
    const char *name = options[k].name;
    switch (k) {
    case OPT_PROFILE: return cli_parse_profile(&doctor_command, name, v, &o->profile);
    case OPT_JSON: o->json = 1; return 1;
    case OPT_SAVE: o->save_path = v; return 1;
    case OPT_COMPARE: o->compare_path = v; return 1;
    case OPT_STRICT: o->strict = 1; return 1;
    case OPT_MODEL: o->model_path = v; return 1;
    case OPT_BACKEND: return cli_parse_backend(&doctor_command, name, v, &o->session.backend);
    case OPT_DEVICE: return cli_parse_device(&doctor_command, name, v, &o->session.device);
    }
    return 0;
}

int cli_cmd_doctor(int argc, char **argv)
{
    doctor_opts o = {.profile = CLI_DEFAULT_PROFILE, /* the profile the other tools run by default */
                     .session = {.backend = DI_BACKEND_CPU, .profile = CLI_DEFAULT_PROFILE, .threads = 1,
                                 .max_sequences = 1, .context_length = 16}};
    int rc = cli_parse_options(&doctor_command, argc, argv, apply_option, &o, NULL);
    if (rc != CLI_EXIT_OK)
        return rc < 0 ? CLI_EXIT_OK : rc;
    doctor *d = calloc(1, sizeof *d);
    doctor_comparison *c = calloc(1, sizeof *c);
    rc = !d || !c ? cli_fail(&doctor_command, "allocating", DI_ERR_OUT_OF_MEMORY, "") : CLI_EXIT_OK;
    if (d)
        d->profile = o.profile;
    di_digest fp;
    if (rc == CLI_EXIT_OK) {
        cli_cuda_info ci;
        cli_cuda_probe(&ci);
        cli_facts_collect(&d->facts, d->profile, &ci);
        doctor_checks(d, &ci);
        o.session.profile = d->profile;
        if (o.model_path)
            doctor_session_checks(d, o.model_path, &o.session);
        cli_facts_digest(&d->facts, d->profile, &fp);
        if (o.compare_path)
            rc = doctor_compare(d, o.compare_path, c);
    }
    if (rc == CLI_EXIT_OK) {
        if (o.json) {
            rc = doctor_print_json(d, &fp, o.compare_path, c);
        } else {
            doctor_print_text(d, &fp);
            if (o.compare_path)
                doctor_print_compare_text(d, o.compare_path, c);
        }
        if (rc == CLI_EXIT_OK && o.save_path)
            rc = doctor_save(d, o.save_path, &fp);
        if (rc == CLI_EXIT_OK && o.compare_path && !c->promised)
            rc = CLI_EXIT_FAIL;
        for (int i = 0; rc == CLI_EXIT_OK && o.strict && i < d->n_checks; i++)
            if (d->checks[i].lv == LV_WARN)
                rc = CLI_EXIT_FAIL;
    }
    free(d);
    free(c);
    return rc < 0 ? CLI_EXIT_OK : rc;
}
