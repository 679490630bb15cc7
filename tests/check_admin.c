/*
 * The admin process (src/daemon/admin/admin_main.c), end to end with the
 * real delayqd and a real redis-server:
 *   - kill -9 of the admin process while 400 jobs drain: every job runs
 *     exactly once, /metrics and /healthz answer again within 1 s, and no
 *     counter line of /metrics went back;
 *   - the port stays the supervisor's while no admin process runs: a
 *     connection made then is answered by the next one, and nobody else
 *     can bind the port;
 *   - /healthz still sees a dead worker (from shared memory), and recovers,
 *     and says "stopping" while the workers drain at a stop;
 *   - a reload starts a new admin process and /healthz is answered all
 *     along; a reload to a port that is taken keeps the old one.
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "testutil.h"

#define PAGE_MAX 262144
#define MAX_SERIES 4096

static struct harness H;
static int PORT;
static char PAGE[PAGE_MAX];

static void setup(void)
{
    h_setup(&H);
    PORT = fixture_free_port();
}

static void teardown(void)
{
    h_teardown(&H);
}

/* The configuration: `workers` workers, the test handler, the admin
 * socket on `port`; written whole, then renamed (a reload never reads
 * half a file). */
static void write_conf(int workers, int port)
{
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.workers = workers;
    hc.batch = 8;
    char extra[128];
    snprintf(extra, sizeof extra, "metrics = { listen = \"127.0.0.1:%d\"; };\n", port);
    hc.extra = extra;
    struct harness tmp = H;
    ck_assert(strlen(H.conf) + 4 < sizeof tmp.conf);
    memcpy(tmp.conf + strlen(H.conf), ".new", 5);
    h_write_conf(&tmp, &hc);
    ck_assert_int_eq(rename(tmp.conf, H.conf), 0);
}

/* Start the daemon (write_conf on PORT); wait until /healthz says ok. */
static void start(int workers)
{
    write_conf(workers, PORT);
    h_start(&H, workers);
    int64_t end = tu_mono_ms() + 10000;
    while (fixture_http_get(PORT, "/healthz", PAGE, sizeof PAGE) != 200
           && tu_mono_ms() < end)
        tu_sleep_ms(20);
    ck_assert_msg(strcmp(PAGE, "ok\n") == 0, "not healthy: '%s'; log:\n%s", PAGE,
                  h_log_tail(&H));
}

/* The admin process, waiting up to 3 s for one to run. */
static pid_t admin_pid(void)
{
    int64_t end = tu_mono_ms() + 3000;
    pid_t p;
    while (!(p = tu_admin_pid(H.pid)) && tu_mono_ms() < end)
        tu_sleep_ms(10);
    ck_assert_msg(p > 0, "no delayqd-admin process; log:\n%s", h_log_tail(&H));
    return p;
}

/* ---- the counter lines of a /metrics page ---------------------------------- */

struct series {
    char name[320];             /* name and labels */
    double value;
};

struct page {
    struct series s[MAX_SERIES];
    size_t n;
};

/* Whether family `fam` (a sample's name up to '{' or ' ', less a
 * histogram's _bucket/_sum/_count) is a counter or a histogram on the
 * page, from its "# TYPE" line. */
static int cumulative(const char *text, const char *sample)
{
    char fam[200];
    size_t n = strcspn(sample, "{ ");
    snprintf(fam, sizeof fam, "%.*s", (int)(n < sizeof fam ? n : sizeof fam - 1), sample);
    static const char *const tails[] = { "_bucket", "_sum", "_count" };
    char want[260];
    snprintf(want, sizeof want, "# TYPE %s counter\n", fam);
    if (strstr(text, want))
        return 1;
    for (size_t i = 0; i < 3; i++) {
        size_t fl = strlen(fam), tl = strlen(tails[i]);
        if (fl > tl && strcmp(fam + fl - tl, tails[i]) == 0) {
            snprintf(want, sizeof want, "# TYPE %.*s histogram\n", (int)(fl - tl), fam);
            if (strstr(text, want))
                return 1;
        }
    }
    return 0;
}

/* Every sample of a counter or histogram on PAGE. */
static void read_page(struct page *p)
{
    p->n = 0;
    for (char *line = PAGE; *line;) {
        char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        char *sp = NULL;
        for (char *c = line; c < line + len; c++)
            if (*c == ' ')
                sp = c;
        if (line[0] != '#' && sp && cumulative(PAGE, line)) {
            ck_assert_uint_lt(p->n, MAX_SERIES);
            struct series *s = &p->s[p->n++];
            snprintf(s->name, sizeof s->name, "%.*s", (int)(sp - line), line);
            s->value = strtod(sp + 1, NULL);
        }
        if (!nl)
            break;
        line = nl + 1;
    }
}

/* Every series of `before` is on `after` with a value not below. */
static void assert_none_went_back(const struct page *before, const struct page *after)
{
    for (size_t i = 0; i < before->n; i++) {
        const struct series *b = &before->s[i];
        const struct series *a = NULL;
        for (size_t k = 0; k < after->n && !a; k++)
            if (strcmp(after->s[k].name, b->name) == 0)
                a = &after->s[k];
        ck_assert_msg(a != NULL, "%s is gone from /metrics", b->name);
        ck_assert_msg(a->value >= b->value, "%s went back: %g, then %g", b->name, b->value,
                      a->value);
    }
}

static double value_of(const struct page *p, const char *name)
{
    for (size_t i = 0; i < p->n; i++)
        if (strcmp(p->s[i].name, name) == 0)
            return p->s[i].value;
    return -1;
}

/* ---- kill -9 during a drain ---------------------------------------------------- */

#define DRAIN_JOBS 400

static void sleeping_job(int i, void *arg, const char **payload, int64_t *at_ms)
{
    (void)i;
    (void)arg;
    *payload = "sleep:10";
    *at_ms = 0;
}

START_TEST(kill_of_the_admin_process_during_a_drain)
{
    static struct page before, after, end;
    start(4);
    h_enqueue_numbered(&H, DRAIN_JOBS, "d", sleeping_job, NULL);
    /* Under way: some jobs done, most still to run. */
    int64_t until = tu_mono_ms() + 10000;
    do {
        tu_sleep_ms(20);
        ck_assert_int_eq(fixture_http_get(PORT, "/metrics", PAGE, sizeof PAGE), 200);
        read_page(&before);
    } while (value_of(&before, "delayq_jobs_succeeded_total{queue=\"" H_QUEUE
                               "\",type=\"t\"}") < 40 && tu_mono_ms() < until);
    double restarts = value_of(&before, "delayq_worker_restarts_total");
    pid_t admin = admin_pid();
    ck_assert_int_eq(kill(admin, SIGKILL), 0);
    int64_t killed = tu_mono_ms();

    /* Both answer again within 1 s. */
    int metrics = 0, health = 0;
    while (tu_mono_ms() - killed < 1000 && !(metrics == 200 && health == 200)) {
        if (metrics != 200)
            metrics = fixture_http_get(PORT, "/metrics", PAGE, sizeof PAGE);
        if (metrics == 200 && after.n == 0)
            read_page(&after);
        if (health != 200)
            health = fixture_http_get(PORT, "/healthz", PAGE, sizeof PAGE);
        if (!(metrics == 200 && health == 200))
            tu_sleep_ms(10);
    }
    int64_t took = tu_mono_ms() - killed;
    ck_assert_msg(metrics == 200 && health == 200,
                  "1 s after the kill: /metrics %d, /healthz %d ('%s'); log:\n%s", metrics,
                  health, PAGE, h_log_tail(&H));
    fprintf(stderr, "check_admin: /metrics and /healthz answered %lld ms after the kill\n",
            (long long)took);
    ck_assert_int_ne(admin_pid(), admin);
    assert_none_went_back(&before, &after);
    ck_assert_double_eq(value_of(&after, "delayq_worker_restarts_total"), restarts + 1);

    /* The drain was not touched: every job ran once, to its end. */
    ck_assert_msg(h_wait_idle(&H, 30000), "the queue did not drain; log:\n%s",
                  h_log_tail(&H));
    struct h_run *runs;
    size_t n = h_records(&H, &runs);
    for (int i = 0; i < DRAIN_JOBS; i++) {
        char id[16];
        snprintf(id, sizeof id, "d%d", i);
        ck_assert_msg(h_count(runs, n, id, 0, NULL) == 1 && h_count(runs, n, id, 1, NULL) == 1,
                      "job %s: %d starts, %d ends", id, h_count(runs, n, id, 0, NULL),
                      h_count(runs, n, id, 1, NULL));
    }
    free(runs);
    ck_assert_int_eq(fixture_http_get(PORT, "/metrics", PAGE, sizeof PAGE), 200);
    read_page(&end);
    assert_none_went_back(&after, &end);
    ck_assert_double_eq(value_of(&end, "delayq_jobs_succeeded_total{queue=\"" H_QUEUE
                                       "\",type=\"t\"}"), DRAIN_JOBS);
    ck_assert_double_eq(value_of(&end, "delayq_jobs_claimed_total{queue=\"" H_QUEUE
                                       "\",type=\"t\"}"), DRAIN_JOBS);
}
END_TEST

/* ---- the port while no admin process runs ---------------------------------------- */

/* A connection to PORT with a request for /healthz sent; -1 on failure. */
static int send_healthz(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)PORT),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -1;
    }
    static const char req[] = "GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    ck_assert_int_eq(write(fd, req, sizeof req - 1), (ssize_t)(sizeof req - 1));
    return fd;
}

START_TEST(the_port_is_kept_while_no_admin_process_runs)
{
    start(1);
    /* The supervisor restarts it 100 ms after its death at the soonest,
     * so right after the kill no admin process runs. */
    pid_t admin = admin_pid();
    ck_assert_int_eq(kill(admin, SIGKILL), 0);
    while (tu_process_running(admin))
        tu_sleep_ms(1);
    int fd = send_healthz();
    ck_assert_msg(fd >= 0, "connect while no admin process runs: %s", strerror(errno));
    /* Nobody else can take the port meanwhile. */
    int other = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)PORT),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    ck_assert_int_lt(bind(other, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(errno, EADDRINUSE);
    close(other);
    /* The next admin process answers the connection that waited. */
    char buf[512];
    size_t got = 0;
    ssize_t r;
    while (got < sizeof buf - 1 && (r = read(fd, buf + got, sizeof buf - 1 - got)) > 0)
        got += (size_t)r;
    buf[got] = '\0';
    close(fd);
    ck_assert_msg(strncmp(buf, "HTTP/1.0 200", 12) == 0 || strncmp(buf, "HTTP/1.1 200", 12) == 0,
                  "the waiting connection got: '%.80s'", buf);
    ck_assert_int_ne(admin_pid(), admin);
}
END_TEST

/* ---- /healthz and a dead worker -------------------------------------------------- */

START_TEST(healthz_sees_a_dead_worker)
{
    start(2);
    for (int i = 0; i < 8; i++)
        h_enqueue(&H, NULL, NULL, "ok", 0, 0);
    ck_assert(h_wait_idle(&H, 10000));
    pid_t busy[4];
    ck_assert_uint_ge(h_busy_workers(&H, busy, NULL, 4), 1);
    ck_assert_int_eq(kill(busy[0], SIGKILL), 0);
    int seen = 0;
    int64_t end = tu_mono_ms() + 3000;
    while (!seen && tu_mono_ms() < end) {
        seen = fixture_http_get(PORT, "/healthz", PAGE, sizeof PAGE) == 503
               && strcmp(PAGE, "1 of 2 workers down\n") == 0;
        tu_sleep_ms(2);
    }
    ck_assert_msg(seen, "no '1 of 2 workers down'; last: '%s'", PAGE);
    end = tu_mono_ms() + 10000;
    while (fixture_http_get(PORT, "/healthz", PAGE, sizeof PAGE) != 200 && tu_mono_ms() < end)
        tu_sleep_ms(20);
    ck_assert_str_eq(PAGE, "ok\n");
}
END_TEST

/* ---- a reload ----------------------------------------------------------------------- */

START_TEST(a_reload_starts_a_new_admin_process_and_healthz_is_answered_throughout)
{
    start(2);
    pid_t admin = admin_pid();
    ck_assert_int_eq(kill(H.pid, SIGHUP), 0);
    int answered = 0, unanswered = 0;
    int64_t end = tu_mono_ms() + 2500;
    while (tu_mono_ms() < end) {
        int st = fixture_http_get(PORT, "/healthz", PAGE, sizeof PAGE);
        answered += st > 0;
        unanswered += st <= 0;
        tu_sleep_ms(5);
    }
    ck_assert_msg(unanswered == 0, "%d of %d requests got no answer during the reload",
                  unanswered, answered + unanswered);
    ck_assert_int_eq(h_log_count(&H, "reloaded"), 1);
    ck_assert(!tu_process_running(admin));
    ck_assert_int_ne(admin_pid(), admin);
    ck_assert_int_eq(fixture_http_get(PORT, "/healthz", PAGE, sizeof PAGE), 200);
}
END_TEST

START_TEST(healthz_says_stopping_while_the_workers_drain)
{
    start(1);
    h_enqueue(&H, "long", NULL, "sleep:800", 0, 0);
    ck_assert_int_eq(h_wait_record(&H, "long", 0, 1, 5000), 1);
    ck_assert_int_eq(kill(H.pid, SIGTERM), 0);
    int seen = 0;
    int64_t end = tu_mono_ms() + 1000;
    while (!seen && tu_mono_ms() < end) {
        seen = fixture_http_get(PORT, "/healthz", PAGE, sizeof PAGE) == 503
               && strcmp(PAGE, "stopping\n") == 0;
        tu_sleep_ms(10);
    }
    ck_assert_msg(seen, "no 'stopping' while the job ran; last: '%s'", PAGE);
    int status = h_stop(&H, 10000);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d; log:\n%s",
                  status, h_log_tail(&H));
    ck_assert_msg(h_wait_record(&H, "long", 1, 1, 100) == 1, "the job did not end; log:\n%s", h_log_tail(&H));
}
END_TEST

/* A listening socket on 127.0.0.1:port, held by the test. */
static int hold_port(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(fd, 1), 0);
    return fd;
}

START_TEST(a_reload_to_a_taken_port_keeps_the_old_one)
{
    start(1);
    int port2 = fixture_free_port();
    ck_assert_int_ne(port2, PORT);
    int taken = hold_port(port2);
    pid_t admin = admin_pid();
    write_conf(1, port2);
    ck_assert_int_eq(kill(H.pid, SIGHUP), 0);
    char line[96];
    snprintf(line, sizeof line, "cannot listen on 127.0.0.1:%d: bind: ", port2);
    ck_assert_msg(h_wait_log(&H, line, 1, 5000) == 1, "no '%s'; log:\n%s", line,
                  h_log_tail(&H));
    ck_assert_int_eq(h_wait_log(&H, "still serving on the previous address", 1, 1000), 1);
    /* The new configuration's admin process serves the old address. */
    int64_t end = tu_mono_ms() + 5000;
    while ((admin_pid() == admin || tu_process_running(admin)) && tu_mono_ms() < end)
        tu_sleep_ms(20);
    ck_assert_int_ne(admin_pid(), admin);
    /* Healthy once the new configuration's workers are up. */
    end = tu_mono_ms() + 10000;
    while (fixture_http_get(PORT, "/healthz", PAGE, sizeof PAGE) != 200 && tu_mono_ms() < end)
        tu_sleep_ms(50);
    ck_assert_int_eq(fixture_http_get(PORT, "/healthz", PAGE, sizeof PAGE), 200);
    /* Once the port is free, the next reload moves there. */
    close(taken);
    ck_assert_int_eq(kill(H.pid, SIGHUP), 0);
    end = tu_mono_ms() + 5000;
    while (fixture_http_get(port2, "/healthz", PAGE, sizeof PAGE) != 200 && tu_mono_ms() < end)
        tu_sleep_ms(20);
    ck_assert_str_eq(PAGE, "ok\n");
    end = tu_mono_ms() + 5000;
    while (fixture_http_get(PORT, "/healthz", PAGE, sizeof PAGE) != -1 && tu_mono_ms() < end)
        tu_sleep_ms(20);
    ck_assert_int_eq(fixture_http_get(PORT, "/healthz", PAGE, sizeof PAGE), -1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("admin");
    TCase *tc = fixture_tcase(s, "process", 60, NULL, NULL, setup, teardown);
    tcase_add_test(tc, kill_of_the_admin_process_during_a_drain);
    tcase_add_test(tc, the_port_is_kept_while_no_admin_process_runs);
    tcase_add_test(tc, healthz_sees_a_dead_worker);
    tcase_add_test(tc, a_reload_starts_a_new_admin_process_and_healthz_is_answered_throughout);
    tcase_add_test(tc, a_reload_to_a_taken_port_keeps_the_old_one);
    tcase_add_test(tc, healthz_says_stopping_while_the_workers_drain);
    return fixture_run_suite(s);
}
