/*
 * libdelayq against a real redis-server, consuming
 * (src/lib/ops_consume.c): dq_claim, dq_ack, dq_release, dq_fail and dq_reap,
 * and the records a claim decodes.
 *
 * Fixtures, helpers and main() are in client_test.c.
 */
#include <check.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_test.h"

/* ---- claiming ----------------------------------------------------------- */

START_TEST(delayed_job_waits_for_its_due_time)
{
    int64_t t0 = tu_mono_ms();
    dq_enqueued e = enq("later", "x", 200, 0);
    dq_claim_result res;
    claim_n(1, 30000, 0, &res);
    ck_assert_int_gt(res.next_due_in_ms, 0);
    ck_assert_int_le(res.next_due_in_ms, 200);
    dq_claim_result_free(&res);

    claim_wait(30000, 3000, &res);
    ck_assert_int_ge(tu_mono_ms() - t0, 190);
    ck_assert_int_ge(res.now_ms, e.due_ms);
    ck_assert_str_eq(res.jobs[0].id, "later");
    ck_assert_int_eq(res.jobs[0].due_ms, e.due_ms);
    dq_claim_result_free(&res);
}
END_TEST

START_TEST(claim_reports_next_due_or_empty)
{
    dq_claim_result res;
    claim_n(5, 1000, 0, &res);
    ck_assert_int_eq(res.next_due_in_ms, -1);
    ck_assert_int_gt(res.now_ms, 0);
    dq_claim_result_free(&res);

    enq("far", "x", 60000, 0);
    enq("near", "x", 30000, 0);
    claim_n(5, 1000, 0, &res);
    ck_assert_int_gt(res.next_due_in_ms, 29000);
    ck_assert_int_le(res.next_due_in_ms, 30000);
    dq_claim_result_free(&res);
}
END_TEST

START_TEST(claim_batch_is_bounded_by_max)
{
    for (int i = 0; i < 10; i++)
        enq(NULL, "x", 0, 0);
    dq_claim_result res;
    claim_n(3, 30000, 3, &res);
    ck_assert_int_eq(res.next_due_in_ms, 0);   /* more are due */
    for (size_t i = 0; i < 3; i++)
        ck_assert_int_eq(res.jobs[i].attempt, 1);
    dq_claim_result_free(&res);
    claim_n(100, 30000, 7, &res);
    ck_assert_int_eq(res.next_due_in_ms, -1);
    dq_claim_result_free(&res);
    dq_stats s = stats();
    ck_assert_int_eq(s.processing, 10);
    ck_assert_int_eq(s.due, 0);
    ck_assert_int_eq(dq_claim(cl, Q, 0, 1000, &res), DQ_ERR_INVALID);
    ck_assert_int_eq(dq_claim(cl, Q, DQ_CLAIM_MAX + 1, 1000, &res), DQ_ERR_INVALID);
    ck_assert_int_eq(dq_claim(cl, Q, 1, 0, &res), DQ_ERR_INVALID);
    dq_claim_result_free(&res);
}
END_TEST

/* ---- fencing ------------------------------------------------------------ */

START_TEST(ack_with_claim_fence_removes_job)
{
    enq("a", "x", 0, 0);
    dq_claim_result res;
    claim_n(1, 30000, 1, &res);
    ck_assert_int_eq(res.jobs[0].attempt, 1);
    ck_assert_int_eq(dq_ack(cl, Q, "a", res.jobs[0].fence), DQ_OK);
    dq_job_info info;
    ck_assert_int_eq(dq_show(cl, Q, "a", &info), DQ_ERR_NOTFOUND);
    /* A second ack of the same claim is stale: the job is finished. */
    ck_assert_int_eq(dq_ack(cl, Q, "a", res.jobs[0].fence), DQ_ERR_STALE);
    dq_claim_result_free(&res);
    dq_stats s = stats();
    ck_assert_int_eq(s.processing + s.due + s.delayed + s.dead, 0);
}
END_TEST

START_TEST(wrong_fence_is_stale_and_changes_nothing)
{
    enq("a", "x", 0, 0);
    dq_claim_result res;
    claim_n(1, 30000, 1, &res);
    int64_t fence = res.jobs[0].fence;
    ck_assert_int_eq(dq_ack(cl, Q, "a", fence + 1), DQ_ERR_STALE);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(cl), "fence"));
    ck_assert_int_eq(dq_fail(cl, Q, "a", fence - 1, "x", DQ_FAIL_DEAD, -1, NULL, NULL),
                     DQ_ERR_STALE);
    dq_job_info info;
    show("a", &info);
    ck_assert_int_eq(info.state, DQ_STATE_PROCESSING);
    ck_assert_int_eq(info.job.fence, fence);
    ck_assert_str_eq(info.job.last_error, "");
    dq_job_info_free(&info);
    /* Acks of jobs never claimed are stale too. */
    ck_assert_int_eq(dq_ack(cl, Q, "nosuch", fence), DQ_ERR_STALE);
    ck_assert_int_eq(dq_ack(cl, Q, "a", fence), DQ_OK);
    dq_claim_result_free(&res);
}
END_TEST

START_TEST(late_ack_after_reclaim_is_stale)
{
    dq_retry_policy p;
    policy_make(&p, 1, 1, 0, 5);
    enq("slow", "x", 0, 5);
    dq_claim_result first;
    claim_n(1, 50, 1, &first);
    int64_t old = first.jobs[0].fence;
    tu_sleep_ms(80);

    dq_reap_result rr;
    ck_assert_int_eq(dq_reap(cl, Q, 100, &p, &rr), DQ_OK);
    ck_assert_uint_eq(rr.retried, 1);
    ck_assert_uint_eq(rr.dead, 0);
    dq_job_info info;
    show("slow", &info);
    ck_assert_int_eq(info.state, DQ_STATE_DELAYED);
    ck_assert_int_eq(info.job.attempt, 1);
    ck_assert_str_eq(info.job.last_error, "lease expired");
    dq_job_info_free(&info);

    dq_claim_result second;
    claim_wait(30000, 2000, &second);
    ck_assert_int_eq(second.jobs[0].attempt, 2);
    ck_assert_str_eq(second.jobs[0].last_error, "lease expired");
    int64_t fresh = second.jobs[0].fence;
    ck_assert_int_ne(fresh, old);

    /* The first worker finally finishes: too late, in both ways. */
    ck_assert_int_eq(dq_ack(cl, Q, "slow", old), DQ_ERR_STALE);
    ck_assert_int_eq(dq_fail(cl, Q, "slow", old, "late", DQ_FAIL_DEAD, -1, &p, NULL),
                     DQ_ERR_STALE);
    ck_assert_int_eq(dq_fail(cl, Q, "slow", old, "late", DQ_FAIL_RETRY, 0, &p, NULL),
                     DQ_ERR_STALE);
    show("slow", &info);
    ck_assert_int_eq(info.state, DQ_STATE_PROCESSING);
    ck_assert_int_eq(info.job.fence, fresh);
    ck_assert_int_eq(info.job.attempt, 2);
    ck_assert_str_eq(info.job.last_error, "lease expired");
    dq_job_info_free(&info);
    dq_stats s = stats();
    ck_assert_int_eq(s.processing, 1);
    ck_assert_int_eq(s.dead + s.due + s.delayed, 0);

    ck_assert_int_eq(dq_ack(cl, Q, "slow", fresh), DQ_OK);
    ck_assert_int_eq(dq_show(cl, Q, "slow", &info), DQ_ERR_NOTFOUND);
    dq_claim_result_free(&first);
    dq_claim_result_free(&second);
}
END_TEST

/* ack trusts the record's fence alone, without a look at the processing
 * set, so every way out of processing must void the claim's fence: a late
 * ack after a reap, a retry or a burial must not delete the job, even
 * before anyone claims it again; and no fence of 0 acks a waiting job. */
START_TEST(ack_after_leaving_processing_is_stale)
{
    dq_retry_policy p;
    policy_make(&p, 60000, 60000, 0, 5);
    dq_claim_result reaped, retried, buried;
    enq("reaped", "x", 0, 0);
    claim_n(1, 30, 1, &reaped);
    tu_sleep_ms(60);
    dq_reap_result rr;
    ck_assert_int_eq(dq_reap(cl, Q, 100, &p, &rr), DQ_OK);
    ck_assert_uint_eq(rr.retried, 1);
    enq("retried", "x", 0, 0);
    claim_n(1, 30000, 1, &retried);
    ck_assert_int_eq(dq_fail(cl, Q, "retried", retried.jobs[0].fence, "boom",
                             DQ_FAIL_RETRY, 60000, &p, NULL), DQ_OK);
    enq("buried", "x", 0, 0);
    claim_n(1, 30000, 1, &buried);
    ck_assert_int_eq(dq_fail(cl, Q, "buried", buried.jobs[0].fence, "boom",
                             DQ_FAIL_DEAD, -1, &p, NULL), DQ_OK);
    enq("waiting", "x", 60000, 0);

    ck_assert_int_eq(dq_ack(cl, Q, "reaped", reaped.jobs[0].fence), DQ_ERR_STALE);
    ck_assert_int_eq(dq_ack(cl, Q, "retried", retried.jobs[0].fence), DQ_ERR_STALE);
    ck_assert_int_eq(dq_ack(cl, Q, "buried", buried.jobs[0].fence), DQ_ERR_STALE);
    ck_assert_int_eq(dq_ack(cl, Q, "waiting", 0), DQ_ERR_STALE);
    const char *ids[] = { "reaped", "retried", "buried", "waiting" };
    const dq_state want[] = { DQ_STATE_DELAYED, DQ_STATE_DELAYED, DQ_STATE_DEAD,
                              DQ_STATE_DELAYED };
    for (int i = 0; i < 4; i++) {
        dq_job_info info;
        show(ids[i], &info);
        ck_assert_msg(info.state == want[i], "%s is in state %d", ids[i], (int)info.state);
        ck_assert_int_eq(info.job.fence, 0);
        dq_job_info_free(&info);
    }
    dq_stats s = stats();
    ck_assert_int_eq(s.processing, 0);
    ck_assert_int_eq(s.delayed + s.due, 3);
    ck_assert_int_eq(s.dead, 1);
    dq_claim_result_free(&reaped);
    dq_claim_result_free(&retried);
    dq_claim_result_free(&buried);
}
END_TEST

/* The encoding Redis gives a key, e.g. "listpack" or "hashtable". */
static void assert_encoding(redisContext *rc, const char *key, const char *want)
{
    redisReply *r = redisCommand(rc, "OBJECT ENCODING %s", key);
    ck_assert_msg(r && r->type == REDIS_REPLY_STRING, "%s: no such key", key);
    ck_assert_msg(strcmp(r->str, want) == 0, "%s is a %s, not a %s", key, r->str, want);
    freeReplyObject(r);
}

/* Workers' batches put up to a few hundred members in the processing set
 * and the lease hash, where Redis's compact encoding (a listpack, up to
 * 128 members) makes each write scan the whole key: both must be hash
 * tables from the first claim, and the member that keeps them so is never
 * counted as a job, nor reaped. */
START_TEST(processing_set_stays_a_skiplist)
{
    enq("one", "x", 0, 0);
    dq_claim_result res;
    claim_n(1, 30, 1, &res);
    redisContext *rc = raw_connect();
    assert_encoding(rc, "dq:{" Q "}:processing", "skiplist");
    assert_encoding(rc, "dq:{" Q "}:lease", "hashtable");
    ck_assert_int_eq(stats().processing, 1);
    ck_assert_int_eq(dq_ack(cl, Q, "one", res.jobs[0].fence), DQ_OK);
    dq_stats s = stats();
    ck_assert_int_eq(s.processing + s.expired + s.delayed + s.due + s.dead, 0);
    dq_retry_policy p;
    policy_make(&p, 1, 1, 0, 5);
    dq_reap_result rr;
    ck_assert_int_eq(dq_reap(cl, Q, 100, &p, &rr), DQ_OK);
    ck_assert_uint_eq(rr.retried + rr.dead, 0);
    ck_assert_int_eq(rr.next_in_ms, -1);
    assert_encoding(rc, "dq:{" Q "}:processing", "skiplist");
    redisFree(rc);
    dq_claim_result_free(&res);
}
END_TEST

/* Memory per job: the records of generated ids go to buckets of 100 that
 * Redis keeps as compact listpacks (records of up to 64 bytes), not to
 * one big hash table; a bigger record turns only its own bucket into a
 * hash table; and every record is found again, by claim and by show. */
START_TEST(generated_ids_are_kept_in_compact_buckets)
{
    enum { N = 250 };
    dq_enqueue_req reqs[N];
    dq_enqueued out[N];
    static char big[200];
    memset(big, 'b', sizeof big - 1);
    for (int i = 0; i < N; i++)
        reqs[i] = req_make(NULL, i == N - 1 ? big : "0123456789abcdef0123456789abcdef", 0, 0);
    ck_assert_int_eq(dq_enqueue_many(cl, reqs, N, out, NULL), DQ_OK);
    ck_assert_str_eq(out[0].id, "1");
    ck_assert_str_eq(out[N - 1].id, "250");
    redisContext *rc = raw_connect();
    assert_encoding(rc, "dq:{" Q "}:jobs:", "listpack");      /* ids 1-99 */
    assert_encoding(rc, "dq:{" Q "}:jobs:1", "listpack");     /* 100-199 */
    assert_encoding(rc, "dq:{" Q "}:jobs:2", "hashtable");    /* 200-250, one big */
    ck_assert_int_eq(fixture_redis_int(fx, "EXISTS dq:{" Q "}:jobs"), 0);
    ck_assert_int_eq(fixture_record_count(fx, Q), N);
    dq_job_info info;
    show("250", &info);
    ck_assert_int_eq((int64_t)info.job.payload_len, (int64_t)strlen(big));
    dq_job_info_free(&info);
    dq_claim_result res;
    claim_n(1000, 30000, N, &res);
    for (size_t i = 0; i < res.n; i++)
        ck_assert_int_eq(dq_ack(cl, Q, res.jobs[i].id, res.jobs[i].fence), DQ_OK);
    ck_assert_int_eq(fixture_record_count(fx, Q), 0);
    ck_assert_int_eq(fixture_redis_int(fx, "EXISTS dq:{" Q "}:jobs:1"), 0);
    redisFree(rc);
    dq_claim_result_free(&res);
}
END_TEST

START_TEST(fence_survives_replace_after_reap)
{
    dq_retry_policy p;
    policy_make(&p, 60000, 60000, 0, 5);
    enq("r", "v1", 0, 0);
    dq_claim_result first;
    claim_n(1, 30, 1, &first);
    int64_t old = first.jobs[0].fence;
    tu_sleep_ms(60);
    dq_reap_result rr;
    ck_assert_int_eq(dq_reap(cl, Q, 100, &p, &rr), DQ_OK);
    ck_assert_uint_eq(rr.retried, 1);

    dq_enqueue_req r = req_make("r", "v2", 0, 0);
    r.replace = true;
    ck_assert_int_eq(dq_enqueue(cl, &r, NULL), DQ_OK);
    dq_claim_result second;
    claim_n(1, 30000, 1, &second);
    ck_assert_str_eq(second.jobs[0].payload, "v2");
    ck_assert_int_eq(second.jobs[0].attempt, 1);
    ck_assert_int_ne(second.jobs[0].fence, old);

    ck_assert_int_eq(dq_ack(cl, Q, "r", old), DQ_ERR_STALE);
    ck_assert_int_eq(dq_fail(cl, Q, "r", old, "late", DQ_FAIL_DEAD, -1, &p, NULL),
                     DQ_ERR_STALE);
    dq_job_info info;
    show("r", &info);
    ck_assert_int_eq(info.state, DQ_STATE_PROCESSING);
    dq_job_info_free(&info);
    ck_assert_int_eq(dq_ack(cl, Q, "r", second.jobs[0].fence), DQ_OK);
    dq_claim_result_free(&first);
    dq_claim_result_free(&second);
}
END_TEST

START_TEST(release_gives_back_unstarted_jobs)
{
    dq_enqueued a = enq("a", "x", 0, 0);
    enq("b", "x", 0, 0);
    enq("c", "x", 0, 0);
    dq_claim_result res;
    claim_n(3, 30000, 3, &res);
    size_t released = 99;
    ck_assert_int_eq(dq_release(cl, Q, res.jobs, 2, &released), DQ_OK);
    ck_assert_uint_eq(released, 2);

    dq_job_info info;
    show(res.jobs[0].id, &info);
    ck_assert_int_eq(info.state, DQ_STATE_DELAYED);
    ck_assert_int_eq(info.job.attempt, 0);   /* not counted */
    dq_job_info_free(&info);
    show("a", &info);
    ck_assert_int_eq(info.state_ms, a.due_ms);   /* keeps its place */
    dq_job_info_free(&info);
    show(res.jobs[2].id, &info);
    ck_assert_int_eq(info.state, DQ_STATE_PROCESSING);
    dq_job_info_free(&info);

    /* The released claims are over: their fences finish nothing. */
    ck_assert_int_eq(dq_ack(cl, Q, res.jobs[0].id, res.jobs[0].fence), DQ_ERR_STALE);
    ck_assert_int_eq(dq_release(cl, Q, res.jobs, 2, &released), DQ_OK);
    ck_assert_uint_eq(released, 0);
    dq_claim_result again;
    claim_n(10, 30000, 2, &again);
    for (size_t i = 0; i < 2; i++) {
        ck_assert_int_eq(again.jobs[i].attempt, 1);
        ck_assert_int_eq(dq_ack(cl, Q, again.jobs[i].id, again.jobs[i].fence), DQ_OK);
    }
    ck_assert_int_eq(dq_ack(cl, Q, res.jobs[2].id, res.jobs[2].fence), DQ_OK);
    dq_claim_result_free(&again);
    dq_claim_result_free(&res);
    dq_stats s = stats();
    ck_assert_int_eq(s.delayed + s.due + s.processing + s.dead, 0);
}
END_TEST

/* ---- failure, backoff, dead --------------------------------------------- */

/* Fail the held job with the policy's backoff and check the retry's delay
 * lies in [lo, hi]: the script read the clock between `before` and `after`. */
static void fail_with_backoff(const dq_job *j, const dq_retry_policy *p,
                              const char *error, int64_t lo, int64_t hi)
{
    dq_fail_result fr;
    int64_t before = server_now();
    ck_assert_int_eq(dq_fail(cl, Q, j->id, j->fence, error, DQ_FAIL_RETRY, -1, p, &fr),
                     DQ_OK);
    int64_t after = server_now();
    ck_assert(!fr.dead);
    ck_assert_msg(fr.at_ms - before >= lo && fr.at_ms - after <= hi,
                  "attempt %d: retry in %lld..%lld ms, expected %lld..%lld", j->attempt,
                  (long long)(fr.at_ms - after), (long long)(fr.at_ms - before),
                  (long long)lo, (long long)hi);
    dq_job_info info;
    show(j->id, &info);
    ck_assert_int_eq(info.state, DQ_STATE_DELAYED);
    ck_assert_int_eq(info.state_ms, fr.at_ms);
    ck_assert_str_eq(info.job.last_error, error);
    dq_job_info_free(&info);
}

START_TEST(backoff_grows_then_job_dies)
{
    dq_retry_policy p;
    policy_make(&p, 100, 250, 0.2, 5);
    enq("flaky", "x", 0, 3);
    dq_claim_result res;
    claim_n(1, 30000, 1, &res);
    ck_assert_int_eq(res.jobs[0].attempt, 1);
    fail_with_backoff(&res.jobs[0], &p, "first", 80, 100);
    dq_claim_result_free(&res);

    claim_wait(30000, 2000, &res);
    ck_assert_int_eq(res.jobs[0].attempt, 2);
    ck_assert_str_eq(res.jobs[0].last_error, "first");
    fail_with_backoff(&res.jobs[0], &p, "second", 160, 200);
    dq_claim_result_free(&res);

    claim_wait(30000, 2000, &res);
    ck_assert_int_eq(res.jobs[0].attempt, 3);
    int64_t before = server_now();
    dq_fail_result fr;
    ck_assert_int_eq(dq_fail(cl, Q, "flaky", res.jobs[0].fence, "third and last",
                             DQ_FAIL_RETRY, -1, &p, &fr), DQ_OK);
    ck_assert(fr.dead);
    ck_assert_int_ge(fr.at_ms, before);
    dq_claim_result_free(&res);

    dq_job_info info;
    show("flaky", &info);
    ck_assert_int_eq(info.state, DQ_STATE_DEAD);
    ck_assert_str_eq(info.job.last_error, "third and last");
    ck_assert_int_eq(info.job.attempt, 3);
    ck_assert_int_eq(info.state_ms, fr.at_ms);
    dq_job_info_free(&info);

    dq_dead_page page;
    ck_assert_int_eq(dq_dead_list(cl, Q, 0, 10, &page), DQ_OK);
    ck_assert_int_eq(page.total, 1);
    ck_assert_uint_eq(page.n, 1);
    ck_assert_str_eq(page.entries[0].id, "flaky");
    ck_assert_str_eq(page.entries[0].type, "email");
    ck_assert_str_eq(page.entries[0].last_error, "third and last");
    ck_assert_int_eq(page.entries[0].attempts, 3);
    ck_assert_int_eq(page.entries[0].died_ms, fr.at_ms);
    ck_assert_uint_eq(page.entries[0].payload_len, 1);
    dq_dead_page_free(&page);
    dq_stats s = stats();
    ck_assert_int_eq(s.dead, 1);
    ck_assert_int_eq(s.due + s.delayed + s.processing, 0);
}
END_TEST

START_TEST(backoff_is_capped)
{
    dq_retry_policy p;
    policy_make(&p, 100, 250, 0.2, 5);
    enq("capped", "x", 0, 10);
    dq_claim_result res;
    int64_t lo[] = { 80, 160, 200, 200 }, hi[] = { 100, 200, 250, 250 };
    for (int i = 0; i < 4; i++) {
        claim_wait(30000, 2000, &res);
        ck_assert_int_eq(res.jobs[0].attempt, i + 1);
        fail_with_backoff(&res.jobs[0], &p, "again", lo[i], hi[i]);
        dq_claim_result_free(&res);
    }
}
END_TEST

START_TEST(fail_dead_buries_at_once)
{
    enq("doomed", "x", 0, 10);
    dq_claim_result res;
    claim_n(1, 30000, 1, &res);
    dq_fail_result fr;
    ck_assert_int_eq(dq_fail(cl, Q, "doomed", res.jobs[0].fence, "bad input",
                             DQ_FAIL_DEAD, -1, NULL, &fr), DQ_OK);
    ck_assert(fr.dead);
    dq_claim_result_free(&res);
    dq_job_info info;
    show("doomed", &info);
    ck_assert_int_eq(info.state, DQ_STATE_DEAD);
    ck_assert_int_eq(info.job.attempt, 1);
    ck_assert_str_eq(info.job.last_error, "bad input");
    dq_job_info_free(&info);
    claim_n(1, 30000, 0, &res);
    dq_claim_result_free(&res);
}
END_TEST

START_TEST(explicit_retry_delay_is_honoured)
{
    enq("later", "x", 0, 0);
    dq_claim_result res;
    claim_n(1, 30000, 1, &res);
    dq_retry_policy p;
    policy_make(&p, 1, 10000, 0, 5);   /* the backoff would be 1 ms; the cap
                                          (10 s) bounds the explicit delay */
    int64_t before = server_now();
    dq_fail_result fr;
    ck_assert_int_eq(dq_fail(cl, Q, "later", res.jobs[0].fence, "busy", DQ_FAIL_RETRY,
                             5000, &p, &fr), DQ_OK);
    int64_t after = server_now();
    dq_claim_result_free(&res);
    ck_assert(!fr.dead);
    ck_assert_int_ge(fr.at_ms - before, 5000);
    ck_assert_int_le(fr.at_ms - after, 5000);
    dq_stats s = stats();
    ck_assert_int_eq(s.delayed, 1);
    ck_assert_int_gt(s.next_due_in_ms, 4000);
    ck_assert_int_le(s.next_due_in_ms, 5000);
    claim_n(1, 30000, 0, &res);
    dq_claim_result_free(&res);

    /* A zero delay retries at once. */
    enq("now", "x", 0, 0);
    claim_n(1, 30000, 1, &res);
    ck_assert_int_eq(dq_fail(cl, Q, "now", res.jobs[0].fence, "busy", DQ_FAIL_RETRY,
                             0, &p, &fr), DQ_OK);
    dq_claim_result_free(&res);
    claim_n(1, 30000, 1, &res);
    ck_assert_str_eq(res.jobs[0].id, "now");
    ck_assert_int_eq(res.jobs[0].attempt, 2);
    dq_claim_result_free(&res);
}
END_TEST

START_TEST(default_max_attempts_applies_without_a_limit)
{
    dq_retry_policy p;
    policy_make(&p, 1, 1, 0, 2);
    enq("nolimit", "x", 0, 0);
    enq("own", "x", 0, 3);
    dq_claim_result res;
    dq_fail_result fr;
    for (int attempt = 1; attempt <= 2; attempt++) {
        claim_n(2, 30000, 2, &res);
        for (size_t i = 0; i < 2; i++) {
            const dq_job *j = &res.jobs[i];
            ck_assert_int_eq(j->attempt, attempt);
            ck_assert_int_eq(dq_fail(cl, Q, j->id, j->fence, "e", DQ_FAIL_RETRY, 0, &p,
                                     &fr), DQ_OK);
            /* The policy's limit of 2 applies to "nolimit" only. */
            ck_assert_int_eq(fr.dead, attempt == 2 && strcmp(j->id, "nolimit") == 0);
        }
        dq_claim_result_free(&res);
    }
    dq_job_info info;
    show("nolimit", &info);
    ck_assert_int_eq(info.state, DQ_STATE_DEAD);
    ck_assert_int_eq(info.job.max_attempts, 0);
    dq_job_info_free(&info);
    show("own", &info);
    ck_assert_int_eq(info.state, DQ_STATE_DELAYED);
    ck_assert_int_eq(info.job.attempt, 2);
    dq_job_info_free(&info);

    /* The reaper applies the same default. */
    ck_assert_int_eq(dq_cancel(cl, Q, "own"), DQ_OK);
    enq("reaped", "x", 0, 0);
    dq_reap_result rr;
    for (int attempt = 1; attempt <= 2; attempt++) {
        claim_wait(1, 2000, &res);
        ck_assert_str_eq(res.jobs[0].id, "reaped");
        dq_claim_result_free(&res);
        tu_sleep_ms(10);
        ck_assert_int_eq(dq_reap(cl, Q, 100, &p, &rr), DQ_OK);
        ck_assert_uint_eq(rr.dead, attempt == 2 ? 1 : 0);
        ck_assert_uint_eq(rr.retried, attempt == 2 ? 0 : 1);
    }
}
END_TEST

/* ---- reaping ------------------------------------------------------------ */

START_TEST(reap_returns_expired_and_buries_exhausted)
{
    dq_retry_policy p;
    policy_make(&p, 60000, 60000, 0, 5);
    dq_claim_result a, b, c;
    enq("once", "x", 0, 1);
    claim_n(1, 50, 1, &a);
    enq("twice", "x", 0, 2);
    claim_n(1, 50, 1, &b);
    enq("live", "x", 0, 1);
    claim_n(1, 10000, 1, &c);
    tu_sleep_ms(100);
    ck_assert_int_eq(stats().expired, 2);

    int64_t before = server_now();
    dq_reap_result rr;
    ck_assert_int_eq(dq_reap(cl, Q, 100, &p, &rr), DQ_OK);
    ck_assert_uint_eq(rr.retried, 1);
    ck_assert_uint_eq(rr.dead, 1);
    ck_assert_int_gt(rr.next_in_ms, 9000);
    ck_assert_int_le(rr.next_in_ms, 10000);

    dq_job_info info;
    show("once", &info);
    ck_assert_int_eq(info.state, DQ_STATE_DEAD);
    ck_assert_str_eq(info.job.last_error, "lease expired");
    dq_job_info_free(&info);
    show("twice", &info);
    ck_assert_int_eq(info.state, DQ_STATE_DELAYED);
    ck_assert_str_eq(info.job.last_error, "lease expired");
    ck_assert_int_eq(info.job.attempt, 1);
    ck_assert_int_ge(info.state_ms, before + 60000);   /* the backoff applies */
    dq_job_info_free(&info);
    show("live", &info);
    ck_assert_int_eq(info.state, DQ_STATE_PROCESSING);
    ck_assert_int_eq(info.job.fence, c.jobs[0].fence);
    ck_assert_str_eq(info.job.last_error, "");
    dq_job_info_free(&info);

    dq_dead_page page;
    ck_assert_int_eq(dq_dead_list(cl, Q, 0, 10, &page), DQ_OK);
    ck_assert_uint_eq(page.n, 1);
    ck_assert_str_eq(page.entries[0].id, "once");
    ck_assert_str_eq(page.entries[0].last_error, "lease expired");
    dq_dead_page_free(&page);
    ck_assert_int_eq(dq_ack(cl, Q, "live", c.jobs[0].fence), DQ_OK);
    ck_assert_int_eq(dq_ack(cl, Q, "twice", b.jobs[0].fence), DQ_ERR_STALE);
    dq_claim_result_free(&a);
    dq_claim_result_free(&b);
    dq_claim_result_free(&c);
}
END_TEST

START_TEST(reap_leaves_live_leases_alone)
{
    dq_reap_result rr;
    ck_assert_int_eq(dq_reap(cl, Q, 100, NULL, &rr), DQ_OK);
    ck_assert_int_eq(rr.next_in_ms, -1);

    enq("a", "x", 0, 0);
    dq_claim_result res;
    claim_n(1, 3000, 1, &res);
    ck_assert_int_eq(dq_reap(cl, Q, 100, NULL, &rr), DQ_OK);
    ck_assert_uint_eq(rr.retried + rr.dead, 0);
    ck_assert_int_gt(rr.next_in_ms, 2000);
    ck_assert_int_le(rr.next_in_ms, 3000);
    dq_job_info info;
    show("a", &info);
    ck_assert_int_eq(info.state, DQ_STATE_PROCESSING);
    dq_job_info_free(&info);
    ck_assert_int_eq(dq_ack(cl, Q, "a", res.jobs[0].fence), DQ_OK);
    dq_claim_result_free(&res);

    /* A batch smaller than the expired count says more are waiting. */
    for (int i = 0; i < 3; i++)
        enq(NULL, "x", 0, 5);
    claim_n(3, 1, 3, &res);
    dq_claim_result_free(&res);
    tu_sleep_ms(20);
    ck_assert_int_eq(dq_reap(cl, Q, 2, NULL, &rr), DQ_OK);
    ck_assert_uint_eq(rr.retried, 2);
    ck_assert_int_eq(rr.next_in_ms, 0);
    ck_assert_int_eq(dq_reap(cl, Q, 2, NULL, &rr), DQ_OK);
    ck_assert_uint_eq(rr.retried, 1);
    ck_assert_int_eq(rr.next_in_ms, -1);
}
END_TEST

/* ---- records ------------------------------------------------------------ */

/* Payloads of every MessagePack string size class (fixstr, str8, str16,
 * str32) come back whole through claim, whose record bodies the client
 * decodes itself; a long type and error survive as well. */
START_TEST(claimed_records_decode_at_every_size)
{
    static const size_t sizes[] = { 0, 31, 32, 255, 256, 65535, 65536, 300000 };
    enum { NS = sizeof sizes / sizeof sizes[0] };
    char *buf = malloc(300000);
    ck_assert_ptr_nonnull(buf);
    for (size_t i = 0; i < 300000; i++)
        buf[i] = (char)(i * 7 + 3);
    for (size_t k = 0; k < NS; k++) {
        char id[32];
        snprintf(id, sizeof id, "size-%zu", sizes[k]);
        dq_enqueue_req r = req_make(id, NULL, 0, 7);
        r.payload = buf;
        r.payload_len = sizes[k];
        r.type = "a.rather.long.job.type.name.that.takes.more.than.thirty.two.bytes";
        ck_assert_int_eq(dq_enqueue(cl, &r, NULL), DQ_OK);
    }
    dq_claim_result res;
    claim_n(NS, 30000, NS, &res);
    for (size_t k = 0; k < NS; k++) {
        const dq_job *j = &res.jobs[k];
        size_t want = strtoull(strchr(j->id, '-') + 1, NULL, 10);
        ck_assert_uint_eq(j->payload_len, want);
        ck_assert_mem_eq(j->payload, buf, want);
        ck_assert_str_eq(j->type, "a.rather.long.job.type.name.that.takes.more.than.thirty.two.bytes");
        ck_assert_int_eq(j->max_attempts, 7);
        ck_assert_int_eq(j->attempt, 1);
        ck_assert_int_gt(j->due_ms, 0);
        ck_assert_int_eq(j->due_ms, j->created_ms);
    }
    dq_claim_result_free(&res);
    free(buf);
}
END_TEST

/* Records this version cannot read are never dropped: one without the
 * format head is buried by the claim script; one whose body is corrupt is
 * handed out as type "" with "unreadable record", for the consumer to
 * bury, and the other jobs of the batch are unaffected. */
START_TEST(corrupt_records_are_not_lost)
{
    enq("good", "fine", 0, 0);
    ck_assert_int_eq(fixture_redis_int(fx, "HSET dq:{%s}:jobs nohead garbage", Q), 1);
    ck_assert_int_eq(fixture_redis_int(fx, "ZADD dq:{%s}:delayed 0 nohead", Q), 1);
    ck_assert_int_eq(fixture_redis_int(fx, "HSET dq:{%s}:jobs badbody 3:0:xyz", Q), 1);
    ck_assert_int_eq(fixture_redis_int(fx, "ZADD dq:{%s}:delayed 0 badbody", Q), 1);
    dq_claim_result res;
    ck_assert_int_eq(dq_claim(cl, Q, 10, 30000, &res), DQ_OK);
    ck_assert_uint_eq(res.n, 2);
    int good = 0, bad = 0;
    for (size_t i = 0; i < res.n; i++) {
        if (strcmp(res.jobs[i].id, "good") == 0) {
            good++;
            ck_assert_str_eq(res.jobs[i].payload, "fine");
        } else {
            bad++;
            ck_assert_str_eq(res.jobs[i].id, "badbody");
            ck_assert_str_eq(res.jobs[i].type, "");
            ck_assert_str_eq(res.jobs[i].last_error, "unreadable record");
        }
    }
    ck_assert_int_eq(good + bad, 2);
    dq_claim_result_free(&res);
    dq_stats s = stats();
    ck_assert_int_eq(s.dead, 1);            /* nohead */
    ck_assert_int_eq(s.processing, 2);
}
END_TEST

/* ---- the suite ---------------------------------------------------------- */

Suite *client_suite(void)
{
    Suite *s = suite_create("client_consume");
    TCase *tc = tcase(s, "claim", 10);
    tcase_add_test(tc, delayed_job_waits_for_its_due_time);
    tcase_add_test(tc, claim_reports_next_due_or_empty);
    tcase_add_test(tc, claim_batch_is_bounded_by_max);

    tc = tcase(s, "fence", 10);
    tcase_add_test(tc, ack_with_claim_fence_removes_job);
    tcase_add_test(tc, wrong_fence_is_stale_and_changes_nothing);
    tcase_add_test(tc, late_ack_after_reclaim_is_stale);
    tcase_add_test(tc, ack_after_leaving_processing_is_stale);
    tcase_add_test(tc, processing_set_stays_a_skiplist);
    tcase_add_test(tc, generated_ids_are_kept_in_compact_buckets);
    tcase_add_test(tc, fence_survives_replace_after_reap);
    tcase_add_test(tc, release_gives_back_unstarted_jobs);

    tc = tcase(s, "retry", 10);
    tcase_add_test(tc, backoff_grows_then_job_dies);
    tcase_add_test(tc, backoff_is_capped);
    tcase_add_test(tc, fail_dead_buries_at_once);
    tcase_add_test(tc, explicit_retry_delay_is_honoured);
    tcase_add_test(tc, default_max_attempts_applies_without_a_limit);

    tc = tcase(s, "reap", 10);
    tcase_add_test(tc, reap_returns_expired_and_buries_exhausted);
    tcase_add_test(tc, reap_leaves_live_leases_alone);

    tc = tcase(s, "records", 20);
    tcase_add_test(tc, claimed_records_decode_at_every_size);
    tcase_add_test(tc, corrupt_records_are_not_lost);
    return s;
}
