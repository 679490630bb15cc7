/*
 * The per-job guarantee inside a batch, end to end with the real delayqd:
 * a long batch never outruns its leases; a worker's death (a crashing or
 * hanging handler, kill -9) costs only the job it was running, with the
 * rest of its batch settled at once; a handler's programs die with their
 * worker; and the reaper and the workers agree on a job's attempts.
 */
#include <check.h>
#include <errno.h>
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

/* Enqueue jobs `prefix`00.. `prefix`NN, all due at one instant `in_ms`
 * from now, so that one claim takes them in id order (equal scores sort
 * by member); payloads[i] is job i's. */
static void enqueue_batch(const char *prefix, const char *const *payloads, int n,
                          int64_t in_ms, int max_attempts)
{
    int64_t now;
    ck_assert_int_eq(dq_server_time(H.c, &now), DQ_OK);
    dq_enqueue_req reqs[64];
    char ids[64][32];
    ck_assert(n <= 64);
    for (int i = 0; i < n; i++) {
        snprintf(ids[i], sizeof ids[i], "%s%02d", prefix, i);
        reqs[i] = (dq_enqueue_req){ .queue = H_QUEUE, .type = "t", .id = ids[i],
                                    .payload = payloads[i], .payload_len = strlen(payloads[i]),
                                    .at_ms = now + in_ms, .max_attempts = max_attempts };
    }
    ck_assert_int_eq(dq_enqueue_many(H.c, reqs, (size_t)n, NULL, NULL), DQ_OK);
}

/* Starts ("start" lines) of `id` in the record file, and the first. */
static int starts_of(const char *id, struct h_run *first)
{
    struct h_run *r;
    size_t n = h_records(&H, &r);
    int k = h_count(r, n, id, 0, first);
    free(r);
    return k;
}

static int ends_of(const char *id)
{
    struct h_run *r;
    size_t n = h_records(&H, &r);
    int k = h_count(r, n, id, 1, NULL);
    free(r);
    return k;
}

static void dead_with(const char *id, const char *error)
{
    ck_assert_msg(h_wait_state(&H, id, DQ_STATE_DEAD, 5000), "%s is not dead; log:\n%s", id,
                  h_log_tail(&H));
    dq_job_info info;
    ck_assert_int_eq(h_state(&H, id, &info), DQ_STATE_DEAD);
    ck_assert_msg(strstr(info.job.last_error, error), "%s died of '%s', not '%s'", id,
                  info.job.last_error, error);
    dq_job_info_free(&info);
}

static void start_conf(int workers, int batch, const char *lease, const char *timeout,
                       int max_attempts)
{
    struct h_conf hc;
    char handler[1024];
    h_conf_defaults(&hc);
    hc.workers = workers;
    hc.batch = batch;
    hc.lease = lease;
    hc.max_attempts = max_attempts;
    hc.handlers = h_handler(&H, handler, sizeof handler, "*", timeout, 0);
    h_write_conf(&H, &hc);
    h_start(&H, workers);
}

/* ---- a long batch and its leases ------------------------------------------ */

/* Four jobs of 0.7 s in one batch under a 2 s lease, one attempt each:
 * the batch takes 2.8 s.  Each runs once and succeeds; none is reaped as
 * "lease expired" while the batch runs, no ack is refused. */
START_TEST(long_batch_outlasts_its_lease)
{
    start_conf(1, 4, "2s", "900ms", 1);
    const char *p[4] = { "sleep:700", "sleep:700", "sleep:700", "sleep:700" };
    enqueue_batch("L", p, 4, 300, 0);
    ck_assert_msg(h_wait_idle(&H, 10000), "not done; log:\n%s", h_log_tail(&H));
    for (int i = 0; i < 4; i++) {
        char id[8];
        snprintf(id, sizeof id, "L%02d", i);
        ck_assert_msg(starts_of(id, NULL) == 1 && ends_of(id) == 1, "%s ran %d times", id,
                      starts_of(id, NULL));
        ck_assert_int_eq(h_state(&H, id, NULL), -1);    /* acked: gone */
    }
    ck_assert_int_eq(h_log_count(&H, "expired lease"), 0);
    ck_assert_int_eq(h_log_count(&H, "ack refused"), 0);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

/* ---- a death in the middle of a batch ------------------------------------ */

/* A batch of 16 whose 9th job (`bad`) kills its worker `death_ms` after
 * it starts (its timeout, or 0): the 8 before it, finished, are not run
 * again; the 7 after it run once, at attempt 1 (no attempt counted),
 * within a second of the death (the lease is 30 s: only the settler's
 * give-back is that quick); the bad job is dead with `error`. */
static void death_in_batch(const char *bad, const char *timeout, const char *error,
                           int death_ms)
{
    start_conf(1, 16, "30s", timeout, 1);
    const char *p[16];
    for (int i = 0; i < 16; i++)
        p[i] = i == 8 ? bad : "ok";
    enqueue_batch("B", p, 16, 300, 0);
    ck_assert_msg(h_wait_idle(&H, 10000), "not done; log:\n%s", h_log_tail(&H));
    dead_with("B08", error);
    struct h_run bad_start, next;
    ck_assert_int_eq(starts_of("B08", &bad_start), 1);
    for (int i = 0; i < 16; i++) {
        char id[8];
        snprintf(id, sizeof id, "B%02d", i);
        if (i == 8)
            continue;
        ck_assert_msg(starts_of(id, &next) == 1, "%s started %d times", id, starts_of(id, NULL));
        ck_assert_int_eq(ends_of(id), 1);
        ck_assert_int_eq(next.attempt, 1);
        ck_assert_int_eq(h_state(&H, id, NULL), -1);
        if (i > 8)
            ck_assert_msg(next.ms - bad_start.ms < death_ms + 1000,
                          "%s started %lld ms after %s did (its death: %d ms after)", id,
                          (long long)(next.ms - bad_start.ms), "B08", death_ms);
    }
    ck_assert_int_eq(h_log_count(&H, "expired lease"), 0);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}

START_TEST(crash_in_batch_costs_only_its_job)
{
    death_in_batch("segv", "1s", "worker died: signal 11", 0);
}
END_TEST

START_TEST(timeout_in_batch_costs_only_its_job)
{
    death_in_batch("hang", "500ms", "timeout after 500 ms", 500);
}
END_TEST

/* ---- a settler that dies before it settles ----------------------------------- */

/* The pid of the settler that logged last that it started. */
static pid_t settler_pid(void)
{
    ck_assert_msg(h_wait_log(&H, "settles the jobs of configuration", 1, 5000) >= 1,
                  "no settler; log:\n%s", h_log_tail(&H));
    pid_t pid = h_log_pid(&H, "settle", "settles the jobs of configuration");
    ck_assert_int_gt(pid, 0);
    return pid;
}

/* A worker dies mid-batch while its settler is stopped (SIGSTOP), and the
 * settler is then killed before it could settle anything: the death stays
 * posted in shared memory, and the settler started in its place settles
 * it.  The running job is dead with the death's cause; the 7 others run
 * once, at attempt 1, within a second of the new settler's start, long
 * before their lease (30 s) could return them. */
START_TEST(a_dead_settler_s_work_is_done_by_the_next)
{
    start_conf(1, 8, "30s", "10s", 1);
    pid_t settler = settler_pid();
    const char *p[8] = { "hang", "ok", "ok", "ok", "ok", "ok", "ok", "ok" };
    enqueue_batch("K", p, 8, 300, 0);
    ck_assert_msg(h_wait_record(&H, "K00", 0, 1, 10000) == 1, "log:\n%s", h_log_tail(&H));
    struct h_run first;
    ck_assert_int_eq(starts_of("K00", &first), 1);
    ck_assert_int_eq(kill(settler, SIGSTOP), 0);
    ck_assert_int_eq(kill(first.pid, SIGKILL), 0);
    tu_sleep_ms(500);
    ck_assert_msg(starts_of("K01", NULL) == 0, "K01 ran with the settler stopped");
    ck_assert_int_eq(h_log_count(&H, "settled the"), 0);
    ck_assert_int_eq(kill(settler, SIGKILL), 0);
    int64_t killed = tu_now_ms();
    ck_assert_msg(h_wait_idle(&H, 10000), "not done; log:\n%s", h_log_tail(&H));
    dead_with("K00", "worker died: signal 9");
    for (int i = 1; i < 8; i++) {
        char id[8];
        struct h_run run;
        snprintf(id, sizeof id, "K%02d", i);
        ck_assert_msg(starts_of(id, &run) == 1, "%s started %d times", id, starts_of(id, NULL));
        ck_assert_int_eq(run.attempt, 1);
        ck_assert_msg(run.ms - killed < 1500, "%s started %lld ms after the settler's death",
                      id, (long long)(run.ms - killed));
    }
    /* The settler says so once Redis confirmed every action: the jobs it
     * gave back may have run before that line is written. */
    ck_assert_msg(h_wait_log(&H, "settled the", 1, 5000) >= 1, "no settlement logged; log:\n%s",
                  h_log_tail(&H));
    ck_assert_int_eq(h_log_count(&H, "settled the"), 1);
    ck_assert_int_eq(h_log_count(&H, "expired lease"), 0);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

/* ---- a handler's programs die with their worker ----------------------------- */

static int gone(pid_t pid)
{
    return !tu_process_running(pid);
}

static pid_t parent_of(pid_t pid)
{
    struct tu_proc_stat ps;
    return tu_proc_stat(pid, &ps) == 0 ? ps.ppid : 0;
}

/* The exec handler runs a shell that starts a background sleep; kill -9
 * the worker: the shell (the exec handler's child, in its own process
 * group) and its own child are both stopped within a second, and the job
 * is failed with the cause. */
START_TEST(exec_programs_die_with_their_worker)
{
    char shpid[PATH_MAX], bgpid[PATH_MAX], handlers[3 * PATH_MAX];
    h_exec_sleeper(&H, handlers, sizeof handlers, "20s", shpid, bgpid);
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.workers = 1;
    hc.lease = "30s";
    hc.max_attempts = 1;
    hc.handlers = handlers;
    h_write_conf(&H, &hc);
    h_start(&H, 1);
    h_enqueue(&H, "x1", "t", "", 0, 0);
    pid_t sh = tu_read_pid(shpid, 5000), bg = tu_read_pid(bgpid, 5000);
    ck_assert_msg(sh > 0 && bg > 0, "the program did not start; log:\n%s", h_log_tail(&H));
    pid_t worker = parent_of(sh);
    ck_assert_msg(worker > 0 && worker != H.pid, "the program's parent is %d", (int)worker);
    ck_assert_int_eq(kill(worker, SIGKILL), 0);
    int64_t end = tu_mono_ms() + 1000;
    while ((!gone(sh) || !gone(bg)) && tu_mono_ms() < end)
        tu_sleep_ms(10);
    ck_assert_msg(gone(sh), "the exec handler's program outlived its worker");
    ck_assert_msg(gone(bg), "the program's own child outlived its worker");
    dead_with("x1", "worker died: signal 9");
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

/* ---- one rule for max attempts ----------------------------------------------- */

/* Claim `id` by hand and let its lease expire until it is dead; returns the
 * number of claims it took. */
static int claims_until_dead(const char *id)
{
    int claims = 0;
    for (int64_t end = tu_mono_ms() + 20000; tu_mono_ms() < end;) {
        int st = h_state(&H, id, NULL);
        if (st == DQ_STATE_DEAD)
            return claims;
        dq_claim_result res;
        if (dq_claim(H.c, H_QUEUE, 1, 100, &res) == DQ_OK) {
            claims += (int)res.n;
            dq_claim_result_free(&res);
        }
        tu_sleep_ms(50);
    }
    return -1;
}

/* Queue max_attempts 3; "*" entry max_attempts 4; an entry for "typed"
 * that sets none.  A "typed" job gets the queue's 3 whether its attempts
 * end in a worker (a handler that retries) or in the reaper (leases that
 * expire); an "other" job gets the "*" entry's 4 from the reaper. */
START_TEST(worker_and_reaper_agree_on_attempts)
{
    char star[1024], typed[1024], both[2100];
    h_handler(&H, star, sizeof star, "*", "1s", 4);
    h_handler(&H, typed, sizeof typed, "typed", "1s", 0);
    snprintf(both, sizeof both, "%s,\n%s", star, typed);
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.workers = 0;             /* the reaper alone: the test claims */
    hc.max_attempts = 3;
    hc.handlers = both;
    h_write_conf(&H, &hc);
    h_start(&H, 0);
    h_enqueue(&H, "r-typed", "typed", "ok", 0, 0);
    ck_assert_int_eq(claims_until_dead("r-typed"), 3);
    h_enqueue(&H, "r-other", "other", "ok", 0, 0);
    ck_assert_int_eq(claims_until_dead("r-other"), 4);
    ck_assert_int_eq(h_stop(&H, 10000), 0);

    hc.workers = 1;             /* now a worker, whose handler retries */
    h_write_conf(&H, &hc);
    h_start(&H, 1);
    h_enqueue(&H, "w-typed", "typed", "retry", 0, 0);
    ck_assert_msg(h_wait_state(&H, "w-typed", DQ_STATE_DEAD, 10000), "log:\n%s",
                  h_log_tail(&H));
    ck_assert_int_eq(starts_of("w-typed", NULL), 3);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("guarantee");
    TCase *tc = fixture_tcase(s, "batch", 40, NULL, NULL, setup, teardown);
    tcase_add_test(tc, long_batch_outlasts_its_lease);
    tcase_add_test(tc, crash_in_batch_costs_only_its_job);
    tcase_add_test(tc, timeout_in_batch_costs_only_its_job);
    tcase_add_test(tc, a_dead_settler_s_work_is_done_by_the_next);
    tcase_add_test(tc, exec_programs_die_with_their_worker);
    tcase_add_test(tc, worker_and_reaper_agree_on_attempts);
    return fixture_run_suite(s);
}
