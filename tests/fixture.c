#include "fixture.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* Start the server on f->sock; exit 77 when there is no redis-server, 1
 * when it does not start. */
static void spawn(struct redis_fixture *f)
{
    char server[PATH_MAX], err[PATH_MAX + 100];
    if (tu_redis_find(NULL, server, sizeof server) < 0) {
        fprintf(stderr, "redis-server not found: skipping (apt-get install redis-server)\n");
        exit(77);
    }
    if (tu_redis_spawn(server, f->dir, f->sock, 0, &f->pid, err, sizeof err) < 0) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
}

void fixture_redis_start(struct redis_fixture *f)
{
    memset(f, 0, sizeof *f);
    char err[300];
    if (tu_make_temp_dir("dqtest", f->dir, sizeof f->dir, err, sizeof err) < 0) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
    snprintf(f->sock, sizeof f->sock, "%s/redis.sock", f->dir);
    snprintf(f->conf_path, sizeof f->conf_path, "%s/test.conf", f->dir);
    spawn(f);
}

int fixture_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

void fixture_redis_stop(struct redis_fixture *f)
{
    tu_stop_process(f->pid, 5000);
    f->pid = 0;
    if (f->dir[0] && tu_remove_tree(f->dir) < 0)
        fprintf(stderr, "could not remove %s: %s\n", f->dir, strerror(errno));
}

void fixture_redis_restart(struct redis_fixture *f)
{
    tu_stop_process(f->pid, 5000);
    f->pid = 0;
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

redisContext *fixture_redis_connect(const struct redis_fixture *f)
{
    char err[300];
    redisContext *rc = tu_redis_connect(f->sock, 5000, err, sizeof err);
    ck_assert_msg(rc != NULL, "%s", err);
    return rc;
}

long long fixture_redis_int(const struct redis_fixture *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    long long v = tu_redis_vint_at(f->sock, 30000, fmt, ap);
    va_end(ap);
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

int fixture_free_port(void)
{
    int port = tu_free_port();
    ck_assert_int_gt(port, 0);
    return port;
}

int fixture_redis_listen_tcp(const struct redis_fixture *f)
{
    for (int tries = 0; tries < 20; tries++) {
        int port = fixture_free_port();
        if (fixture_redis_int(f, "CONFIG SET port %d", port) == 0)
            return port;
    }
    ck_abort_msg("no free TCP port could be bound in 20 tries");
    return -1;
}

int fixture_http_get(int port, const char *path, char *body, size_t len)
{
    body[0] = '\0';
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    struct timeval tv = { 10, 0 };
    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -1;
    }
    char req[600];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
    if (n < 0 || (size_t)n >= sizeof req || write(fd, req, (size_t)n) != n) {
        close(fd);      /* reset: the listener closed under the connection */
        return 0;
    }
    static char raw[262144];
    size_t got = 0;
    ssize_t k;
    while (got < sizeof raw - 1 && (k = read(fd, raw + got, sizeof raw - 1 - got)) > 0)
        got += (size_t)k;
    close(fd);
    raw[got] = '\0';
    int status = 0;
    if (sscanf(raw, "HTTP/1.%*d %d", &status) != 1)
        return 0;
    const char *b = strstr(raw, "\r\n\r\n");
    snprintf(body, len, "%s", b ? b + 4 : "");
    return status;
}
