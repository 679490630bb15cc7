/*
 * A private redis-server for one benchmark run: started on a unix socket
 * in a fresh temporary directory with the default settings (only
 * persistence is off), and stopped by pid, by the code the tests' fixture
 * uses (tests/testutil.c).  The
 * directory also holds the run's other files (delayqd's configuration and
 * log, the lateness file) and is removed with the server.
 */
#ifndef DQ_BENCH_REDIS_PROC_H
#define DQ_BENCH_REDIS_PROC_H

#include <hiredis/hiredis.h>
#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

struct redis_proc {
    char dir[200];          /* the temporary directory */
    char sock[PATH_MAX];    /* DIR/redis.sock */
    char log[PATH_MAX];     /* DIR/redis.log */
    pid_t pid;              /* 0 when not running */
    struct redis_proc *replica; /* with --replica: its replica, or NULL */
    int port;               /* loopback TCP (--tcp) or TLS (--tls) port, or 0 */
};

/* Start `server` (tu_redis_spawn; it dies with the bench); wait until it
 * answers PING (10 s).  With --replica (bench_replica), start a second
 * server as its replica over loopback TCP and wait until the writes
 * stream to it.  Returns 0, or -1 with the reason (everything
 * started is cleaned up then). */
int redis_proc_start(struct redis_proc *r, const char *server, char *err, size_t errlen);

/* Stop the server (SIGTERM, SIGKILL after 5 s) and remove its directory
 * (unless bench_keep).
 * Safe on a struct that never started or was stopped already. */
void redis_proc_stop(struct redis_proc *r);

/* A blocking connection to the server (60 s for a command: INFO and big
 * pipelines on a loaded two-core box); NULL with the reason.  For integer
 * replies, tu_redis_int (tests/testutil.h). */
redisContext *redis_proc_connect(const struct redis_proc *r, char *err, size_t errlen);

#endif
