#define _GNU_SOURCE
#include "exec_env.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The job's variables, in the order exec_env_for_job writes them.  The
 * settings may neither pass them through nor set them. */
static const char *const job_vars[] = {
    "DELAYQ_JOB_ID", "DELAYQ_JOB_TYPE", "DELAYQ_QUEUE", "DELAYQ_ATTEMPT",
    "DELAYQ_MAX_ATTEMPTS", "DELAYQ_FENCE",
};
#define NJOB_VARS (sizeof job_vars / sizeof job_vars[0])
#define NDEFAULTS 2 /* PATH, LANG */

#define NAME_RULE "letters, digits and _, not starting with a digit"

/* What the settings are read with, and where a reason goes. */
struct reader {
    const dq_host *host;
    const dq_settings *s;
    char *err;
    size_t errlen;
};

/* Whether the `len` bytes at name make a variable name a shell can use. */
static int valid_name(const char *name, size_t len)
{
    if (len == 0 || (name[0] >= '0' && name[0] <= '9'))
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (c != '_' && !(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z')
            && !(c >= '0' && c <= '9'))
            return 0;
    }
    return 1;
}

static int is_job_var(const char *name, size_t len)
{
    for (size_t i = 0; i < NJOB_VARS; i++)
        if (strlen(job_vars[i]) == len && memcmp(job_vars[i], name, len) == 0)
            return 1;
    return 0;
}

/* Fail with the problem the host's accessors recorded.  Returns -1. */
static int setting_failed(const struct reader *r, const char *name)
{
    const char *e = r->host->setting_error(r->s);
    if (e)
        snprintf(r->err, r->errlen, "%s", e);
    else
        snprintf(r->err, r->errlen, "exec: %s: unreadable", name);
    return -1;
}

/* Refuse element i of setting `name` because of what fmt says: through the
 * host, which adds the file and line, when it offers that.  Returns -1. */
static int refuse(const struct reader *r, const char *name, size_t i, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int refuse(const struct reader *r, const char *name, size_t i, const char *fmt, ...)
{
    char why[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (DQ_HOST_HAS(r->host, setting_reject)) {
        r->host->setting_reject(r->s, name, i, why);
        const char *e = r->host->setting_error(r->s);
        if (e) {
            snprintf(r->err, r->errlen, "%s", e);
            return -1;
        }
    }
    snprintf(r->err, r->errlen, "exec: %s: %s", name, why);
    return -1;
}

/* Refuse a name (len bytes at name) the settings may not use. */
static int check_name(const struct reader *r, const char *setting, size_t i,
                      const char *name, size_t len)
{
    if (len == 0)
        return refuse(r, setting, i, "a variable name is missing");
    if (!valid_name(name, len))
        return refuse(r, setting, i, "\"%.*s\" is not a variable name (" NAME_RULE ")",
                      (int)len, name);
    if (is_job_var(name, len))
        return refuse(r, setting, i, "%.*s is set by the handler for each job",
                      (int)len, name);
    return 0;
}

/* Whether env names `name` (len bytes) before its element `upto`. */
static int named_in_env(const struct reader *r, const char *name, size_t len, size_t upto)
{
    for (size_t j = 0; j < upto; j++) {
        const char *other = r->host->setting_list_item(r->s, "env", j);
        if (other && strcspn(other, "=") == len && memcmp(other, name, len) == 0)
            return 1;
    }
    return 0;
}

/* Add NAME=VALUE (name: len bytes) to ee->vars, which has room, replacing
 * a default of the same name. */
static int put(struct exec_env *ee, const struct reader *r, const char *name, size_t len,
               const char *value)
{
    char *var;
    if (asprintf(&var, "%.*s=%s", (int)len, name, value) < 0) {
        snprintf(r->err, r->errlen, "exec: out of memory");
        return -1;
    }
    for (size_t i = 0; i < NDEFAULTS && i < ee->nfixed; i++) {
        if (strncmp(ee->vars[i], var, len + 1) == 0) {
            free(ee->vars[i]);
            ee->vars[i] = var;
            return 0;
        }
    }
    ee->vars[ee->nfixed++] = var;
    return 0;
}

/* PATH, a default when the daemon has none (or an empty one); LANG, when
 * the daemon has it. */
static int put_defaults(struct exec_env *ee, const struct reader *r)
{
    const char *path = getenv("PATH");
    if (put(ee, r, "PATH", 4, path && *path ? path : EXEC_DEFAULT_PATH) < 0)
        return -1;
    const char *lang = getenv("LANG");
    return lang ? put(ee, r, "LANG", 4, lang) : 0;
}

/*
 * env's element i: NAME, passed through from the daemon's environment when
 * it is there.  NAME=VALUE, the form of releases that passed the whole
 * environment, still sets the variable, with a warning that does not show
 * the value (it may be a secret).
 */
static int put_env_item(struct exec_env *ee, const struct reader *r, size_t i)
{
    const char *item = r->host->setting_list_item(r->s, "env", i);
    if (!item)
        return setting_failed(r, "env");
    size_t len = strcspn(item, "=");
    if (check_name(r, "env", i, item, len) < 0)
        return -1;
    if (named_in_env(r, item, len, i))
        return refuse(r, "env", i, "%.*s is named twice", (int)len, item);
    if (item[len] == '=') {
        r->host->log(DQ_LOG_WARN, "exec: env item \"%.*s=...\": env names variables to "
                     "pass through; set this one with setenv = { %.*s = \"...\"; }",
                     (int)len, item, (int)len, item);
        return put(ee, r, item, len, item + len + 1);
    }
    const char *value = getenv(item);
    if (!value) {
        r->host->log(DQ_LOG_INFO, "exec: env names %s, which delayqd's environment "
                     "does not have: the program will not have it either", item);
        return 0;
    }
    return put(ee, r, item, len, value);
}

/* setenv's member j (env has nenv elements). */
static int put_setenv_item(struct exec_env *ee, const struct reader *r, size_t nenv,
                           size_t j)
{
    const char *value;
    const char *name = r->host->setting_group_item(r->s, "setenv", j, &value);
    if (!name || !value)
        return setting_failed(r, "setenv");
    size_t len = strlen(name);
    if (check_name(r, "setenv", j, name, len) < 0)
        return -1;
    if (named_in_env(r, name, len, nenv))
        return refuse(r, "setenv", j, "%s is in env too: pass it through or set it, "
                      "not both", name);
    return put(ee, r, name, len, value);
}

int exec_env_init(struct exec_env *ee, const dq_host *host, const dq_settings *s,
                  char *err, size_t errlen)
{
    memset(ee, 0, sizeof *ee);
    ee->has_fence = DQ_JOB_HAS(host, fence);
    struct reader r = { host, s, err, errlen };
    size_t nenv = host->setting_list_len(s, "env");
    /* A host without group accessors cannot read setenv: it then warns
     * that setenv is a setting the handler does not read. */
    size_t nset = DQ_HOST_HAS(host, setting_group_len)
                  && DQ_HOST_HAS(host, setting_group_item)
                  ? host->setting_group_len(s, "setenv") : 0;
    if (host->setting_error(s))
        return setting_failed(&r, "env or setenv");
    ee->vars = calloc(NDEFAULTS + nenv + nset + NJOB_VARS + 1, sizeof *ee->vars);
    if (!ee->vars) {
        snprintf(err, errlen, "exec: out of memory");
        return -1;
    }
    if (put_defaults(ee, &r) < 0)
        goto fail;
    for (size_t i = 0; i < nenv; i++)
        if (put_env_item(ee, &r, i) < 0)
            goto fail;
    for (size_t j = 0; j < nset; j++)
        if (put_setenv_item(ee, &r, nenv, j) < 0)
            goto fail;
    return 0;
fail:
    exec_env_free(ee);
    return -1;
}

char *const *exec_env_for_job(struct exec_env *ee, const dq_handler_job *job)
{
    char attempt[24], max_attempts[24], fence[24] = "";
    snprintf(attempt, sizeof attempt, "%d", job->attempt);
    snprintf(max_attempts, sizeof max_attempts, "%d", job->max_attempts);
    if (ee->has_fence)
        snprintf(fence, sizeof fence, "%lld", (long long)job->fence);
    const char *values[NJOB_VARS] = { job->id, job->type, job->queue, attempt,
                                      max_attempts, fence };
    size_t need = 0;
    for (size_t i = 0; i < NJOB_VARS; i++) {
        if (!values[i])
            values[i] = "";
        need += strlen(job_vars[i]) + strlen(values[i]) + 2;
    }
    if (need > ee->jobcap) {
        /* Room for longer names too: a worker seldom grows it twice. */
        size_t cap = need < 256 ? 256 : need * 2;
        char *buf = realloc(ee->jobbuf, cap);
        if (!buf)
            return NULL;
        ee->jobbuf = buf;
        ee->jobcap = cap;
    }
    char *p = ee->jobbuf;
    for (size_t i = 0; i < NJOB_VARS; i++) {
        ee->vars[ee->nfixed + i] = p;
        p += sprintf(p, "%s=%s", job_vars[i], values[i]) + 1;
    }
    ee->vars[ee->nfixed + NJOB_VARS] = NULL;
    return ee->vars;
}

void exec_env_free(struct exec_env *ee)
{
    for (size_t i = 0; ee->vars && i < ee->nfixed; i++)
        free(ee->vars[i]);
    free(ee->vars);
    free(ee->jobbuf);
    memset(ee, 0, sizeof *ee);
}
