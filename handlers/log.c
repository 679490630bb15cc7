/*
 * The log handler: one log line per job, and the job is done.  Useful as the
 * "*" fallback while a system is being set up, and as the smallest example
 * of a handler.
 *
 * Settings:
 *   level = "info";   # "debug", "info", "warn" or "err"
 *
 * Result: always OK.
 */
#include <delayq/handler.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG_PAYLOAD_MAX 200 /* longer payloads are only counted */

struct log_state {
    const dq_host *host;
    enum dq_log_level level;
};

static int log_level_named(const char *name, enum dq_log_level *level)
{
    static const struct { const char *name; enum dq_log_level level; } levels[] = {
        { "debug", DQ_LOG_DEBUG }, { "info", DQ_LOG_INFO },
        { "warn", DQ_LOG_WARN }, { "warning", DQ_LOG_WARN },
        { "err", DQ_LOG_ERR }, { "error", DQ_LOG_ERR },
    };
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        if (strcmp(name, levels[i].name) == 0) {
            *level = levels[i].level;
            return 0;
        }
    }
    return -1;
}

static int log_init(const dq_host *host, const dq_settings *settings, void **state,
                    char *err, size_t errlen)
{
    const char *name = host->setting_string(settings, "level", "info");
    if (host->setting_error(settings)) {
        snprintf(err, errlen, "%s", host->setting_error(settings));
        return -1;
    }
    struct log_state *ls = calloc(1, sizeof *ls);
    if (!ls) {
        snprintf(err, errlen, "log: out of memory");
        return -1;
    }
    if (log_level_named(name, &ls->level) < 0) {
        snprintf(err, errlen, "log: level \"%s\": expected debug, info, warn or err",
                 name);
        free(ls);
        return -1;
    }
    ls->host = host;
    *state = ls;
    return 0;
}

/* Whether the payload can go into a log line as it is. */
static int printable(const char *p, size_t len)
{
    if (len > LOG_PAYLOAD_MAX)
        return 0;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f)
            return 0;
    return 1;
}

static dq_handler_result log_handle(void *state, const dq_handler_job *job,
                                    dq_handler_outcome *out)
{
    struct log_state *ls = state;
    (void)out;
    if (printable(job->payload, job->payload_len))
        ls->host->log(ls->level, "job %s/%s type=%s attempt=%d/%d payload=%zu bytes: %.*s",
                      job->queue, job->id, job->type, job->attempt, job->max_attempts,
                      job->payload_len, (int)job->payload_len,
                      (const char *)job->payload);
    else
        ls->host->log(ls->level, "job %s/%s type=%s attempt=%d/%d payload=%zu bytes",
                      job->queue, job->id, job->type, job->attempt, job->max_attempts,
                      job->payload_len);
    return DQ_HANDLER_OK;
}

static void log_fini(void *state)
{
    free(state);
}

DQ_HANDLER_DEFINE("log", log_init, log_handle, log_fini);
