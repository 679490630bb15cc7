/*
 * Expiry: a job that has not started by its expiry is not run.  First
 * through libdelayq against a real redis-server (claims never hand out an
 * expired job, the reaper ends them, a retry after the expiry is not run,
 * an entry left by a finished job touches no later job of that id), then
 * end to end with the real delayqd: a paused queue's expired jobs are
 * ended by the reaper while no worker claims, and none runs on resume.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Enqueue `id` due in `delay_ms`, expiring `ttl_ms` after its due time. */
static void enq_ttl(const char *id, int64_t delay_ms, int64_t ttl_ms, int on_expire)
{
    dq_enqueue_req req = { .queue = H_QUEUE, .type = "t", .id = id, .delay_ms = delay_ms,
                           .ttl_ms = ttl_ms, .on_expire = on_expire };
    ck_assert_int_eq(dq_enqueue(H.c, &req, NULL), DQ_OK);
}

static dq_stats stats(void)
{
    dq_stats st;
    ck_assert_int_eq(dq_stats_get(H.c, H_QUEUE, &st), DQ_OK);
    return st;
}

/* The job's state and last error ("" when gone: state -1). */
static int state_of(const char *id, char *err, size_t errlen)
{
    dq_job_info info;
    int s = h_state(&H, id, &info);
    if (err)
        snprintf(err, errlen, "%s", s >= 0 ? info.job.last_error : "");
    if (s >= 0)
        dq_job_info_free(&info);
    return s;
}

/* Claim everything due; the ids handed out, joined with spaces. */
static void claim_all(char *ids, size_t len)
{
    dq_claim_result res;
    ids[0] = '\0';
    ck_assert_int_eq(dq_claim(H.c, H_QUEUE, 100, 30000, &res), DQ_OK);
    for (size_t i = 0; i < res.n; i++) {
        strncat(ids, res.jobs[i].id, len - strlen(ids) - 2);
        strcat(ids, " ");
    }
    dq_claim_result_free(&res);
}

/* ---- libdelayq and the scripts -------------------------------------------- */

/* Three jobs expire while due and waiting; the claim hands out only the
 * two without an expiry.  The expired ones are dead with the error
 * "expired" (attempts unchanged), or gone with on_expire drop, and the
 * queue's counter says three. */
START_TEST(a_claim_never_hands_out_an_expired_job)
{
    enq_ttl("x1", 0, 150, DQ_EXPIRE_DEAD);
    enq_ttl("x2", 0, 150, DQ_EXPIRE_DEAD);
    enq_ttl("x3", 0, 150, DQ_EXPIRE_DROP);
    h_enqueue(&H, "p1", "t", "", 0, 0);
    h_enqueue(&H, "p2", "t", "", 0, 0);
    dq_job_info info;
    ck_assert_int_eq(h_state(&H, "x1", &info), DQ_STATE_DELAYED);
    ck_assert_int_eq(info.expire_at_ms, info.job.due_ms + 150);
    ck_assert_int_eq(info.on_expire, DQ_EXPIRE_DEAD);
    dq_job_info_free(&info);
    tu_sleep_ms(300);

    char ids[256], err[64];
    claim_all(ids, sizeof ids);
    ck_assert_str_eq(ids, "p1 p2 ");
    ck_assert_int_eq(state_of("x1", err, sizeof err), DQ_STATE_DEAD);
    ck_assert_str_eq(err, "expired");
    ck_assert_int_eq(h_state(&H, "x2", &info), DQ_STATE_DEAD);
    ck_assert_int_eq(info.job.attempt, 0);
    ck_assert_int_eq(info.expire_at_ms, 0);     /* a dead job expires no more */
    dq_job_info_free(&info);
    ck_assert_int_eq(state_of("x3", NULL, 0), -1);
    ck_assert_int_eq(stats().jobs_expired, 3);
}
END_TEST

/* A job started before its expiry runs; if that attempt fails, the retry,
 * due after the expiry, is not run: it is dead "expired". */
START_TEST(a_retry_after_the_expiry_is_not_run)
{
    enq_ttl("r", 0, 1000, DQ_EXPIRE_DEAD);
    dq_claim_result res;
    ck_assert_int_eq(dq_claim(H.c, H_QUEUE, 10, 30000, &res), DQ_OK);
    ck_assert_int_eq(res.n, 1);
    tu_sleep_ms(1200);                          /* expires while it runs */
    char ids[256], err[64];
    claim_all(ids, sizeof ids);
    ck_assert_str_eq(ids, "");
    ck_assert_int_eq(state_of("r", NULL, 0), DQ_STATE_PROCESSING);
    dq_fail_result fr;
    ck_assert_int_eq(dq_fail(H.c, H_QUEUE, "r", res.jobs[0].fence, "boom", DQ_FAIL_RETRY, 0,
                             NULL, &fr), DQ_OK);
    ck_assert(!fr.dead);
    dq_claim_result_free(&res);
    claim_all(ids, sizeof ids);
    ck_assert_str_eq(ids, "");
    ck_assert_int_eq(state_of("r", err, sizeof err), DQ_STATE_DEAD);
    ck_assert_str_eq(err, "expired");
}
END_TEST

/* A job requeued from the dead set has no expiry left: it runs. */
START_TEST(a_requeued_job_has_no_expiry)
{
    enq_ttl("q", 0, 300, DQ_EXPIRE_DEAD);
    dq_claim_result res;
    ck_assert_int_eq(dq_claim(H.c, H_QUEUE, 10, 30000, &res), DQ_OK);
    ck_assert_int_eq(res.n, 1);
    dq_fail_result fr;
    ck_assert_int_eq(dq_fail(H.c, H_QUEUE, "q", res.jobs[0].fence, "no", DQ_FAIL_DEAD, 0, NULL,
                             &fr), DQ_OK);
    dq_claim_result_free(&res);
    ck_assert_int_eq(dq_requeue(H.c, H_QUEUE, "q"), DQ_OK);
    dq_job_info info;
    ck_assert_int_eq(h_state(&H, "q", &info), DQ_STATE_DELAYED);
    ck_assert_int_eq(info.expire_at_ms, 0);
    dq_job_info_free(&info);
    tu_sleep_ms(400);
    char ids[256];
    claim_all(ids, sizeof ids);
    ck_assert_str_eq(ids, "q ");
}
END_TEST

/* The reaper ends expired jobs of a paused queue (no claim runs), at most
 * a batch a call, and says when the next expiry is due. */
START_TEST(the_reaper_expires_jobs_of_a_paused_queue)
{
    ck_assert_int_eq(dq_pause(H.c, H_QUEUE, NULL), DQ_OK);
    for (int i = 0; i < 5; i++) {
        char id[16];
        snprintf(id, sizeof id, "e%d", i);
        enq_ttl(id, 0, 100, DQ_EXPIRE_DEAD);
    }
    enq_ttl("later", 0, 60000, DQ_EXPIRE_DEAD);
    tu_sleep_ms(250);
    dq_reap_result rr;
    ck_assert_int_eq(dq_reap(H.c, H_QUEUE, 3, NULL, &rr), DQ_OK);
    ck_assert_int_eq(rr.expired, 3);
    ck_assert_int_eq(rr.next_in_ms, 0);         /* more have expired */
    ck_assert_int_eq(dq_reap(H.c, H_QUEUE, 3, NULL, &rr), DQ_OK);
    ck_assert_int_eq(rr.expired, 2);
    ck_assert_msg(rr.next_in_ms > 50000 && rr.next_in_ms <= 60000,
                  "next expiry in %lld ms", (long long)rr.next_in_ms);
    dq_stats st = stats();
    ck_assert_int_eq(st.dead, 5);
    ck_assert_int_eq(st.due, 1);
    ck_assert_int_eq(st.jobs_expired, 5);
}
END_TEST

/* An acked job leaves its entry behind; a new job of the same id, without
 * an expiry, is not ended by it.  A replacement without an expiry has
 * none; with one, the new one. */
START_TEST(an_expiry_belongs_to_its_job_only)
{
    enq_ttl("same", 0, 300, DQ_EXPIRE_DEAD);
    dq_claim_result res;
    ck_assert_int_eq(dq_claim(H.c, H_QUEUE, 10, 30000, &res), DQ_OK);
    ck_assert_int_eq(res.n, 1);
    ck_assert_int_eq(dq_ack(H.c, H_QUEUE, "same", res.jobs[0].fence), DQ_OK);
    dq_claim_result_free(&res);
    tu_sleep_ms(5);
    h_enqueue(&H, "same", "t", "", 1000, 0);    /* due after the old expiry */
    enq_ttl("repl", 0, 300, DQ_EXPIRE_DEAD);
    dq_enqueue_req req = { .queue = H_QUEUE, .type = "t", .id = "repl", .delay_ms = 1000,
                           .replace = true };
    ck_assert_int_eq(dq_enqueue(H.c, &req, NULL), DQ_OK);
    dq_job_info info;
    ck_assert_int_eq(h_state(&H, "repl", &info), DQ_STATE_DELAYED);
    ck_assert_int_eq(info.expire_at_ms, 0);
    dq_job_info_free(&info);
    tu_sleep_ms(1300);
    char ids[256];
    claim_all(ids, sizeof ids);
    ck_assert_msg(strcmp(ids, "same repl ") == 0 || strcmp(ids, "repl same ") == 0,
                  "claimed %s", ids);
    ck_assert_int_eq(stats().jobs_expired, 0);
}
END_TEST

/* dq_enqueue_many carries expiries too (by ms after the due time, or a
 * Unix time), next to jobs without one. */
START_TEST(enqueue_many_carries_expiries)
{
    int64_t now = tu_now_ms();
    dq_enqueue_req reqs[4] = {
        { .queue = H_QUEUE, .type = "t", .id = "m1", .ttl_ms = 1000 },
        { .queue = H_QUEUE, .type = "t", .id = "m2", .expire_at = now + 1000,
          .on_expire = DQ_EXPIRE_DROP },
        { .queue = H_QUEUE, .type = "t", .id = "m3" },
        { .queue = H_QUEUE, .type = "t" },
    };
    dq_enqueued out[4];
    dq_status st[4];
    ck_assert_int_eq(dq_enqueue_many(H.c, reqs, 4, out, st), DQ_OK);
    dq_job_info info;
    ck_assert_int_eq(h_state(&H, "m2", &info), DQ_STATE_DELAYED);
    ck_assert_int_eq(info.expire_at_ms, now + 1000);
    ck_assert_int_eq(info.on_expire, DQ_EXPIRE_DROP);
    dq_job_info_free(&info);
    tu_sleep_ms(now + 1100 - tu_now_ms());
    char ids[256], want[2][300];
    claim_all(ids, sizeof ids);
    /* Both are due at once: the set orders them by their ids' bytes. */
    snprintf(want[0], sizeof want[0], "m3 %s ", out[3].id);
    snprintf(want[1], sizeof want[1], "%s m3 ", out[3].id);
    ck_assert_msg(strcmp(ids, want[0]) == 0 || strcmp(ids, want[1]) == 0, "claimed %s", ids);
    ck_assert_int_eq(state_of("m1", NULL, 0), DQ_STATE_DEAD);
    ck_assert_int_eq(state_of("m2", NULL, 0), -1);
}
END_TEST

/* More expired jobs than a claim takes (1000 a call): claims end them a
 * thousand at a time and hand out none of them; the job without an
 * expiry comes out once they are gone. */
START_TEST(a_backlog_of_expired_jobs_is_never_handed_out)
{
    enum { N = 2500 };
    static dq_enqueue_req reqs[N];
    static dq_enqueued out[N];
    static dq_status st[N];
    for (int i = 0; i < N; i++)
        reqs[i] = (dq_enqueue_req){ .queue = H_QUEUE, .type = "t", .ttl_ms = 100 };
    ck_assert_int_eq(dq_enqueue_many(H.c, reqs, N, out, st), DQ_OK);
    h_enqueue(&H, "plain", "t", "", 0, 0);
    tu_sleep_ms(250);
    char ids[256];
    int calls = 0;
    do {
        claim_all(ids, sizeof ids);
        calls++;
    } while (ids[0] == '\0' && calls < 10);
    ck_assert_str_eq(ids, "plain ");
    ck_assert_int_eq(calls, 3);                 /* 1000, 1000, then 500 and plain */
    dq_stats s = stats();
    ck_assert_int_eq(s.dead, N);
    ck_assert_int_eq(s.jobs_expired, N);
}
END_TEST

/* Bad expiries are refused before anything is written, each with what is
 * wrong. */
START_TEST(bad_expiries_are_refused)
{
    int64_t now = tu_now_ms();
    dq_enqueue_req req = { .queue = H_QUEUE, .type = "t", .id = "b", .at_ms = now + 5000,
                           .expire_at = now + 4000 };
    ck_assert_int_eq(dq_enqueue(H.c, &req, NULL), DQ_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(H.c), "not after the due time"));
    req = (dq_enqueue_req){ .queue = H_QUEUE, .type = "t", .id = "b", .delay_ms = 5000,
                            .expire_at = now + 1000 };
    ck_assert_int_eq(dq_enqueue(H.c, &req, NULL), DQ_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(H.c), "after the due time"));
    req = (dq_enqueue_req){ .queue = H_QUEUE, .type = "t", .id = "b", .ttl_ms = 10,
                            .on_expire = 7 };
    ck_assert_int_eq(dq_enqueue(H.c, &req, NULL), DQ_ERR_INVALID);
    req = (dq_enqueue_req){ .queue = H_QUEUE, .type = "t", .id = "b", .ttl_ms = -1 };
    ck_assert_int_eq(dq_enqueue(H.c, &req, NULL), DQ_ERR_INVALID);
    ck_assert_int_eq(state_of("b", NULL, 0), -1);
    ck_assert_int_eq(stats().delayed + stats().due, 0);
}
END_TEST

/* The command line: --ttl and --expire-at, shown by show (and --json);
 * usage errors exit 2 and name the option. */
START_TEST(the_command_line_adds_and_shows_expiries)
{
    struct run_result *r = CLI("add", "-q", H_QUEUE, "-t", "t", "--id", "c1", "-d", "1m",
                                   "--ttl", "30s", "--on-expire", "drop");
    ck_assert_int_eq(r->status, 0);
    r = CLI("show", "-q", H_QUEUE, "c1");
    ck_assert_int_eq(r->status, 0);
    ck_assert_ptr_nonnull(strstr(r->out, "expires: "));
    ck_assert_ptr_nonnull(strstr(r->out, "on expiry: drop"));
    r = CLI("show", "-q", H_QUEUE, "c1", "--json");
    ck_assert_ptr_nonnull(strstr(r->out, "\"on_expire\":\"drop\""));
    dq_job_info info;
    ck_assert_int_eq(h_state(&H, "c1", &info), DQ_STATE_DELAYED);
    ck_assert_int_eq(info.expire_at_ms - info.job.due_ms, 30000);
    dq_job_info_free(&info);

    static const struct { const char *a1, *a2, *a3, *a4, *phrase; } bad[] = {
        { "--ttl", "1s", "--expire-at", "2099-01-01T00:00:00Z", "not both" },
        { "--ttl", "0", NULL, NULL, "bad --ttl '0'" },
        { "--expire-at", "1", NULL, NULL, "in the past" },
        { "--on-expire", "drop", NULL, NULL, "needs --expire-at or --ttl" },
        { "--ttl", "1s", "--on-expire", "later", "bad --on-expire 'later'" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = CLI("add", "-q", H_QUEUE, "-t", "t", "--id", "c2", bad[i].a1, bad[i].a2,
                    bad[i].a3, bad[i].a4);
        ck_assert_msg(r->status == 2 && strstr(r->err, bad[i].phrase),
                      "case %zu: exit %d, %s", i, r->status, r->err);
    }
    ck_assert_int_eq(state_of("c2", NULL, 0), -1);
}
END_TEST

/* ---- the daemon ----------------------------------------------------------- */

static int all_expired(void *arg)
{
    return stats().jobs_expired >= *(int64_t *)arg;
}

/* A paused queue: 100 jobs pass their expiry (and 20 more dropped), the
 * reaper ends them while no worker claims; on resume none of them runs,
 * and a job without an expiry does. */
START_TEST(a_paused_queues_expired_jobs_never_run)
{
    struct h_conf hc;
    h_conf_defaults(&hc);
    h_write_conf(&H, &hc);
    h_start(&H, 2);
    ck_assert_int_eq(dq_pause(H.c, H_QUEUE, NULL), DQ_OK);
    for (int i = 0; i < 120; i++) {
        char id[16];
        snprintf(id, sizeof id, "%s%d", i < 100 ? "dead" : "drop", i);
        enq_ttl(id, 0, 300, i < 100 ? DQ_EXPIRE_DEAD : DQ_EXPIRE_DROP);
    }
    int64_t want = 120;
    ck_assert_msg(h_wait(10000, all_expired, &want), "the reaper did not expire them; "
                  "log:\n%s", h_log_tail(&H));
    dq_stats st = stats();
    ck_assert_int_eq(st.dead, 100);
    ck_assert_int_eq(st.due + st.delayed, 0);
    ck_assert_int_eq(h_wait_log(&H, "reached", 1, 1000) >= 1, 1);
    ck_assert_int_eq(dq_resume(H.c, H_QUEUE, NULL), DQ_OK);
    h_enqueue(&H, "plain", "t", "", 0, 0);
    ck_assert_int_eq(h_wait_record(&H, "plain", 1, 1, 10000), 1);
    struct h_run *r;
    size_t n = h_records(&H, &r);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(strcmp(r[i].id, "plain") == 0, "expired job %s ran", r[i].id);
    free(r);
    char err[64];
    ck_assert_int_eq(state_of("dead7", err, sizeof err), DQ_STATE_DEAD);
    ck_assert_str_eq(err, "expired");
    ck_assert_int_eq(state_of("drop107", NULL, 0), -1);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("expiry");
    TCase *tc = fixture_tcase(s, "scripts", 60, NULL, NULL, setup, teardown);
    tcase_add_test(tc, a_claim_never_hands_out_an_expired_job);
    tcase_add_test(tc, a_retry_after_the_expiry_is_not_run);
    tcase_add_test(tc, a_requeued_job_has_no_expiry);
    tcase_add_test(tc, the_reaper_expires_jobs_of_a_paused_queue);
    tcase_add_test(tc, an_expiry_belongs_to_its_job_only);
    tcase_add_test(tc, enqueue_many_carries_expiries);
    tcase_add_test(tc, a_backlog_of_expired_jobs_is_never_handed_out);
    tcase_add_test(tc, bad_expiries_are_refused);
    tcase_add_test(tc, the_command_line_adds_and_shows_expiries);
    TCase *td = fixture_tcase(s, "daemon", 60, NULL, NULL, setup, teardown);
    tcase_add_test(td, a_paused_queues_expired_jobs_never_run);
    return fixture_run_suite(s);
}
