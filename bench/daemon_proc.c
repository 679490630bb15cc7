#include "config.h"

#include "bench/daemon_proc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/testutil.h"

#define READY_TIMEOUT_US (15 * 1000000LL)

static int write_conf(const struct daemon_proc *d, const struct bench_env *env,
                      const char *redis, const struct daemon_spec *spec, char *err,
                      size_t errlen)
{
    FILE *fp = fopen(d->conf, "w");
    if (!fp) {
        snprintf(err, errlen, "%s: %s", d->conf, strerror(errno));
        return -1;
    }
    char settings[PATH_MAX + 64] = "";
    if (spec->lateness_file)
        snprintf(settings, sizeof settings, " settings = { lateness_file = \"%s\"; };",
                 spec->lateness_file);
    char partitions[32] = "";
    if (spec->partitions > 0)
        snprintf(partitions, sizeof partitions, " partitions = %d;", spec->partitions);
    /* Only what a run varies is set; the reaper and the rest keep the
     * daemon's defaults, as a deployment would. */
    fprintf(fp,
            "redis = { %s%s };\n"
            "handler_dir = \"%s\";\n"
            "log = { level = \"info\"; target = \"stderr\"; };\n"
            "shutdown_timeout = \"10s\";\n"
            "queues = ( { name = \"" BENCH_QUEUE "\"; workers = %d; batch = %d;\n"
            "             lease = \"60s\"; max_attempts = 3;%s } );\n"
            "handlers = ( { type = \"*\"; file = \"noop.so\"; timeout = \"10s\";%s } );\n",
            redis, bench_replica ? " durability = \"replicated\";" : "", env->handler_dir,
            spec->workers, spec->batch, partitions, settings);
    if (fclose(fp) != 0) {
        snprintf(err, errlen, "%s: %s", d->conf, strerror(errno));
        return -1;
    }
    return 0;
}

void daemon_proc_last_problem(const struct daemon_proc *d, char *out, size_t outlen)
{
    out[0] = '\0';
    FILE *fp = fopen(d->log, "r");
    if (!fp)
        return;
    char line[1024];
    while (fgets(line, sizeof line, fp))
        if (strstr(line, " err ") || strstr(line, " warn ") || strstr(line, "delayqd:")) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(out, outlen, "%s", line);
        }
    fclose(fp);
}

/* Wait until the workers and the reaper are connected and have talked to
 * Redis once: then the daemon is in its steady state. */
static int wait_ready(struct daemon_proc *d, const struct redis_proc *r, int workers,
                      char *err, size_t errlen)
{
    redisContext *rc = redis_proc_connect(r, err, errlen);
    if (!rc)
        return -1;
    int64_t deadline = bench_mono_us() + READY_TIMEOUT_US;
    int ready = 0;
    while (!ready && bench_mono_us() < deadline && !bench_interrupted) {
        int status;
        if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
            d->pid = 0;
            char why[600];
            daemon_proc_last_problem(d, why, sizeof why);
            snprintf(err, errlen, "delayqd exited at start (%s %d)%s%s%s",
                     WIFSIGNALED(status) ? "signal" : "status",
                     WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status),
                     why[0] ? ": " : "", why,
                     bench_keep ? "" : "; --keep keeps its log");
            redisFree(rc);
            return -1;
        }
        ready = tu_delayqd_ready(rc, workers);
        if (!ready)
            bench_sleep_ms(20);
    }
    redisFree(rc);
    if (!ready)
        snprintf(err, errlen, "delayqd did not get ready within %lld s (log %s)",
                 READY_TIMEOUT_US / 1000000, d->log);
    return ready ? 0 : -1;
}

int daemon_proc_spawn(struct daemon_proc *d, const struct bench_env *env, const char *dir,
                      const struct daemon_spec *spec, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    snprintf(d->conf, sizeof d->conf, "%s/delayqd.conf", dir);
    snprintf(d->log, sizeof d->log, "%s/delayqd.log", dir);
    if (write_conf(d, env, spec->redis_group ? spec->redis_group : "", spec, err, errlen) < 0)
        return -1;
    char *const argv[] = { (char *)env->delayqd, "-f", "-c", d->conf, NULL };
    d->pid = tu_spawn(argv, d->log, TU_DIE_WITH_PARENT, err, errlen);
    if (d->pid < 0) {
        d->pid = 0;
        return -1;
    }
    return 0;
}

int daemon_proc_start(struct daemon_proc *d, const struct bench_env *env,
                      const struct redis_proc *r, const struct daemon_spec *spec,
                      char *err, size_t errlen)
{
    char redis[PATH_MAX + 128];
    if (r->port && bench_tls_dir)
        snprintf(redis, sizeof redis, "host = \"127.0.0.1\"; port = %d; "
                 "tls = { ca_file = \"%s/ca.crt\"; };", r->port, bench_tls_dir);
    else if (r->port)
        snprintf(redis, sizeof redis, "host = \"127.0.0.1\"; port = %d;", r->port);
    else
        snprintf(redis, sizeof redis, "unix_socket = \"%s\";", r->sock);
    struct daemon_spec s = *spec;
    if (!s.redis_group)
        s.redis_group = redis;
    if (daemon_proc_spawn(d, env, r->dir, &s, err, errlen) < 0)
        return -1;
    if (wait_ready(d, r, spec->workers, err, errlen) < 0) {
        daemon_proc_stop(d, 5000);
        return -1;
    }
    return 0;
}

int daemon_proc_stop(struct daemon_proc *d, int timeout_ms)
{
    if (d->pid <= 0)
        return -1;
    /* The workers and the reaper die with the supervisor (PDEATHSIG), but
     * make sure. */
    int status = tu_stop_process_tree(d->pid, timeout_ms);
    d->pid = 0;
    return status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}
