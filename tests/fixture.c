#include "fixture.h"

#include <check.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The redis-server to run: $REDIS_SERVER, else the first on PATH or in
 * /usr/bin, /usr/sbin, /usr/local/bin; NULL when there is none. */
static const char *find_redis_server(void)
{
    static char found[512];
    const char *env = getenv("REDIS_SERVER");
    if (env && *env && access(env, X_OK) == 0)
        return env;
    const char *path = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s:/usr/bin:/usr/sbin:/usr/local/bin", path ? path : "");
    for (char *save, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(found, sizeof found, "%s/redis-server", d);
        if (access(found, X_OK) == 0)
            return found;
    }
    return NULL;
}

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* Wait until the server answers PING on its socket. */
static int wait_for_ping(const struct redis_fixture *f)
{
    for (int i = 0; i < 500; i++) {
        struct timeval tv = { 1, 0 };
        redisContext *rc = redisConnectUnixWithTimeout(f->sock, tv);
        if (rc && !rc->err) {
            redisReply *r = redisCommand(rc, "PING");
            int ok = r && r->type == REDIS_REPLY_STATUS;
            if (r)
                freeReplyObject(r);
            redisFree(rc);
            if (ok)
                return 0;
        } else if (rc) {
            redisFree(rc);
        }
        int status;
        if (waitpid(f->pid, &status, WNOHANG) == f->pid)
            return -1;
        sleep_ms(10);
    }
    return -1;
}

static void spawn(struct redis_fixture *f)
{
    const char *server = find_redis_server();
    if (!server) {
        fprintf(stderr, "redis-server not found: skipping (apt-get install redis-server)\n");
        exit(77);
    }
    char log[256];
    snprintf(log, sizeof log, "%s/redis.log", f->dir);
    f->pid = fork();
    if (f->pid < 0) {
        perror("fork");
        exit(1);
    }
    if (f->pid == 0) {
        execl(server, server, "--port", "0", "--unixsocket", f->sock,
              "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
              "--dir", f->dir, "--logfile", log, "--daemonize", "no", (char *)NULL);
        _exit(127);
    }
    if (wait_for_ping(f) < 0) {
        fprintf(stderr, "redis-server did not start (see %s)\n", log);
        exit(1);
    }
}

void fixture_redis_start(struct redis_fixture *f)
{
    memset(f, 0, sizeof *f);
    const char *tmp = getenv("TMPDIR");
    snprintf(f->dir, sizeof f->dir, "%s/dqtest.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(f->dir)) {
        perror("mkdtemp");
        exit(1);
    }
    snprintf(f->sock, sizeof f->sock, "%s/redis.sock", f->dir);
    snprintf(f->conf_path, sizeof f->conf_path, "%s/test.conf", f->dir);
    spawn(f);
}

int fixture_proc_stat(pid_t pid, char *state, pid_t *ppid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *fp = fopen(path, "r");
    if (!fp)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');  /* the name may hold anything */
    int parent = 0;
    char st = '?';
    if (!p || sscanf(p + 1, " %c %d", &st, &parent) != 2)
        return -1;
    if (state)
        *state = st;
    if (ppid)
        *ppid = (pid_t)parent;
    return 0;
}

/* Works for a process that is not our child too (a server a test in a
 * forked child restarted), where waitpid cannot tell. */
int fixture_process_running(pid_t pid)
{
    if (kill(pid, 0) < 0)
        return 0;
    char st;
    return fixture_proc_stat(pid, &st, NULL) < 0 || st != 'Z';
}

int fixture_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

static void kill_server(struct redis_fixture *f)
{
    if (f->pid <= 0)
        return;
    kill(f->pid, SIGTERM);
    for (int i = 0; i < 500; i++) {
        pid_t w = waitpid(f->pid, NULL, WNOHANG);
        if (w == f->pid || (w < 0 && errno == ECHILD && !fixture_process_running(f->pid))) {
            f->pid = 0;
            return;
        }
        sleep_ms(10);
    }
    kill(f->pid, SIGKILL);
    waitpid(f->pid, NULL, 0);
    f->pid = 0;
}

void fixture_redis_stop(struct redis_fixture *f)
{
    kill_server(f);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    if (f->dir[0] && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", f->dir);
}

void fixture_redis_restart(struct redis_fixture *f)
{
    kill_server(f);
    unlink(f->sock);
    spawn(f);
}

void fixture_options(const struct redis_fixture *f, dq_options *opt)
{
    dq_options_init(opt);
    opt->unix_path = f->sock;
}

dq_client *fixture_client(const struct redis_fixture *f)
{
    dq_options opt;
    fixture_options(f, &opt);
    char err[256];
    dq_client *c = dq_connect(&opt, err, sizeof err, NULL);
    ck_assert_msg(c != NULL, "cannot connect to the test redis: %s", err);
    return c;
}

long long fixture_redis_int(const struct redis_fixture *f, const char *fmt, ...)
{
    struct timeval tv = { 5, 0 };
    redisContext *rc = redisConnectUnixWithTimeout(f->sock, tv);
    if (!rc || rc->err) {
        if (rc)
            redisFree(rc);
        return -1;
    }
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(rc, fmt, ap);
    va_end(ap);
    long long v = -1;
    if (r && r->type == REDIS_REPLY_INTEGER)
        v = r->integer;
    else if (r && r->type == REDIS_REPLY_ARRAY)
        v = (long long)r->elements;
    else if (r && r->type == REDIS_REPLY_STATUS)
        v = 0;
    if (r)
        freeReplyObject(r);
    redisFree(rc);
    return v;
}

void fixture_redis_flush(const struct redis_fixture *f)
{
    ck_assert_int_eq(fixture_redis_int(f, "FLUSHALL"), 0);
}

long long fixture_record_count(const struct redis_fixture *f, const char *queue)
{
    static const char count[] =
        "local n = redis.call('HLEN', KEYS[1]) "
        "for _, k in ipairs(redis.call('KEYS', KEYS[1] .. ':*')) do "
        "n = n + redis.call('HLEN', k) end return n";
    return fixture_redis_int(f, "EVAL %s 1 dq:{%s}:jobs", count, queue);
}

TCase *fixture_tcase(Suite *s, const char *name, int timeout, SFun up, SFun down,
                     SFun setup, SFun teardown)
{
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, timeout);
    if (up || down)
        tcase_add_unchecked_fixture(tc, up, down);
    if (setup || teardown)
        tcase_add_checked_fixture(tc, setup, teardown);
    suite_add_tcase(s, tc);
    return tc;
}

const char *fixture_build_path(const char *name)
{
    static char path[4][512];
    static int next;
    const char *top = getenv("TOP_BUILDDIR");
    char *p = path[next++ % 4];
    snprintf(p, 512, "%s/%s", top && *top ? top : ".", name);
    return p;
}
