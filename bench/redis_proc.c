#include "config.h"

#include "bench/redis_proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench.h"

int redis_find_server(const char *given, char *out, size_t outlen)
{
    if (given && *given) {
        snprintf(out, outlen, "%s", given);
        return access(out, X_OK) == 0 ? 0 : -1;
    }
    const char *env = getenv("REDIS_SERVER");
    if (env && *env && access(env, X_OK) == 0) {
        snprintf(out, outlen, "%s", env);
        return 0;
    }
    const char *path = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s:/usr/bin:/usr/sbin:/usr/local/bin", path ? path : "");
    for (char *save, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(out, outlen, "%s/redis-server", d);
        if (access(out, X_OK) == 0)
            return 0;
    }
    return -1;
}

/* Remove the run's directory and the plain files in it. */
static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char path[PATH_MAX + 256];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

redisContext *redis_proc_connect(const struct redis_proc *r, char *err, size_t errlen)
{
    struct timeval tv = { 5, 0 };
    redisContext *rc = redisConnectUnixWithTimeout(r->sock, tv);
    if (!rc || rc->err) {
        snprintf(err, errlen, "cannot connect to %s: %s", r->sock,
                 rc ? rc->errstr : "out of memory");
        if (rc)
            redisFree(rc);
        return NULL;
    }
    /* Generous: INFO and big pipelines on a loaded two-core box. */
    struct timeval cmd = { 60, 0 };
    redisSetTimeout(rc, cmd);
    return rc;
}

long long redis_int(redisContext *rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(rc, fmt, ap);
    va_end(ap);
    long long v = -1;
    if (r && r->type == REDIS_REPLY_INTEGER)
        v = r->integer;
    else if (r && r->type == REDIS_REPLY_ARRAY)
        v = (long long)r->elements;
    if (r)
        freeReplyObject(r);
    return v;
}

/* Wait until the server answers PING, or it exits, or 10 s pass. */
static int wait_for_ping(struct redis_proc *r)
{
    int64_t deadline = bench_mono_us() + 10 * 1000000LL;
    while (bench_mono_us() < deadline && !bench_interrupted) {
        struct timeval tv = { 1, 0 };
        redisContext *rc = redisConnectUnixWithTimeout(r->sock, tv);
        if (rc && !rc->err) {
            redisReply *rep = redisCommand(rc, "PING");
            int ok = rep && rep->type == REDIS_REPLY_STATUS;
            if (rep)
                freeReplyObject(rep);
            redisFree(rc);
            if (ok)
                return 0;
        } else if (rc) {
            redisFree(rc);
        }
        if (waitpid(r->pid, NULL, WNOHANG) == r->pid) {
            r->pid = 0;
            return -1;
        }
        bench_sleep_ms(10);
    }
    return -1;
}

int redis_proc_start(struct redis_proc *r, const char *server, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    const char *tmp = getenv("TMPDIR");
    snprintf(r->dir, sizeof r->dir, "%s/dqbench.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(r->dir)) {
        snprintf(err, errlen, "mkdtemp %s: %s", r->dir, strerror(errno));
        r->dir[0] = '\0';
        return -1;
    }
    snprintf(r->sock, sizeof r->sock, "%s/redis.sock", r->dir);
    if (strlen(r->sock) >= sizeof ((struct sockaddr_un *)0)->sun_path) {
        snprintf(err, errlen, "%s: too long for a unix socket (set a shorter TMPDIR)",
                 r->sock);
        redis_proc_stop(r);
        return -1;
    }
    snprintf(r->log, sizeof r->log, "%s/redis.log", r->dir);
    fflush(NULL);
    r->pid = fork();
    if (r->pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        r->pid = 0;
        redis_proc_stop(r);
        return -1;
    }
    if (r->pid == 0) {
        /* Never outlive the bench, even when it is killed. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 1);
        }
        execl(server, server, "--port", "0", "--unixsocket", r->sock,
              "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
              "--dir", r->dir, "--logfile", r->log, "--daemonize", "no", (char *)NULL);
        _exit(127);
    }
    if (wait_for_ping(r) < 0) {
        snprintf(err, errlen, "%s did not start (see its log %s)", server, r->log);
        redis_proc_stop(r);
        return -1;
    }
    return 0;
}

void redis_proc_stop(struct redis_proc *r)
{
    if (r->pid > 0) {
        kill(r->pid, SIGTERM);
        int64_t deadline = bench_mono_us() + 5 * 1000000LL;
        while (waitpid(r->pid, NULL, WNOHANG) != r->pid) {
            if (bench_mono_us() >= deadline) {
                kill(r->pid, SIGKILL);
                waitpid(r->pid, NULL, 0);
                break;
            }
            bench_sleep_ms(5);
        }
        r->pid = 0;
    }
    if (r->dir[0] && bench_keep)
        bench_progress("kept %s", r->dir);
    else if (r->dir[0])
        remove_dir(r->dir);
    r->dir[0] = '\0';
}
