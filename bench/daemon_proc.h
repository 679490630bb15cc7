/*
 * The real delayqd for a benchmark run: a configuration written into the
 * run's directory (one queue, BENCH_QUEUE, every type to the no-op
 * handler bench/noop.c), `delayqd -f -c FILE` with its stderr in a log
 * file there, a wait until every worker is connected, and a stop by pid.
 */
#ifndef DQ_BENCH_DAEMON_PROC_H
#define DQ_BENCH_DAEMON_PROC_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

#include "bench/bench.h"
#include "bench/redis_proc.h"

struct daemon_spec {
    int workers;
    int batch;                  /* claim batch */
    const char *lateness_file;  /* NULL: the handler records nothing */
    const char *redis_group;    /* the text inside redis = { }; NULL: the
                                   redis_proc's (daemon_proc_start) */
    int partitions;             /* the queue's; 0: not set (1) */
};

struct daemon_proc {
    char conf[PATH_MAX];        /* DIR/delayqd.conf */
    char log[PATH_MAX];         /* DIR/delayqd.log: its stderr */
    pid_t pid;                  /* the supervisor; 0 when not running */
};

/*
 * Write the configuration, start delayqd and wait (15 s) until each worker
 * has subscribed to the wake channel and claimed once, and the reaper has
 * reaped once.  Returns 0, or -1 with the reason (the daemon is stopped).
 */
int daemon_proc_start(struct daemon_proc *d, const struct bench_env *env,
                      const struct redis_proc *r, const struct daemon_spec *spec,
                      char *err, size_t errlen);

/* Write the configuration into `dir` and start delayqd, without waiting
 * for it (the caller knows when it is ready: daemon_proc_start, or the
 * cluster run, which asks every node).  0, or -1 with the reason. */
int daemon_proc_spawn(struct daemon_proc *d, const struct bench_env *env, const char *dir,
                      const struct daemon_spec *spec, char *err, size_t errlen);

/* SIGTERM, wait up to `timeout_ms`, then SIGKILL the daemon and whatever
 * children it left.  Returns 0 when it exited by itself with status 0. */
int daemon_proc_stop(struct daemon_proc *d, int timeout_ms);

/* The last line of the daemon's log that says "err" or "warn", for a
 * failure message; "" when none. */
void daemon_proc_last_problem(const struct daemon_proc *d, char *out, size_t outlen);

#endif
