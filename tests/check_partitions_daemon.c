/*
 * Partitioned queues end to end, on one redis-server: the real delayqd
 * with the test handler, a queue of several partitions (partitions = N in
 * its group).  Every partition is drained, each job runs once, a killed
 * worker's jobs are settled in their partitions, a partition whose home
 * worker is stopped is still served on time (stealing, and every worker
 * hears every partition's wake channel), /metrics sums the partitions, a
 * change of the count over jobs is refused at start and by -t, and pause
 * and priorities hold through the daemon.  The library's side is in
 * check_partitions.c.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_run.h"
#include "daemon_harness.h"
#include "lib/keys.h"
#include "testutil.h"

#define NPARTS 8

static struct harness H;

static void setup(void)
{
    h_setup(&H);
}

static void teardown(void)
{
    h_teardown(&H);
}

/* The jobs not finished (delayed, due, processing) in every partition of
 * a queue of `nparts`, into per[] (may be NULL); their sum. */
static int64_t jobs_left(unsigned nparts, int64_t *per, int64_t *dead)
{
    int64_t sum = 0;
    if (dead)
        *dead = 0;
    for (unsigned p = 0; p < nparts; p++) {
        dq_stats st;
        ck_assert_msg(dq_stats_partition(H.c, H_QUEUE, p, &st) == DQ_OK, "%s",
                      dq_errmsg(H.c));
        int64_t n = st.delayed + st.due + st.processing;
        if (per)
            per[p] = n;
        if (dead)
            *dead += st.dead;
        sum += n;
    }
    return sum;
}

static unsigned g_nparts = NPARTS;

static int all_done(void *arg)
{
    (void)arg;
    return jobs_left(g_nparts, NULL, NULL) == 0;
}

/* An id in partition `p` of NPARTS: PREFIX<k> for the first k that is. */
static void id_in_partition(char *id, size_t len, const char *prefix, unsigned p,
                            unsigned nparts)
{
    for (int k = 0;; k++) {
        snprintf(id, len, "%s%d", prefix, k);
        if (keys_partition_of(id, nparts) == p)
            return;
    }
}

struct due_in {
    int64_t at;
    const char *payload;
};

static void job_due(int i, void *arg, const char **payload, int64_t *at_ms)
{
    (void)i;
    const struct due_in *d = arg;
    *payload = d->payload;
    *at_ms = d->at;
}

/* `n` jobs PREFIX0.. due `delay_ms` from now, with `payload`. */
static void enqueue_due(const char *prefix, int n, int64_t delay_ms, const char *payload)
{
    struct due_in d = { 0, payload };
    ck_assert_int_eq(dq_server_time(H.c, &d.at), DQ_OK);
    d.at += delay_ms;
    h_enqueue_numbered(&H, n, prefix, job_due, &d);
}

static void stop_clean(void)
{
    int status = h_stop(&H, 30000);
    ck_assert_msg(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "delayqd did not stop cleanly; log:\n%s", h_log_tail(&H));
}

/* Per id "<prefix><k>": how many start and end lines. */
struct runs {
    int starts, ends;
};

static struct runs *count_runs(int n, size_t skip, int *overlaps)
{
    struct runs *c = calloc((size_t)n, sizeof *c);
    ck_assert(c != NULL);
    struct h_run *r;
    size_t nr = h_records(&H, &r);
    *overlaps = 0;
    for (size_t i = 0; i < nr; i++) {
        if (r[i].end == H_OVERLAP) {
            (*overlaps)++;
            continue;
        }
        int k = atoi(r[i].id + skip);
        ck_assert_msg(k >= 0 && k < n, "unexpected id %s", r[i].id);
        if (r[i].end)
            c[k].ends++;
        else
            c[k].starts++;
    }
    free(r);
    return c;
}

START_TEST(drains_every_partition_exactly_once)
{
    enum { N = 5000 };
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.workers = 3;
    hc.batch = 16;
    hc.partitions = NPARTS;
    h_write_conf(&H, &hc);
    h_start(&H, 3);
    enqueue_due("j", N, 3000, "ok");
    int64_t per[NPARTS];
    jobs_left(NPARTS, per, NULL);
    for (int p = 0; p < NPARTS; p++)
        ck_assert_msg(per[p] > 0, "partition %d got no job", p);
    g_nparts = NPARTS;
    ck_assert_msg(h_wait(60000, all_done, NULL) == 1, "not drained; log:\n%s",
                  h_log_tail(&H));
    int64_t dead;
    ck_assert_int_eq(jobs_left(NPARTS, per, &dead), 0);
    ck_assert_int_eq(dead, 0);
    stop_clean();
    int overlaps;
    struct runs *c = count_runs(N, 1, &overlaps);
    for (int k = 0; k < N; k++)
        ck_assert_msg(c[k].starts == 1 && c[k].ends == 1, "j%d ran %d times (%d ends)", k,
                      c[k].starts, c[k].ends);
    free(c);
}
END_TEST

START_TEST(a_killed_workers_partitioned_jobs_are_settled)
{
    enum { N = 1500 };
    char locks[300], handler[1024];
    snprintf(locks, sizeof locks, "%s/locks", H.fx.dir);
    ck_assert_int_eq(mkdir(locks, 0700), 0);
    snprintf(handler, sizeof handler,
             "{ type = \"*\"; file = \"testhandler.so\"; timeout = \"1s\";\n"
             "  settings = { record = \"%s\"; lock_dir = \"%s\"; }; }", H.record, locks);
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.workers = 3;
    hc.batch = 8;
    hc.partitions = NPARTS;
    hc.handlers = handler;
    h_write_conf(&H, &hc);
    h_start(&H, 3);
    enqueue_due("k", N, 0, "sleep:3");
    /* Mid-run: kill -9 a worker busy with a job. */
    pid_t busy[8], victim = 0;
    for (int i = 0; i < 500 && !victim; i++) {
        if (h_busy_workers(&H, busy, NULL, 8) > 0 && kill(busy[0], SIGKILL) == 0)
            victim = busy[0];
        else
            tu_sleep_ms(10);
    }
    ck_assert_msg(victim > 0, "no busy worker to kill; log:\n%s", h_log_tail(&H));
    g_nparts = NPARTS;
    ck_assert_msg(h_wait(90000, all_done, NULL) == 1, "not drained; log:\n%s",
                  h_log_tail(&H));
    int64_t dead;
    jobs_left(NPARTS, NULL, &dead);
    ck_assert_msg(dead == 0, "%lld dead", (long long)dead);
    ck_assert_msg(h_wait_log(&H, "settled the", 1, 5000) >= 1, "no settlement; log:\n%s",
                  h_log_tail(&H));
    stop_clean();
    int overlaps;
    struct runs *c = count_runs(N, 1, &overlaps);
    ck_assert_msg(overlaps == 0, "%d runs overlapped another run of their job", overlaps);
    int twice = 0;
    for (int k = 0; k < N; k++) {
        ck_assert_msg(c[k].ends >= 1, "k%d lost: it never finished", k);
        twice += c[k].starts > 1;
    }
    /* A job runs twice only when the killed worker had started it. */
    ck_assert_msg(twice <= 1, "%d jobs ran more than once", twice);
    free(c);
}
END_TEST

START_TEST(a_partition_without_its_home_worker_is_served_on_time)
{
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.workers = 2;
    hc.batch = 4;
    hc.partitions = NPARTS;
    h_write_conf(&H, &hc);
    h_start(&H, 2);
    /* Find both workers: a burst that keeps each busy for a while. */
    enqueue_due("w", 64, 0, "sleep:20");
    pid_t busy[8];
    size_t nb = 0;
    for (int i = 0; i < 500 && nb < 2; i++) {
        nb = h_busy_workers(&H, busy, NULL, 8);
        if (nb < 2)
            tu_sleep_ms(10);
    }
    ck_assert_msg(nb == 2, "saw %zu busy workers; log:\n%s", nb, h_log_tail(&H));
    g_nparts = NPARTS;
    ck_assert(h_wait(30000, all_done, NULL) == 1);
    /* Stop one: its home partitions have no worker that calls them home. */
    ck_assert_int_eq(kill(busy[0], SIGSTOP), 0);
    int64_t due[NPARTS];
    char ids[NPARTS][32];
    for (unsigned p = 0; p < NPARTS; p++) {
        id_in_partition(ids[p], sizeof ids[p], "late", p, NPARTS);
        due[p] = h_enqueue(&H, ids[p], NULL, "ok", 1000, 0);
    }
    for (int p = 0; p < NPARTS; p++) {
        struct h_run first;
        int ok = h_wait_record(&H, ids[p], 0, 1, 10000);
        struct h_run *r;
        size_t n = h_records(&H, &r);
        h_count(r, n, ids[p], 0, &first);
        free(r);
        ck_assert_msg(ok == 1, "%s (partition %d) never ran; log:\n%s", ids[p], p,
                      h_log_tail(&H));
        ck_assert_msg(first.pid != busy[0], "the stopped worker ran %s", ids[p]);
        /* On time-ish: a loaded test machine allows some lateness, but a
         * job left for its home worker would never start. */
        ck_assert_msg(first.ms - due[p] < 1500 && first.ms >= due[p] - 5,
                      "%s started %lld ms after its due time", ids[p],
                      (long long)(first.ms - due[p]));
    }
    kill(busy[0], SIGCONT);
    stop_clean();
}
END_TEST

/* The value of the /metrics line starting with `line`, or -1. */
static long long metric(int port, const char *line)
{
    static char body[256 * 1024];
    if (fixture_http_get(port, "/metrics", body, sizeof body) != 200)
        return -1;
    const char *p = strstr(body, line);
    return p ? atoll(p + strlen(line)) : -1;
}

START_TEST(metrics_sum_the_partitions)
{
    int port = fixture_free_port();
    char extra[200];
    snprintf(extra, sizeof extra, "metrics = { listen = \"127.0.0.1:%d\"; };\n", port);
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.workers = 1;
    hc.partitions = 4;
    hc.extra = extra;
    h_write_conf(&H, &hc);
    h_start(&H, 1);
    enqueue_due("m", 40, 60000, "ok");
    int64_t per[4];
    jobs_left(4, per, NULL);
    int spread = 0;
    for (int p = 0; p < 4; p++)
        spread += per[p] > 0;
    ck_assert_msg(spread >= 2, "the jobs are in %d partition(s)", spread);
    const char *line = "delayq_queue_jobs{queue=\"" H_QUEUE "\",state=\"delayed\"} ";
    long long v = -1;
    for (int i = 0; i < 300 && v != 40; i++) {
        v = metric(port, line);
        if (v != 40)
            tu_sleep_ms(20);
    }
    ck_assert_msg(v == 40, "/metrics says %lld delayed, not 40", v);
    /* Each partition's own gauge: what Redis holds there. */
    for (int p = 0; p < 4; p++) {
        char series[200];
        snprintf(series, sizeof series, "delayq_partition_jobs{queue=\"" H_QUEUE "\","
                 "partition=\"%d\",state=\"delayed\"} ", p);
        ck_assert_int_eq(metric(port, series), per[p]);
    }
    stop_clean();
}
END_TEST

START_TEST(a_change_of_partitions_over_jobs_is_refused)
{
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.workers = 1;
    hc.partitions = NPARTS;
    h_write_conf(&H, &hc);
    h_start(&H, 1);
    enqueue_due("r", 20, 60000, "ok");
    stop_clean();
    char err[2048];
    const char *check[] = { "-t", "-c", H.conf, NULL };
    ck_assert_int_eq(h_run_delayqd(check, err, sizeof err), 0);

    hc.partitions = 4;
    h_write_conf(&H, &hc);
    int rc = h_run_delayqd(check, err, sizeof err);
    ck_assert_msg(rc == 78, "-t exited %d: %s", rc, err);
    ck_assert_msg(strstr(err, "partitions = 4") && strstr(err, "8 partitions")
                  && strchr(err, '\n') == err + strlen(err) - 1,
                  "not one line naming both counts: %s", err);
    ck_assert_msg(strstr(err, H.conf) != NULL, "the file is not named: %s", err);

    const char *start[] = { "-f", "-c", H.conf, NULL };
    rc = h_run_delayqd(start, err, sizeof err);
    ck_assert_msg(rc == 78, "delayqd exited %d: %s", rc, err);
    ck_assert_msg(strstr(err, "partitions = 4") && strstr(err, "refused"), "%s", err);
    unsigned stored;
    ck_assert_int_eq(dq_queue_partitions(H.c, H_QUEUE, &stored), DQ_OK);
    ck_assert_int_eq(stored, NPARTS);
    ck_assert_int_eq(jobs_left(NPARTS, NULL, NULL), 20);
}
END_TEST

START_TEST(a_reload_that_changes_partitions_is_refused)
{
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.workers = 1;
    hc.partitions = 4;
    h_write_conf(&H, &hc);
    h_start(&H, 1);
    hc.partitions = 8;
    h_write_conf(&H, &hc);
    ck_assert_int_eq(kill(H.pid, SIGHUP), 0);
    ck_assert_msg(h_wait_log(&H, "reload refused", 1, 10000) >= 1, "log:\n%s",
                  h_log_tail(&H));
    ck_assert_int_eq(h_log_count(&H, "a reload cannot change it"), 1);
    /* The configuration in force still runs: a job is run. */
    h_enqueue(&H, "after", NULL, "ok", 0, 0);
    ck_assert_msg(h_wait_record(&H, "after", 1, 1, 10000) == 1, "log:\n%s", h_log_tail(&H));
    unsigned stored;
    ck_assert_int_eq(dq_queue_partitions(H.c, H_QUEUE, &stored), DQ_OK);
    ck_assert_int_eq(stored, 4);
    stop_clean();
}
END_TEST

START_TEST(an_unpartitioned_queue_with_jobs_is_not_partitioned)
{
    h_enqueue(&H, "u1", NULL, "ok", 60000, 0);
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.workers = 1;
    hc.partitions = 4;
    h_write_conf(&H, &hc);
    char err[2048];
    const char *check[] = { "-t", "-c", H.conf, NULL };
    int rc = h_run_delayqd(check, err, sizeof err);
    ck_assert_msg(rc == 78, "-t exited %d: %s", rc, err);
    const char *start[] = { "-f", "-c", H.conf, NULL };
    rc = h_run_delayqd(start, err, sizeof err);
    ck_assert_msg(rc == 78, "delayqd exited %d: %s", rc, err);
    ck_assert_msg(strstr(err, "partitions = 4"), "%s", err);
}
END_TEST

START_TEST(a_partition_named_queue_next_to_its_partitioned_queue_is_refused)
{
    char text[PATH_MAX + 1024];
    snprintf(text, sizeof text,
             "redis = { unix_socket = \"%s\"; };\nhandler_dir = \"%s\";\n"
             "queues = ( { name = \"" H_QUEUE "\"; partitions = 4; },\n"
             "           { name = \"" H_QUEUE ":3\"; } );\n"
             "handlers = ( { type = \"*\"; file = \"testhandler.so\"; } );\n",
             H.fx.sock, H.handler_dir);
    h_write_file(H.conf, text);
    char err[2048];
    const char *check[] = { "-t", "-c", H.conf, NULL };
    int rc = h_run_delayqd(check, err, sizeof err);
    ck_assert_msg(rc == 78, "-t exited %d: %s", rc, err);
    ck_assert_msg(strstr(err, ":4:") && strstr(err, "collides"), "%s", err);
}
END_TEST

/* A new user's order: a 12-partition queue in the file, jobs added with
 * `delayq -c FILE add` before delayqd ever started.  The command line
 * stores the file's count before the first add, so the daemon starts
 * (rather than finding the jobs unpartitioned and refusing) and runs each
 * job once. */
START_TEST(jobs_added_with_the_file_before_the_first_start_run_once)
{
    enum { N = 24, PARTS = 12 };
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.workers = 2;
    hc.partitions = PARTS;
    h_write_conf(&H, &hc);
    const struct cli_run how = { .no_socket = true };
    char ids[N][DQ_ID_MAX + 1];
    for (int i = 0; i < N; i++)
        add_id(CLI_HOW(&how, "-c", H.conf, "add", "-q", H_QUEUE, "-t", "t", "ok"), ids[i],
               sizeof ids[i]);
    unsigned stored;
    ck_assert_int_eq(dq_queue_partitions(H.c, H_QUEUE, &stored), DQ_OK);
    ck_assert_int_eq(stored, PARTS);
    h_start(&H, 2);
    g_nparts = PARTS;
    ck_assert_msg(h_wait(30000, all_done, NULL) == 1, "not drained; log:\n%s",
                  h_log_tail(&H));
    stop_clean();
    struct h_run *r;
    size_t n = h_records(&H, &r);
    for (int i = 0; i < N; i++)
        ck_assert_msg(h_count(r, n, ids[i], 0, NULL) == 1, "job %s ran %d times", ids[i],
                      h_count(r, n, ids[i], 0, NULL));
    free(r);
}
END_TEST

/* What the command line does with the file's count: a count Redis holds
 * already is followed (a warning when the file says otherwise), a count
 * that cannot be stored (the queue holds jobs unpartitioned) adds
 * nothing, and a bad count in the file is refused at its line (78). */
START_TEST(the_command_line_follows_or_refuses_the_files_count)
{
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.partitions = 4;
    h_write_conf(&H, &hc);
    const struct cli_run how = { .no_socket = true };
    ck_assert_int_eq(dq_queue_set_partitions(H.c, H_QUEUE, 3), DQ_OK);
    struct run_result *r = CLI_HOW(&how, "-c", H.conf, "add", "-q", H_QUEUE, "-t", "t", "x");
    ck_assert_msg(r->status == 0 && strstr(r->err, "partitions = 4, but Redis holds it "
                                           "with 3"), "exit %d: %s", r->status, r->err);
    ck_assert_int_eq(jobs_left(3, NULL, NULL), 1);
    char id[DQ_ID_MAX + 1];
    snprintf(id, sizeof id, "%.*s", (int)strcspn(r->out, "\n"), r->out);
    ck_assert_int_eq(dq_cancel(H.c, H_QUEUE, id), DQ_OK);

    ck_assert_int_eq(dq_queue_set_partitions(H.c, H_QUEUE, 1), DQ_OK);
    h_enqueue(&H, "plain", NULL, "ok", 60000, 0);
    assert_fails(CLI_HOW(&how, "-c", H.conf, "add", "-q", H_QUEUE, "-t", "t", "x"), 1,
                 "drain it first");
    ck_assert_int_eq(fixture_redis_int(&H.fx, "ZCARD dq:{" H_QUEUE "}:delayed"), 1);

    char text[PATH_MAX + 512];
    snprintf(text, sizeof text, "redis = { unix_socket = \"%s\"; };\n"
             "queues = ( { name = \"" H_QUEUE "\";\n  partitions = 0; } );\n", H.fx.sock);
    h_write_file(H.conf, text);
    char want[PATH_MAX + 64];
    snprintf(want, sizeof want, "%s:3: queues.[0].partitions", H.conf);
    assert_fails(CLI_HOW(&how, "-c", H.conf, "add", "-q", H_QUEUE, "-t", "t", "x"), 78, want);
}
END_TEST

/* After `delayq partitions Q 3`, a daemon whose file names no count runs
 * the queue on those 3 (it used to store 1 over them, and producers that
 * had read 3 wrote where no worker read), and so does a reload. */
START_TEST(a_daemon_without_a_count_takes_the_stored_one)
{
    ck_assert_int_eq(dq_queue_set_partitions(H.c, H_QUEUE, 3), DQ_OK);
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.workers = 2;
    h_write_conf(&H, &hc);
    char err[2048];
    const char *check[] = { "-t", "-c", H.conf, NULL };
    ck_assert_msg(h_run_delayqd(check, err, sizeof err) == 0, "-t: %s", err);
    h_start(&H, 2);
    ck_assert_int_eq(h_log_count(&H, "queue " H_QUEUE ": 3 partitions, the count stored "
                                 "in Redis"), 1);
    unsigned stored;
    ck_assert_int_eq(dq_queue_partitions(H.c, H_QUEUE, &stored), DQ_OK);
    ck_assert_int_eq(stored, 3);
    enqueue_due("a", 30, 0, "ok");
    g_nparts = 3;
    ck_assert_msg(h_wait(20000, all_done, NULL) == 1, "not drained; log:\n%s",
                  h_log_tail(&H));
    ck_assert_int_eq(kill(H.pid, SIGHUP), 0);
    ck_assert_msg(h_wait_log(&H, "reloaded", 1, 10000) >= 1, "no reload; log:\n%s",
                  h_log_tail(&H));
    enqueue_due("b", 30, 0, "ok");
    ck_assert_msg(h_wait(20000, all_done, NULL) == 1, "not drained after the reload; "
                  "log:\n%s", h_log_tail(&H));
    ck_assert_int_eq(dq_queue_partitions(H.c, H_QUEUE, &stored), DQ_OK);
    ck_assert_int_eq(stored, 3);
    stop_clean();
}
END_TEST

/* A reload that adds a queue whose file names no count, while Redis
 * holds it with more than 1: refused with one line naming the count to
 * write; the configuration in force keeps running. */
START_TEST(a_reload_adding_a_stored_partitioned_queue_needs_its_count)
{
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.workers = 1;
    h_write_conf(&H, &hc);
    h_start(&H, 1);
    ck_assert_int_eq(dq_queue_set_partitions(H.c, "more", 2), DQ_OK);
    char text[PATH_MAX * 2 + 512];
    snprintf(text, sizeof text,
             "redis = { unix_socket = \"%s\"; };\nhandler_dir = \"%s\";\n"
             "queues = ( { name = \"" H_QUEUE "\"; workers = 1; },\n"
             "           { name = \"more\"; workers = 1; } );\n"
             "handlers = ( { type = \"*\"; file = \"testhandler.so\"; } );\n"
             "log = { level = \"info\"; target = \"stderr\"; };\n",
             H.fx.sock, H.handler_dir);
    h_write_file(H.conf, text);
    ck_assert_int_eq(kill(H.pid, SIGHUP), 0);
    ck_assert_msg(h_wait_log(&H, "reload refused", 1, 10000) >= 1, "log:\n%s",
                  h_log_tail(&H));
    ck_assert_msg(h_log_count(&H, ":4: queue more: Redis holds it with 2 partitions: a "
                              "reload adds it only with partitions = 2") == 1, "log:\n%s",
                  h_log_tail(&H));
    h_enqueue(&H, "after", NULL, "ok", 0, 0);
    ck_assert_msg(h_wait_record(&H, "after", 1, 1, 10000) == 1, "log:\n%s", h_log_tail(&H));
    stop_clean();
}
END_TEST

/* The scripts Redis has run (INFO commandstats' EVALSHA calls). */
static long long scripts_run(void)
{
    redisContext *rc = fixture_redis_connect(&H.fx);
    redisReply *r = redisCommand(rc, "INFO commandstats");
    ck_assert(r && r->type == REDIS_REPLY_STRING);
    const char *at = strstr(r->str, "cmdstat_evalsha:calls=");
    long long calls = at ? atoll(at + strlen("cmdstat_evalsha:calls=")) : 0;
    freeReplyObject(r);
    redisFree(rc);
    return calls;
}

/* Jobs coming due one by one in one partition of 12: a worker that woke
 * for each asks that partition, not all 12 (each claim tells it when its
 * partition's next job is due, and it sleeps towards the soonest), and
 * every job still starts on time. */
START_TEST(a_job_due_in_one_partition_costs_one_claim_not_one_per_partition)
{
    enum { PARTS = 12, N = 20 };
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.workers = 1;
    hc.partitions = PARTS;
    hc.reaper_interval = "60s";     /* its passes are scripts too */
    h_write_conf(&H, &hc);
    h_start(&H, 1);
    int64_t now;
    ck_assert_int_eq(dq_server_time(H.c, &now), DQ_OK);
    char id[32];
    for (int i = 0; i < N; i++) {
        char prefix[16];
        snprintf(prefix, sizeof prefix, "p5-%d-", i);
        id_in_partition(id, sizeof id, prefix, 5, PARTS);
        dq_enqueue_req req = { .queue = H_QUEUE, .type = "t", .id = id, .payload = "ok",
                               .payload_len = 2, .at_ms = now + 1500 + i * 100 };
        ck_assert_int_eq(dq_enqueue(H.c, &req, NULL), DQ_OK);
    }
    tu_sleep_ms(1000);          /* the worker asleep towards the first */
    long long before = scripts_run();
    /* the last job's end, read from the record file (not from Redis) */
    ck_assert_msg(h_wait_record(&H, id, 1, 1, 20000) == 1, "the last job did not run; "
                  "log:\n%s", h_log_tail(&H));
    long long claims = scripts_run() - before - N;  /* less the acks */
    ck_assert_msg(claims <= 3 * N, "%lld claims for %d jobs due one by one in one "
                  "partition of %d", claims, N, PARTS);
    g_nparts = PARTS;
    ck_assert_int_eq(jobs_left(PARTS, NULL, NULL), 0);
    stop_clean();
    ck_assert_int_eq(h_starts(&H), N);
}
END_TEST

/* Jobs PREFIX0.. due now at priority `level`. */
static void enqueue_level(const char *prefix, int n, int level, const char *payload)
{
    for (int i = 0; i < n; i++) {
        char id[32];
        snprintf(id, sizeof id, "%s%d", prefix, i);
        dq_enqueue_req req = { .queue = H_QUEUE, .type = "t", .id = id, .payload = payload,
                               .payload_len = strlen(payload),
                               .priority = DQ_PRIORITY(level) };
        ck_assert_msg(dq_enqueue_many(H.c, &req, 1, NULL, NULL) == DQ_OK, "%s",
                      dq_errmsg(H.c));
    }
}

START_TEST(pause_and_priority_hold_on_a_partitioned_queue)
{
    enum { LOW = 40, HIGH = 8, PARTS = 4 };
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.workers = 1;
    hc.batch = 4;
    hc.partitions = PARTS;
    h_write_conf(&H, &hc);
    h_start(&H, 1);
    ck_assert_int_eq(dq_pause(H.c, H_QUEUE, NULL), DQ_OK);
    ck_assert_msg(h_wait_log(&H, "paused", 1, 5000) >= 1, "no pause; log:\n%s",
                  h_log_tail(&H));
    enqueue_level("lo", LOW, 9, "sleep:5");
    enqueue_level("hi", HIGH, 0, "ok");
    tu_sleep_ms(1000);
    struct h_run *r;
    size_t n = h_records(&H, &r);
    free(r);
    ck_assert_msg(n == 0, "%zu runs while paused", n);
    ck_assert_int_eq(dq_resume(H.c, H_QUEUE, NULL), DQ_OK);
    g_nparts = PARTS;
    ck_assert_msg(h_wait(30000, all_done, NULL) == 1, "not drained; log:\n%s",
                  h_log_tail(&H));
    stop_clean();
    /* One worker: in each partition, every high job starts before any low
     * one (order among due jobs is per partition). */
    n = h_records(&H, &r);
    int low_seen[PARTS] = { 0 }, highs = 0, lows = 0;
    for (size_t i = 0; i < n; i++) {
        if (r[i].end != 0)
            continue;
        unsigned p = keys_partition_of(r[i].id, PARTS);
        if (strncmp(r[i].id, "hi", 2) == 0) {
            ck_assert_msg(!low_seen[p], "%s started after a low job of partition %u",
                          r[i].id, p);
            highs++;
        } else {
            low_seen[p] = 1;
            lows++;
        }
    }
    free(r);
    ck_assert_int_eq(highs, HIGH);
    ck_assert_int_eq(lows, LOW);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("partitions_daemon");
    TCase *tc = tcase_create("partitions");
    tcase_set_timeout(tc, 180);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, drains_every_partition_exactly_once);
    tcase_add_test(tc, a_killed_workers_partitioned_jobs_are_settled);
    tcase_add_test(tc, a_partition_without_its_home_worker_is_served_on_time);
    tcase_add_test(tc, metrics_sum_the_partitions);
    tcase_add_test(tc, a_change_of_partitions_over_jobs_is_refused);
    tcase_add_test(tc, a_reload_that_changes_partitions_is_refused);
    tcase_add_test(tc, an_unpartitioned_queue_with_jobs_is_not_partitioned);
    tcase_add_test(tc, a_partition_named_queue_next_to_its_partitioned_queue_is_refused);
    tcase_add_test(tc, pause_and_priority_hold_on_a_partitioned_queue);
    tcase_add_test(tc, jobs_added_with_the_file_before_the_first_start_run_once);
    tcase_add_test(tc, the_command_line_follows_or_refuses_the_files_count);
    tcase_add_test(tc, a_daemon_without_a_count_takes_the_stored_one);
    tcase_add_test(tc, a_reload_adding_a_stored_partitioned_queue_needs_its_count);
    tcase_add_test(tc, a_job_due_in_one_partition_costs_one_claim_not_one_per_partition);
    suite_add_tcase(s, tc);
    return fixture_run_suite(s);
}
