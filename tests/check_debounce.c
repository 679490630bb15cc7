/*
 * Debounce: adds of one id while its job waits merge into it (the latest
 * payload, due debounce after the last add, never later than max-wait
 * after the first); an add while it runs becomes its next run.  First
 * through libdelayq against a real redis-server, then end to end with the
 * real delayqd: 20 adds in 2 s make exactly 2 runs, each with the payload
 * latest at its time, and an add during a run makes one more run after it.
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

/* A debounced add of `id` with `payload`. */
static dq_enqueued debounce(const char *id, const char *payload, int64_t debounce_ms,
                            int64_t max_wait_ms)
{
    dq_enqueue_req req = { .queue = H_QUEUE, .type = "t", .id = id, .payload = payload,
                           .payload_len = strlen(payload), .debounce_ms = debounce_ms,
                           .max_wait_ms = max_wait_ms };
    dq_enqueued out;
    ck_assert_msg(dq_enqueue(H.c, &req, &out) == DQ_OK, "%s", dq_errmsg(H.c));
    return out;
}

static dq_job_info show(const char *id)
{
    dq_job_info info;
    ck_assert_int_eq(dq_show(H.c, H_QUEUE, id, &info), DQ_OK);
    return info;
}

/* Claim everything due (expecting `n` jobs) with a lease of 30 s. */
static void claim(dq_claim_result *res, size_t n)
{
    ck_assert_int_eq(dq_claim(H.c, H_QUEUE, 10, 30000, res), DQ_OK);
    ck_assert_int_eq(res->n, n);
}

/* ---- libdelayq and the scripts -------------------------------------------- */

/* The first add makes the job; the next ones take its place while it
 * waits: latest payload, due debounce after the last add but never later
 * than max-wait after the first (created_ms is the first add). */
START_TEST(adds_to_a_waiting_job_merge_into_it)
{
    dq_enqueued e = debounce("d", "one", 400, 1000);
    ck_assert(!e.debounced && !e.next_run);
    dq_job_info a = show("d");
    ck_assert_int_eq(a.job.due_ms, a.job.created_ms + 400);
    tu_sleep_ms(300);
    e = debounce("d", "two", 400, 1000);
    ck_assert(e.debounced);
    dq_job_info b = show("d");
    ck_assert_str_eq(b.job.payload, "two");
    ck_assert_int_eq(b.job.created_ms, a.job.created_ms);
    ck_assert_int_gt(b.job.due_ms, a.job.due_ms);     /* moved on */
    ck_assert_int_eq(b.job.due_ms, e.due_ms);
    tu_sleep_ms(300);
    e = debounce("d", "three", 400, 1000);
    dq_job_info c = show("d");
    ck_assert_str_eq(c.job.payload, "three");
    ck_assert_int_eq(c.job.due_ms, a.job.created_ms + 1000);   /* the max wait */
    dq_job_info_free(&a);
    dq_job_info_free(&b);
    dq_job_info_free(&c);
    dq_stats st;
    ck_assert_int_eq(dq_stats_get(H.c, H_QUEUE, &st), DQ_OK);
    ck_assert_int_eq(st.delayed + st.due, 1);
}
END_TEST

/* An add while the job runs is its next run: it does not touch the
 * running job, and takes the id once that job is acked, with the latest
 * of the adds made meanwhile. */
START_TEST(an_add_while_it_runs_is_its_next_run)
{
    debounce("r", "first", 1, 0);
    tu_sleep_ms(20);
    dq_claim_result res;
    claim(&res, 1);
    dq_enqueued e = debounce("r", "second", 100, 0);
    ck_assert(e.next_run);
    e = debounce("r", "third", 100, 0);
    ck_assert(e.next_run);
    dq_job_info info = show("r");
    ck_assert_int_eq(info.state, DQ_STATE_PROCESSING);
    ck_assert_str_eq(info.job.payload, "first");
    dq_job_info_free(&info);
    ck_assert_int_eq(dq_ack(H.c, H_QUEUE, "r", res.jobs[0].fence), DQ_OK);
    dq_claim_result_free(&res);
    info = show("r");
    ck_assert_int_eq(info.state, DQ_STATE_DELAYED);
    ck_assert_str_eq(info.job.payload, "third");
    ck_assert_int_eq(info.job.attempt, 0);
    dq_job_info_free(&info);
    tu_sleep_ms(150);
    claim(&res, 1);
    ck_assert_str_eq(res.jobs[0].payload, "third");
    ck_assert_int_eq(dq_ack(H.c, H_QUEUE, "r", res.jobs[0].fence), DQ_OK);
    dq_claim_result_free(&res);
    ck_assert_int_eq(dq_show(H.c, H_QUEUE, "r", &info), DQ_ERR_NOTFOUND);
}
END_TEST

/* The attempt may end otherwise: a retry, a death, an expired lease each
 * give way to the next run (the newer payload runs instead). */
START_TEST(a_failed_attempt_gives_way_to_the_next_run)
{
    static const dq_fail_mode modes[] = { DQ_FAIL_RETRY, DQ_FAIL_DEAD };
    for (int m = 0; m < 2; m++) {
        char id[8];
        snprintf(id, sizeof id, "f%d", m);
        debounce(id, "old", 1, 0);
        tu_sleep_ms(20);
        dq_claim_result res;
        claim(&res, 1);
        debounce(id, "new", 1, 0);
        dq_fail_result fr;
        ck_assert_int_eq(dq_fail(H.c, H_QUEUE, id, res.jobs[0].fence, "no", modes[m], 0,
                                 NULL, &fr), DQ_OK);
        ck_assert(!fr.dead);                    /* it runs again, as its next run */
        dq_claim_result_free(&res);
        dq_job_info info = show(id);
        ck_assert_int_eq(info.state, DQ_STATE_DELAYED);
        ck_assert_str_eq(info.job.payload, "new");
        ck_assert_int_eq(info.job.attempt, 0);
        ck_assert_str_eq(info.job.last_error, "");
        dq_job_info_free(&info);
        ck_assert_int_eq(dq_cancel(H.c, H_QUEUE, id), DQ_OK);
    }
    /* A lease that expires: the reaper's way. */
    debounce("l", "old", 1, 0);
    tu_sleep_ms(20);
    dq_claim_result res;
    ck_assert_int_eq(dq_claim(H.c, H_QUEUE, 10, 50, &res), DQ_OK);
    ck_assert_int_eq(res.n, 1);
    dq_claim_result_free(&res);
    debounce("l", "new", 1, 0);
    tu_sleep_ms(100);
    /* The old run may still be under way: the next run waits as its retry
     * would have (the backoff, 10 s here), not at once. */
    dq_retry_policy pol;
    dq_retry_policy_init(&pol);
    pol.base_ms = 10000;
    pol.jitter = 0;
    dq_reap_result rr;
    int64_t reaped = tu_now_ms();
    ck_assert_int_eq(dq_reap(H.c, H_QUEUE, 10, &pol, &rr), DQ_OK);
    dq_job_info info = show("l");
    ck_assert_str_eq(info.job.payload, "new");
    ck_assert_int_eq(info.state, DQ_STATE_DELAYED);
    ck_assert_int_ge(info.job.due_ms, reaped + 9000);
    dq_job_info_free(&info);
    dq_stats st;
    ck_assert_int_eq(dq_stats_get(H.c, H_QUEUE, &st), DQ_OK);
    ck_assert_int_eq(st.dead + st.processing, 0);
}
END_TEST

/* A job given back (release) gives way to its next run, which waits in
 * its place; a later add merges into that one. */
START_TEST(a_given_back_job_takes_the_latest_add)
{
    debounce("g", "first", 1, 0);
    tu_sleep_ms(20);
    dq_claim_result res;
    claim(&res, 1);
    debounce("g", "kept-while-running", 1, 0);
    ck_assert_int_eq(dq_release(H.c, H_QUEUE, res.jobs, res.n, NULL), DQ_OK);
    dq_claim_result_free(&res);
    dq_job_info info = show("g");
    ck_assert_int_eq(info.state, DQ_STATE_DELAYED);
    ck_assert_str_eq(info.job.payload, "kept-while-running");
    dq_job_info_free(&info);
    ck_assert_int_eq(fixture_redis_int(&H.fx, "EXISTS dq:{" H_QUEUE "}:next"), 0);
    dq_enqueued e = debounce("g", "latest", 1, 0);
    ck_assert(e.debounced);
    tu_sleep_ms(20);
    claim(&res, 1);
    ck_assert_str_eq(res.jobs[0].payload, "latest");
    ck_assert_int_eq(dq_ack(H.c, H_QUEUE, "g", res.jobs[0].fence), DQ_OK);
    dq_claim_result_free(&res);
    ck_assert_int_eq(dq_show(H.c, H_QUEUE, "g", &(dq_job_info){ 0 }), DQ_ERR_NOTFOUND);
}
END_TEST

/* A debounce needs an id and goes alone; bulk adds refuse it. */
START_TEST(bad_debounces_are_refused)
{
    dq_enqueue_req req = { .queue = H_QUEUE, .type = "t", .debounce_ms = 100 };
    ck_assert_int_eq(dq_enqueue(H.c, &req, NULL), DQ_ERR_INVALID);
    req.id = "b";
    req.delay_ms = 5;
    ck_assert_int_eq(dq_enqueue(H.c, &req, NULL), DQ_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(H.c), "goes alone"));
    req = (dq_enqueue_req){ .queue = H_QUEUE, .type = "t", .id = "b", .max_wait_ms = 9 };
    ck_assert_int_eq(dq_enqueue(H.c, &req, NULL), DQ_ERR_INVALID);
    req = (dq_enqueue_req){ .queue = H_QUEUE, .type = "t", .id = "b", .debounce_ms = 100 };
    dq_status st;
    ck_assert_int_eq(dq_enqueue_many(H.c, &req, 1, NULL, &st), DQ_ERR_INVALID);
    ck_assert_int_eq(dq_show(H.c, H_QUEUE, "b", &(dq_job_info){ 0 }), DQ_ERR_NOTFOUND);
    assert_fails(CLI("add", "-q", H_QUEUE, "-t", "t", "--debounce", "1s"), 2,
                 "--debounce needs --id");
    assert_fails(CLI("add", "-q", H_QUEUE, "-t", "t", "--id", "b", "--debounce", "1s", "-d",
                     "5s"), 2, "--debounce goes without -d");
    assert_fails(CLI("add", "-q", H_QUEUE, "-t", "t", "--id", "b", "--max-wait", "1s"), 2,
                 "--max-wait needs --debounce");
}
END_TEST

/* ---- the daemon ----------------------------------------------------------- */

/* The say: TEXT of each run of `id`, in order, with its start time. */
static int runs_with_times(const char *id, char said[][64], int64_t *at, int max)
{
    struct h_run *r;
    size_t n = h_records(&H, &r);
    int k = 0;
    for (size_t i = 0; i < n && k < max; i++)
        if (r[i].end == 0 && strcmp(r[i].id, id) == 0) {
            snprintf(said[k], sizeof said[k], "%s", r[i].said);
            at[k++] = r[i].ms;
        }
    free(r);
    return k;
}

/* 20 adds in 2 s, debounce 500 ms, max wait 1 s: exactly two runs, the
 * first at the max wait (about 1 s in), the second after the last add;
 * each ran the payload of the last add made before it started. */
START_TEST(twenty_adds_make_runs_at_the_max_wait_with_the_latest_payload)
{
    struct h_conf hc;
    h_conf_defaults(&hc);
    h_write_conf(&H, &hc);
    h_start(&H, 2);
    int64_t t0 = tu_mono_ms(), added[20];
    char payload[32];
    for (int i = 0; i < 20; i++) {
        while (tu_mono_ms() < t0 + 100 * i)
            tu_sleep_ms(5);
        snprintf(payload, sizeof payload, "say:10:p%d", i);
        debounce("deb", payload, 500, 1000);
        added[i] = tu_now_ms();
    }
    ck_assert_msg(h_wait_idle(&H, 10000), "not idle; log:\n%s", h_log_tail(&H));
    char said[8][64], runs[600] = "";
    int64_t at[8];
    int n = runs_with_times("deb", said, at, 8);
    for (int k = 0; k < n; k++)
        snprintf(runs + strlen(runs), sizeof runs - strlen(runs), "%s at +%lld ms; ", said[k],
                 (long long)(at[k] - (added[0] - 0)));
    printf("debounce: 20 adds in 2 s (500 ms, max wait 1 s) made %d runs: %s\n", n, runs);
    ck_assert_msg(n == 2, "%d runs: %s", n, runs);
    for (int k = 0; k < n; k++) {
        /* The latest add applied before the claim: the last one that had
         * returned when the run started, or the one before it (an add
         * may land between the claim and the handler's start, and then
         * is the next run), or the one after it (applied before the
         * claim, its reply still on its way). */
        int last = -1;
        for (int i = 0; i < 20; i++)
            if (added[i] <= at[k])
                last = i;
        char a[16], b[16], c[16];
        snprintf(a, sizeof a, "p%d", last);
        snprintf(b, sizeof b, "p%d", last - 1);
        snprintf(c, sizeof c, "p%d", last + 1);
        ck_assert_msg(strcmp(said[k], a) == 0 || strcmp(said[k], b) == 0
                      || strcmp(said[k], c) == 0,
                      "run %d said %s, the latest add then was %s (%s)", k, said[k], a, runs);
    }
    ck_assert_str_eq(said[1], "p19");

    /* An add while it runs: one more run, after it, with that payload. */
    debounce("long", "say:400:a", 1, 0);
    ck_assert_int_eq(h_wait_record(&H, "long", 0, 1, 5000), 1);
    dq_enqueued e = debounce("long", "say:10:b", 1, 0);
    ck_assert(e.next_run);
    ck_assert_int_eq(h_wait_record(&H, "long", 0, 2, 5000), 2);
    ck_assert_msg(h_wait_idle(&H, 5000), "not idle");
    n = runs_with_times("long", said, at, 8);
    ck_assert_int_eq(n, 2);
    ck_assert_str_eq(said[0], "a");
    ck_assert_str_eq(said[1], "b");
    struct h_run first, second = { .ms = -1 }, *r;
    size_t m = h_records(&H, &r);
    h_count(r, m, "long", 1, &first);           /* the first run's end */
    int starts = 0;
    for (size_t i = 0; i < m; i++)
        if (r[i].end == 0 && strcmp(r[i].id, "long") == 0 && ++starts == 2)
            second = r[i];
    free(r);
    ck_assert_int_eq(starts, 2);
    ck_assert_msg(second.ms >= first.ms, "the next run started %lld ms before the first ended",
                  (long long)(first.ms - second.ms));
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("debounce");
    TCase *tc = fixture_tcase(s, "scripts", 60, NULL, NULL, setup, teardown);
    tcase_add_test(tc, adds_to_a_waiting_job_merge_into_it);
    tcase_add_test(tc, an_add_while_it_runs_is_its_next_run);
    tcase_add_test(tc, a_failed_attempt_gives_way_to_the_next_run);
    tcase_add_test(tc, a_given_back_job_takes_the_latest_add);
    tcase_add_test(tc, bad_debounces_are_refused);
    TCase *td = fixture_tcase(s, "daemon", 60, NULL, NULL, setup, teardown);
    tcase_add_test(td, twenty_adds_make_runs_at_the_max_wait_with_the_latest_payload);
    return fixture_run_suite(s);
}
