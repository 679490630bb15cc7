/*
 * End-to-end tests of delayqd under faults: workers killed, crashing or
 * hanging in a handler, Redis restarting or dropping connections, a job
 * longer than the command timeout, the supervisor killed, and a
 * soak with workers killed at random.  See check_daemon.c for the rest.
 *
 * DELAYQ_SOAK_JOBS sets the soak's job count (default 50,000), for slow
 * builds (sanitizers).
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

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

static void stop_clean(void)
{
    int status = h_stop(&H, 10000);
    ck_assert_msg(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "delayqd did not stop cleanly (status %d); log:\n%s", status,
                  h_log_tail(&H));
}

/* Start with the test handler for "*" with `timeout` and a lease of
 * `lease`. */
static void start_with(int workers, const char *lease, const char *timeout)
{
    struct h_conf hc;
    char handler[1024];
    h_conf_defaults(&hc);
    hc.workers = workers;
    hc.lease = lease;
    hc.handlers = h_handler(&H, handler, sizeof handler, "*", timeout, 0);
    h_write_conf(&H, &hc);
    h_start(&H, workers);
}

/* ---- workers that die ------------------------------------------------------ */

START_TEST(killed_worker_job_runs_again)
{
    start_with(2, "7s", "5s");
    h_enqueue(&H, "k1", "t", "sleep:2000", 0, 0);
    ck_assert_int_eq(h_wait_record(&H, "k1", 0, 1, 3000), 1);
    struct h_run *r, first;
    size_t n = h_records(&H, &r);
    h_count(r, n, "k1", 0, &first);
    free(r);
    ck_assert_int_eq(kill(first.pid, SIGKILL), 0);

    /* The supervisor fails the job at once (no waiting for the lease):
     * it runs again after the backoff, as attempt 2. */
    ck_assert_msg(h_wait_record(&H, "k1", 0, 2, 2000) == 2, "log:\n%s", h_log_tail(&H));
    dq_job_info info;
    ck_assert_int_eq(h_state(&H, "k1", &info), DQ_STATE_PROCESSING);
    ck_assert_str_eq(info.job.last_error, "worker died: signal 9");
    ck_assert_int_eq(info.job.attempt, 2);
    dq_job_info_free(&info);
    ck_assert_int_eq(h_log_count(&H, "while running job k1"), 1);

    ck_assert_int_eq(h_wait_record(&H, "k1", 1, 1, 4000), 1);
    ck_assert(h_wait_gone(&H, "k1", 2000));
    n = h_records(&H, &r);
    struct h_run second, end;
    ck_assert_int_eq(h_count(r, n, "k1", 1, &end), 1);
    for (size_t i = 0, starts = 0; i < n; i++)
        if (!r[i].end && strcmp(r[i].id, "k1") == 0 && ++starts == 2)
            second = r[i];
    free(r);
    ck_assert_int_eq(second.attempt, 2);
    ck_assert_int_eq(end.attempt, 2);
    ck_assert_int_eq(end.pid, second.pid);
    ck_assert_int_ne(second.pid, first.pid);
    stop_clean();
}
END_TEST

START_TEST(crashing_job_dies_after_its_attempts)
{
    start_with(2, "3s", "1s");
    h_enqueue(&H, "s1", "t", "segv", 0, 2);
    ck_assert_msg(h_wait_state(&H, "s1", DQ_STATE_DEAD, 5000), "log:\n%s", h_log_tail(&H));
    dq_job_info info;
    h_state(&H, "s1", &info);
    ck_assert_str_eq(info.job.last_error, "worker died: signal 11");
    ck_assert_int_eq(info.job.attempt, 2);
    dq_job_info_free(&info);
    struct h_run *r;
    size_t n = h_records(&H, &r);
    ck_assert_int_eq(h_count(r, n, "s1", 0, NULL), 2);
    ck_assert_int_eq(h_count(r, n, "s1", 1, NULL), 0);
    free(r);
    /* Each crashed worker was restarted: the daemon still serves. */
    ck_assert_int_eq(h_log_count(&H, "killed by signal 11"), 2);
    h_enqueue(&H, "after", "t", "ok", 0, 0);
    ck_assert_int_eq(h_wait_record(&H, "after", 1, 1, 5000), 1);
    pid_t kids[8];      /* two workers, the reaper, the settler */
    int64_t deadline = tu_mono_ms() + 5000;
    while (tu_children(H.pid, kids, NULL, 8) < 4 && tu_mono_ms() < deadline)
        tu_sleep_ms(20);
    ck_assert_int_eq(tu_children(H.pid, kids, NULL, 8), 4);
    stop_clean();
}
END_TEST

START_TEST(exiting_handler_fails_its_job)
{
    start_with(2, "3s", "1s");
    h_enqueue(&H, "e1", "t", "exit", 0, 1);
    ck_assert_msg(h_wait_state(&H, "e1", DQ_STATE_DEAD, 3000), "log:\n%s", h_log_tail(&H));
    dq_job_info info;
    h_state(&H, "e1", &info);
    ck_assert_str_eq(info.job.last_error, "worker died: exit status 3");
    dq_job_info_free(&info);
    stop_clean();
}
END_TEST

START_TEST(hanging_job_is_stopped_at_its_timeout)
{
    start_with(2, "3s", "300ms");
    h_enqueue(&H, "h1", "t", "hang", 0, 2);
    ck_assert_int_eq(h_wait_record(&H, "h1", 0, 1, 3000), 1);
    /* Killed after 300 ms and retried (attempt 1 of 2) ... */
    ck_assert_msg(h_wait_record(&H, "h1", 0, 2, 2000) == 2, "log:\n%s", h_log_tail(&H));
    dq_job_info info;
    ck_assert_int_eq(h_state(&H, "h1", &info), DQ_STATE_PROCESSING);
    ck_assert_str_eq(info.job.last_error, "timeout after 300 ms");
    dq_job_info_free(&info);
    /* ... then dead after the second. */
    ck_assert(h_wait_state(&H, "h1", DQ_STATE_DEAD, 2000));
    ck_assert_int_eq(h_state(&H, "h1", &info), DQ_STATE_DEAD);
    ck_assert_str_eq(info.job.last_error, "timeout after 300 ms");
    ck_assert_int_eq(info.job.attempt, 2);
    int64_t died = info.state_ms;
    dq_job_info_free(&info);
    struct h_run *r, s1;
    size_t n = h_records(&H, &r);
    h_count(r, n, "h1", 0, &s1);
    ck_assert_int_eq(h_count(r, n, "h1", 1, NULL), 0);
    struct h_run s2 = s1;
    for (size_t i = 0, starts = 0; i < n; i++)
        if (!r[i].end && strcmp(r[i].id, "h1") == 0 && ++starts == 2)
            s2 = r[i];
    free(r);
    /* 300 ms, the supervisor's 50 ms tick, the fail, 100 ms backoff */
    ck_assert_msg(s2.ms - s1.ms >= 400 && s2.ms - s1.ms < 1500, "second run after %lld ms",
                  (long long)(s2.ms - s1.ms));
    ck_assert_msg(died - s2.ms >= 300 && died - s2.ms < 1500, "dead %lld ms after its start",
                  (long long)(died - s2.ms));
    ck_assert_int_eq(h_log_count(&H, "overran its timeout"), 2);
    stop_clean();
}
END_TEST

/* ---- Redis going away ------------------------------------------------------ */

/* Enqueue, retrying while the client reconnects. */
static void enqueue_retrying(const char *id, int64_t delay_ms)
{
    dq_enqueue_req req = { .queue = H_QUEUE, .type = "t", .id = id, .payload = "ok",
                           .payload_len = 2, .delay_ms = delay_ms };
    dq_status st = DQ_ERR_CONNECT;
    for (int i = 0; i < 100 && st == DQ_ERR_CONNECT; i++)
        if ((st = dq_enqueue(H.c, &req, NULL)) == DQ_ERR_CONNECT)
            tu_sleep_ms(20);
    ck_assert_msg(st == DQ_OK, "enqueue %s: %s", id, dq_errmsg(H.c));
}

/* The most reconnect attempts a connection logged ("connected again after
 * N attempts"). */
static int most_attempts(void)
{
    FILE *fp = fopen(H.log, "r");
    ck_assert(fp != NULL);
    char line[2048];
    int most = 0;
    while (fgets(line, sizeof line, fp)) {
        const char *p = strstr(line, "connected again after ");
        int n;
        if (p && sscanf(p, "connected again after %d", &n) == 1 && n > most)
            most = n;
    }
    fclose(fp);
    return most;
}

START_TEST(redis_restart_is_survived)
{
    start_with(1, "3s", "1s");
    h_enqueue(&H, "before", "t", "ok", 0, 0);
    ck_assert_int_eq(h_wait_record(&H, "before", 1, 1, 3000), 1);

    /* Down for 1.5 s: several reconnect attempts, each connection's
     * backoff growing from 100 ms. */
    kill(H.fx.pid, SIGTERM);
    waitpid(H.fx.pid, NULL, 0);
    H.fx.pid = 0;
    tu_sleep_ms(1500);
    fixture_redis_restart(&H.fx);

    enqueue_retrying("after-1", 0);
    enqueue_retrying("after-2", 500);
    ck_assert_msg(h_wait_record(&H, "after-1", 1, 1, 8000) == 1, "log:\n%s", h_log_tail(&H));
    ck_assert_msg(h_wait_record(&H, "after-2", 1, 1, 3000) == 1, "log:\n%s", h_log_tail(&H));
    ck_assert(h_wait_gone(&H, "after-2", 2000));
    /* Five connections (the worker's cmd and sub, the reaper's for its
     * commands and for cancels, the settler's): each logs the outage
     * once and its end once, not every attempt. */
    ck_assert_msg(h_log_count(&H, "reconnecting") == 5, "log:\n%s", h_log_tail(&H));
    ck_assert_int_eq(h_wait_log(&H, "connected again", 5, 3000), 5);
    ck_assert_msg(most_attempts() >= 2, "the outage was too short to test; log:\n%s",
                  h_log_tail(&H));
    stop_clean();
}
END_TEST

/* A wake message published while the subscription is being re-made is
 * lost; the worker must look again once it is back, not sleep 30 s. */
START_TEST(wake_is_not_lost_while_resubscribing)
{
    start_with(1, "3s", "1s");
    tu_sleep_ms(200);
    /* The worker's subscription, and the reaper's (cancels). */
    ck_assert_int_eq(fixture_redis_int(&H.fx, "CLIENT KILL TYPE pubsub"), 2);
    int64_t due = h_enqueue(&H, "soon", "t", "ok", 300, 0);
    ck_assert_msg(h_wait_record(&H, "soon", 1, 1, 3000) == 1, "log:\n%s", h_log_tail(&H));
    struct h_run *r, first;
    size_t n = h_records(&H, &r);
    h_count(r, n, "soon", 0, &first);
    free(r);
    ck_assert_msg(first.ms - due < 100, "lateness %lld ms", (long long)(first.ms - due));
    stop_clean();
}
END_TEST

/* ---- soak ------------------------------------------------------------------ */

static int cmp_pid(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

/*
 * The soak's jobs come due in bursts, one every KILL_EVERY_MS, and a worker
 * is killed a few ms into each burst.  All at once, 50,000 "ok" jobs are
 * done in well under a second, and a kill would almost never find a worker
 * holding jobs.  This way the kills land while the workers are busy.
 *
 * On a small machine a busy worker is mostly waiting for the CPU with a
 * batch claimed and not yet started: a kill there only tests the reaper.
 * So one job in a hundred sleeps 20 ms, during which the jobs before it in
 * the batch have run but are not acked (they must run again), and the job
 * itself is running (the supervisor must fail it at once).
 */
#define SOAK_PAYLOAD(i) ((i) % 100 == 50 ? "sleep:20" : "ok")
#define SOAK_BURSTS 30
#define KILL_EVERY_MS 200
#define FIRST_BURST_MS 1500     /* after the start: room to enqueue */

struct soak_job {
    int starts, ends;
    int by_killed;      /* a run was by a worker we killed */
    int dead;
};

/* Soak job i: its payload, due in burst i % SOAK_BURSTS after *base
 * (h_enqueue_numbered). */
static void soak_job(int i, void *arg, const char **payload, int64_t *at_ms)
{
    *payload = SOAK_PAYLOAD(i);
    *at_ms = *(const int64_t *)arg + i % SOAK_BURSTS * KILL_EVERY_MS;
}

START_TEST(soak_with_workers_killed_at_random)
{
    const char *env = getenv("DELAYQ_SOAK_JOBS");
    int njobs = env && atoi(env) > 0 ? atoi(env) : 50000;
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.workers = 4;
    hc.batch = 16;
    h_write_conf(&H, &hc);
    int64_t t0 = tu_mono_ms();
    h_start(&H, 4);

    int64_t base;
    ck_assert_int_eq(dq_server_time(H.c, &base), DQ_OK);
    base += FIRST_BURST_MS;
    h_enqueue_numbered(&H, njobs, "s", soak_job, &base);
    /* (Where enqueueing took longer than FIRST_BURST_MS, as in a sanitizer
     * build, the first bursts are simply due at once.) */

    /* A few ms into each burst, kill one of the workers busy with it, so
     * long as another worker is up (keeping the daemon draining while the
     * killed ones wait out their restart backoff). */
    enum { MAX_KILLS = SOAK_BURSTS };
    static pid_t killed[MAX_KILLS];
    size_t nkilled = 0;
    srandom((unsigned)t0);
    for (int b = 0; b < SOAK_BURSTS; b++) {
        int64_t at = base + b * KILL_EVERY_MS + 2 + random() % 6;
        if (at > tu_now_ms())
            tu_sleep_ms((int)(at - tu_now_ms()));
        pid_t kids[16], busy[16];
        size_t nb = h_busy_workers(&H, busy, NULL, 16);
        if (nb > 0 && tu_children(H.pid, kids, NULL, 16) >= 3) {
            pid_t victim = busy[random() % (long)nb];
            if (kill(victim, SIGKILL) == 0)
                killed[nkilled++] = victim;
        }
    }
    int idle = h_wait_idle(&H, 60000);
    int64_t took = tu_mono_ms() - t0;
    ck_assert_msg(idle, "not done after %lld ms; log:\n%s", (long long)took, h_log_tail(&H));
    stop_clean();

    struct soak_job *jobs = calloc((size_t)njobs, sizeof *jobs);
    ck_assert(jobs != NULL);
    qsort(killed, nkilled, sizeof killed[0], cmp_pid);
    struct h_run *r;
    size_t n = h_records(&H, &r);
    for (size_t i = 0; i < n; i++) {
        int k = atoi(r[i].id + 1);
        ck_assert(r[i].id[0] == 's' && k >= 0 && k < njobs);
        if (r[i].end)
            jobs[k].ends++;
        else
            jobs[k].starts++;
        if (bsearch(&r[i].pid, killed, nkilled, sizeof killed[0], cmp_pid))
            jobs[k].by_killed = 1;
    }
    free(r);

    int64_t dead = 0;
    for (int64_t off = 0;; ) {
        dq_dead_page page;
        ck_assert_int_eq(dq_dead_list(H.c, H_QUEUE, off, 1000, &page), DQ_OK);
        for (size_t i = 0; i < page.n; i++) {
            const char *e = page.entries[i].last_error;
            ck_assert_msg(strstr(e, "worker died") || strstr(e, "lease expired"),
                          "%s died of: %s", page.entries[i].id, e);
            jobs[atoi(page.entries[i].id + 1)].dead = 1;
            dead++;
        }
        off += (int64_t)page.n;
        size_t got = page.n;
        dq_dead_page_free(&page);
        if (got == 0)
            break;
    }
    ck_assert_int_eq(fixture_record_count(&H.fx, H_QUEUE), dead);

    int acked = 0, twice = 0;
    for (int i = 0; i < njobs; i++) {
        if (!jobs[i].dead) {
            ck_assert_msg(jobs[i].ends >= 1, "s%d never ran to its end", i);
            acked++;
        }
        if (jobs[i].starts > 1) {
            twice++;
            ck_assert_msg(jobs[i].by_killed, "s%d ran %d times, no worker of it was killed",
                          i, jobs[i].starts);
        }
    }
    ck_assert_int_eq(acked + dead, njobs);
    free(jobs);
    int running = h_log_count(&H, "while running job");
    int reaped = h_log_count(&H, "expired lease");
    fprintf(stderr, "soak: %d jobs in %lld ms, %zu processes killed (%d while running a "
            "job, %d reaps of expired leases), %d jobs ran more than once, %lld dead\n",
            njobs, (long long)took, nkilled, running, reaped, twice, (long long)dead);
    /* A death costs only the job that was running: the rest of its batch
     * is settled at once by the supervisor, none waits for its lease. */
    ck_assert_msg(twice <= running, "%d jobs ran twice, %d deaths while running", twice,
                  running);
    ck_assert_msg(reaped == 0, "%d reaps of expired leases after deaths", reaped);
}
END_TEST

/* ---- the worker's life ------------------------------------------------------ */

/* A field of Redis's INFO (`section`), as an integer; -1 when absent. */
static long long info_int(const char *section, const char *field)
{
    redisContext *rc = fixture_redis_connect(&H.fx);
    redisReply *r = redisCommand(rc, "INFO %s", section);
    long long v = -1;
    size_t flen = strlen(field);
    for (const char *p = r && r->type == REDIS_REPLY_STRING ? r->str : NULL; p && *p;
         p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, field, flen) == 0 && p[flen] == ':')
            v = strtoll(p + flen + 1, NULL, 10);
    if (r)
        freeReplyObject(r);
    redisFree(rc);
    return v;
}

/* A job that runs longer than the command timeout: its ack's deadline
 * starts when the ack is sent, not when the loop last woke (before the
 * job), so the ack is applied once, on the same connection, with no
 * warning.  (It used to be "late" on arrival: the connection was dropped
 * and the ack sent again, which Redis refused as stale.) */
START_TEST(long_job_is_acked_once_without_alarm)
{
    struct h_conf hc;
    char handler[1024], redis[512];
    h_conf_defaults(&hc);
    hc.workers = 1;
    hc.lease = "14s";
    hc.handlers = h_handler(&H, handler, sizeof handler, "*", "12s", 0);
    snprintf(redis, sizeof redis, "unix_socket = \"%s\"; command_timeout = \"5s\";",
             H.fx.sock);
    hc.redis = redis;
    h_write_conf(&H, &hc);
    h_start(&H, 1);
    long long conns = info_int("stats", "total_connections_received");
    h_enqueue(&H, "long", "t", "sleep:10000", 0, 0);
    ck_assert_msg(h_wait_record(&H, "long", 1, 1, 13000) == 1, "log:\n%s", h_log_tail(&H));
    ck_assert(h_wait_gone(&H, "long", 2000));
    /* The false alarm came at once after the job; give it time to show. */
    tu_sleep_ms(500);
    ck_assert_msg(h_log_count(&H, "command timeout") == 0, "log:\n%s", h_log_tail(&H));
    ck_assert_msg(h_log_count(&H, "reconnecting") == 0, "log:\n%s", h_log_tail(&H));
    ck_assert_msg(h_log_count(&H, "ack refused") == 0, "log:\n%s", h_log_tail(&H));
    ck_assert_msg(h_log_count(&H, " warn ") + h_log_count(&H, " err ") == 0, "log:\n%s",
                  h_log_tail(&H));
    /* No connection was made again (this test's own INFO connections are
     * the only new ones: one per info_int). */
    ck_assert_int_eq(info_int("stats", "total_connections_received"), conns + 1);
    struct h_run *r;
    size_t n = h_records(&H, &r);
    ck_assert_int_eq(h_count(r, n, "long", 0, NULL), 1);
    ck_assert_int_eq(h_count(r, n, "long", 1, NULL), 1);
    free(r);
    stop_clean();
}
END_TEST

static int is_running(void *arg)
{
    const pid_t *p = arg;
    for (; *p > 0; p++)
        if (tu_process_running(*p))
            return 0;
    return 1;
}

/* The supervisor is killed (-9) while a worker runs a job, and Redis stops
 * answering: every child notices, finishes what it can and exits within
 * shutdown_timeout (none retries its ack for ever).  When Redis is back,
 * a new daemon runs the job whose ack was lost: nothing is lost. */
START_TEST(children_exit_when_the_supervisor_dies)
{
    struct h_conf hc;
    char handler[1024];
    h_conf_defaults(&hc);
    hc.workers = 2;
    hc.lease = "5s";
    hc.shutdown_timeout = "2s";
    hc.handlers = h_handler(&H, handler, sizeof handler, "*", "3s", 0);
    h_write_conf(&H, &hc);
    h_start(&H, 2);
    h_enqueue(&H, "orphan", "t", "sleep:1000", 0, 0);
    ck_assert_int_eq(h_wait_record(&H, "orphan", 0, 1, 3000), 1);
    pid_t kids[9] = { 0 };
    size_t nkids = tu_children(H.pid, kids, NULL, 8);
    ck_assert_msg(nkids == 4, "%zu children (2 workers, the reaper and the settler expected)",
                  nkids);

    ck_assert_int_eq(kill(H.pid, SIGKILL), 0);
    ck_assert_int_eq(waitpid(H.pid, NULL, 0), H.pid);
    H.pid = 0;
    ck_assert_int_eq(kill(H.fx.pid, SIGSTOP), 0);
    int64_t t0 = tu_mono_ms();
    int gone = h_wait(2000 + 700, is_running, kids);
    int64_t took = tu_mono_ms() - t0;
    ck_assert_int_eq(kill(H.fx.pid, SIGCONT), 0);
    ck_assert_msg(gone == 1, "children still running %lld ms after the supervisor died; "
                  "log:\n%s", (long long)took, h_log_tail(&H));
    /* The job finished (1 s) but its ack could not reach Redis. */
    ck_assert_int_eq(h_wait_record(&H, "orphan", 1, 1, 100), 1);
    ck_assert_msg(h_log_count(&H, "the supervisor is gone") >= 3, "log:\n%s",
                  h_log_tail(&H));

    /* Redis is back: a new daemon finds the job when its lease runs out. */
    h_start(&H, 2);
    ck_assert_msg(h_wait_gone(&H, "orphan", 8000), "log:\n%s", h_log_tail(&H));
    struct h_run *r;
    size_t n = h_records(&H, &r);
    int ends = h_count(r, n, "orphan", 1, NULL);
    free(r);
    ck_assert_msg(ends == 1 || ends == 2, "the job ended %d times", ends);
    ck_assert_int_eq(fixture_redis_int(&H.fx, "ZCARD dq:{%s}:dead", H_QUEUE), 0);
    stop_clean();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("daemon_faults");
    TCase *tc = tcase_create("workers");
    tcase_set_timeout(tc, 30);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, killed_worker_job_runs_again);
    tcase_add_test(tc, crashing_job_dies_after_its_attempts);
    tcase_add_test(tc, exiting_handler_fails_its_job);
    tcase_add_test(tc, hanging_job_is_stopped_at_its_timeout);
    suite_add_tcase(s, tc);

    tc = tcase_create("redis");
    tcase_set_timeout(tc, 30);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, redis_restart_is_survived);
    tcase_add_test(tc, wake_is_not_lost_while_resubscribing);
    suite_add_tcase(s, tc);

    tc = tcase_create("life");
    tcase_set_timeout(tc, 40);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, long_job_is_acked_once_without_alarm);
    tcase_add_test(tc, children_exit_when_the_supervisor_dies);
    suite_add_tcase(s, tc);

    tc = tcase_create("soak");
    tcase_set_timeout(tc, 150);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, soak_with_workers_killed_at_random);
    suite_add_tcase(s, tc);

    return fixture_run_suite(s);
}
