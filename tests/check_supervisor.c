/*
 * The supervisor only supervises, end to end with the real delayqd:
 *   - reloads in a row under load: 10 SIGHUPs in 2 s while 20,000 jobs
 *     drain leave every job run exactly once and the queue with the
 *     configured workers (each reload changes the count);
 *   - it never waits for Redis: during a 10 s CLIENT PAUSE, 20 parallel
 *     /healthz requests are answered at once, a hung handler is still
 *     killed at its timeout and the watchdog is still fed;
 *   - /healthz turns 503 when claims have failed for longer than
 *     claim_failure_grace (Redis demoted to a replica: READONLY), and 200
 *     again once Redis takes writes.
 */
#include <check.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon_harness.h"

static struct harness H;

static void setup(void)
{
    h_setup(&H);
}

static void teardown(void)
{
    h_teardown(&H);
}

/* Write the configuration of `hc` with a metrics group on `port` (and
 * `grace` as claim_failure_grace when not NULL), atomically: a reload
 * never reads half a file. */
static void write_conf(const struct h_conf *hc, int port, const char *grace)
{
    struct harness tmp = H;
    ck_assert(strlen(H.conf) + 4 < sizeof tmp.conf);
    memcpy(tmp.conf + strlen(H.conf), ".new", 5);
    h_write_conf(&tmp, hc);
    FILE *f = fopen(tmp.conf, "a");
    ck_assert(f != NULL);
    fprintf(f, "metrics = { listen = \"127.0.0.1:%d\";", port);
    if (grace)
        fprintf(f, " claim_failure_grace = \"%s\";", grace);
    fputs(" };\n", f);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(rename(tmp.conf, H.conf), 0);
}

struct health_wait {
    int port, want;
    const char *needle;     /* in the body; NULL: any */
    char body[4096];
};

static int health_is(void *arg)
{
    struct health_wait *w = arg;
    return fixture_http_get(w->port, "/healthz", w->body, sizeof w->body) == w->want
           && (!w->needle || strstr(w->body, w->needle));
}

static int wait_health(int port, int want, const char *needle, int timeout_ms, char *body,
                       size_t len)
{
    static struct health_wait w;
    w = (struct health_wait){ .port = port, .want = want, .needle = needle };
    int ok = h_wait(timeout_ms, health_is, &w);
    snprintf(body, len, "%s", w.body);
    return ok;
}

/* A raw command on the server at unix socket `sock` that must succeed. */
static void redis_ok(const char *sock, const char *fmt, ...)
{
    struct timeval tv = { 5, 0 };
    redisContext *rc = redisConnectUnixWithTimeout(sock, tv);
    ck_assert_msg(rc && !rc->err, "connect %s: %s", sock, rc ? rc->errstr : "oom");
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(rc, fmt, ap);
    va_end(ap);
    ck_assert_msg(r && r->type != REDIS_REPLY_ERROR, "%s: %s", fmt,
                  r ? r->str : rc->errstr);
    freeReplyObject(r);
    redisFree(rc);
}

/* ---- reloads in a row --------------------------------------------------- */

#define RELOAD_JOBS 20000
#define RELOADS 10
#define RELOAD_EVERY_MS 200
#define SPREAD_MS 3000

/* The workers after `reload` reloads: three generations overflow the
 * child table (2 * 256 + 2 rows), and the last count is new. */
static int workers_of(int reload)
{
    return reload == RELOADS ? 180 : reload % 2 ? 190 : 200;
}

/* Job i of the drain (h_enqueue_numbered): "ok", due evenly over
 * SPREAD_MS from *base. */
static void drain_job(int i, void *arg, const char **payload, int64_t *at_ms)
{
    *payload = "ok";
    *at_ms = *(const int64_t *)arg + (int64_t)i * SPREAD_MS / RELOAD_JOBS;
}

struct children_wait {
    pid_t daemon;
    size_t want;
    size_t seen;
    const char *applied;        /* the log line of the last reload */
    int reloaded;               /* "reloaded" lines seen */
    int64_t since;              /* seen == want from then on; 0: not */
};

/* The last configuration is in force and its children alone run, for a
 * second. The count passes through `want` while generations overlap,
 * and a slow machine (ASan, 2 cores, 200 workers) applies a reload
 * seconds after its SIGHUP. */
static int children_are(void *arg)
{
    struct children_wait *w = arg;
    pid_t kids[1024];
    w->reloaded = h_log_count(&H, "reloaded ");
    if (h_log_count(&H, w->applied) == 0)
        return 0;
    w->seen = tu_children(w->daemon, kids, NULL, 1024);
    if (w->seen != w->want) {
        w->since = 0;
        return 0;
    }
    if (w->since == 0)
        w->since = tu_mono_ms();
    return tu_mono_ms() - w->since >= 1000;
}

START_TEST(reloads_in_a_row_keep_every_worker)
{
    int port = fixture_free_port();
    char body[4096];
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.workers = workers_of(0);
    hc.batch = 16;
    hc.lease = "30s";
    h_write_conf(&H, &hc);
    write_conf(&hc, port, NULL);
    h_start(&H, hc.workers);
    ck_assert_msg(wait_health(port, 200, "ok", 20000, body, sizeof body), "not healthy: %s; "
                  "log:\n%s", body, h_log_tail(&H));

    int64_t base;
    ck_assert_int_eq(dq_server_time(H.c, &base), DQ_OK);
    base += 300;
    h_enqueue_numbered(&H, RELOAD_JOBS, "r", drain_job, &base);
    int64_t t0 = tu_mono_ms();
    for (int i = 0; i < RELOADS; i++) {
        int64_t next = t0 + (int64_t)i * RELOAD_EVERY_MS;  /* the last at 1.8 s */
        if (next > tu_mono_ms())
            tu_sleep_ms((int)(next - tu_mono_ms()));
        hc.workers = workers_of(i + 1);
        write_conf(&hc, port, NULL);
        ck_assert_int_eq(kill(H.pid, SIGHUP), 0);
    }
    int64_t reloading = tu_mono_ms() - t0;
    if (!h_wait_idle(&H, 60000)) {
        pid_t kids[1024];
        ck_abort_msg("not drained in 60 s: %zu children, %d \"no room\" lines; log:\n%s",
                     tu_children(H.pid, kids, NULL, 1024), h_log_count(&H, "no room"),
                     h_log_tail(&H));
    }
    int64_t drained = tu_mono_ms() - t0;
    dq_stats st;
    ck_assert_int_eq(dq_stats_get(H.c, H_QUEUE, &st), DQ_OK);

    /* Every job exactly once: one start, one end. */
    int *starts = calloc(RELOAD_JOBS, sizeof *starts), *ends = calloc(RELOAD_JOBS, sizeof *ends);
    ck_assert(starts && ends);
    struct h_run *r;
    size_t nr = h_records(&H, &r);
    for (size_t i = 0; i < nr; i++) {
        int k = atoi(r[i].id + 1);
        ck_assert(r[i].id[0] == 'r' && k >= 0 && k < RELOAD_JOBS && r[i].end != H_OVERLAP);
        (r[i].end ? ends : starts)[k]++;
    }
    free(r);
    int once = 0, lost = 0, twice = 0;
    for (int i = 0; i < RELOAD_JOBS; i++) {
        once += starts[i] == 1 && ends[i] == 1;
        lost += starts[i] == 0;
        twice += starts[i] > 1;
    }
    free(starts);
    free(ends);

    /* The last configuration's workers, its reaper and its settler, nothing
     * more: the older settlers stop once their workers' deaths are settled.
     * In a sanitizer build beside other tests, the reload lines came 13 s
     * and 11 s apart, the last 28 s after the drain, and the last
     * settler later still; so up to 90 s. */
    char applied[64];
    snprintf(applied, sizeof applied, "1 queue, %d workers, 1 handler", workers_of(RELOADS));
    struct children_wait cw = { .daemon = H.pid, .want = (size_t)workers_of(RELOADS) + 2,
                                .applied = applied };
    int settled = h_wait(90000, children_are, &cw);
    int reloaded = cw.reloaded;
    fprintf(stderr, "reloads: %d SIGHUPs in %lld ms during a drain of %d jobs (%lld ms): "
            "%d reloaded, %d waited for room, %d partial starts; %d jobs ran once, %d "
            "lost, %d ran twice; %zu children at the end (want %zu)\n", RELOADS,
            (long long)reloading, RELOAD_JOBS, (long long)drained, reloaded,
            h_log_count(&H, "still draining"), h_log_count(&H, "start as the previous"),
            once, lost, twice, cw.seen, cw.want);
    ck_assert_int_eq(lost, 0);
    ck_assert_int_eq(twice, 0);
    ck_assert_int_eq(once, RELOAD_JOBS);
    ck_assert_int_eq(st.dead, 0);
    ck_assert_int_eq(h_log_count(&H, "no room"), 0);
    ck_assert_msg(settled, "%zu children, want %zu, \"%s\" %s; log:\n%s", cw.seen, cw.want,
                  applied, h_log_count(&H, applied) ? "logged" : "not logged", h_log_tail(&H));
    /* SIGHUPs that came while every generation place was taken are
     * applied together once one is free, so there may be fewer lines. */
    ck_assert_int_ge(reloaded, 1);
    ck_assert_int_eq(h_log_count(&H, "reload refused"), 0);
    ck_assert_msg(wait_health(port, 200, "ok", 10000, body, sizeof body), "not healthy: %s",
                  body);
    ck_assert_int_eq(h_stop(&H, 20000), 0);
}
END_TEST

/* ---- Redis paused --------------------------------------------------------- */

#define PARALLEL 20

struct answer {
    int status;
    int64_t us;
};

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* PARALLEL /healthz requests at once (each from its own process, released
 * together); returns the slowest answer's time in µs, every status in
 * `statuses` (PARALLEL entries). */
static int64_t parallel_health(int port, int *statuses)
{
    struct answer *a = mmap(NULL, PARALLEL * sizeof *a, PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert(a != MAP_FAILED);
    int gate[2];
    ck_assert_int_eq(pipe(gate), 0);
    pid_t pids[PARALLEL];
    for (int i = 0; i < PARALLEL; i++) {
        pids[i] = fork();
        ck_assert(pids[i] >= 0);
        if (pids[i] == 0) {
            char c, body[1024];
            close(gate[1]);
            if (read(gate[0], &c, 1) < 0)
                _exit(1);
            int64_t t = mono_us();
            a[i].status = fixture_http_get(port, "/healthz", body, sizeof body);
            a[i].us = mono_us() - t;
            _exit(0);
        }
    }
    close(gate[0]);
    close(gate[1]);             /* EOF: all go */
    for (int i = 0; i < PARALLEL; i++)
        waitpid(pids[i], NULL, 0);
    int64_t max = 0;
    for (int i = 0; i < PARALLEL; i++) {
        statuses[i] = a[i].status;
        if (a[i].us > max)
            max = a[i].us;
    }
    munmap(a, PARALLEL * sizeof *a);
    return max;
}

/* systemd's side of NOTIFY_SOCKET: a process that reads the datagrams as
 * they come and notes when each WATCHDOG=1 arrived (monotonic ms). */
#define MAX_PINGS 1000
struct pings {
    int n;
    int64_t at[MAX_PINGS];
};

static pid_t watchdog_reader(char *path, size_t len, struct pings *p)
{
    snprintf(path, len, "%s/notify.sock", H.fx.dir);
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    ck_assert(strlen(path) < sizeof sa.sun_path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        char buf[256];
        ssize_t k;
        while ((k = recv(fd, buf, sizeof buf - 1, 0)) >= 0) {
            buf[k] = '\0';
            if (strcmp(buf, "WATCHDOG=1") == 0 && p->n < MAX_PINGS) {
                p->at[p->n] = tu_mono_ms();
                __atomic_store_n(&p->n, p->n + 1, __ATOMIC_RELEASE);
            }
        }
        _exit(0);
    }
    close(fd);
    return pid;
}

/* Pings between `from` and `to`, and the longest gap between two. */
static int pings_between(const struct pings *p, int64_t from, int64_t to, int64_t *gap)
{
    int n = 0;
    int64_t last = from;
    *gap = 0;
    for (int i = 0; i < __atomic_load_n(&p->n, __ATOMIC_ACQUIRE); i++)
        if (p->at[i] >= from && p->at[i] <= to) {
            n++;
            if (p->at[i] - last > *gap)
                *gap = p->at[i] - last;
            last = p->at[i];
        }
    if (to - last > *gap)
        *gap = to - last;
    return n;
}

START_TEST(healthz_never_waits_for_redis)
{
    int port = fixture_free_port();
    char body[4096], handler[1024], path[300];
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.handlers = h_handler(&H, handler, sizeof handler, "*", "1s", 1);
    write_conf(&hc, port, NULL);
    struct pings *p = mmap(NULL, sizeof *p, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                           -1, 0);
    ck_assert(p != MAP_FAILED);
    pid_t reader = watchdog_reader(path, sizeof path, p);
    setenv("NOTIFY_SOCKET", path, 1);
    setenv("WATCHDOG_USEC", "1000000", 1);  /* fed every 500 ms */
    h_start(&H, 2);
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    ck_assert_msg(wait_health(port, 200, "ok", 10000, body, sizeof body), "not healthy: %s",
                  body);
    int statuses[PARALLEL];
    int64_t before = parallel_health(port, statuses);

    /* A handler that hangs, started before Redis stalls. */
    h_enqueue(&H, "hung", NULL, "hang", 0, 1);
    ck_assert_msg(h_wait_record(&H, "hung", 0, 1, 5000) == 1, "hung job not started; log:\n%s",
                  h_log_tail(&H));
    redis_ok(H.fx.sock, "CLIENT PAUSE 10000 ALL");
    int64_t paused = tu_mono_ms();

    int64_t at_once = parallel_health(port, statuses);
    for (int i = 0; i < PARALLEL; i++)
        ck_assert_msg(statuses[i] == 200 || statuses[i] == 503, "request %d: status %d; log:\n%s",
                      i, statuses[i], h_log_tail(&H));
    ck_assert_msg(h_wait_log(&H, "overran its timeout", 1, 3000) == 1,
                  "hung handler not stopped at its timeout; log:\n%s", h_log_tail(&H));
    int64_t killed_after = tu_mono_ms() - paused;
    tu_sleep_ms(3000);       /* stale by now: Redis counts as unreachable */
    int64_t stale = parallel_health(port, statuses);
    for (int i = 0; i < PARALLEL; i++)
        ck_assert_msg(statuses[i] == 503, "request %d: status %d (%.1f ms); log:\n%s", i,
                      statuses[i], stale / 1000.0, h_log_tail(&H));
    ck_assert_int_eq(fixture_http_get(port, "/healthz", body, sizeof body), 503);
    ck_assert_msg(strncmp(body, "redis unreachable: ", 19) == 0, "reason: %s", body);
    int64_t now = tu_mono_ms(), gap;
    int pings = pings_between(p, paused, now, &gap);
    ck_assert_msg(now - paused < 10000, "the checks took %lld ms: Redis was no longer paused",
                  (long long)(now - paused));
    int64_t max = at_once > stale ? at_once : stale;
    fprintf(stderr, "paused Redis: %d parallel /healthz, slowest %.1f ms at the start of the "
            "pause, %.1f ms 4 s into it (%.1f ms before it); hung handler killed %lld ms "
            "into the pause; %d watchdog pings in %lld ms, longest gap %lld ms\n", PARALLEL,
            at_once / 1000.0, stale / 1000.0, before / 1000.0, (long long)killed_after, pings,
            (long long)(now - paused), (long long)gap);
    /* 100 ms is the aim; the bound is generous for a loaded test machine
     * and still far below one wait on Redis (2 s before, one at a time). */
    ck_assert_msg(max < 1000000, "slowest /healthz took %.1f ms", max / 1000.0);
    /* Fed every 500 ms: a gap of a whole watchdog interval (1 s) would get
     * the daemon killed by systemd. */
    ck_assert_msg(gap < 1000, "the watchdog went %lld ms without a ping", (long long)gap);
    ck_assert_int_ge(pings, (int)((now - paused) / 500) / 2);

    /* Once Redis answers again, so does everything. */
    ck_assert_msg(wait_health(port, 200, "ok", 20000, body, sizeof body),
                  "not healthy after the pause: %s; log:\n%s", body, h_log_tail(&H));
    ck_assert_msg(h_wait_state(&H, "hung", DQ_STATE_DEAD, 5000), "the hung job is not dead");
    kill(reader, SIGKILL);
    waitpid(reader, NULL, 0);
    munmap(p, sizeof *p);
}
END_TEST

/* ---- claims failing --------------------------------------------------------- */

START_TEST(healthz_turns_503_while_claims_fail)
{
    /* A second server, the master the daemon's Redis is demoted under. */
    struct redis_fixture m;
    fixture_redis_start(&m);
    int mport = fixture_free_port();
    redis_ok(m.sock, "CONFIG SET port %d", mport);

    int port = fixture_free_port();
    char body[4096];
    struct h_conf hc;
    h_conf_defaults(&hc);
    write_conf(&hc, port, "1s");
    h_start(&H, 2);
    ck_assert_msg(wait_health(port, 200, "ok", 10000, body, sizeof body), "not healthy: %s",
                  body);

    /* A job due soon: a worker wakes for it and claims, on a replica by
     * then, where every claim is refused (READONLY). */
    h_enqueue(&H, "j1", NULL, "ok", 1000, 0);
    redis_ok(H.fx.sock, "REPLICAOF 127.0.0.1 %d", mport);
    int64_t demoted = tu_mono_ms();
    ck_assert_msg(wait_health(port, 503, "claims failing for ", 10000, body, sizeof body),
                  "not 503 with the claims' failure: %s; log:\n%s", body, h_log_tail(&H));
    int64_t unhealthy = tu_mono_ms() - demoted;
    ck_assert_msg(strstr(body, "queue " H_QUEUE ": "), "reason: %s", body);
    fprintf(stderr, "demoted Redis: /healthz 503 after %lld ms (job due after 1 s, grace "
            "1 s): %s", (long long)unhealthy, body);
    ck_assert_int_ge(unhealthy, 1000);

    redis_ok(H.fx.sock, "REPLICAOF NO ONE");
    int64_t promoted = tu_mono_ms();
    ck_assert_msg(wait_health(port, 200, "ok", 10000, body, sizeof body),
                  "not healthy after REPLICAOF NO ONE: %s; log:\n%s", body, h_log_tail(&H));
    fprintf(stderr, "promoted again: /healthz 200 after %lld ms\n",
            (long long)(tu_mono_ms() - promoted));
    /* And jobs run again. */
    h_enqueue(&H, "j2", NULL, "ok", 0, 0);
    ck_assert_msg(h_wait_record(&H, "j2", 1, 1, 10000) == 1, "j2 did not run; log:\n%s",
                  h_log_tail(&H));
    fixture_redis_stop(&m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("supervisor");
    TCase *tc = fixture_tcase(s, "reloads", 240, NULL, NULL, setup, teardown);
    tcase_add_test(tc, reloads_in_a_row_keep_every_worker);
    tc = fixture_tcase(s, "redis", 90, NULL, NULL, setup, teardown);
    tcase_add_test(tc, healthz_never_waits_for_redis);
    tcase_add_test(tc, healthz_turns_503_while_claims_fail);
    return fixture_run_suite(s);
}
