#include "daemon/dconfig.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/conf_reader.h"
#include "daemon/dconfig_admin.h"
#include "daemon/dconfig_sched.h"
#include "daemon/dconfig_sources.h"
#include "daemon/log.h"
#include "lib/keys.h"

#ifndef PKGLIBDIR
#define PKGLIBDIR "/usr/lib/delayq"
#endif

/* The settings of this file by name, from the shared readers
 * (config/conf_reader.h): a member left out keeps its default. */
static int get_string(struct conf_reader *r, const config_setting_t *g, const char *where,
                      const char *name, const char **out)
{
    return conf_string(r, config_setting_get_member(g, name), where, out);
}

static int get_int(struct conf_reader *r, const config_setting_t *g, const char *where,
                   const char *name, int min, int max, int *out)
{
    long long v = *out;
    int rc = conf_int(r, config_setting_get_member(g, name), where, min, max, &v);
    *out = (int)v;
    return rc;
}

static int get_duration(struct conf_reader *r, const config_setting_t *g, const char *where,
                        const char *name, int64_t min_ms, int64_t *out)
{
    return conf_duration(r, config_setting_get_member(g, name), where, min_ms, out);
}

static char *dup_str(const char *s)
{
    return s ? strdup(s) : NULL;
}

static void read_backoff(struct conf_reader *r, const config_setting_t *q,
                         const char *where, dq_retry_policy *p)
{
    const config_setting_t *b = config_setting_get_member(q, "backoff");
    if (!b)
        return;
    if (!config_setting_is_group(b)) {
        conf_fail(r, b, "%sbackoff: expected a group { base = ...; }", where);
        return;
    }
    char w[160];
    snprintf(w, sizeof w, "%sbackoff.", where);
    static const char *const known[] = { "base", "cap", "jitter", NULL };
    conf_check_keys(r, b, w, known);
    get_duration(r, b, w, "base", 1, &p->base_ms);
    get_duration(r, b, w, "cap", 1, &p->cap_ms);
    conf_float(r, config_setting_get_member(b, "jitter"), w, 0.0, 1.0, &p->jitter);
    if (!r->failed && p->cap_ms < p->base_ms)
        conf_fail(r, b, "%sbackoff: cap is shorter than base", where);
}

static void read_queue(struct conf_reader *r, const config_setting_t *q, size_t i,
                       struct queue_conf *qc)
{
    char where[64];
    snprintf(where, sizeof where, "queues.[%zu].", i);
    qc->line = (int)config_setting_source_line(q);
    qc->workers = 1;
    qc->lease_ms = 5 * 60 * 1000;
    qc->batch = 16;
    qc->partitions = 1;
    dq_retry_policy_init(&qc->retry);
    if (!config_setting_is_group(q)) {
        conf_fail(r, q, "queues.[%zu]: expected a group { name = ...; }", i);
        return;
    }
    static const char *const known[] = { "name", "workers", "lease", "batch",
                                         "max_attempts", "backoff", "partitions", NULL };
    conf_check_keys(r, q, where, known);
    const char *name = NULL;
    get_string(r, q, where, "name", &name);
    if (!r->failed && !name)
        conf_fail(r, q, "%sname: missing", where);
    const char *why = r->failed ? NULL : keys_check_queue(name);
    if (why)
        conf_fail(r, config_setting_get_member(q, "name"), "%sname: %s", where, why);
    qc->name = dup_str(name);
    get_int(r, q, where, "workers", 0, DCONFIG_MAX_WORKERS, &qc->workers);
    get_duration(r, q, where, "lease", 1000, &qc->lease_ms);
    get_int(r, q, where, "batch", 1, DQ_CLAIM_MAX, &qc->batch);
    get_int(r, q, where, "max_attempts", 1, 1000000, &qc->retry.default_max_attempts);
    read_backoff(r, q, where, &qc->retry);
    get_int(r, q, where, "partitions", 1, KEYS_PARTITIONS_MAX, &qc->partitions);
    qc->partitions_set = config_setting_get_member(q, "partitions") != NULL;
}

/* Whether `name` is "X:<digits>": the key tag of partition <digits> of a
 * queue named X ({X:<digits>}).  *xlen is then X's length. */
static int is_partition_tag(const char *name, size_t *xlen)
{
    const char *colon = strrchr(name, ':');
    if (!colon || colon == name || !colon[1])
        return 0;
    for (const char *p = colon + 1; *p; p++)
        if (*p < '0' || *p > '9')
            return 0;
    *xlen = (size_t)(colon - name);
    return 1;
}

const struct queue_conf *dconfig_partition_clash(const struct daemon_conf *dc,
                                                 const struct queue_conf *x)
{
    size_t xlen;
    for (size_t i = 0; i < dc->nqueues; i++)
        if (is_partition_tag(dc->queues[i].name, &xlen) && strlen(x->name) == xlen
            && strncmp(x->name, dc->queues[i].name, xlen) == 0)
            return &dc->queues[i];
    return NULL;
}

/* A queue named "X:<digits>" next to a partitioned queue X would share
 * the key tag {X:<digits>} with one of X's partitions: refused. */
static void check_partition_names(struct conf_reader *r, const struct daemon_conf *dc,
                                  const config_setting_t *qs)
{
    for (size_t j = 0; j < dc->nqueues && !r->failed; j++) {
        const struct queue_conf *x = &dc->queues[j];
        const struct queue_conf *tag = x->partitions > 1 ? dconfig_partition_clash(dc, x)
                                                         : NULL;
        if (!tag)
            continue;
        size_t i = (size_t)(tag - dc->queues);
        const config_setting_t *q = config_setting_get_elem(qs, (unsigned)i);
        conf_fail(r, config_setting_get_member(q, "name"),
                  "queues.[%zu].name: '%s' collides with the keys of partitioned queue "
                  "'%s' (line %d)", i, tag->name, x->name, x->line);
    }
}

static void read_handler(struct conf_reader *r, const config_setting_t *h, size_t i,
                         struct handler_conf *hc)
{
    char where[64];
    snprintf(where, sizeof where, "handlers.[%zu].", i);
    hc->line = (int)config_setting_source_line(h);
    hc->timeout_ms = 60 * 1000;
    hc->cancel_grace_ms = DCONFIG_CANCEL_GRACE_MS;
    if (!config_setting_is_group(h)) {
        conf_fail(r, h, "handlers.[%zu]: expected a group { type = ...; file = ...; }", i);
        return;
    }
    static const char *const known[] = { "type", "file", "timeout", "cancel_grace",
                                         "max_attempts", "settings", NULL };
    conf_check_keys(r, h, where, known);
    const char *type = NULL, *file = NULL;
    get_string(r, h, where, "type", &type);
    get_string(r, h, where, "file", &file);
    if (!r->failed && !type)
        conf_fail(r, h, "%stype: missing", where);
    if (!r->failed && !file)
        conf_fail(r, h, "%sfile: missing", where);
    if (!r->failed && strcmp(type, DCONFIG_FALLBACK_TYPE) != 0 && keys_check_type(type))
        conf_fail(r, config_setting_get_member(h, "type"), "%stype: %s", where,
                keys_check_type(type));
    hc->type = dup_str(type);
    hc->file = dup_str(file);
    get_duration(r, h, where, "timeout", 1, &hc->timeout_ms);
    get_duration(r, h, where, "cancel_grace", 0, &hc->cancel_grace_ms);
    get_int(r, h, where, "max_attempts", 1, 1000000, &hc->max_attempts);
    hc->settings = config_setting_get_member(h, "settings");
    if (hc->settings && !config_setting_is_group(hc->settings))
        conf_fail(r, hc->settings, "%ssettings: expected a group { ... }", where);
}

/* Read a list of groups with `read` into a fresh array. */
static void *read_list(struct conf_reader *r, const config_setting_t *list,
                       const char *name, size_t elem, size_t max, size_t *n,
                       void (*read)(struct conf_reader *, const config_setting_t *,
                                    size_t, void *))
{
    *n = 0;
    if (!list)
        return NULL;
    if (!config_setting_is_list(list) && !config_setting_is_array(list)) {
        conf_fail(r, list, "%s: expected a list ( { ... }, { ... } )", name);
        return NULL;
    }
    size_t len = (size_t)config_setting_length(list);
    if (len > max) {
        conf_fail(r, list, "%s: more than %zu entries", name, max);
        return NULL;
    }
    char *arr = calloc(len ? len : 1, elem);
    if (!arr) {
        conf_fail(r, list, "out of memory");
        return NULL;
    }
    *n = len;
    for (size_t i = 0; i < len; i++)
        read(r, config_setting_get_elem(list, (unsigned)i), i, arr + i * elem);
    return arr;
}

static void read_queue_cb(struct conf_reader *r, const config_setting_t *s, size_t i, void *out)
{
    read_queue(r, s, i, out);
}

static void read_handler_cb(struct conf_reader *r, const config_setting_t *s, size_t i, void *out)
{
    read_handler(r, s, i, out);
}

static void read_log_and_reaper(struct conf_reader *r, struct daemon_conf *dc,
                                const config_setting_t *root)
{
    const config_setting_t *log = config_setting_get_member(root, "log");
    if (log) {
        static const char *const known[] = { "level", "target", NULL };
        conf_check_keys(r, log, "log.", known);
        const char *level = NULL, *target = NULL;
        get_string(r, log, "log.", "level", &level);
        get_string(r, log, "log.", "target", &target);
        if (level && !r->failed && (dc->log_level = log_level_parse(level)) < 0)
            conf_fail(r, config_setting_get_member(log, "level"),
                    "log.level: '%s' is not debug, info, warn or err", level);
        if (target && !r->failed) {
            if (strcmp(target, "syslog") == 0)
                dc->log_syslog = 1;
            else if (strcmp(target, "stderr") != 0)
                conf_fail(r, config_setting_get_member(log, "target"),
                        "log.target: '%s' is not stderr or syslog", target);
        }
    }
    const config_setting_t *reaper = config_setting_get_member(root, "reaper");
    if (reaper) {
        static const char *const known[] = { "interval", "batch", "fsck_interval", NULL };
        conf_check_keys(r, reaper, "reaper.", known);
        get_duration(r, reaper, "reaper.", "interval", 10, &dc->reaper_interval_ms);
        get_int(r, reaper, "reaper.", "batch", 1, DQ_CLAIM_MAX, &dc->reaper_batch);
        get_duration(r, reaper, "reaper.", "fsck_interval", 0, &dc->fsck_interval_ms);
    }
}

/* Cross-checks: unique names and types, and leases longer than every
 * timeout, so that a job is never claimed twice while its handler may
 * still be running. */
static void check_consistency(struct conf_reader *r, struct daemon_conf *dc)
{
    const config_setting_t *root = config_root_setting(&dc->cfg);
    const config_setting_t *qs = config_setting_get_member(root, "queues");
    const config_setting_t *hs = config_setting_get_member(root, "handlers");
    for (size_t i = 0; i < dc->nqueues && !r->failed; i++)
        for (size_t j = 0; j < i; j++)
            if (strcmp(dc->queues[i].name, dc->queues[j].name) == 0)
                conf_fail(r, config_setting_get_elem(qs, (unsigned)i),
                        "queues.[%zu]: queue '%s' is configured twice", i, dc->queues[i].name);
    int64_t longest = 0;
    for (size_t i = 0; i < dc->nhandlers && !r->failed; i++) {
        for (size_t j = 0; j < i; j++)
            if (strcmp(dc->handlers[i].type, dc->handlers[j].type) == 0)
                conf_fail(r, config_setting_get_elem(hs, (unsigned)i),
                        "handlers.[%zu]: type '%s' has two handlers", i, dc->handlers[i].type);
        if (dc->handlers[i].timeout_ms > longest)
            longest = dc->handlers[i].timeout_ms;
    }
    for (size_t i = 0; i < dc->nqueues && !r->failed; i++)
        if (dc->queues[i].lease_ms <= longest + 1000)
            conf_fail(r, config_setting_get_elem(qs, (unsigned)i),
                    "queues.[%zu].lease: %llds must be longer than the longest handler "
                    "timeout (%llds) plus 1s", i, (long long)dc->queues[i].lease_ms / 1000,
                    (long long)longest / 1000);
    check_partition_names(r, dc, qs);
    if (!r->failed && dc->nqueues == 0)
        conf_fail(r, NULL, "no queues configured (queues = ( { name = \"...\"; } );)");
}

int dconfig_load(struct daemon_conf *dc, const char *path, char *err, size_t errlen)
{
    memset(dc, 0, sizeof *dc);
    config_init(&dc->cfg);
    redis_conf_init(&dc->redis);
    dc->shutdown_timeout_ms = 30000;
    dc->reaper_interval_ms = 60000;
    dc->reaper_batch = 100;
    dc->fsck_interval_ms = 60000;
    dc->log_level = DQ_LOG_INFO;
    dc->claim_failure_grace_ms = 10000;
    dconfig_admin_defaults(dc);
    struct conf_reader r;
    conf_reader_init(&r, path, err, errlen);
    if (conf_read_file(&dc->cfg, path, err, errlen) < 0)
        goto fail;
    dc->path = strdup(path);
    if (redis_conf_read(&dc->redis, &dc->cfg, path, err, errlen) < 0)
        goto fail;
    const config_setting_t *root = config_root_setting(&dc->cfg);
    static const char *const known[] = { "redis", "log", "handler_dir", "shutdown_timeout",
                                         "reaper", "queues", "handlers", "metrics",
                                         "admin", "schedules", "sources", NULL };
    conf_check_keys(&r, root, "", known);
    const char *dir = PKGLIBDIR "/handlers";
    get_string(&r, root, "", "handler_dir", &dir);
    dc->handler_dir = strdup(dir);
    get_duration(&r, root, "", "shutdown_timeout", 0, &dc->shutdown_timeout_ms);
    read_log_and_reaper(&r, dc, root);
    dconfig_read_admin(&r, dc, root);
    dc->queues = read_list(&r, config_setting_get_member(root, "queues"), "queues",
                           sizeof *dc->queues, DCONFIG_MAX_QUEUES, &dc->nqueues,
                           read_queue_cb);
    dc->handlers = read_list(&r, config_setting_get_member(root, "handlers"), "handlers",
                             sizeof *dc->handlers, 1000, &dc->nhandlers, read_handler_cb);
    dc->schedules = read_list(&r, config_setting_get_member(root, "schedules"),
                              "schedules", sizeof *dc->schedules, 10000, &dc->nschedules,
                              dconfig_read_schedule);
    dc->sources = read_list(&r, config_setting_get_member(root, "sources"), "sources",
                            sizeof *dc->sources, DCONFIG_MAX_SOURCES, &dc->nsources,
                            dconfig_read_source);
    if (!r.failed)
        check_consistency(&r, dc);
    if (!r.failed)
        dconfig_check_schedules(&r, dc);
    if (!r.failed)
        dconfig_check_sources(&r, dc);
    int total = 0;
    for (size_t i = 0; i < dc->nqueues; i++)
        total += dc->queues[i].workers;
    if (!r.failed && total > DCONFIG_MAX_WORKERS)
        conf_fail(&r, NULL, "%d workers in all: at most %d", total, DCONFIG_MAX_WORKERS);
    if (r.failed)
        goto fail;
    return 0;
fail:
    dconfig_free(dc);
    return -1;
}

void dconfig_free(struct daemon_conf *dc)
{
    for (size_t i = 0; i < dc->nqueues; i++)
        free(dc->queues[i].name);
    for (size_t i = 0; i < dc->nhandlers; i++) {
        free(dc->handlers[i].type);
        free(dc->handlers[i].file);
    }
    free(dc->queues);
    free(dc->handlers);
    free(dc->schedules);
    dconfig_free_sources(dc->sources, dc->nsources);
    free(dc->handler_dir);
    free(dc->metrics_listen);
    free(dc->admin_token);
    free(dc->admin_basic);
    for (size_t i = 0; i < dc->nadmin_hosts; i++)
        free(dc->admin_hosts[i]);
    free(dc->admin_hosts);
    free(dc->path);
    redis_conf_free(&dc->redis);
    if (dc->cfg.root)
        config_destroy(&dc->cfg);
    memset(dc, 0, sizeof *dc);
}

const struct handler_conf *dconfig_handler_for(const struct daemon_conf *dc,
                                               const char *type)
{
    const struct handler_conf *fallback = NULL;
    for (size_t i = 0; i < dc->nhandlers; i++) {
        if (type && strcmp(dc->handlers[i].type, type) == 0)
            return &dc->handlers[i];
        if (strcmp(dc->handlers[i].type, DCONFIG_FALLBACK_TYPE) == 0)
            fallback = &dc->handlers[i];
    }
    return fallback;
}

int dconfig_max_attempts(const struct daemon_conf *dc, const struct queue_conf *q,
                         const char *type)
{
    const struct handler_conf *h = dconfig_handler_for(dc, type);
    if (h && h->max_attempts > 0)
        return h->max_attempts;
    return q->retry.default_max_attempts;
}

dq_retry_policy dconfig_retry_for(const struct daemon_conf *dc, const struct queue_conf *q,
                                  const char *type)
{
    dq_retry_policy policy = q->retry;
    policy.default_max_attempts = dconfig_max_attempts(dc, q, type);
    return policy;
}
