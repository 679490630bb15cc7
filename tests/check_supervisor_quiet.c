/*
 * The supervisor holds no connection to Redis or to a sentinel and makes
 * no call that can wait on the network: the real delayqd over TCP, over
 * Sentinel and over a cluster, with real servers on loopback.
 *
 * While each runs (a worker killed with kill -9 mid-batch, so that its
 * jobs are settled; a reload, so that its checks run), the test samples
 * the supervisor's file descriptors (/proc/PID/fd) and finds each socket
 * in /proc/net/tcp, tcp6 and unix: every TCP socket of the supervisor
 * must be a listener (the admin socket, which only its admin process
 * accepts on), and it must have no named unix socket.  The same look at its children must
 * find their connections to the Redis (or sentinel) ports, so the sampling
 * sees what it is meant to see.
 *
 * With a sentinel address that accepts connections and never answers (a
 * listening socket the test owns and never reads) listed first, and with
 * a cluster master stopped (SIGSTOP: its connections hang rather than
 * fail), the supervisor feeds systemd's watchdog (NOTIFY_SOCKET, a
 * datagram socket the test reads; WATCHDOG_USEC 400 ms: every 200 ms)
 * with no gap of 1 s or more, and a handler that hangs is killed on its
 * timeout (1 s) within the supervisor's tick and a margin.
 */
#include <check.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster_fixture.h"
#include "daemon_harness.h"
#include "proc_sockets.h"
#include "testutil.h"

#define MASTER_NAME "jobs"
#define WATCHDOG_USEC "400000"  /* the supervisor sends every 200 ms */
#define MAX_GAP_MS 1000
#define HANG_TIMEOUT_MS 1000    /* the hanging handler's timeout */
/* The tick (50 ms), the kill, a loaded host: a sanitizer build beside
 * three other tests took 940 ms from the overrun's line to the reap. */
#define KILL_MARGIN_MS 1500
#define MAX_PORTS 16

static struct harness H;
static struct cluster_fx C;
static int cluster_up;
static pid_t sentinel_pid;
static int hole_fd = -1;        /* the black-hole sentinel's listener */

/* ---- a run observed ----------------------------------------------------------- */

/* A datagram socket at DIR/NAME standing in for systemd's. */
static int notify_socket(char *path, size_t len)
{
    snprintf(path, len, "%s/notify.sock", H.fx.dir);
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    struct timeval tv = { 0, 20 * 1000 };
    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
    int on = 1;
    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_TIMESTAMP, &on, sizeof on), 0);
    return fd;
}

/* One datagram from `fd` into buf (NUL-terminated), and *at_ms the time
 * the kernel took it in (Unix ms): when the supervisor sent it, whenever
 * this process gets to read it on a loaded machine. -1: none within the
 * socket's timeout. */
static ssize_t recv_stamped(int fd, char *buf, size_t len, int64_t *at_ms)
{
    char ctl[CMSG_SPACE(sizeof(struct timeval))];
    struct iovec iov = { buf, len - 1 };
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
                        .msg_controllen = sizeof ctl };
    ssize_t n = recvmsg(fd, &m, 0);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    *at_ms = tu_now_ms();
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMP) {
            struct timeval tv;
            memcpy(&tv, CMSG_DATA(c), sizeof tv);
            *at_ms = (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
        }
    return n;
}

/* What a window of a run showed. */
struct observed {
    int pings;                  /* WATCHDOG=1 received */
    int64_t max_gap_ms;         /* the longest time without one */
    int samples, bad_samples;   /* socket looks, and those that found a
                                   connection of the supervisor */
    char bad[1024];             /* the first such look */
};

/* Watch for `ms`: every datagram on `fd` (timing WATCHDOG=1 by when it
 * was sent), and the supervisor's sockets every 100 ms.  `last_ping`
 * (Unix ms) carries over windows. */
static void observe(int fd, pid_t sup, const int *ports, size_t nports, int ms,
                    struct observed *o, int64_t *last_ping)
{
    int64_t end = tu_mono_ms() + ms, next_look = 0;
    while (tu_mono_ms() < end) {
        char buf[256];
        int64_t at;
        ssize_t n = recv_stamped(fd, buf, sizeof buf, &at);
        if (n > 0 && strcmp(buf, "WATCHDOG=1") == 0) {
            if (*last_ping && at - *last_ping > o->max_gap_ms)
                o->max_gap_ms = at - *last_ping;
            *last_ping = at;
            o->pings++;
        }
        /* Nothing waiting: a gap still open counts. */
        if (n < 0 && *last_ping && tu_now_ms() - *last_ping > o->max_gap_ms)
            o->max_gap_ms = tu_now_ms() - *last_ping;
        int64_t now = tu_mono_ms();
        if (now >= next_look) {
            struct sockets_seen seen;
            ps_look_at_sockets(sup, ports, nports, &seen);
            o->samples++;
            if (seen.connected || seen.named_unix) {
                if (!o->bad_samples++)
                    snprintf(o->bad, sizeof o->bad, "%s", seen.why);
            }
            next_look = now + 100;
        }
    }
}

static void assert_quiet(const struct observed *o, const char *what)
{
    ck_assert_msg(o->samples >= 10, "%s: only %d looks at the supervisor", what, o->samples);
    ck_assert_msg(o->bad_samples == 0,
                  "%s: %d of %d looks found the supervisor holding a connection:%s (the "
                  "longest watchdog gap: %lld ms)\nlog:\n%s", what, o->bad_samples,
                  o->samples, o->bad, (long long)o->max_gap_ms, h_log_tail(&H));
    ck_assert_msg(o->pings >= 5, "%s: %d WATCHDOG=1", what, o->pings);
    ck_assert_msg(o->max_gap_ms < MAX_GAP_MS, "%s: the watchdog went %lld ms unfed; log:\n%s",
                  what, (long long)o->max_gap_ms, h_log_tail(&H));
}

/* Start delayqd with the test's notify socket and watchdog; wait with
 * `ready(arg)` (h_wait's kind) for its workers. */
static void start_watched(const char *notify_path, int (*ready)(void *), void *arg)
{
    setenv("NOTIFY_SOCKET", notify_path, 1);
    setenv("WATCHDOG_USEC", WATCHDOG_USEC, 1);
    char *const argv[] = { (char *)fixture_build_path("delayqd"), "-f", "-c", H.conf, NULL };
    char err[300];
    H.pid = tu_spawn(argv, H.log, 0, err, sizeof err);
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    ck_assert_msg(H.pid > 0, "%s", err);
    int ok = h_wait(30000, ready, arg);
    ck_assert_msg(ok == 1, "delayqd did not get ready (%s); its log:\n%s",
                  ok < 0 ? "it exited" : "timeout", h_log_tail(&H));
}

/* The daemon's steady state on the fixture (its unix socket; the daemon
 * itself uses TCP); -1 when it exited. */
static int fixture_ready(void *arg)
{
    if (waitpid(H.pid, NULL, WNOHANG) == H.pid) {
        H.pid = 0;
        return -1;
    }
    char err[300];
    redisContext *rc = tu_redis_connect(H.fx.sock, 2000, err, sizeof err);
    if (!rc)
        return 0;
    int ready = tu_delayqd_ready(rc, *(int *)arg);
    redisFree(rc);
    return ready;
}

/* The queue's settings and the test handler with a 1 s timeout; `more`
 * (NULL for none): further queue groups, each after a comma. */
/* The admin address of this test's daemons: the supervisor binds it (a
 * listener, allowed) and its admin process answers on it and holds the
 * statistics' Redis connection. */
static int admin_port;

static void write_conf_more(const char *redis, int workers, const char *more)
{
    char text[8192 + PATH_MAX];
    snprintf(text, sizeof text,
             "redis = { %s };\n"
             "handler_dir = \"%s\";\n"
             "queues = ( { name = \"" H_QUEUE "\"; workers = %d; lease = \"30s\"; batch = 8;\n"
             "             max_attempts = 5;\n"
             "             backoff = { base = \"100ms\"; cap = \"1s\"; jitter = 0.0; }; }%s );\n"
             "handlers = ( { type = \"*\"; file = \"testhandler.so\"; timeout = \"%dms\";\n"
             "               settings = { record = \"%s\"; }; } );\n"
             "reaper = { interval = \"200ms\"; batch = 100; };\n"
             "shutdown_timeout = \"10s\";\n"
             "admin = { listen = \"127.0.0.1:%d\"; };\n"
             "log = { level = \"info\"; target = \"stderr\"; };\n",
             redis, H.handler_dir, workers, more ? more : "", HANG_TIMEOUT_MS, H.record,
             admin_port ? admin_port : (admin_port = fixture_free_port()));
    h_write_file(H.conf, text);
}

static void write_conf(const char *redis, int workers)
{
    write_conf_more(redis, workers, NULL);
}

static void enqueue(dq_client *c, const char *id, const char *payload)
{
    dq_enqueue_req req = { .queue = H_QUEUE, .type = "t", .id = id, .payload = payload,
                           .payload_len = strlen(payload) };
    ck_assert_msg(dq_enqueue(c, &req, NULL) == DQ_OK, "enqueue %s: %s", id, dq_errmsg(c));
}

/* The worker running `id` (its record's start line), once it started. */
static pid_t runner_of(const char *id)
{
    ck_assert_msg(h_wait_record(&H, id, 0, 1, 20000) >= 1, "%s never started; log:\n%s", id,
                  h_log_tail(&H));
    struct h_run *r;
    size_t n = h_records(&H, &r);
    struct h_run first;
    h_count(r, n, id, 0, &first);
    free(r);
    return first.pid;
}

/* A job that hangs is killed once its timeout is over: the worker running
 * it is gone within the tick and a margin.  Watches while it waits. */
static void assert_hang_killed(int fd, dq_client *c, const int *ports, size_t nports,
                               struct observed *o, int64_t *last_ping)
{
    enqueue(c, "hangs", "hang");
    pid_t w = runner_of("hangs");
    int64_t started = tu_mono_ms();
    while (tu_process_running(w) && tu_mono_ms() - started < HANG_TIMEOUT_MS + 5000)
        observe(fd, H.pid, ports, nports, 20, o, last_ping);
    int64_t took = tu_mono_ms() - started;
    ck_assert_msg(!tu_process_running(w), "the hung worker %d still runs", (int)w);
    ck_assert_msg(took < HANG_TIMEOUT_MS + KILL_MARGIN_MS,
                  "the hung worker was killed %lld ms after its job started (timeout %d ms)",
                  (long long)took, HANG_TIMEOUT_MS);
    ck_assert_msg(h_wait_log(&H, "overran its timeout", 1, 2000) >= 1, "log:\n%s",
                  h_log_tail(&H));
}

/* ---- set-up ------------------------------------------------------------------- */

static void setup(void)
{
    h_setup(&H);
}

static void teardown(void)
{
    if (H.fx.pid > 0)
        kill(H.fx.pid, SIGCONT);
    if (H.pid > 0)
        h_stop(&H, 10000);
    if (sentinel_pid > 0)
        tu_stop_process(sentinel_pid, 5000);
    sentinel_pid = 0;
    if (hole_fd >= 0)
        close(hole_fd);
    hole_fd = -1;
    if (cluster_up) {
        for (int i = 0; i < C.nnodes; i++)
            if (C.pid[i] > 0)
                kill(C.pid[i], SIGCONT);
        cluster_fx_stop(&C);
    }
    cluster_up = 0;
    h_teardown(&H);
}

/* Give the fixture a TCP port on loopback; returns it. */
static int fixture_tcp_port(void)
{
    return fixture_redis_listen_tcp(&H.fx);
}

/* ---- over TCP ----------------------------------------------------------------- */

START_TEST(no_connection_over_tcp)
{
    int port = fixture_tcp_port();
    char redis[200], notify[300];
    snprintf(redis, sizeof redis, "host = \"127.0.0.1\"; port = %d;", port);
    write_conf(redis, 2);
    int fd = notify_socket(notify, sizeof notify);
    int workers = 2;
    start_watched(notify, fixture_ready, &workers);
    ck_assert_msg(ps_children_connected_to(H.pid, port) >= 3,
                  "the children's connections to Redis are not seen (port %d)", port);
    struct observed o = { 0 };
    int64_t last = 0;
    observe(fd, H.pid, &port, 1, 1000, &o, &last);
    /* A death mid-batch: its jobs are settled, by the settler. */
    for (int i = 0; i < 8; i++) {
        char id[16];
        snprintf(id, sizeof id, "s%d", i);
        enqueue(H.c, id, i == 0 ? "segv" : "sleep:50");
    }
    ck_assert_msg(h_wait_log(&H, "settled the", 1, 10000) >= 1, "no settlement; log:\n%s",
                  h_log_tail(&H));
    observe(fd, H.pid, &port, 1, 500, &o, &last);
    /* A reload: its checks run in a child. */
    ck_assert_int_eq(kill(H.pid, SIGHUP), 0);
    ck_assert_msg(h_wait_log(&H, "reloaded", 1, 10000) >= 1, "no reload; log:\n%s",
                  h_log_tail(&H));
    observe(fd, H.pid, &port, 1, 1000, &o, &last);
    assert_hang_killed(fd, H.c, &port, 1, &o, &last);
    assert_quiet(&o, "over TCP");
    close(fd);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

/* A reload that adds a partitioned queue records its partition count in
 * Redis; with Redis stopped (SIGSTOP: the connect goes through, the
 * command is never answered) that waits for the 2 s timeout, in the
 * reload's checker: the reload is refused with the reason, the
 * configuration in force stays, and the supervisor's watchdog never
 * waits. */
START_TEST(reload_check_waits_in_a_child)
{
    int port = fixture_tcp_port();
    char redis[200], notify[300];
    snprintf(redis, sizeof redis, "host = \"127.0.0.1\"; port = %d;", port);
    write_conf(redis, 2);
    int fd = notify_socket(notify, sizeof notify);
    int workers = 2;
    start_watched(notify, fixture_ready, &workers);
    struct observed o = { 0 };
    int64_t last = 0;
    observe(fd, H.pid, &port, 1, 1000, &o, &last);
    write_conf_more(redis, 2, ", { name = \"more\"; workers = 1; partitions = 4; }");
    ck_assert_int_eq(kill(H.fx.pid, SIGSTOP), 0);
    ck_assert_int_eq(kill(H.pid, SIGHUP), 0);
    int64_t t0 = tu_mono_ms();
    while (h_log_count(&H, "reload refused") == 0 && tu_mono_ms() - t0 < 15000)
        observe(fd, H.pid, &port, 1, 100, &o, &last);
    int64_t took = tu_mono_ms() - t0;
    observe(fd, H.pid, &port, 1, 500, &o, &last);
    ck_assert_int_eq(kill(H.fx.pid, SIGCONT), 0);
    ck_assert_msg(h_log_count(&H, "reload refused: redis not reachable") == 1, "log:\n%s",
                  h_log_tail(&H));
    ck_assert_msg(took >= 1500, "refused after %lld ms: the check did not wait for Redis",
                  (long long)took);
    ck_assert_int_eq(h_log_count(&H, "reloaded"), 0);
    assert_quiet(&o, "a reload's check waiting on Redis");
    /* The configuration in force still runs its jobs. */
    enqueue(H.c, "after", "ok");
    ck_assert_msg(h_wait_record(&H, "after", 1, 1, 10000) == 1, "log:\n%s", h_log_tail(&H));
    close(fd);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

/* The reload's checker dies with the supervisor: killed (-9) while the
 * check waits on a stopped Redis, the supervisor leaves no checker behind
 * (it would otherwise wait out its 2 s timeout, or a handler's init, for
 * an answer nobody reads). */
START_TEST(reload_checker_dies_with_the_supervisor)
{
    int port = fixture_tcp_port();
    char redis[200];
    snprintf(redis, sizeof redis, "host = \"127.0.0.1\"; port = %d;", port);
    write_conf(redis, 1);
    h_start(&H, 1);
    pid_t before[16], after[16];
    size_t nb = tu_children(H.pid, before, NULL, 16);
    write_conf_more(redis, 1, ", { name = \"more\"; workers = 1; partitions = 4; }");
    ck_assert_int_eq(kill(H.fx.pid, SIGSTOP), 0);
    ck_assert_int_eq(kill(H.pid, SIGHUP), 0);
    pid_t checker = 0;
    for (int t = 0; t < 100 && !checker; t++) {
        size_t na = tu_children(H.pid, after, NULL, 16);
        for (size_t i = 0; i < na && !checker; i++) {
            int known = 0;
            for (size_t k = 0; k < nb; k++)
                known |= after[i] == before[k];
            if (!known)
                checker = after[i];
        }
        tu_sleep_ms(10);
    }
    ck_assert_msg(checker > 0, "no checker started; log:\n%s", h_log_tail(&H));
    ck_assert_int_eq(kill(H.pid, SIGKILL), 0);
    ck_assert_int_eq(waitpid(H.pid, NULL, 0), H.pid);
    H.pid = 0;
    int64_t t0 = tu_mono_ms();
    while (tu_process_running(checker) && tu_mono_ms() - t0 < 3000)
        tu_sleep_ms(10);
    int64_t took = tu_mono_ms() - t0;
    ck_assert_int_eq(kill(H.fx.pid, SIGCONT), 0);
    ck_assert_msg(took < 500, "the checker outlived its supervisor by %lld ms",
                  (long long)took);
}
END_TEST

/* ---- over Sentinel, one sentinel a black hole ------------------------------------ */

/* A sentinel monitoring the fixture (at `master_port`) on a free port; its
 * port.  Quorum 1: one sentinel is enough here. */
static int start_sentinel(int master_port)
{
    char conf[300], log[300], server[PATH_MAX], text[1024], err[300];
    int port = fixture_free_port();
    snprintf(conf, sizeof conf, "%s/sentinel.conf", H.fx.dir);
    snprintf(log, sizeof log, "%s/sentinel.log", H.fx.dir);
    snprintf(text, sizeof text,
             "port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n"
             "sentinel monitor " MASTER_NAME " 127.0.0.1 %d 1\n"
             "sentinel down-after-milliseconds " MASTER_NAME " 5000\n",
             port, H.fx.dir, log, master_port);
    h_write_file(conf, text);
    ck_assert_msg(tu_redis_find(NULL, server, sizeof server) == 0, "no redis-server");
    char *const argv[] = { server, conf, "--sentinel", NULL };
    sentinel_pid = tu_spawn(argv, NULL, 0, err, sizeof err);
    ck_assert_msg(sentinel_pid > 0, "%s", err);
    for (int t = 0; t < 500; t++) {
        struct timeval tv = { 1, 0 };
        redisContext *rc = redisConnectWithTimeout("127.0.0.1", port, tv);
        if (rc && rc->err) {
            redisFree(rc);
            rc = NULL;
        }
        redisReply *r = rc ? redisCommand(rc, "SENTINEL get-master-addr-by-name "
                                          MASTER_NAME) : NULL;
        int up = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2;
        if (r)
            freeReplyObject(r);
        if (rc)
            redisFree(rc);
        if (up)
            return port;
        tu_sleep_ms(10);
    }
    ck_abort_msg("the sentinel did not answer (see %s)", log);
    return -1;
}

/* A listener on a free loopback port that the test never reads: connects
 * succeed (the kernel's queue), commands are never answered. */
static int black_hole(void)
{
    int port = fixture_free_port();
    hole_fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(hole_fd, 0);
    int one = 1;
    setsockopt(hole_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    ck_assert_int_eq(bind(hole_fd, (struct sockaddr *)&sa, sizeof sa), 0);
    ck_assert_int_eq(listen(hole_fd, 128), 0);
    return port;
}

START_TEST(no_connection_over_sentinel_with_a_black_hole)
{
    int master = fixture_tcp_port();
    int sentinel = start_sentinel(master), hole = black_hole();
    char redis[400], notify[300];
    snprintf(redis, sizeof redis,
             "sentinel = { master = \"" MASTER_NAME "\"; nodes = [ \"127.0.0.1:%d\", "
             "\"127.0.0.1:%d\" ]; }; connect_timeout = \"2s\";", hole, sentinel);
    write_conf(redis, 2);
    int fd = notify_socket(notify, sizeof notify);
    int workers = 2;
    start_watched(notify, fixture_ready, &workers);
    int ports[] = { master, sentinel, hole };
    struct observed o = { 0 };
    int64_t last = 0;
    observe(fd, H.pid, ports, 3, 1500, &o, &last);
    enqueue(H.c, "dies", "segv");
    ck_assert_msg(h_wait_log(&H, "settled the", 1, 10000) >= 1, "no settlement; log:\n%s",
                  h_log_tail(&H));
    ck_assert_int_eq(kill(H.pid, SIGHUP), 0);
    ck_assert_msg(h_wait_log(&H, "reloaded", 1, 15000) >= 1, "no reload; log:\n%s",
                  h_log_tail(&H));
    observe(fd, H.pid, ports, 3, 1500, &o, &last);
    assert_hang_killed(fd, H.c, ports, 3, &o, &last);
    assert_quiet(&o, "over Sentinel with a black hole");
    /* The watcher (in the settler) is subscribed on both sentinels. */
    ck_assert_msg(ps_children_connected_to(H.pid, sentinel) >= 1
                  && ps_children_connected_to(H.pid, hole) >= 1,
                  "no child holds the watcher's connections to the sentinels");
    close(fd);
    ck_assert_int_eq(h_stop(&H, 15000), 0);
}
END_TEST

/* ---- over a cluster, a master stopped ------------------------------------------ */

/* Subscribed workers over the cluster's nodes (check_cluster.c's count);
 * -1 when the daemon exited. */
static int cluster_ready(void *arg)
{
    int workers = *(int *)arg, subs = 0;
    if (waitpid(H.pid, NULL, WNOHANG) == H.pid) {
        H.pid = 0;
        return -1;
    }
    for (int i = 0; i < C.nnodes; i++) {
        char err[300];
        redisContext *rc = cluster_fx_connect(&C, i, 2000, err, sizeof err);
        if (!rc)
            continue;
        subs += tu_redis_clients_with(rc, "cmd=subscribe");
        redisFree(rc);
    }
    return subs >= workers;
}

START_TEST(no_connection_over_a_cluster_with_a_master_stopped)
{
    char err[400];
    ck_assert_msg(cluster_fx_start(&C, 3, 0, NULL, err, sizeof err) == 0, "%s", err);
    cluster_up = 1;
    char nodes[CLUSTER_FX_MAX_NODES * 40] = "", redis[1024], notify[300];
    size_t n = 0;
    for (int i = 0; i < C.nnodes; i++)
        n += (size_t)snprintf(nodes + n, sizeof nodes - n, "%s\"%s\"", i ? ", " : "",
                              C.seeds[i]);
    snprintf(redis, sizeof redis, "cluster = true; nodes = [ %s ]; connect_timeout = \"2s\"; "
             "command_timeout = \"2s\";", nodes);
    write_conf(redis, 2);
    int fd = notify_socket(notify, sizeof notify);
    int workers = 2;
    start_watched(notify, cluster_ready, &workers);
    dq_options opt;
    dq_options_init(&opt);
    opt.cluster = 1;
    opt.nodes = C.seeds;
    opt.nnodes = (size_t)C.nnodes;
    opt.connect_timeout_ms = 10000;
    dq_client *c = dq_connect(&opt, err, sizeof err, NULL);
    ck_assert_msg(c != NULL, "connect to the cluster: %s", err);
    int seen = 0;
    for (int i = 0; i < C.nnodes; i++)
        seen += ps_children_connected_to(H.pid, C.port[i]);
    ck_assert_msg(seen >= 3, "the children's connections to the cluster are not seen");
    struct observed o = { 0 };
    int64_t last = 0;
    observe(fd, H.pid, C.port, (size_t)C.nnodes, 1000, &o, &last);
    /* A hanging job runs; then a master stops answering (its connections
     * hang), and its worker dies on its timeout. */
    enqueue(c, "hangs", "hang");
    pid_t w = runner_of("hangs");
    int64_t started = tu_mono_ms();
    int stopped = cluster_fx_master_of_slot(&C, 0);
    ck_assert_int_ge(stopped, 0);
    ck_assert_int_eq(kill(C.pid[stopped], SIGSTOP), 0);
    while (tu_process_running(w) && tu_mono_ms() - started < HANG_TIMEOUT_MS + 5000)
        observe(fd, H.pid, C.port, (size_t)C.nnodes, 20, &o, &last);
    int64_t took = tu_mono_ms() - started;
    ck_assert_msg(!tu_process_running(w) && took < HANG_TIMEOUT_MS + KILL_MARGIN_MS,
                  "the hung worker was killed %lld ms after its job started (timeout %d ms)",
                  (long long)took, HANG_TIMEOUT_MS);
    /* The settler, the respawned worker and the reaper find the master
     * stopped; the supervisor goes on. */
    observe(fd, H.pid, C.port, (size_t)C.nnodes, 4000, &o, &last);
    ck_assert_int_eq(kill(H.pid, SIGHUP), 0);
    observe(fd, H.pid, C.port, (size_t)C.nnodes, 1000, &o, &last);
    assert_quiet(&o, "over a cluster with a master stopped");
    ck_assert_int_eq(kill(C.pid[stopped], SIGCONT), 0);
    dq_close(c);
    close(fd);
    ck_assert_int_eq(h_stop(&H, 15000), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("supervisor_quiet");
    TCase *tc = fixture_tcase(s, "tcp", 90, NULL, NULL, setup, teardown);
    tcase_add_test(tc, no_connection_over_tcp);
    tcase_add_test(tc, reload_check_waits_in_a_child);
    tcase_add_test(tc, reload_checker_dies_with_the_supervisor);
    tc = fixture_tcase(s, "sentinel", 120, NULL, NULL, setup, teardown);
    tcase_add_test(tc, no_connection_over_sentinel_with_a_black_hole);
    tc = fixture_tcase(s, "cluster", 180, NULL, NULL, setup, teardown);
    tcase_add_test(tc, no_connection_over_a_cluster_with_a_master_stopped);
    return fixture_run_suite(s);
}
