/*
 * doctor_file.c — a fingerprint as a file: `--save FILE` writes
 * every fact, `--compare FILE` reads one back and says whether the two
 * environments promise equal digests.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli_digest.h"
#include "commands/doctor.h"

int doctor_save(const doctor *d, const char *path, const di_digest *fp)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "detinfer doctor: cannot write '%s': %s\n", path, strerror(errno));
        return CLI_EXIT_FAIL;
    }
    char hex[DI_DIGEST_HEX_SIZE];
    cli_hex(fp, hex);
    fprintf(f, "# detinfer doctor fingerprint, profile %s, digest %s\n", cli_profile_name(d->profile), hex);
    for (int i = 0; i < d->facts.n; i++)
        fprintf(f, "%s=%s\n", d->facts.f[i].key, d->facts.f[i].value);
    int bad = ferror(f);
    if (fclose(f) || bad) {
        fprintf(stderr, "detinfer doctor: writing '%s' failed\n", path);
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

static int load(const char *path, cli_facts *facts)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "detinfer doctor: cannot read '%s': %s\n", path, strerror(errno));
        return CLI_EXIT_FAIL;
    }
    char line[1024];
    facts->n = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        char *eq = strchr(line, '=');
        if (line[0] == '#' || !line[0] || !eq)
            continue;
        *eq = '\0';
        cli_facts_add(facts, line, eq + 1);
    }
    fclose(f);
    if (!cli_facts_get(facts, "profile")) {
        fprintf(stderr, "detinfer doctor: '%s' is not a fingerprint saved by 'detinfer doctor --save'\n", path);
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

static int differences(const cli_facts *here, const cli_facts *other, doctor_difference *out, int max)
{
    int n = 0;
    for (int i = 0; i < here->n && n < max; i++) {
        const char *there = cli_facts_get(other, here->f[i].key);
        if (!there || strcmp(there, here->f[i].value))
            out[n++] = (doctor_difference){here->f[i].key, here->f[i].value, there};
    }
    for (int i = 0; i < other->n && n < max; i++)
        if (!cli_facts_get(here, other->f[i].key))
            out[n++] = (doctor_difference){other->f[i].key, NULL, other->f[i].value};
    return n;
}

int doctor_compare(const doctor *d, const char *path, doctor_comparison *c)
{
    int rc = load(path, &c->other);
    if (rc)
        return rc;
    const char *their_profile = cli_facts_get(&c->other, "profile");
    c->comparable = !strcmp(their_profile, cli_profile_name(d->profile));
    c->n_diff = differences(&d->facts, &c->other, c->diff, 2 * CLI_MAX_FACTS);
    cli_facts_digest(&c->other, strcmp(their_profile, "device") ? DI_PROFILE_PORTABLE : DI_PROFILE_DEVICE,
                     &c->theirs);
    c->promised = c->comparable;
    for (int i = 0; i < c->n_diff; i++)
        if (cli_fact_in_digest(c->diff[i].key, d->profile))
            c->promised = 0;
    return CLI_EXIT_OK;
}
