#include "daemon/worker/handlers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/log.h"

/* The log service handed to handlers: their lines go through ours. */
static void handler_log(enum dq_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void handler_log(enum dq_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vmsg((int)level, fmt, ap);
    va_end(ap);
}

static const struct cancel_request *cancel_row;

void handlers_watch_cancels(const struct cancel_request *row)
{
    cancel_row = row;
}

int handlers_cancel_asked(int64_t fence, const char *id)
{
    return cancel_row && cancel_request_matches(cancel_row, fence, id, NULL);
}

int handlers_job_cancelled(const dq_handler_job *job)
{
    return job && handlers_cancel_asked(job->fence, job->id);
}

static int open_entry(struct handler_entry *e, const struct daemon_conf *dc,
                      char *err, size_t errlen)
{
    char why[600];
    if (handler_load(&e->lh, dc->handler_dir, e->conf->file, why, sizeof why) < 0)
        goto fail;
    e->settings = settings_new(e->conf->settings);
    if (!e->settings) {
        snprintf(why, sizeof why, "out of memory");
        goto fail;
    }
    e->host = settings_host(handler_log, e->conf->timeout_ms);
    e->host.cancelled = handlers_job_cancelled;
    if (handler_init(&e->lh, &e->host, e->settings, why, sizeof why) < 0)
        goto fail;
    return 0;
fail:
    snprintf(err, errlen, "%s:%d: %s", dc->path, e->conf->line, why);
    return -1;
}

int handlers_open(struct handler_table *t, const struct daemon_conf *dc,
                  char *err, size_t errlen)
{
    t->n = 0;
    t->entries = calloc(dc->nhandlers ? dc->nhandlers : 1, sizeof *t->entries);
    if (!t->entries) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < dc->nhandlers; i++) {
        struct handler_entry *e = &t->entries[t->n++];
        e->conf = &dc->handlers[i];
        if (open_entry(e, dc, err, errlen) < 0) {
            handlers_close(t);
            return -1;
        }
    }
    return 0;
}

struct daemon_conf *handlers_load_config(const char *path, struct handler_table *t,
                                         char *err, size_t errlen)
{
    struct daemon_conf *conf = malloc(sizeof *conf);
    if (!conf) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (dconfig_load(conf, path, err, errlen) < 0) {
        free(conf);
        return NULL;
    }
    if (handlers_open(t, conf, err, errlen) < 0) {
        dconfig_free(conf);
        free(conf);
        return NULL;
    }
    return conf;
}

void handlers_close(struct handler_table *t)
{
    for (size_t i = 0; i < t->n; i++) {
        handler_unload(&t->entries[i].lh);
        if (t->entries[i].settings)
            settings_free(t->entries[i].settings);
    }
    free(t->entries);
    t->entries = NULL;
    t->n = 0;
}

struct handler_entry *handlers_find(struct handler_table *t, const char *type)
{
    struct handler_entry *fallback = NULL;
    for (size_t i = 0; i < t->n; i++) {
        if (strcmp(t->entries[i].conf->type, type) == 0)
            return &t->entries[i];
        if (strcmp(t->entries[i].conf->type, DCONFIG_FALLBACK_TYPE) == 0)
            fallback = &t->entries[i];
    }
    return fallback;
}
