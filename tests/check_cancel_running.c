/*
 * Cancelling a running job, end to end with the real delayqd against a
 * real redis-server: `delayq cancel` of a running job ends it in Redis at
 * once (cancelled: not retried, not dead) and the daemon stops its run:
 * the exec handler's program and its own child within a second, an
 * in-process handler that watches host->cancelled when it returns, one
 * that ignores it with its worker after cancel_grace (its batch-mates
 * untouched).  It never runs again, not after a restart either; and of a
 * cancel and the job's own end exactly one wins, over 1,000 races.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_run.h"
#include "daemon_harness.h"
#include "testutil.h"

static struct harness H;

static void setup(void)
{
    h_setup(&H);
    cli_run_socket(H.fx.sock);
}

static void teardown(void)
{
    h_teardown(&H);
}

static int gone(pid_t pid)
{
    return !tu_process_running(pid);
}

static dq_stats stats(void)
{
    dq_stats st;
    ck_assert_int_eq(dq_stats_get(H.c, H_QUEUE, &st), DQ_OK);
    return st;
}

/* An add of `id` due at server ms `at`. */
static void add_at(const char *id, const char *payload, int64_t at)
{
    dq_enqueue_req req = { .queue = H_QUEUE, .type = "t", .id = id, .payload = payload,
                           .payload_len = strlen(payload), .at_ms = at };
    dq_enqueued out;
    ck_assert_msg(dq_enqueue(H.c, &req, &out) == DQ_OK, "%s", dq_errmsg(H.c));
}

/* The job is cancelled: its tombstone says so, with the fence of the run
 * stopped, and keeps the id until the run's lease would have ended. */
static void assert_cancelled(const char *id, int64_t fence)
{
    dq_job_info info;
    int st = h_state(&H, id, &info);
    ck_assert_msg(st == DQ_STATE_CANCELLED, "job %s is %d, not cancelled", id, st);
    ck_assert_int_eq(info.job.fence, fence);
    ck_assert_int_gt(info.unique_until_ms, info.state_ms);
    dq_job_info_free(&info);
}

/* Wait for the record file's start line of `id`; returns its fence. */
static int64_t wait_started(const char *id)
{
    ck_assert_msg(h_wait_record(&H, id, 0, 1, 5000) == 1, "%s did not start; log:\n%s", id,
                  h_log_tail(&H));
    struct h_run *r, first;
    size_t n = h_records(&H, &r);
    h_count(r, n, id, 0, &first);
    free(r);
    return first.fence;
}

/* The configuration of most tests here: `workers` workers with claims of
 * `batch`, leases of 60 s, the recording test handler with a 30 s timeout
 * and the cancel_grace `grace` (NULL: the default). */
static void write_conf(int workers, int batch, const char *grace)
{
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.workers = workers;
    hc.lease = "60s";
    hc.batch = batch;
    char handlers[1024], text[1200];
    h_handler(&H, handlers, sizeof handlers, "*", "30s", 0);
    const char *cut = strstr(handlers, "timeout");
    ck_assert_ptr_nonnull(cut);
    snprintf(text, sizeof text, "%.*s%s%s%s%s", (int)(cut - handlers), handlers,
             grace ? "cancel_grace = \"" : "", grace ? grace : "", grace ? "\"; " : "", cut);
    hc.handlers = text;
    h_write_conf(&H, &hc);
}

/* ---- exec: the program and its child are stopped ---------------------------- */

/* A shell that starts a background sleep and waits, run by the exec
 * handler: `delayq cancel` exits 0 and both processes are gone within a
 * second; the job is cancelled, the worker was not killed (the handler
 * stopped the program itself), and a restart of the daemon does not run
 * it again. */
START_TEST(an_exec_program_and_its_child_stop_within_a_second)
{
    char shpid[PATH_MAX], bgpid[PATH_MAX], handlers[3 * PATH_MAX];
    h_exec_sleeper(&H, handlers, sizeof handlers, "90s", shpid, bgpid);
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.workers = 1;
    hc.lease = "100s";
    hc.handlers = handlers;
    h_write_conf(&H, &hc);
    h_start(&H, 1);
    h_enqueue(&H, "order:7", "t", "", 0, 0);
    pid_t sh = tu_read_pid(shpid, 5000), bg = tu_read_pid(bgpid, 5000);
    ck_assert_msg(sh > 0 && bg > 0, "the program did not start; log:\n%s", h_log_tail(&H));
    dq_job_info info;
    ck_assert_int_eq(h_state(&H, "order:7", &info), DQ_STATE_PROCESSING);
    int64_t fence = info.job.fence;
    dq_job_info_free(&info);

    struct run_result *r = CLI("cancel", "-q", H_QUEUE, "order:7");
    int64_t returned = tu_mono_ms();
    assert_ok(r);
    while ((!gone(sh) || !gone(bg)) && tu_mono_ms() - returned < 1000)
        tu_sleep_ms(5);
    ck_assert_msg(gone(sh), "the program outlived its cancel by 1 s; log:\n%s", h_log_tail(&H));
    ck_assert_msg(gone(bg), "the program's child outlived its cancel by 1 s");
    assert_cancelled("order:7", fence);
    ck_assert_int_eq(stats().jobs_cancelled, 1);
    ck_assert(h_wait_log(&H, "job cancelled while running", 1, 2000) == 1);
    ck_assert_int_eq(h_log_count(&H, "cancel_grace"), 0);
    ck_assert_int_eq(h_log_count(&H, "stale"), 0);

    /* show --json says so too. */
    r = CLI("show", "-q", H_QUEUE, "--json", "order:7");
    assert_ok(r);
    ck_assert_msg(strstr(r->out, "\"state\":\"cancelled\""), "%s", r->out);
    char want[64];
    snprintf(want, sizeof want, "\"fence\":%lld", (long long)fence);
    ck_assert_msg(strstr(r->out, want), "%s", r->out);

    /* Not run again after a restart: no program starts. */
    ck_assert_int_eq(unlink(shpid), 0);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
    h_start(&H, 1);
    ck_assert_int_eq(tu_read_pid(shpid, 1500), 0);
    assert_cancelled("order:7", fence);
    /* Its id stays taken while the stopped run's lease lasts. */
    dq_enqueue_req req = { .queue = H_QUEUE, .type = "t", .id = "order:7" };
    dq_enqueued out;
    ck_assert_int_eq(dq_enqueue(H.c, &req, &out), DQ_ERR_UNIQUE);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

/* ---- in-process handlers ------------------------------------------------------ */

/* A handler that asks host->cancelled returns soon after the cancel; its
 * worker lives on and takes the next job; the job ran once and is
 * neither retried nor dead. */
START_TEST(a_handler_that_watches_returns_and_its_worker_goes_on)
{
    write_conf(1, 8, NULL);
    h_start(&H, 1);
    h_enqueue(&H, "w", "t", "watch:30000", 0, 0);
    int64_t fence = wait_started("w");
    pid_t worker = 0;
    ck_assert_int_eq(h_busy_workers(&H, &worker, NULL, 1), 1);

    ck_assert_int_eq(dq_cancel(H.c, H_QUEUE, "w"), DQ_OK);
    int64_t returned = tu_mono_ms();
    ck_assert_msg(h_wait_record(&H, "w", 1, 1, 1000) == 1,
                  "the handler did not return within 1 s of the cancel; log:\n%s",
                  h_log_tail(&H));
    int64_t took = tu_mono_ms() - returned;
    assert_cancelled("w", fence);
    ck_assert_int_eq(stats().jobs_cancelled, 1);

    /* The same worker runs the next job. */
    h_enqueue(&H, "next", "t", "ok", 0, 0);
    ck_assert(h_wait_gone(&H, "next", 5000));
    ck_assert(tu_process_running(worker));
    ck_assert_int_eq(h_log_count(&H, "cancel_grace"), 0);
    /* Ran once, never again (wait past a backoff). */
    tu_sleep_ms(500);
    struct h_run *r;
    size_t n = h_records(&H, &r);
    ck_assert_int_eq(h_count(r, n, "w", 0, NULL), 1);
    free(r);
    ck_assert_int_eq(stats().dead, 0);
    fprintf(stderr, "watching handler returned %lld ms after the cancel\n", (long long)took);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

/* A handler that ignores the cancel is stopped with its worker after
 * cancel_grace; the jobs claimed with it in one batch are untouched: each
 * runs once, on its first attempt, and succeeds. */
START_TEST(a_handler_that_ignores_it_is_stopped_after_its_grace)
{
    write_conf(1, 8, "500ms");
    /* One claim takes all five: they are due before the daemon starts. */
    int64_t now = tu_now_ms();
    add_at("a", "hang", now - 1000);
    char id[8];
    for (int i = 0; i < 4; i++) {
        snprintf(id, sizeof id, "b%d", i);
        add_at(id, "ok", now - 500 + i);
    }
    h_start(&H, 1);
    int64_t fence = wait_started("a");
    ck_assert_int_eq(dq_cancel(H.c, H_QUEUE, "a"), DQ_OK);
    int64_t returned = tu_mono_ms();
    ck_assert_msg(h_wait_log(&H, "within its cancel_grace of 500ms", 1, 3000) == 1,
                  "the worker was not stopped; log:\n%s", h_log_tail(&H));
    int64_t took = tu_mono_ms() - returned;
    ck_assert_msg(took >= 450, "stopped after %lld ms, before its grace", (long long)took);
    for (int i = 0; i < 4; i++) {
        snprintf(id, sizeof id, "b%d", i);
        ck_assert_msg(h_wait_gone(&H, id, 10000), "%s did not finish; log:\n%s", id,
                      h_log_tail(&H));
    }
    assert_cancelled("a", fence);
    tu_sleep_ms(500);
    struct h_run *r;
    size_t n = h_records(&H, &r);
    ck_assert_int_eq(h_count(r, n, "a", 0, NULL), 1);
    for (int i = 0; i < 4; i++) {
        struct h_run first;
        snprintf(id, sizeof id, "b%d", i);
        ck_assert_int_eq(h_count(r, n, id, 0, &first), 1);
        ck_assert_int_eq(first.attempt, 1);
    }
    free(r);
    dq_stats st = stats();
    ck_assert_int_eq(st.dead, 0);
    ck_assert_int_eq(st.delayed + st.due + st.processing, 0);
    ck_assert_int_eq(st.jobs_cancelled, 1);
    fprintf(stderr, "ignoring handler's worker stopped %lld ms after the cancel\n",
                    (long long)took);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

/* Two daemons on one Redis (one worker each, a job running in each):
 * each cancel is heard by both, and stops its job in the daemon that
 * runs it, within a second; each daemon stops exactly its own. */
START_TEST(each_daemon_stops_the_job_it_runs)
{
    write_conf(1, 1, NULL);
    h_start(&H, 1);
    struct harness h2 = H;
    h2.pid = 0;
    snprintf(h2.log, sizeof h2.log, "%s/delayqd2.log", H.fx.dir);
    h_start(&h2, 2);
    h_enqueue(&H, "one", "t", "watch:30000", 0, 0);
    wait_started("one");
    h_enqueue(&H, "two", "t", "watch:30000", 0, 0);   /* the idle worker's */
    wait_started("two");
    ck_assert_int_eq(dq_cancel(H.c, H_QUEUE, "one"), DQ_OK);
    ck_assert_int_eq(dq_cancel(H.c, H_QUEUE, "two"), DQ_OK);
    int64_t returned = tu_mono_ms();
    ck_assert_msg(h_wait_record(&H, "one", 1, 1, 1000) == 1, "one: log:\n%s",
                  h_log_tail(&H));
    ck_assert_msg(h_wait_record(&H, "two", 1, 1, 1000) == 1, "two: log:\n%s",
                  h_log_tail(&h2));
    fprintf(stderr, "two daemons: both runs stopped %lld ms after the cancels\n",
            (long long)(tu_mono_ms() - returned));
    ck_assert_int_eq(h_log_count(&H, "was cancelled while running"), 1);
    ck_assert_int_eq(h_log_count(&h2, "was cancelled while running"), 1);
    ck_assert_int_eq(h_stop(&h2, 10000), 0);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

/* A job claimed in a batch and not started yet is in processing too: a
 * cancel of it ends it, and its worker skips it when its turn comes, so
 * it never runs; the job before it runs on and succeeds. */
START_TEST(a_claimed_job_cancelled_before_its_turn_never_starts)
{
    write_conf(1, 8, NULL);
    int64_t now = tu_now_ms();
    add_at("first", "sleep:1000", now - 1000);
    add_at("second", "ok", now - 500);
    h_start(&H, 1);
    wait_started("first");
    dq_job_info info;
    ck_assert_int_eq(h_state(&H, "second", &info), DQ_STATE_PROCESSING);
    int64_t fence = info.job.fence;
    dq_job_info_free(&info);
    ck_assert_int_eq(dq_cancel(H.c, H_QUEUE, "second"), DQ_OK);
    ck_assert(h_wait_gone(&H, "first", 5000));
    ck_assert(h_wait_log(&H, "job cancelled before it started", 1, 2000) == 1);
    struct h_run *r;
    size_t n = h_records(&H, &r);
    ck_assert_int_eq(h_count(r, n, "first", 1, NULL), 1);
    ck_assert_int_eq(h_count(r, n, "second", 0, NULL), 0);
    free(r);
    assert_cancelled("second", fence);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

/* The pid of the latest reaper that said it listens for cancels, from
 * the daemon's log ("[reap PID] listening for cancels ..."); 0 if none. */
static pid_t reaper_pid(void)
{
    return h_log_pid(&H, "reap", "listening for cancels");
}

/* A cancel published while no reaper listens (killed, and not restarted
 * yet) is not lost for the run: the next reaper looks up the jobs running
 * when it subscribes, and stops the one cancelled. */
START_TEST(a_cancel_missed_while_the_reaper_was_down_still_stops_the_run)
{
    write_conf(1, 8, NULL);
    h_start(&H, 1);
    h_enqueue(&H, "m", "t", "watch:30000", 0, 0);
    int64_t fence = wait_started("m");
    ck_assert(h_wait_log(&H, "listening for cancels", 1, 5000) == 1);
    pid_t reaper = reaper_pid();
    ck_assert_int_gt(reaper, 0);
    ck_assert_int_eq(kill(reaper, SIGKILL), 0);
    while (tu_process_running(reaper))
        tu_sleep_ms(1);
    ck_assert_int_eq(dq_cancel(H.c, H_QUEUE, "m"), DQ_OK);
    ck_assert_msg(h_wait_record(&H, "m", 1, 1, 5000) == 1,
                  "the run was not stopped after the reaper came back; log:\n%s",
                  h_log_tail(&H));
    ck_assert_int_eq(h_log_count(&H, "listening for cancels"), 2);
    assert_cancelled("m", fence);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

/* ---- the race with the job's own end --------------------------------------- */

#define RACES 1000

static int64_t race_start;

/* Job i sleeps 6-17 ms; due i ms after the start, so that the jobs run in
 * the order of their numbers (at one due time they would run in the ids'
 * byte order: r1, r10, r100 ...). */
static void race_job(int i, void *arg, const char **payload, int64_t *at_ms)
{
    static char buf[32];
    (void)arg;
    snprintf(buf, sizeof buf, "sleep:%d", 6 + i * 7 % 12);
    *payload = buf;
    *at_ms = race_start + i;
}

/* How many of the race's jobs have ended (done or cancelled). */
static int races_ended(void)
{
    dq_stats st = stats();
    return RACES - (int)(st.delayed + st.due + st.processing);
}

/* 1,000 cancels, each sent about when its job ends: the jobs run in order
 * on 4 workers, and cancel i waits until the jobs that ended are within
 * two of i, either side (so job i is running, ending, or just ended).
 * Every cancel says cancelled (0) or not found (it finished first), never
 * anything else; one that lost found a job that ran to its end; the
 * counter counts the winners; nothing is left delayed, running or dead;
 * and no job ran twice. */
START_TEST(each_job_is_finished_or_cancelled_never_both)
{
    write_conf(4, 1, NULL);
    h_start(&H, 4);
    race_start = tu_now_ms();
    h_enqueue_numbered(&H, RACES, "r", race_job, NULL);
    int won = 0, lost = 0;
    static char lost_ids[RACES][8], won_ids[RACES][8];
    for (int i = 0; i < RACES; i++) {
        int lead = (i * 13) % 5 - 2;
        for (int64_t end = tu_mono_ms() + 2000; i > races_ended() + lead && tu_mono_ms() < end;)
            tu_sleep_ms(1);
        char id[8];
        snprintf(id, sizeof id, "r%d", i);
        dq_status st = dq_cancel(H.c, H_QUEUE, id);
        ck_assert_msg(st == DQ_OK || st == DQ_ERR_NOTFOUND, "cancel %s: %s", id,
                      dq_errmsg(H.c));
        if (st == DQ_OK)
            snprintf(won_ids[won++], sizeof won_ids[0], "%s", id);
        else
            snprintf(lost_ids[lost++], sizeof lost_ids[0], "%s", id);
    }
    ck_assert(h_wait_idle(&H, 20000));
    tu_sleep_ms(300);           /* past any retry's backoff (100 ms) */
    dq_stats st = stats();
    ck_assert_int_eq(st.jobs_cancelled, won);
    ck_assert_int_eq(st.dead, 0);
    ck_assert_int_eq(st.delayed + st.due + st.processing, 0);
    struct h_run *r;
    size_t n = h_records(&H, &r);
    for (int i = 0; i < lost; i++)
        ck_assert_msg(h_count(r, n, lost_ids[i], 1, NULL) == 1,
                      "%s finished first but did not run to its end", lost_ids[i]);
    int stopped = 0;            /* cancelled while running */
    for (int i = 0; i < won; i++)
        stopped += h_count(r, n, won_ids[i], 0, NULL) > 0;
    int ran_twice = 0, overlaps = 0;
    for (int i = 0; i < RACES; i++) {
        char id[8];
        snprintf(id, sizeof id, "r%d", i);
        ran_twice += h_count(r, n, id, 0, NULL) > 1;
    }
    for (size_t k = 0; k < n; k++)
        overlaps += r[k].end == H_OVERLAP;
    free(r);
    fprintf(stderr, "races: %d cancelled (%d of them running), %d finished first, %d ran "
            "twice\n", won, stopped, lost, ran_twice);
    ck_assert_int_eq(won + lost, RACES);
    ck_assert_int_eq(ran_twice, 0);
    ck_assert_int_eq(overlaps, 0);
    /* Both sides won some: the race was run. */
    ck_assert_int_gt(stopped, 20);
    ck_assert_int_gt(lost, 20);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cancel_running");
    TCase *tc = fixture_tcase(s, "daemon", 90, NULL, NULL, setup, teardown);
    tcase_add_test(tc, an_exec_program_and_its_child_stop_within_a_second);
    tcase_add_test(tc, a_handler_that_watches_returns_and_its_worker_goes_on);
    tcase_add_test(tc, a_handler_that_ignores_it_is_stopped_after_its_grace);
    tcase_add_test(tc, a_cancel_missed_while_the_reaper_was_down_still_stops_the_run);
    tcase_add_test(tc, a_claimed_job_cancelled_before_its_turn_never_starts);
    tcase_add_test(tc, each_daemon_stops_the_job_it_runs);
    tcase_add_test(tc, each_job_is_finished_or_cancelled_never_both);
    return fixture_run_suite(s);
}
