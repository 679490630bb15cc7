#include "config.h"

#include "bench/redis_proc.h"

#include <errno.h>
#include <stdio.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench/bench.h"
#include "tests/testutil.h"

redisContext *redis_proc_connect(const struct redis_proc *r, char *err, size_t errlen)
{
    return tu_redis_connect(r->sock, 60000, err, errlen);
}

/* A loopback TCP port that was free a moment ago, or -1. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0
        && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

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
        if ((r->port = free_port()) < 0) {
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
    return 0;
}

void redis_proc_stop(struct redis_proc *r)
{
    tu_stop_process(r->pid, 5000);
    r->pid = 0;
    if (r->dir[0] && bench_keep)
        bench_progress("kept %s", r->dir);
    else if (r->dir[0] && tu_remove_tree(r->dir) < 0)
        bench_progress("could not remove %s: %s", r->dir, strerror(errno));
    r->dir[0] = '\0';
}
