#include "config.h"

#include "bench/redis_proc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench/bench.h"
#include "tests/testutil.h"

redisContext *redis_proc_connect(const struct redis_proc *r, char *err, size_t errlen)
{
    return tu_redis_connect(r->sock, 60000, err, errlen);
}

static int start_replica(struct redis_proc *r, const char *server, char *err, size_t errlen);

int redis_proc_start(struct redis_proc *r, const char *server, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    if (tu_make_temp_dir("dqbench", r->dir, sizeof r->dir, err, errlen) < 0)
        return -1;
    snprintf(r->sock, sizeof r->sock, "%s/redis.sock", r->dir);
    snprintf(r->log, sizeof r->log, "%s/redis.log", r->dir);
    char port[16], crt[PATH_MAX], key[PATH_MAX], ca[PATH_MAX];
    char *extra[16] = { NULL };
    if (bench_tcp || bench_tls_dir) {
        if ((r->port = tu_free_port()) < 0) {
            snprintf(err, errlen, "no free port: %s", strerror(errno));
            redis_proc_stop(r);
            return -1;
        }
        snprintf(port, sizeof port, "%d", r->port);
        snprintf(crt, sizeof crt, "%s/server.crt", bench_tls_dir ? bench_tls_dir : "");
        snprintf(key, sizeof key, "%s/server.key", bench_tls_dir ? bench_tls_dir : "");
        snprintf(ca, sizeof ca, "%s/ca.crt", bench_tls_dir ? bench_tls_dir : "");
        char *tcp[] = { "--port", port, NULL };
        char *tls[] = { "--tls-port", port, "--tls-cert-file", crt, "--tls-key-file", key,
                        "--tls-ca-cert-file", ca, "--tls-auth-clients", "no", NULL };
        memcpy(extra, bench_tls_dir ? tls : tcp, bench_tls_dir ? sizeof tls : sizeof tcp);
    }
    if (tu_redis_spawn_with(server, r->dir, r->sock, extra, TU_DIE_WITH_PARENT, &r->pid, err,
                            errlen) < 0) {
        redis_proc_stop(r);
        return -1;
    }
    if (bench_replica && start_replica(r, server, err, errlen) < 0) {
        redis_proc_stop(r);
        return -1;
    }
    return 0;
}

void redis_proc_stop(struct redis_proc *r)
{
    if (r->replica) {
        redis_proc_stop(r->replica);
        free(r->replica);
        r->replica = NULL;
    }
    tu_stop_process(r->pid, 5000);
    r->pid = 0;
    if (r->dir[0] && bench_keep)
        bench_progress("kept %s", r->dir);
    else if (r->dir[0] && tu_remove_tree(r->dir) < 0)
        bench_progress("could not remove %s: %s", r->dir, strerror(errno));
    r->dir[0] = '\0';
}

/* Run the command on `sock`; its integer reply (0 for a status), or -1. */
__attribute__((format(printf, 2, 3)))
static long long command_on(const char *sock, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    long long v = tu_redis_vint_at(sock, 10000, fmt, ap);
    va_end(ap);
    return v;
}

/*
 * The replica of --replica: the master listens on a loopback port, the
 * replica (a second server in its own directory) follows it.  After a
 * diskless sync a master streams writes only once the replica's first
 * acknowledgement came (up to 1 s): wait until a write shows on it.
 */
static int start_replica(struct redis_proc *r, const char *server, char *err, size_t errlen)
{
    char port[16];
    snprintf(port, sizeof port, "%d", r->port ? r->port : tu_free_port());
    struct redis_proc *rep = calloc(1, sizeof *rep);
    int saved = bench_replica;
    bench_replica = 0;          /* the replica has none of its own */
    int st = rep ? redis_proc_start(rep, server, err, errlen) : -1;
    bench_replica = saved;
    if (st < 0) {
        if (!rep)
            snprintf(err, errlen, "out of memory");
        free(rep);
        return -1;
    }
    r->replica = rep;
    if ((!r->port && command_on(r->sock, "CONFIG SET port %s", port) != 0)
        || command_on(rep->sock, "REPLICAOF 127.0.0.1 %s", port) != 0
        || command_on(r->sock, "SET bench-replica-probe 1") != 0) {
        snprintf(err, errlen, "could not make %s a replica of port %s", rep->sock, port);
        return -1;
    }
    for (int i = 0; i < 1000; i++) {
        if (command_on(rep->sock, "EXISTS bench-replica-probe") == 1)
            return command_on(r->sock, "DEL bench-replica-probe") == 1
                   ? 0 : -1;
        bench_sleep_ms(20);
    }
    snprintf(err, errlen, "the replica did not follow its master within 20 s");
    return -1;
}
