/*
 * doctor_print.c — what `detinfer doctor` prints: the checks, the
 * fingerprint and the keys it covers, and a comparison with a saved one;
 * as text, or as one JSON object with --json.
 */
#include <stdio.h>

#include "cli/cli_digest.h"
#include "cli/cli_json.h"
#include "commands/doctor.h"

static const char *level_word(doctor_level lv)
{
    return lv == LV_OK ? "OK" : lv == LV_WARN ? "WARN" : "INFO";
}

void doctor_print_compare_text(const doctor *d, const char *path, const doctor_comparison *c)
{
    char hex[DI_DIGEST_HEX_SIZE];
    cli_hex(&c->theirs, hex);
    printf("\ncompared with %s (fingerprint %s):\n", path, hex);
    for (int i = 0; i < c->n_diff; i++) {
        const doctor_difference *x = &c->diff[i];
        int matters = cli_fact_in_digest(x->key, d->profile);
        printf("  %-5s %-28s here %s, there %s%s\n", matters ? "DIFF" : "INFO", x->key, x->here ? x->here : "(absent)",
               x->there ? x->there : "(absent)", matters ? "" : "  (does not change digests in this profile)");
    }
    if (!c->comparable)
        printf("NOT COMPARABLE: the file was taken for another profile; run doctor with its --profile\n");
    else if (c->promised)
        printf("EQUAL DIGESTS PROMISED: the two environments differ in nothing the %s profile depends on\n",
               cli_profile_name(d->profile));
    else
        printf("EQUAL DIGESTS NOT PROMISED: the environments differ in what the %s profile depends on (DIFF above)\n",
               cli_profile_name(d->profile));
}

void doctor_print_text(const doctor *d, const di_digest *fp)
{
    printf("detinfer doctor: environment fingerprint for the %s profile\n", cli_profile_name(d->profile));
    for (int i = 0; i < d->n_checks; i++)
        printf("  %-5s %-24s %s\n", level_word(d->checks[i].lv), d->checks[i].name, d->checks[i].text);
    char hex[DI_DIGEST_HEX_SIZE];
    cli_hex(fp, hex);
    printf("fingerprint (%s profile): %s\n", cli_profile_name(d->profile), hex);
    printf("  covers:");
    for (int i = 0; i < d->facts.n; i++)
        if (cli_fact_in_digest(d->facts.f[i].key, d->profile))
            printf(" %s", d->facts.f[i].key);
    if (d->profile != DI_PROFILE_DEVICE)
        printf("\n  (CPU, GPU, OS and CUDA versions do not change digests in the %s profile)\n",
               cli_profile_name(d->profile));
    else
        printf("\n  (the device profile's digests also depend on the GPU model and CUDA library versions)\n");
}

static json_t *compare_json(const doctor *d, const char *path, const doctor_comparison *c)
{
    json_t *differences = json_array();
    for (int i = 0; i < c->n_diff; i++)
        differences = cli_json_push(differences,
                                    json_pack("{s:s, s:o, s:o, s:b}", "key", c->diff[i].key, "here",
                                              cli_json_text(c->diff[i].here), "there", cli_json_text(c->diff[i].there),
                                              "matters", cli_fact_in_digest(c->diff[i].key, d->profile)));
    return json_pack("{s:o, s:o, s:b, s:b, s:o}", "file", cli_json_text(path), "fingerprint",
                     cli_json_digest(&c->theirs), "comparable", c->comparable, "equal_digests_promised", c->promised,
                     "differences", differences);
}

int doctor_print_json(const doctor *d, const di_digest *fp, const char *path, const doctor_comparison *c)
{
    json_t *checks = json_array(), *facts = json_object(), *keys = json_array();
    for (int i = 0; i < d->n_checks; i++)
        checks = cli_json_push(checks, json_pack("{s:s, s:s, s:o}", "status", level_word(d->checks[i].lv), "name",
                                                 d->checks[i].name, "detail", cli_json_text(d->checks[i].text)));
    for (int i = 0; i < d->facts.n; i++)
        facts = cli_json_set(facts, d->facts.f[i].key, cli_json_text(d->facts.f[i].value));
    for (int i = 0; i < d->facts.n; i++)
        if (cli_fact_in_digest(d->facts.f[i].key, d->profile))
            keys = cli_json_push(keys, json_string(d->facts.f[i].key));
    json_t *root = json_pack("{s:s, s:s, s:o, s:o, s:o, s:o}", "command", "doctor", "profile",
                             cli_profile_name(d->profile), "checks", checks, "facts", facts, "fingerprint_keys", keys,
                             "fingerprint", cli_json_digest(fp));
    if (path)
        root = cli_json_set(root, "compare", compare_json(d, path, c));
    return cli_json_emit(&doctor_command, root, stdout);
}
