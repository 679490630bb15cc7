#include "config.h"

#include "daemon/dconfig_sources.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/dconfig_admin.h"

/* A source's name labels metrics and names jobs: printable, no quote, no
 * colon (it is followed by one in a job's id). */
static const char *check_source_name(const char *name)
{
    size_t n = strlen(name);
    if (n == 0)
        return "is empty";
    if (n > SOURCE_NAME_MAX)
        return "is longer than 63 bytes";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c <= ' ' || c >= 0x7f || c == '"' || c == '\\' || c == ':')
            return "may hold only printable ASCII, with no space, quote, backslash or colon";
    }
    return NULL;
}

static void read_password(struct conf_reader *r, const config_setting_t *s,
                          const char *where, struct source_conf *sc)
{
    const config_setting_t *pf = config_setting_get_member(s, "password_file");
    const char *path = NULL;
    if (conf_string(r, pf, where, &path) < 0 || !path)
        return;
    char why[600];
    sc->password = dconfig_read_secret(path, why, sizeof why);
    if (!sc->password)
        conf_fail(r, pf, "%spassword_file: %s", where, why);
}

static void read_table(struct conf_reader *r, const config_setting_t *s, const char *where,
                       struct source_conf *sc)
{
    const config_setting_t *t = config_setting_get_member(s, "table");
    const char *qualified = OUTBOX_DEFAULT_TABLE;
    char why[200];
    if (conf_string(r, t, where, &qualified) < 0)
        return;
    if (outbox_split_table(qualified, sc->schema, sc->table, sizeof sc->table, why,
                           sizeof why) < 0)
        conf_fail(r, t, "%stable: %s", where, why);
}

void dconfig_read_source(struct conf_reader *r, const config_setting_t *s, size_t i,
                         void *out)
{
    struct source_conf *sc = out;
    char where[64];
    snprintf(where, sizeof where, "sources.[%zu].", i);
    sc->line = (int)config_setting_source_line(s);
    sc->batch = 500;
    sc->poll_ms = 2000;
    sc->grace_ms = 30000;
    sc->replay_window_ms = 86400000;
    if (!config_setting_is_group(s)) {
        conf_fail(r, s, "sources.[%zu]: expected a group { type = \"postgres\"; conninfo "
                  "= ...; }", i);
        return;
    }
    static const char *const known[] = { "type", "name", "conninfo", "password_file",
                                         "table", "batch", "poll_interval", "failure_grace",
                                         "replay_window", NULL };
    conf_check_keys(r, s, where, known);
    const config_setting_t *type = config_setting_get_member(s, "type");
    const char *kind = NULL;
    conf_string(r, type, where, &kind);
    if (!r->failed && !kind)
        conf_fail(r, s, "%stype: missing (type = \"postgres\")", where);
    if (!r->failed && strcmp(kind, "postgres") != 0)
        conf_fail(r, type, "%stype: \"%s\": the only kind is \"postgres\"", where, kind);
    conf_string(r, config_setting_get_member(s, "conninfo"), where, &sc->conninfo);
    if (!r->failed && !sc->conninfo)
        conf_fail(r, s, "%sconninfo: missing (a libpq connection string, "
                  "\"host=/run/postgresql dbname=shop user=delayq\")", where);
    read_table(r, s, where, sc);
    sc->name = sc->table;
    const config_setting_t *name = config_setting_get_member(s, "name");
    conf_string(r, name, where, &sc->name);
    const char *bad = r->failed ? NULL : check_source_name(sc->name);
    if (bad)
        conf_fail(r, name, "%sname: \"%s\" %s", where, sc->name, bad);
    long long batch = sc->batch;
    conf_int(r, config_setting_get_member(s, "batch"), where, 1, SOURCE_BATCH_MAX, &batch);
    sc->batch = (int)batch;
    conf_duration(r, config_setting_get_member(s, "poll_interval"), where, 10, &sc->poll_ms);
    conf_duration(r, config_setting_get_member(s, "failure_grace"), where, 0, &sc->grace_ms);
    conf_duration(r, config_setting_get_member(s, "replay_window"), where, 60000,
                  &sc->replay_window_ms);
    if (!r->failed && sc->replay_window_ms > DQ_MAX_AHEAD_MS)
        conf_fail(r, config_setting_get_member(s, "replay_window"), "%sreplay_window: "
                  "more than 100 years", where);
    if (!r->failed)
        read_password(r, s, where, sc);
}

void dconfig_check_sources(struct conf_reader *r, const struct daemon_conf *dc)
{
    const config_setting_t *list = config_setting_get_member(config_root_setting(&dc->cfg),
                                                             "sources");
    for (size_t i = 0; i < dc->nsources && !r->failed; i++) {
        const struct source_conf *sc = &dc->sources[i];
        const config_setting_t *entry = config_setting_get_elem(list, (unsigned)i);
#ifndef HAVE_LIBPQ
        conf_fail(r, entry, "sources.[%zu]: this delayqd was built without PostgreSQL "
                  "(libpq): no source can be relayed", i);
#endif
        for (size_t j = 0; j < i && !r->failed; j++)
            if (strcmp(dc->sources[j].name, sc->name) == 0)
                conf_fail(r, entry, "sources.[%zu]: the name \"%s\" is taken by "
                          "sources.[%zu] (give one a name = \"...\")", i, sc->name, j);
    }
}

void dconfig_free_sources(struct source_conf *sources, size_t n)
{
    for (size_t i = 0; sources && i < n; i++)
        free(sources[i].password);
    free(sources);
}
