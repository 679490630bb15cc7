#include "daemon/dconfig_sched.h"

#include <stdio.h>
#include <string.h>

#include "lib/keys.h"
#include "lib/sched.h"
#include "util/cron.h"

/* A required string member `key` of group `s`, or NULL after conf_fail. */
static const char *required(struct conf_reader *r, const config_setting_t *s,
                            const char *where, const char *key)
{
    const char *v = NULL;
    const config_setting_t *m = config_setting_get_member(s, key);
    conf_string(r, m, where, &v);
    if (!r->failed && !v)
        conf_fail(r, s, "%s%s: missing", where, key);
    return v;
}

/* Fail at member `key` with `why` when `why` is not NULL. */
static void refuse(struct conf_reader *r, const config_setting_t *s, const char *where,
                   const char *key, const char *why)
{
    if (why && !r->failed)
        conf_fail(r, config_setting_get_member(s, key), "%s%s: %s", where, key, why);
}

void dconfig_read_schedule(struct conf_reader *r, const config_setting_t *s, size_t i,
                           void *out)
{
    struct sched_conf *sc = out;
    char where[64], err[300];
    snprintf(where, sizeof where, "schedules.[%zu].", i);
    sc->line = (int)config_setting_source_line(s);
    sc->tz = "";
    sc->payload = "";
    if (!config_setting_is_group(s)) {
        conf_fail(r, s, "schedules.[%zu]: expected a group { queue = ...; name = ...; }", i);
        return;
    }
    static const char *const known[] = { "queue", "name", "cron", "tz", "type", "payload",
                                         "max_attempts", "catch_up", NULL };
    conf_check_keys(r, s, where, known);
    sc->queue = required(r, s, where, "queue");
    sc->name = required(r, s, where, "name");
    sc->expr = required(r, s, where, "cron");
    sc->type = required(r, s, where, "type");
    conf_string(r, config_setting_get_member(s, "tz"), where, &sc->tz);
    conf_string(r, config_setting_get_member(s, "payload"), where, &sc->payload);
    long long max = 0;
    conf_int(r, config_setting_get_member(s, "max_attempts"), where, 1, 1000000, &max);
    sc->max_attempts = (int)max;
    const char *cu = "one";
    conf_string(r, config_setting_get_member(s, "catch_up"), where, &cu);
    if (r->failed)
        return;
    refuse(r, s, where, "queue", keys_check_queue(sc->queue));
    refuse(r, s, where, "name", sched_check_name(sc->name));
    refuse(r, s, where, "type", keys_check_type(sc->type));
    struct cron_expr e;
    if (!r->failed && cron_parse(sc->expr, &e, err, sizeof err) < 0)
        refuse(r, s, where, "cron", err);
    if (!r->failed && cron_check_zone(sc->tz, err, sizeof err) < 0)
        refuse(r, s, where, "tz", err);
    if (!r->failed && dq_catch_up_parse(cu, &sc->catch_up) < 0)
        refuse(r, s, where, "catch_up", "expected \"one\", \"all\" or \"none\"");
}

void dconfig_check_schedules(struct conf_reader *r, const struct daemon_conf *dc)
{
    const config_setting_t *list = config_setting_get_member(config_root_setting(&dc->cfg),
                                                             "schedules");
    for (size_t i = 0; i < dc->nschedules && !r->failed; i++) {
        const struct sched_conf *sc = &dc->schedules[i];
        const config_setting_t *entry = config_setting_get_elem(list, (unsigned)i);
        size_t q = 0;
        while (q < dc->nqueues && strcmp(dc->queues[q].name, sc->queue) != 0)
            q++;
        if (q == dc->nqueues)
            conf_fail(r, entry, "schedules.[%zu].queue: \"%s\" is not one of the queues", i,
                      sc->queue);
        for (size_t j = 0; j < i && !r->failed; j++)
            if (strcmp(dc->schedules[j].queue, sc->queue) == 0
                && strcmp(dc->schedules[j].name, sc->name) == 0)
                conf_fail(r, entry, "schedules.[%zu]: schedule %s of queue %s is declared "
                          "twice", i, sc->name, sc->queue);
    }
}
