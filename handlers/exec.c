/*
 * The exec handler: run a program for each job, with the payload on its
 * standard input.  No shell is involved.
 *
 * Settings:
 *   argv = ["/usr/local/bin/cancel-order", "--quiet"];   # required
 *   timeout = "25s";     # default: the type's timeout less a margin; "0": none
 *   env = ["HOME"];      # passed through from the daemon's environment
 *   setenv = { LC_ALL = "C.UTF-8"; };     # set
 *
 * The program's environment is not the daemon's (see exec_env.h): PATH,
 * LANG, what env and setenv name, and DELAYQ_JOB_ID, DELAYQ_JOB_TYPE,
 * DELAYQ_QUEUE, DELAYQ_ATTEMPT and DELAYQ_MAX_ATTEMPTS.  Its standard output
 * is discarded; the last line of its standard error is the job's error
 * message.
 *
 * Result: exit 0: OK.  Exit 75 (EX_TEMPFAIL): RETRY.  Any other exit: FAIL
 * "exit status N: LAST STDERR LINE".  Killed by a signal: RETRY.  Still
 * running at the timeout: its process group is killed, RETRY.  Its job
 * cancelled while it runs (`delayq cancel`): its process group is killed
 * within EXEC_STOP_CHECK_MS.
 */
#define _GNU_SOURCE
#include <delayq/handler.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec_env.h"
#include "exec_run.h"

struct exec_state {
    const dq_host *host;
    char **argv;            /* owned, NULL-terminated */
    struct exec_env env;    /* the program's environment */
    int64_t timeout_ms;     /* 0: none */
};

static void free_strv(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

static void exec_fini(void *state)
{
    struct exec_state *es = state;
    if (!es)
        return;
    free_strv(es->argv);
    exec_env_free(&es->env);
    free(es);
}

/* Copy the string list `name` from the settings; NULL with err on error. */
static char **copy_list(const dq_host *host, const dq_settings *s, const char *name,
                        char *err, size_t errlen)
{
    size_t n = host->setting_list_len(s, name);
    char **v = calloc(n + 1, sizeof *v);
    if (!v) {
        snprintf(err, errlen, "exec: out of memory");
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        const char *item = host->setting_list_item(s, name, i);
        if (!item) {
            snprintf(err, errlen, "%s", host->setting_error(s) ? host->setting_error(s)
                     : "exec: bad list");
            free_strv(v);
            return NULL;
        }
        if (!(v[i] = strdup(item))) {
            snprintf(err, errlen, "exec: out of memory");
            free_strv(v);
            return NULL;
        }
    }
    if (host->setting_error(s)) {
        snprintf(err, errlen, "%s", host->setting_error(s));
        free_strv(v);
        return NULL;
    }
    return v;
}

/* Check argv as copy_list read it; 0 or -1 with err. */
static int check_settings(const struct exec_state *es, char *err, size_t errlen)
{
    if (!es->argv[0]) {
        snprintf(err, errlen, "exec: argv is required: the program and its "
                 "arguments, such as [\"/usr/local/bin/prog\", \"arg\"]");
        return -1;
    }
    if (es->argv[0][0] != '/') {
        snprintf(err, errlen, "exec: argv[0] \"%s\" must be an absolute path (no "
                 "shell, no PATH search)", es->argv[0]);
        return -1;
    }
    if (access(es->argv[0], X_OK) < 0) {
        snprintf(err, errlen, "exec: %s: %s", es->argv[0], strerror(errno));
        return -1;
    }
    return 0;
}

static int exec_init(const dq_host *host, const dq_settings *settings, void **state,
                     char *err, size_t errlen)
{
    struct exec_state *es = calloc(1, sizeof *es);
    if (!es) {
        snprintf(err, errlen, "exec: out of memory");
        return -1;
    }
    es->host = host;
    /* Give up a little before the daemon would stop the worker. */
    int64_t def = 0;
    if (host->timeout_ms > 0) {
        int64_t margin = host->timeout_ms / 10 < 1000 ? host->timeout_ms / 10 : 1000;
        def = host->timeout_ms - margin;
    }
    es->timeout_ms = host->setting_duration_ms(settings, "timeout", def);
    if (host->setting_error(settings)) {
        snprintf(err, errlen, "%s", host->setting_error(settings));
        goto fail;
    }
    if (!(es->argv = copy_list(host, settings, "argv", err, errlen)))
        goto fail;
    if (check_settings(es, err, errlen) < 0)
        goto fail;
    if (exec_env_init(&es->env, host, settings, err, errlen) < 0)
        goto fail;
    if (host->timeout_ms > 0 && (es->timeout_ms == 0 || es->timeout_ms >= host->timeout_ms))
        host->log(DQ_LOG_WARN, "exec %s: its timeout is not shorter than the "
                  "type's (%lld ms): the worker may be stopped first",
                  es->argv[0], (long long)host->timeout_ms);
    *state = es;
    return 0;
fail:
    exec_fini(es);
    return -1;
}

/* The job a program runs for, and whose cancel stops it. */
struct exec_watch {
    const dq_host *host;
    const dq_handler_job *job;
};

static int job_cancelled(const void *arg)
{
    const struct exec_watch *w = arg;
    return w->host->cancelled(w->job);
}

static dq_handler_result exec_handle(void *state, const dq_handler_job *job,
                                     dq_handler_outcome *out)
{
    struct exec_state *es = state;
    char *const *env = exec_env_for_job(&es->env, job);
    if (!env) {
        snprintf(out->error, sizeof out->error, "exec: out of memory");
        return DQ_HANDLER_RETRY;
    }
    struct exec_result r;
    struct exec_watch watch = { es->host, job };
    struct exec_stop stop = { job_cancelled, &watch };
    exec_run(es->argv, env, job->payload, job->payload_len, es->timeout_ms,
             DQ_HOST_HAS(es->host, cancelled) ? &stop : NULL, &r);

    const char *sep = r.last_line[0] ? ": " : "";
    switch (r.kind) {
    case EXEC_EXITED:
        if (r.code == 0)
            return DQ_HANDLER_OK;
        snprintf(out->error, sizeof out->error, "exit status %d%s%s", r.code, sep,
                 r.last_line);
        return r.code == 75 ? DQ_HANDLER_RETRY : DQ_HANDLER_FAIL;
    case EXEC_SIGNALED:
        snprintf(out->error, sizeof out->error, "killed by signal %d%s%s", r.code, sep,
                 r.last_line);
        return DQ_HANDLER_RETRY;
    case EXEC_TIMEOUT:
        snprintf(out->error, sizeof out->error, "timeout after %lld ms",
                 (long long)es->timeout_ms);
        return DQ_HANDLER_RETRY;
    case EXEC_STOPPED:      /* ended in Redis already: the outcome is moot */
        snprintf(out->error, sizeof out->error, "cancelled");
        return DQ_HANDLER_FAIL;
    case EXEC_ERROR:
    default:
        snprintf(out->error, sizeof out->error, "exec %s: %s", es->argv[0],
                 r.last_line);
        return DQ_HANDLER_RETRY;
    }
}

DQ_HANDLER_DEFINE("exec", exec_init, exec_handle, exec_fini);
