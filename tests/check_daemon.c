/*
 * End-to-end tests of delayqd: the real binary, with the test handler
 * (tests/plugins/testhandler.c), against a real redis-server.  Outcomes
 * are checked in Redis through libdelayq and in the handler's record of
 * its runs.  Faults (killed workers, Redis restarts, the soak) are in
 * check_daemon_faults.c; the machinery is in daemon_harness.c.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

static void start_default(int workers)
{
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.workers = workers;
    h_write_conf(&H, &hc);
    h_start(&H, workers);
}

/* Stop the daemon and check it exited 0. */
static void stop_clean(void)
{
    int status = h_stop(&H, 10000);
    ck_assert_msg(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "delayqd did not stop cleanly (status %d); log:\n%s", status,
                  h_log_tail(&H));
}

/* ---- due times ----------------------------------------------------------- */

START_TEST(jobs_run_once_at_their_due_time)
{
    enum { N = 20 };
    start_default(2);
    char ids[N][16];
    int64_t due[N];
    for (int i = 0; i < N; i++) {
        snprintf(ids[i], sizeof ids[i], "job-%02d", i);
        /* 300..800 ms, not in id order */
        due[i] = h_enqueue(&H, ids[i], "t", "ok", 300 + (i * 7 % N) * 25, 0);
    }
    for (int i = 0; i < N; i++)
        ck_assert_msg(h_wait_record(&H, ids[i], 1, 1, 3000) == 1, "%s did not run; log:\n%s",
                      ids[i], h_log_tail(&H));
    for (int i = 0; i < N; i++)
        ck_assert_msg(h_wait_gone(&H, ids[i], 2000), "%s is still in Redis", ids[i]);
    tu_sleep_ms(300);    /* a second run would show by now */
    struct h_run *r;
    size_t n = h_records(&H, &r);
    for (int i = 0; i < N; i++) {
        struct h_run first;
        ck_assert_int_eq(h_count(r, n, ids[i], 0, &first), 1);
        ck_assert_int_eq(h_count(r, n, ids[i], 1, NULL), 1);
        ck_assert_int_eq(first.attempt, 1);
        ck_assert_msg(first.ms >= due[i], "%s started %lld ms early", ids[i],
                      (long long)(due[i] - first.ms));
        ck_assert_msg(first.ms < due[i] + 100, "%s started %lld ms late", ids[i],
                      (long long)(first.ms - due[i]));
    }
    free(r);
    stop_clean();
}
END_TEST

START_TEST(sleeping_workers_wake_for_a_sooner_job)
{
    start_default(2);
    /* Both workers sleep towards the far job (capped at 30 s). */
    h_enqueue(&H, "far", "t", "ok", 3600 * 1000, 0);
    tu_sleep_ms(500);
    int64_t due = h_enqueue(&H, "soon", "t", "ok", 200, 0);
    ck_assert_int_eq(h_wait_record(&H, "soon", 1, 1, 3000), 1);
    struct h_run *r, first;
    size_t n = h_records(&H, &r);
    ck_assert_int_eq(h_count(r, n, "soon", 0, &first), 1);
    free(r);
    ck_assert_msg(first.ms >= due && first.ms - due < 100, "lateness %lld ms",
                  (long long)(first.ms - due));
    ck_assert_int_eq(h_state(&H, "far", NULL), DQ_STATE_DELAYED);
    stop_clean();
}
END_TEST

/* A wake message that arrives while the only worker is busy must not be
 * lost: after its batch the worker sleeps until that job, not 30 s. */
START_TEST(busy_worker_keeps_a_wake_for_later)
{
    start_default(1);
    h_enqueue(&H, "busy", "t", "sleep:400", 0, 0);
    ck_assert_int_eq(h_wait_record(&H, "busy", 0, 1, 3000), 1);
    int64_t due = h_enqueue(&H, "soon", "t", "ok", 100, 0);
    ck_assert_msg(h_wait_record(&H, "soon", 1, 1, 3000) == 1,
                  "the job enqueued while the worker was busy did not run; log:\n%s",
                  h_log_tail(&H));
    struct h_run *r, busy_end, soon;
    size_t n = h_records(&H, &r);
    h_count(r, n, "busy", 1, &busy_end);
    h_count(r, n, "soon", 0, &soon);
    free(r);
    ck_assert(soon.ms >= due);
    ck_assert_msg(soon.ms - busy_end.ms < 100, "ran %lld ms after the worker was free",
                  (long long)(soon.ms - busy_end.ms));
    stop_clean();
}
END_TEST

/* ---- results: retry, fail, dead ------------------------------------------ */

START_TEST(retry_then_success_after_backoff)
{
    start_default(2);
    h_enqueue(&H, "r1", "t", "retry-once", 0, 0);
    ck_assert_int_eq(h_wait_record(&H, "r1", 1, 2, 3000), 2);
    ck_assert(h_wait_gone(&H, "r1", 2000));
    struct h_run *r;
    size_t n = h_records(&H, &r);
    struct h_run s1 = { 0 }, e1 = { 0 }, s2 = { 0 };
    int starts = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(r[i].id, "r1") != 0)
            continue;
        if (!r[i].end && starts++ == 0)
            s1 = r[i];
        else if (!r[i].end)
            s2 = r[i];
        else if (!e1.ms)
            e1 = r[i];
    }
    free(r);
    ck_assert_int_eq(starts, 2);
    ck_assert_int_eq(s1.attempt, 1);
    ck_assert_int_eq(s2.attempt, 2);
    /* base 100 ms, no jitter: the retry is due 100 ms after the failure */
    ck_assert_msg(s2.ms - e1.ms >= 99, "retried after %lld ms", (long long)(s2.ms - e1.ms));
    ck_assert_msg(s2.ms - e1.ms < 400, "retried after %lld ms", (long long)(s2.ms - e1.ms));
    stop_clean();
}
END_TEST

/* The fence the handler is given is the one Redis holds the job's lease
 * under, and a later attempt gets a greater one: what a system the job
 * writes to needs to refuse an attempt older than one it has seen. */
START_TEST(the_handler_gets_the_fence_its_lease_is_held_under)
{
    start_default(2);
    h_enqueue(&H, "f1", "t", "sleep:800", 0, 0);   /* within the 1 s timeout */
    ck_assert_int_eq(h_wait_record(&H, "f1", 0, 1, 3000), 1);
    struct h_run *r;
    size_t n = h_records(&H, &r);
    struct h_run run = { 0 };
    ck_assert_int_eq(h_count(r, n, "f1", 0, &run), 1);
    free(r);
    redisContext *rc = fixture_redis_connect(&H.fx);
    redisReply *lease = redisCommand(rc, "HGET dq:{" H_QUEUE "}:lease f1");
    ck_assert_msg(lease && lease->type == REDIS_REPLY_STRING, "no lease for f1");
    ck_assert_msg(run.fence > 0 && atoll(lease->str) == run.fence,
                  "the handler got fence %lld, the lease is held under %s",
                  (long long)run.fence, lease->str);
    freeReplyObject(lease);
    redisFree(rc);

    h_enqueue(&H, "f2", "t", "retry-once", 0, 0);
    ck_assert_int_eq(h_wait_record(&H, "f2", 1, 2, 5000), 2);
    n = h_records(&H, &r);
    int64_t fences[2] = { -1, -1 };
    for (size_t i = 0; i < n; i++)
        if (strcmp(r[i].id, "f2") == 0 && !r[i].end && r[i].attempt >= 1 && r[i].attempt <= 2)
            fences[r[i].attempt - 1] = r[i].fence;
    free(r);
    ck_assert_msg(fences[0] > run.fence && fences[1] > fences[0],
                  "fences: f1 %lld, f2 attempt 1 %lld, attempt 2 %lld", (long long)run.fence,
                  (long long)fences[0], (long long)fences[1]);
    stop_clean();
}
END_TEST

START_TEST(fail_is_dead_at_once)
{
    start_default(2);
    h_enqueue(&H, "f1", "t", "fail", 0, 0);
    ck_assert(h_wait_state(&H, "f1", DQ_STATE_DEAD, 3000));
    dq_job_info info;
    ck_assert_int_eq(h_state(&H, "f1", &info), DQ_STATE_DEAD);
    ck_assert_str_eq(info.job.last_error, "asked to fail");
    ck_assert_int_eq(info.job.attempt, 1);
    dq_job_info_free(&info);
    dq_dead_page page;
    ck_assert_int_eq(dq_dead_list(H.c, H_QUEUE, 0, 10, &page), DQ_OK);
    ck_assert_int_eq(page.total, 1);
    ck_assert_str_eq(page.entries[0].id, "f1");
    ck_assert_str_eq(page.entries[0].last_error, "asked to fail");
    dq_dead_page_free(&page);
    tu_sleep_ms(300);
    struct h_run *r;
    size_t n = h_records(&H, &r);
    ck_assert_int_eq(h_count(r, n, "f1", 0, NULL), 1);
    free(r);
    stop_clean();
}
END_TEST

START_TEST(unknown_type_is_dead)
{
    struct h_conf hc;
    char handler[1024];
    h_conf_defaults(&hc);
    hc.handlers = h_handler(&H, handler, sizeof handler, "t", "1s", 0);
    h_write_conf(&H, &hc);
    h_start(&H, 2);
    h_enqueue(&H, "u1", "other", "ok", 0, 0);
    ck_assert(h_wait_state(&H, "u1", DQ_STATE_DEAD, 3000));
    dq_job_info info;
    h_state(&H, "u1", &info);
    ck_assert_msg(strstr(info.job.last_error, "no handler for type") != NULL, "error: %s",
                  info.job.last_error);
    ck_assert_int_eq(info.job.attempt, 1);
    dq_job_info_free(&info);
    struct h_run *r;
    ck_assert_int_eq(h_records(&H, &r), 0);
    free(r);
    stop_clean();
}
END_TEST

/* A record whose body cannot be decoded never crashes a worker and is
 * never lost: it is buried at once, and the good jobs claimed with it run. */
START_TEST(corrupt_record_is_buried_at_once)
{
    struct h_conf hc;
    h_conf_defaults(&hc);
    h_write_conf(&H, &hc);
    /* Written behind the scripts' back (no wake message), so both are in
     * place before the workers start and make their first claim. */
    ck_assert_int_eq(fixture_redis_int(&H.fx, "HSET dq:{%s}:jobs bad 3:0:garbage", H_QUEUE), 1);
    ck_assert_int_eq(fixture_redis_int(&H.fx, "ZADD dq:{%s}:delayed 0 bad", H_QUEUE), 1);
    h_enqueue(&H, "good", "t", "ok", 0, 0);
    h_start(&H, 2);
    ck_assert_int_eq(h_wait_record(&H, "good", 1, 1, 3000), 1);
    int64_t end = tu_mono_ms() + 3000;
    while (fixture_redis_int(&H.fx, "ZCARD dq:{%s}:dead", H_QUEUE) != 1 && tu_mono_ms() < end)
        tu_sleep_ms(20);
    ck_assert_int_eq(fixture_redis_int(&H.fx, "ZCARD dq:{%s}:dead", H_QUEUE), 1);
    ck_assert_int_eq(fixture_redis_int(&H.fx, "ZCOUNT dq:{%s}:processing -inf (9007199254740991", H_QUEUE), 0);
    ck_assert_int_eq(fixture_redis_int(&H.fx, "HEXISTS dq:{%s}:jobs bad", H_QUEUE), 1);
    /* The worker logs it after the claim's reply, which moved it: a
     * moment after the dead set shows it. */
    ck_assert_int_ge(h_wait_log(&H, "unreadable record -> dead", 1, 3000), 1);
    stop_clean();
}
END_TEST

START_TEST(attempts_run_out)
{
    struct h_conf hc;
    char handler[1024];
    h_conf_defaults(&hc);
    hc.handlers = h_handler(&H, handler, sizeof handler, "*", "1s", 3);
    h_write_conf(&H, &hc);
    h_start(&H, 2);
    h_enqueue(&H, "x1", "t", "retry", 0, 0);
    ck_assert(h_wait_state(&H, "x1", DQ_STATE_DEAD, 5000));
    tu_sleep_ms(400);
    dq_job_info info;
    ck_assert_int_eq(h_state(&H, "x1", &info), DQ_STATE_DEAD);
    ck_assert_str_eq(info.job.last_error, "asked to retry");
    ck_assert_int_eq(info.job.attempt, 3);
    dq_job_info_free(&info);
    struct h_run *r;
    size_t n = h_records(&H, &r);
    ck_assert_int_eq(h_count(r, n, "x1", 0, NULL), 3);
    ck_assert_int_eq(h_count(r, n, "x1", 1, NULL), 3);
    free(r);
    stop_clean();
}
END_TEST

START_TEST(retry_delay_from_handler_is_honoured)
{
    start_default(2);
    h_enqueue(&H, "d1", "t", "retry-in:300", 0, 2);
    ck_assert(h_wait_state(&H, "d1", DQ_STATE_DEAD, 3000));
    struct h_run *r;
    size_t n = h_records(&H, &r);
    struct h_run e1 = { 0 }, s2 = { 0 };
    int starts = 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(r[i].id, "d1") == 0) {
            if (!r[i].end && ++starts == 2)
                s2 = r[i];
            if (r[i].end && !e1.ms)
                e1 = r[i];
        }
    free(r);
    ck_assert_int_eq(starts, 2);
    ck_assert_msg(s2.ms - e1.ms >= 299 && s2.ms - e1.ms < 450, "retried after %lld ms",
                  (long long)(s2.ms - e1.ms));
    stop_clean();
}
END_TEST

/* ---- stopping -------------------------------------------------------------- */

START_TEST(sigterm_finishes_the_running_job_and_gives_back_the_rest)
{
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.workers = 1;
    hc.batch = 8;
    h_write_conf(&H, &hc);
    h_start(&H, 1);
    /* One due time for all, so that the worker claims them in one batch;
     * "a" sorts first. */
    int64_t now;
    ck_assert_int_eq(dq_server_time(H.c, &now), DQ_OK);
    const char *ids[] = { "a", "b1", "b2", "b3", "b4", "b5" };
    for (int i = 0; i < 6; i++) {
        const char *payload = i == 0 ? "sleep:800" : "sleep:300";
        dq_enqueue_req req = { .queue = H_QUEUE, .type = "t", .id = ids[i],
                               .payload = payload, .payload_len = strlen(payload),
                               .at_ms = now + 300 };
        ck_assert_int_eq(dq_enqueue(H.c, &req, NULL), DQ_OK);
    }
    ck_assert_int_eq(h_wait_record(&H, "a", 0, 1, 3000), 1);
    dq_stats st;
    ck_assert_int_eq(dq_stats_get(H.c, H_QUEUE, &st), DQ_OK);
    ck_assert_msg(st.processing == 6, "claimed %lld of 6 in the batch", (long long)st.processing);
    int64_t t0 = tu_mono_ms();
    int status = h_stop(&H, 10000);
    int64_t took = tu_mono_ms() - t0;
    ck_assert_msg(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "status %d; log:\n%s", status, h_log_tail(&H));
    ck_assert_msg(took < 2000, "took %lld ms to stop", (long long)took);
    struct h_run *r;
    size_t n = h_records(&H, &r);
    ck_assert_int_eq(h_count(r, n, "a", 1, NULL), 1);
    for (int i = 1; i < 6; i++)
        ck_assert_msg(h_count(r, n, ids[i], 0, NULL) == 0, "%s was started", ids[i]);
    free(r);
    ck_assert_int_eq(h_state(&H, "a", NULL), -1);
    for (int i = 1; i < 6; i++) {
        dq_job_info info;
        ck_assert_int_eq(h_state(&H, ids[i], &info), DQ_STATE_DELAYED);
        ck_assert_msg(info.job.attempt == 0, "%s: attempts %d", ids[i], info.job.attempt);
        dq_job_info_free(&info);
    }
    ck_assert_int_eq(h_log_count(&H, "giving back 5 claimed jobs"), 1);
}
END_TEST

START_TEST(shutdown_timeout_stops_an_overrunning_job)
{
    struct h_conf hc;
    char handler[1024];
    h_conf_defaults(&hc);
    hc.workers = 1;
    hc.lease = "7s";
    hc.shutdown_timeout = "500ms";
    hc.handlers = h_handler(&H, handler, sizeof handler, "*", "5s", 0);
    h_write_conf(&H, &hc);
    h_start(&H, 1);
    h_enqueue(&H, "long", "t", "sleep:3000", 0, 0);
    ck_assert_int_eq(h_wait_record(&H, "long", 0, 1, 3000), 1);
    int64_t t0 = tu_mono_ms();
    int status = h_stop(&H, 10000);
    int64_t took = tu_mono_ms() - t0;
    ck_assert_msg(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "status %d; log:\n%s", status, h_log_tail(&H));
    ck_assert_msg(took >= 500 && took < 1500, "took %lld ms to stop", (long long)took);
    ck_assert_int_eq(h_log_count(&H, "shutdown timeout"), 1);
    /* Killed: failed at once, so it is retried rather than waiting out its
     * lease. */
    dq_job_info info;
    ck_assert_int_eq(h_state(&H, "long", &info), DQ_STATE_DELAYED);
    ck_assert_str_eq(info.job.last_error, "worker died: signal 9");
    ck_assert_int_eq(info.job.attempt, 1);
    dq_job_info_free(&info);
    struct h_run *r;
    size_t n = h_records(&H, &r);
    ck_assert_int_eq(h_count(r, n, "long", 1, NULL), 0);
    free(r);
}
END_TEST

/* ---- reload ---------------------------------------------------------------- */

/* A configuration with a handler for each of `types` (NULL-terminated). */
static void write_typed_conf(const char *const *types)
{
    char handlers[4096] = "", one[1024];
    for (size_t i = 0; types[i]; i++) {
        if (i)
            strcat(handlers, ",\n  ");
        strcat(handlers, h_handler(&H, one, sizeof one, types[i], "1s", 0));
    }
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.handlers = handlers;
    h_write_conf(&H, &hc);
}

START_TEST(sighup_reloads_handlers_and_refuses_a_broken_config)
{
    static const char *const only_a[] = { "a", NULL };
    static const char *const a_and_b[] = { "a", "b", NULL };
    write_typed_conf(only_a);
    h_start(&H, 2);
    h_enqueue(&H, "b-1", "b", "ok", 0, 0);
    ck_assert(h_wait_state(&H, "b-1", DQ_STATE_DEAD, 3000));
    dq_job_info info;
    h_state(&H, "b-1", &info);
    ck_assert_msg(strstr(info.job.last_error, "no handler") != NULL, "%s", info.job.last_error);
    dq_job_info_free(&info);

    write_typed_conf(a_and_b);
    kill(H.pid, SIGHUP);
    ck_assert_int_eq(h_wait_log(&H, "reloaded", 1, 3000), 1);
    h_enqueue(&H, "b-2", "b", "ok", 0, 0);
    ck_assert_msg(h_wait_record(&H, "b-2", 1, 1, 5000) == 1, "log:\n%s", h_log_tail(&H));
    ck_assert(h_wait_gone(&H, "b-2", 2000));

    h_write_file(H.conf, "queues = ( { name = ; } );\n");
    kill(H.pid, SIGHUP);
    ck_assert_msg(h_wait_log(&H, "reload refused", 1, 3000) == 1, "log:\n%s", h_log_tail(&H));
    ck_assert_int_eq(h_log_count(&H, "reloaded"), 1);
    h_enqueue(&H, "a-1", "a", "ok", 0, 0);
    ck_assert_msg(h_wait_record(&H, "a-1", 1, 1, 3000) == 1, "log:\n%s", h_log_tail(&H));
    ck_assert(h_wait_gone(&H, "a-1", 2000));
    stop_clean();
}
END_TEST

START_TEST(sighup_under_load_runs_each_job_once)
{
    enum { N = 200 };
    static const char *const a_only[] = { "a", NULL };
    static const char *const a_and_b[] = { "a", "b", NULL };
    write_typed_conf(a_only);
    h_start(&H, 2);
    static dq_enqueue_req reqs[N];
    static char ids[N][16];
    for (int i = 0; i < N; i++) {
        snprintf(ids[i], sizeof ids[i], "L%03d", i);
        reqs[i] = (dq_enqueue_req){ .queue = H_QUEUE, .type = "a", .id = ids[i],
                                    .payload = "sleep:5", .payload_len = 7 };
    }
    ck_assert_int_eq(dq_enqueue_many(H.c, reqs, N, NULL, NULL), DQ_OK);
    /* Reload while the jobs run: twice, to catch a second generation too. */
    struct h_run *r;
    int64_t deadline = tu_mono_ms() + 5000;
    size_t n;
    while ((n = h_records(&H, &r)) < 40 && tu_mono_ms() < deadline) {
        free(r);
        tu_sleep_ms(5);
    }
    pid_t old_pids[8];
    size_t nold = 0;
    for (size_t i = 0; i < n && nold < 8; i++)
        if (nold == 0 || old_pids[nold - 1] != r[i].pid)
            old_pids[nold++] = r[i].pid;
    size_t before_reload = n;
    free(r);
    write_typed_conf(a_and_b);
    kill(H.pid, SIGHUP);
    ck_assert_int_eq(h_wait_log(&H, "reloaded", 1, 3000), 1);
    tu_sleep_ms(100);
    kill(H.pid, SIGHUP);
    ck_assert_int_eq(h_wait_log(&H, "reloaded", 2, 3000), 2);
    ck_assert_msg(h_wait_idle(&H, 15000), "jobs left; log:\n%s", h_log_tail(&H));
    tu_sleep_ms(200);
    n = h_records(&H, &r);
    for (int i = 0; i < N; i++) {
        ck_assert_msg(h_count(r, n, ids[i], 0, NULL) == 1, "%s started %d times", ids[i],
                      h_count(r, n, ids[i], 0, NULL));
        ck_assert_msg(h_count(r, n, ids[i], 1, NULL) == 1, "%s ended %d times", ids[i],
                      h_count(r, n, ids[i], 1, NULL));
        ck_assert_int_eq(h_state(&H, ids[i], NULL), -1);
    }
    /* The reloads happened in the middle: later runs are by new workers. */
    int by_new_workers = 0;
    for (size_t i = before_reload; i < n; i++) {
        int old = 0;
        for (size_t k = 0; k < nold; k++)
            old |= r[i].pid == old_pids[k];
        by_new_workers += !old;
    }
    free(r);
    ck_assert_msg(before_reload < 2 * N, "the jobs were done before the reload");
    ck_assert_int_gt(by_new_workers, 0);
    dq_stats st;
    ck_assert_int_eq(dq_stats_get(H.c, H_QUEUE, &st), DQ_OK);
    ck_assert_int_eq(st.dead, 0);
    stop_clean();
}
END_TEST

/* ---- configuration errors ---------------------------------------------------- */

/* Write a small configuration, five lines:
 *   1 redis   2 handler_dir   3 queues (lease)   4 handlers (file, timeout)
 *   5 `extra` */
static void write_small_conf(const char *lease, const char *file, const char *timeout,
                             const char *extra)
{
    char text[8192];
    snprintf(text, sizeof text,
             "redis = { unix_socket = \"%s\"; };\n"
             "handler_dir = \"%s\";\n"
             "queues = ( { name = \"orders\"; workers = 1; lease = \"%s\"; } );\n"
             "handlers = ( { type = \"*\"; file = \"%s\"; timeout = \"%s\"; } );\n"
             "%s\n",
             H.fx.sock, H.handler_dir, lease, file, timeout, extra);
    h_write_file(H.conf, text);
}

static void assert_refused(int line, const char *what)
{
    h_assert_refused(&H, line, what);
}

START_TEST(good_config_checks_ok)
{
    write_small_conf("3s", "testhandler.so", "1s", "");
    const char *args[] = { "-t", "-c", H.conf, NULL };
    char err[4096];
    ck_assert_int_eq(h_run_delayqd(args, err, sizeof err), 0);
    ck_assert_str_eq(err, "");
}
END_TEST

START_TEST(config_syntax_error_is_refused)
{
    write_small_conf("3s", "testhandler.so", "1s", "oops = ( ; ");
    assert_refused(5, "syntax error");
}
END_TEST

START_TEST(config_unknown_key_is_refused)
{
    write_small_conf("3s", "testhandler.so", "1s", "colour = \"blue\";");
    assert_refused(5, "unknown setting 'colour'");
}
END_TEST

/* A group given as a list or a number: refused by name, not a crash
 * (a list's elements have no names) and not silently taken as empty. */
START_TEST(config_group_of_another_type_is_refused)
{
    write_small_conf("3s", "testhandler.so", "1s", "log = ( 1 );");
    assert_refused(5, "log: expected a group");
    write_small_conf("3s", "testhandler.so", "1s", "reaper = 5;");
    assert_refused(5, "reaper: expected a group");
}
END_TEST

/* A quoted value with a newline (a libconfig escape) keeps the message on
 * one line. */
START_TEST(config_value_with_newline_is_refused_on_one_line)
{
    write_small_conf("3s", "testhandler.so", "1s", "log = { target = \"sys\\nlog\"; };");
    assert_refused(5, "log.target: 'sys?log' is not stderr or syslog");
}
END_TEST

START_TEST(config_missing_handler_file_is_refused)
{
    write_small_conf("3s", "nosuch.so", "1s", "");
    assert_refused(4, "nosuch.so");
}
END_TEST

START_TEST(config_wrong_abi_plugin_is_refused)
{
    write_small_conf("3s", "wrongabi.so", "1s", "");
    assert_refused(4, "ABI");
}
END_TEST

START_TEST(config_plugin_without_descriptor_is_refused)
{
    write_small_conf("3s", "noabi.so", "1s", "");
    assert_refused(4, "dq_handler_v1");
}
END_TEST

START_TEST(config_lease_not_longer_than_timeout_is_refused)
{
    write_small_conf("2s", "testhandler.so", "1s", "");
    assert_refused(3, "longer than the longest handler timeout");
}
END_TEST

/* delayqd -t warns, in one line on stderr and without failing, of a file
 * holding the Redis password that every user can read. */
START_TEST(config_check_warns_of_a_readable_password)
{
    char pass[300], text[PATH_MAX + 1024], want[1024], err[4096];
    snprintf(pass, sizeof pass, "%s/redis.pass", H.fx.dir);
    h_write_file(pass, "pw\n");
    const char *redis[] = { "password = \"pw\";", "password_file = \"redis.pass\";" };
    const char *holder[] = { H.conf, pass };
    for (int i = 0; i < 2; i++) {
        snprintf(text, sizeof text,
                 "redis = { unix_socket = \"%s\"; %s };\n"
                 "handler_dir = \"%s\";\n"
                 "queues = ( { name = \"orders\"; lease = \"3s\"; } );\n"
                 "handlers = ( { type = \"*\"; file = \"testhandler.so\"; timeout = \"1s\"; } );\n",
                 H.fx.sock, redis[i], H.handler_dir);
        h_write_file(H.conf, text);
        ck_assert_int_eq(chmod(H.conf, 0644), 0);
        ck_assert_int_eq(chmod(pass, 0644), 0);
        const char *args[] = { "-t", "-c", H.conf, NULL };
        ck_assert_int_eq(h_run_delayqd(args, err, sizeof err), 0);
        snprintf(want, sizeof want, "delayqd: warning: %s holds the Redis password and every "
                 "user can read it (chmod o-r %s)\n", holder[i], holder[i]);
        ck_assert_str_eq(err, want);
        ck_assert_int_eq(chmod(holder[i], 0640), 0);
        ck_assert_int_eq(h_run_delayqd(args, err, sizeof err), 0);
        ck_assert_str_eq(err, "");
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("daemon");
    TCase *tc = tcase_create("jobs");
    tcase_set_timeout(tc, 30);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, jobs_run_once_at_their_due_time);
    tcase_add_test(tc, sleeping_workers_wake_for_a_sooner_job);
    tcase_add_test(tc, busy_worker_keeps_a_wake_for_later);
    tcase_add_test(tc, retry_then_success_after_backoff);
    tcase_add_test(tc, the_handler_gets_the_fence_its_lease_is_held_under);
    tcase_add_test(tc, fail_is_dead_at_once);
    tcase_add_test(tc, unknown_type_is_dead);
    tcase_add_test(tc, corrupt_record_is_buried_at_once);
    tcase_add_test(tc, attempts_run_out);
    tcase_add_test(tc, retry_delay_from_handler_is_honoured);
    suite_add_tcase(s, tc);

    tc = tcase_create("signals");
    tcase_set_timeout(tc, 40);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, sigterm_finishes_the_running_job_and_gives_back_the_rest);
    tcase_add_test(tc, shutdown_timeout_stops_an_overrunning_job);
    tcase_add_test(tc, sighup_reloads_handlers_and_refuses_a_broken_config);
    tcase_add_test(tc, sighup_under_load_runs_each_job_once);
    suite_add_tcase(s, tc);

    tc = tcase_create("config");
    tcase_set_timeout(tc, 30);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, good_config_checks_ok);
    tcase_add_test(tc, config_check_warns_of_a_readable_password);
    tcase_add_test(tc, config_syntax_error_is_refused);
    tcase_add_test(tc, config_unknown_key_is_refused);
    tcase_add_test(tc, config_group_of_another_type_is_refused);
    tcase_add_test(tc, config_value_with_newline_is_refused_on_one_line);
    tcase_add_test(tc, config_missing_handler_file_is_refused);
    tcase_add_test(tc, config_wrong_abi_plugin_is_refused);
    tcase_add_test(tc, config_plugin_without_descriptor_is_refused);
    tcase_add_test(tc, config_lease_not_longer_than_timeout_is_refused);
    suite_add_tcase(s, tc);

    return fixture_run_suite(s);
}
