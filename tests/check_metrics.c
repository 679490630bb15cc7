/*
 * Metrics and health of the real delayqd (with the shipped log.so handler)
 * against a real redis-server: /metrics counters and histograms while jobs
 * run and after, the queue gauges against dq_stats_get, /healthz with
 * Redis stopped and workers killed, restarts, a reload that moves the
 * address, the configuration checks, a port already taken; and
 * `delayq stats --watch` on a pipe.
 *
 * Each test starts its own redis-server and daemon in Check's forked
 * child: they share its process group, which Check kills after the test.
 */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fixture.h"

#define QUEUE "orders"
#define PAGE_MAX 262144

static struct redis_fixture F;
static pid_t D;                 /* the daemon, or 0 */
static char CONF[256], LOG[256], HANDLER_DIR[PATH_MAX];
static char PAGE[PAGE_MAX];     /* the last answer's body */

/* ---- helpers ---------------------------------------------------------------- */

/* A formatted string in one of a few rotating buffers. */
static const char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static const char *fmt(const char *f, ...)
{
    static char bufs[8][512];
    static int next;
    char *b = bufs[next++ % 8];
    va_list ap;
    va_start(ap, f);
    vsnprintf(b, 512, f, ap);
    va_end(ap);
    return b;
}

/* GET `path` from 127.0.0.1:port (fixture_http_get); the body goes to
 * PAGE. */
static int http_get(int port, const char *path)
{
    return fixture_http_get(port, path, PAGE, sizeof PAGE);
}

/* GET /metrics, which must answer 200. */
static void scrape(int port)
{
    int st = http_get(port, "/metrics");
    ck_assert_msg(st == 200, "/metrics answered %d (0: nothing)", st);
}

/* The value of the series `series` (name and labels, exactly) in PAGE;
 * -1 when absent. */
static double metric(const char *series)
{
    size_t n = strlen(series);
    for (const char *p = PAGE; *p;) {
        if (strncmp(p, series, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
        const char *nl = strchr(p, '\n');
        if (!nl)
            break;
        p = nl + 1;
    }
    return -1;
}

static double counter(const char *name, const char *type)
{
    return metric(fmt("delayq_jobs_%s_total{queue=\"" QUEUE "\",type=\"%s\"}", name, type));
}

/* Check the histogram `name` of `type` in PAGE: buckets cumulative, +Inf
 * equal to _count, a _sum.  Returns _count. */
static double histogram(const char *name, const char *type)
{
    static const char *const les[] = { "0.001", "0.005", "0.01", "0.025", "0.05", "0.1",
                                       "0.25", "0.5", "1", "2.5", "5", "10", "30", "60",
                                       "+Inf" };
    double prev = 0;
    for (size_t i = 0; i < sizeof les / sizeof les[0]; i++) {
        double v = metric(fmt("%s_bucket{queue=\"" QUEUE "\",type=\"%s\",le=\"%s\"}", name,
                              type, les[i]));
        ck_assert_msg(v >= prev, "%s{type=%s} bucket le=%s is %g, below %g", name, type,
                      les[i], v, prev);
        prev = v;
    }
    double count = metric(fmt("%s_count{queue=\"" QUEUE "\",type=\"%s\"}", name, type));
    ck_assert_msg(count == prev, "%s_count %g != +Inf bucket %g", name, count, prev);
    ck_assert(metric(fmt("%s_sum{queue=\"" QUEUE "\",type=\"%s\"}", name, type)) >= 0);
    return count;
}

/* The configuration: `workers` workers on QUEUE in `partitions`
 * partitions, type "ok" to log.so, metrics on `listen` (NULL: none),
 * `extra` appended to the metrics group. */
static void write_conf_parts(int workers, int partitions, const char *listen,
                             const char *extra)
{
    FILE *f = fopen(CONF, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "redis = { unix_socket = \"%s\"; };\n"
            "handler_dir = \"%s\";\n"
            "shutdown_timeout = \"5s\";\n"
            "log = { level = \"info\"; };\n"
            "queues = ( { name = \"" QUEUE "\"; workers = %d; lease = \"10s\"; "
            "partitions = %d; } );\n"
            "handlers = ( { type = \"ok\"; file = \"log.so\"; timeout = \"2s\"; } );\n",
            F.sock, HANDLER_DIR, workers, partitions);
    if (listen)
        fprintf(f, "metrics = {\n  listen = \"%s\";\n  %s\n};\n", listen, extra ? extra : "");
    fclose(f);
}

static void write_conf(int workers, const char *listen, const char *extra)
{
    write_conf_parts(workers, 1, listen, extra);
}

/* Start delayqd -f -c CONF, its stderr appended to LOG. */
static pid_t spawn_daemon(void)
{
    char *const argv[] = { (char *)fixture_build_path("delayqd"), "-f", "-c", CONF, NULL };
    char err[300];
    pid_t pid = tu_spawn(argv, LOG, 0, err, sizeof err);
    ck_assert_msg(pid > 0, "%s", err);
    return pid;
}

static const char *log_tail(void)
{
    static char buf[4096];
    buf[0] = '\0';
    FILE *f = fopen(LOG, "r");
    if (!f)
        return "(no log)";
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, size > (long)sizeof buf - 1 ? size - (long)sizeof buf + 1 : 0, SEEK_SET);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Poll /healthz until it answers `want` (and, when `body` is not NULL,
 * with that body), for `timeout_ms` at most; returns 1 when it did. */
static int wait_health(int port, int want, const char *body, int timeout_ms)
{
    int64_t end = tu_mono_ms() + timeout_ms;
    do {
        if (http_get(port, "/healthz") == want && (!body || strcmp(PAGE, body) == 0))
            return 1;
        tu_sleep_ms(20);
    } while (tu_mono_ms() < end);
    return 0;
}

/* Start the daemon and wait until /healthz says it is ready. */
static void start_daemon(int workers, int port)
{
    write_conf(workers, fmt("127.0.0.1:%d", port), NULL);
    D = spawn_daemon();
    ck_assert_msg(wait_health(port, 200, "ok\n", 10000),
                  "delayqd not healthy within 10 s (last: '%s'); log:\n%s", PAGE, log_tail());
}

static void stop_daemon(void)
{
    if (D <= 0)
        return;
    tu_stop_process(D, 10000);
    D = 0;
}

static void enqueue(dq_client *c, const char *type, int64_t delay_ms)
{
    dq_enqueue_req req = { .queue = QUEUE, .type = type, .payload = "{}", .payload_len = 2,
                           .delay_ms = delay_ms };
    dq_enqueued out;
    ck_assert_msg(dq_enqueue(c, &req, &out) == DQ_OK, "enqueue: %s", dq_errmsg(c));
}

/* Run argv to its end (10 s at most), stdout and stderr into `out`;
 * returns the exit code, or -1 when it did not end in time. */
static int run(char *const argv[], char *out, size_t len)
{
    char path[300];
    snprintf(path, sizeof path, "%s/run.out", F.dir);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    int status = -1;
    for (int i = 0; i < 1000 && waitpid(pid, &status, WNOHANG) == 0; i++, status = -1)
        tu_sleep_ms(10);
    if (status == -1) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(out, 1, len - 1, f) : 0;
    out[n] = '\0';
    if (f)
        fclose(f);
    return status == -1 ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static void setup(void)
{
    fixture_redis_start(&F);
    snprintf(CONF, sizeof CONF, "%s/delayqd.conf", F.dir);
    snprintf(LOG, sizeof LOG, "%s/delayqd.log", F.dir);
    /* The shipped handlers; the loader wants a directory only we can write. */
    ck_assert_msg(realpath(fixture_build_path("handlers/.libs"), HANDLER_DIR) != NULL,
                  "handlers/.libs not built");
    D = 0;
}

static void teardown(void)
{
    if (F.pid > 0)
        kill(F.pid, SIGCONT);
    stop_daemon();
    fixture_redis_stop(&F);
}

/* ---- /metrics ------------------------------------------------------------------ */

START_TEST(counters_and_histograms_while_running_and_after)
{
    enum { OK_JOBS = 20, UNKNOWN_JOBS = 4, LATER_JOBS = 2 };
    int port = fixture_free_port();
    start_daemon(2, port);
    dq_client *c = fixture_client(&F);
    for (int i = 0; i < OK_JOBS; i++)
        enqueue(c, "ok", i * 50);               /* due over a second */
    for (int i = 0; i < UNKNOWN_JOBS; i++)
        enqueue(c, "nope", 0);                  /* no handler: dead at once */
    for (int i = 0; i < LATER_JOBS; i++)
        enqueue(c, "ok", 3600 * 1000);          /* stay delayed */

    /* Scrape while they run: counters only grow; histograms stay whole. */
    double last_claimed = 0, last_succeeded = 0;
    int partial = 0, done = 0;
    for (int64_t end = tu_mono_ms() + 15000; !done && tu_mono_ms() < end; tu_sleep_ms(40)) {
        scrape(port);
        double claimed = counter("claimed", "ok"), succeeded = counter("succeeded", "ok");
        if (claimed < 0)
            continue;                           /* nothing claimed yet */
        ck_assert(claimed >= last_claimed && succeeded >= last_succeeded);
        ck_assert(succeeded <= claimed);
        ck_assert(histogram("delayq_handler_duration_seconds", "ok") <= claimed);
        histogram("delayq_fire_lateness_seconds", "ok");
        last_claimed = claimed;
        last_succeeded = succeeded;
        partial += succeeded > 0 && succeeded < OK_JOBS;
        done = succeeded == OK_JOBS && counter("dead", "nope") == UNKNOWN_JOBS;
    }
    ck_assert_msg(done, "jobs not done within 15 s; page:\n%s", PAGE);
    ck_assert_msg(partial > 0, "no scrape saw the jobs half done");

    scrape(port);
    ck_assert_double_eq(counter("claimed", "ok"), OK_JOBS);
    ck_assert_double_eq(counter("succeeded", "ok"), OK_JOBS);
    ck_assert_double_eq(counter("retried", "ok"), 0);
    ck_assert_double_eq(counter("dead", "ok"), 0);
    ck_assert_double_eq(counter("timed_out", "ok"), 0);
    ck_assert_double_eq(counter("claimed", "nope"), UNKNOWN_JOBS);
    ck_assert_double_eq(counter("succeeded", "nope"), 0);
    ck_assert_double_eq(counter("dead", "nope"), UNKNOWN_JOBS);
    /* Every handler run is timed (succeeded + failed); a job without a
     * handler never runs. */
    ck_assert_double_eq(histogram("delayq_handler_duration_seconds", "ok"),
                        counter("succeeded", "ok") + counter("retried", "ok")
                        + counter("dead", "ok"));
    ck_assert_double_eq(histogram("delayq_fire_lateness_seconds", "ok"), OK_JOBS);
    /* The same runs by priority level: all normal (5). */
    ck_assert_double_eq(metric("delayq_fire_lateness_by_priority_seconds_count{queue=\""
                               QUEUE "\",priority=\"5\"}"), OK_JOBS);
    ck_assert_double_eq(metric("delayq_fire_lateness_by_priority_seconds_bucket{queue=\""
                               QUEUE "\",priority=\"5\",le=\"+Inf\"}"), OK_JOBS);
    ck_assert_double_eq(metric("delayq_fire_lateness_by_priority_seconds_count{queue=\""
                               QUEUE "\",priority=\"0\"}"), -1);
    ck_assert_double_eq(histogram("delayq_handler_duration_seconds", "nope"), 0);
    ck_assert_double_eq(metric("delayq_jobs_stale_total{queue=\"" QUEUE "\"}"), 0);

    /* The queue gauges are Redis's figures, at most a refresh old (the
     * supervisor never asks Redis while answering a scrape). */
    dq_stats st;
    ck_assert_int_eq(dq_stats_get(c, QUEUE, &st), DQ_OK);
    for (int64_t end = tu_mono_ms() + 3000; tu_mono_ms() < end; tu_sleep_ms(50)) {
        scrape(port);
        if (metric("delayq_queue_jobs{queue=\"" QUEUE "\",state=\"delayed\"}") == st.delayed
            && metric("delayq_queue_jobs{queue=\"" QUEUE "\",state=\"dead\"}") == st.dead
            && metric("delayq_queue_jobs{queue=\"" QUEUE "\",state=\"processing\"}")
                   == st.processing)
            break;
    }
    ck_assert(metric("delayq_stats_age_seconds") >= 0 && metric("delayq_stats_age_seconds") < 2);
    ck_assert_double_eq(metric("delayq_queue_jobs{queue=\"" QUEUE "\",state=\"delayed\"}"),
                        st.delayed);
    ck_assert_double_eq(metric("delayq_queue_jobs{queue=\"" QUEUE "\",state=\"due\"}"), st.due);
    ck_assert_double_eq(metric("delayq_queue_jobs{queue=\"" QUEUE "\",state=\"processing\"}"),
                        st.processing);
    ck_assert_double_eq(metric("delayq_queue_jobs{queue=\"" QUEUE "\",state=\"dead\"}"), st.dead);
    ck_assert_int_eq(st.delayed, LATER_JOBS);
    ck_assert_int_eq(st.dead, UNKNOWN_JOBS);
    /* Cancels and expiries are counted in Redis: a cancel shows within a
     * refresh. */
    ck_assert_double_eq(metric("delayq_jobs_expired_total{queue=\"" QUEUE "\"}"), 0);
    ck_assert_double_eq(metric("delayq_jobs_cancelled_total{queue=\"" QUEUE "\"}"), 0);
    dq_enqueue_req cx = { .queue = QUEUE, .type = "ok", .id = "cx", .delay_ms = 3600000 };
    ck_assert_int_eq(dq_enqueue(c, &cx, NULL), DQ_OK);
    ck_assert_int_eq(dq_cancel(c, QUEUE, "cx"), DQ_OK);
    for (int64_t end = tu_mono_ms() + 3000; tu_mono_ms() < end; tu_sleep_ms(50)) {
        scrape(port);
        if (metric("delayq_jobs_cancelled_total{queue=\"" QUEUE "\"}") == 1)
            break;
    }
    ck_assert_double_eq(metric("delayq_jobs_cancelled_total{queue=\"" QUEUE "\"}"), 1);
    ck_assert_ptr_nonnull(strstr(PAGE, "# TYPE delayq_jobs_cancelled_total counter\n"));

    ck_assert_double_eq(metric("delayq_redis_up"), 1);
    ck_assert_double_eq(metric("delayq_workers{queue=\"" QUEUE "\"}"), 2);
    ck_assert_double_eq(metric("delayq_worker_restarts_total"), 0);
    ck_assert_double_eq(metric("delayq_redis_reconnects_total"), 0);
    ck_assert_double_eq(metric(fmt("delayq_build_info{version=\"%s\"}", PACKAGE_VERSION)), 1);
    ck_assert_ptr_nonnull(strstr(PAGE, "# TYPE delayq_jobs_claimed_total counter\n"));
    ck_assert_ptr_nonnull(strstr(PAGE, "# TYPE delayq_handler_duration_seconds histogram\n"));
    ck_assert_ptr_nonnull(strstr(PAGE, "# TYPE delayq_queue_jobs gauge\n"));
    ck_assert_ptr_nonnull(strstr(PAGE, "# HELP delayq_fire_lateness_seconds "));

    ck_assert_int_eq(http_get(port, "/healthz"), 200);
    ck_assert_str_eq(PAGE, "ok\n");
    ck_assert_int_eq(http_get(port, "/nothing"), 404);
    dq_close(c);
}
END_TEST

/* ---- /healthz ------------------------------------------------------------------- */

START_TEST(health_follows_redis)
{
    int port = fixture_free_port();
    start_daemon(2, port);
    kill(F.pid, SIGSTOP);
    /* The figures it serves are cached: Redis counts as unreachable once
     * they are 2 s old without an answer. */
    int64_t stopped = tu_mono_ms();
    ck_assert_msg(wait_health(port, 503, NULL, 5000), "/healthz answered %d with Redis "
                  "stopped for 5 s", http_get(port, "/healthz"));
    ck_assert_int_le(tu_mono_ms() - stopped, 3500);
    ck_assert_msg(strncmp(PAGE, "redis unreachable: ", 19) == 0 && strchr(PAGE, '\n')
                      == PAGE + strlen(PAGE) - 1, "reason: '%s'", PAGE);
    scrape(port);
    ck_assert_double_eq(metric("delayq_redis_up"), 0);
    ck_assert_ptr_null(strstr(PAGE, "delayq_queue_jobs{"));
    ck_assert_ptr_nonnull(strstr(PAGE, "# TYPE delayq_jobs_claimed_total counter\n"));
    kill(F.pid, SIGCONT);
    ck_assert_msg(wait_health(port, 200, "ok\n", 10000), "not healthy again: '%s'", PAGE);
    scrape(port);
    ck_assert_double_eq(metric("delayq_redis_up"), 1);
}
END_TEST

/* A partition whose statistics answer an error (one of its keys of the
 * wrong type, on a single server) is named by /healthz with that error,
 * not as out of reach, and its gauge is 0 until it answers again. */
START_TEST(health_names_a_partition_whose_statistics_fail)
{
    int port = fixture_free_port();
    write_conf_parts(2, 2, fmt("127.0.0.1:%d", port), NULL);
    D = spawn_daemon();
    ck_assert_msg(wait_health(port, 200, "ok\n", 10000), "not healthy (last: '%s'); log:\n%s",
                  PAGE, log_tail());
    redisContext *rc = fixture_redis_connect(&F);
    freeReplyObject(redisCommand(rc, "DEL dq:{" QUEUE ":1}:dead"));
    freeReplyObject(redisCommand(rc, "SET dq:{" QUEUE ":1}:dead x"));
    int64_t end = tu_mono_ms() + 5000;
    while (!(http_get(port, "/healthz") == 503 && strstr(PAGE, "statistics fail"))
           && tu_mono_ms() < end)
        tu_sleep_ms(50);
    ck_assert_msg(strncmp(PAGE, "1 partition whose statistics fail (", 35) == 0
                      && strstr(PAGE, "WRONGTYPE") && strstr(PAGE, "): " QUEUE "/1\n"),
                  "/healthz: '%s'", PAGE);
    scrape(port);
    ck_assert_double_eq(metric("delayq_partition_up{queue=\"" QUEUE "\",partition=\"1\"}"), 0);
    ck_assert_double_eq(metric("delayq_partition_up{queue=\"" QUEUE "\",partition=\"0\"}"), 1);
    freeReplyObject(redisCommand(rc, "DEL dq:{" QUEUE ":1}:dead"));
    end = tu_mono_ms() + 5000;
    do {
        scrape(port);
        if (metric("delayq_partition_up{queue=\"" QUEUE "\",partition=\"1\"}") == 1)
            break;
        tu_sleep_ms(50);
    } while (tu_mono_ms() < end);
    ck_assert_double_eq(metric("delayq_partition_up{queue=\"" QUEUE "\",partition=\"1\"}"), 1);
    redisFree(rc);
}
END_TEST

START_TEST(reconnects_are_counted)
{
    int port = fixture_free_port();
    start_daemon(1, port);
    scrape(port);
    ck_assert_double_eq(metric("delayq_redis_reconnects_total"), 0);
    /* The worker's two connections and the reaper's are made again. */
    fixture_redis_restart(&F);
    int64_t end = tu_mono_ms() + 15000;
    /* A connection is counted as it is made again, and up once it has
     * answered: a scrape may come between the two. */
    do {
        tu_sleep_ms(50);
        scrape(port);
    } while ((metric("delayq_redis_reconnects_total") < 3 || metric("delayq_redis_up") != 1)
             && tu_mono_ms() < end);
    ck_assert_msg(metric("delayq_redis_reconnects_total") >= 3, "reconnects: %g; log:\n%s",
                  metric("delayq_redis_reconnects_total"), log_tail());
    ck_assert_double_eq(metric("delayq_redis_up"), 1);
    ck_assert_msg(wait_health(port, 200, "ok\n", 10000), "not healthy again: '%s'", PAGE);
}
END_TEST

START_TEST(killed_children_are_counted_and_their_counts_kept)
{
    int port = fixture_free_port();
    start_daemon(2, port);
    dq_client *c = fixture_client(&F);
    for (int i = 0; i < 3; i++)
        enqueue(c, "ok", 0);
    int64_t end = tu_mono_ms() + 10000;
    do {
        tu_sleep_ms(20);
        scrape(port);
    } while (counter("succeeded", "ok") < 3 && tu_mono_ms() < end);
    ck_assert_double_eq(counter("succeeded", "ok"), 3);

    /* Both workers, the reaper and the settler: whichever ran the jobs has
     * its slot folded into the supervisor's totals before the row is reused. */
    pid_t kids[8];
    size_t n = tu_children(D, kids, NULL, 8);
    ck_assert_int_eq(n, 4);
    for (size_t i = 0; i < n; i++)
        kill(kids[i], SIGKILL);
    ck_assert_msg(wait_health(port, 503, "2 of 2 workers down\n", 3000),
                  "no 'workers down' answer; last: '%s'", PAGE);
    ck_assert_msg(wait_health(port, 200, "ok\n", 10000), "not healthy again: '%s'", PAGE);
    scrape(port);
    ck_assert_double_eq(metric("delayq_worker_restarts_total"), 4);
    ck_assert_double_eq(counter("claimed", "ok"), 3);
    ck_assert_double_eq(counter("succeeded", "ok"), 3);
    ck_assert_double_eq(metric("delayq_workers{queue=\"" QUEUE "\"}"), 2);

    /* And the new workers count on top. */
    enqueue(c, "ok", 0);
    end = tu_mono_ms() + 10000;
    do {
        tu_sleep_ms(20);
        scrape(port);
    } while (counter("succeeded", "ok") < 4 && tu_mono_ms() < end);
    ck_assert_double_eq(counter("succeeded", "ok"), 4);
    ck_assert_double_eq(histogram("delayq_handler_duration_seconds", "ok"), 4);
    dq_close(c);
}
END_TEST

/* ---- the address ------------------------------------------------------------------ */

START_TEST(reload_moves_the_address)
{
    int port = fixture_free_port(), port2 = fixture_free_port();
    ck_assert_int_ne(port, port2);
    start_daemon(1, port);
    write_conf(1, fmt("127.0.0.1:%d", port2), NULL);
    kill(D, SIGHUP);
    ck_assert_msg(wait_health(port2, 200, "ok\n", 10000), "not served on the new port; log:\n%s",
                  log_tail());
    ck_assert_int_eq(http_get(port, "/healthz"), -1);
    /* Without the group: no longer served. */
    write_conf(1, NULL, NULL);
    kill(D, SIGHUP);
    int64_t end = tu_mono_ms() + 5000;
    while (http_get(port2, "/healthz") != -1 && tu_mono_ms() < end)
        tu_sleep_ms(20);
    ck_assert_int_eq(http_get(port2, "/healthz"), -1);
}
END_TEST

START_TEST(a_taken_port_stops_the_start)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(fd, 1), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    int port = ntohs(a.sin_port);
    write_conf(1, fmt("127.0.0.1:%d", port), NULL);
    D = spawn_daemon();
    int status = 0;
    for (int i = 0; i < 1000 && waitpid(D, &status, WNOHANG) == 0; i++, status = -1)
        tu_sleep_ms(10);
    ck_assert_msg(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 71,
                  "delayqd did not exit 71; log:\n%s", log_tail());
    D = 0;
    ck_assert_msg(strstr(log_tail(), fmt("metrics: cannot listen on 127.0.0.1:%d: bind: "
                                         "Address already in use", port)) != NULL,
                  "log:\n%s", log_tail());
    close(fd);
}
END_TEST

START_TEST(the_address_is_checked)
{
    char out[4096];
    char *argv[] = { (char *)fixture_build_path("delayqd"), "-t", "-c", CONF, NULL };
    write_conf(1, "0.0.0.0:9464", NULL);
    ck_assert_int_eq(run(argv, out, sizeof out), 78);
    ck_assert_msg(strstr(out, fmt("%s:8: metrics.listen: '0.0.0.0:9464' is not a loopback "
                                  "address", CONF)) != NULL, "%s", out);
    write_conf(1, "0.0.0.0:9464", "allow_remote = true;");
    ck_assert_msg(run(argv, out, sizeof out) == 0, "%s", out);
    write_conf(1, "[::1]:9464", NULL);
    ck_assert_msg(run(argv, out, sizeof out) == 0, "%s", out);
    write_conf(1, "localhost:9464", NULL);
    ck_assert_int_eq(run(argv, out, sizeof out), 78);
    ck_assert_msg(strstr(out, ":8: metrics.listen: bad address 'localhost:9464'") != NULL,
                  "%s", out);
    write_conf(1, "127.0.0.1:70000", NULL);
    ck_assert_int_eq(run(argv, out, sizeof out), 78);
    write_conf(1, "127.0.0.1:9464", "allow_remote = \"yes\";");
    ck_assert_int_eq(run(argv, out, sizeof out), 78);
    ck_assert_msg(strstr(out, ":9: metrics.allow_remote: expected true or false") != NULL,
                  "%s", out);
}
END_TEST

/* ---- delayq stats --watch -------------------------------------------------------- */

START_TEST(stats_watch_on_a_pipe)
{
    dq_client *c = fixture_client(&F);
    enqueue(c, "ok", 3600 * 1000);
    dq_close(c);
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        const char *prog = fixture_build_path("delayq");
        execl(prog, prog, "-s", F.sock, "stats", "--watch", "1", (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    static char out[65536];
    size_t n = 0;
    int64_t stop_at = tu_mono_ms() + 2500, end = tu_mono_ms() + 10000;
    int signalled = 0;
    for (;;) {
        if (!signalled && tu_mono_ms() >= stop_at) {
            kill(pid, SIGINT);
            signalled = 1;
        }
        struct pollfd pfd = { p[0], POLLIN, 0 };
        if (poll(&pfd, 1, 50) > 0) {
            ssize_t r = read(p[0], out + n, sizeof out - 1 - n);
            if (r <= 0)
                break;              /* EOF: it exited */
            n += (size_t)r;
        }
        ck_assert_msg(tu_mono_ms() < end, "delayq stats --watch did not end on SIGINT");
    }
    out[n] = '\0';
    close(p[0]);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);
    int tables = 0;
    for (const char *s = out; (s = strstr(s, "QUEUE ")); s++)
        tables++;
    ck_assert_msg(tables >= 2, "%d table(s) in 2.5 s:\n%s", tables, out);
    ck_assert_msg(strstr(out, "\n\n20") != NULL, "no blank line and timestamp between tables:\n%s",
                  out);
    ck_assert_ptr_null(strstr(out, "\033["));
    ck_assert_ptr_nonnull(strstr(out, "\n" QUEUE " "));
}
END_TEST

static Suite *metrics_suite(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("daemon");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, counters_and_histograms_while_running_and_after);
    tcase_add_test(tc, health_follows_redis);
    tcase_add_test(tc, health_names_a_partition_whose_statistics_fail);
    tcase_add_test(tc, reconnects_are_counted);
    tcase_add_test(tc, killed_children_are_counted_and_their_counts_kept);
    tcase_add_test(tc, reload_moves_the_address);
    tcase_add_test(tc, a_taken_port_stops_the_start);
    tcase_add_test(tc, the_address_is_checked);
    suite_add_tcase(s, tc);
    TCase *cli = tcase_create("cli");
    tcase_add_checked_fixture(cli, setup, teardown);
    tcase_set_timeout(cli, 30);
    tcase_add_test(cli, stats_watch_on_a_pipe);
    suite_add_tcase(s, cli);
    return s;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    return fixture_run_suite(metrics_suite());
}
