/*
 * libdelayq against a real redis-server, operating
 * (src/lib/ops_admin.c): dq_requeue, dq_requeue_all, dq_purge, dq_purge_all,
 * dq_stats_get, dq_queues, dq_pause, dq_resume, dq_paused, and how many calls
 * dq_show makes.
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

/* ---- operating ---------------------------------------------------------- */

START_TEST(requeue_one_dead_job)
{
    make_dead("d");
    enq("waiting", "x", 60000, 0);
    int64_t before = server_now();
    ck_assert_int_eq(dq_requeue(cl, Q, "d"), DQ_OK);
    dq_job_info info;
    show("d", &info);
    ck_assert_int_eq(info.state, DQ_STATE_DELAYED);
    ck_assert_int_eq(info.job.attempt, 0);
    ck_assert_int_ge(info.state_ms, before);
    ck_assert_int_le(info.state_ms, server_now());
    ck_assert_str_eq(info.job.last_error, "broken");   /* kept for reference */
    dq_job_info_free(&info);
    ck_assert_int_eq(stats().dead, 0);

    dq_claim_result res;
    claim_n(5, 30000, 1, &res);
    ck_assert_str_eq(res.jobs[0].id, "d");
    ck_assert_int_eq(res.jobs[0].attempt, 1);
    dq_claim_result_free(&res);

    ck_assert_int_eq(dq_requeue(cl, Q, "waiting"), DQ_ERR_NOTFOUND);
    ck_assert_int_eq(dq_requeue(cl, Q, "d"), DQ_ERR_NOTFOUND);
    ck_assert_int_eq(dq_requeue(cl, Q, "nosuch"), DQ_ERR_NOTFOUND);
    show("waiting", &info);
    ck_assert_int_eq(info.state, DQ_STATE_DELAYED);
    dq_job_info_free(&info);
}
END_TEST

/* Make `n` dead jobs quickly: claim them with a 1 ms lease, reap them. */
static void make_many_dead(int n)
{
    dq_enqueue_req *reqs = calloc((size_t)n, sizeof *reqs);
    ck_assert_ptr_nonnull(reqs);
    for (int i = 0; i < n; i++)
        reqs[i] = req_make(NULL, "x", 0, 1);
    ck_assert_int_eq(dq_enqueue_many(cl, reqs, (size_t)n, NULL, NULL), DQ_OK);
    free(reqs);
    for (int left = n; left > 0;) {
        dq_claim_result res;
        int want = left < DQ_CLAIM_MAX ? left : DQ_CLAIM_MAX;
        claim_n(want, 1, (size_t)want, &res);
        dq_claim_result_free(&res);
        left -= want;
    }
    tu_sleep_ms(10);
    dq_reap_result rr;
    size_t dead = 0;
    do {
        ck_assert_int_eq(dq_reap(cl, Q, 1000, NULL, &rr), DQ_OK);
        dead += rr.dead;
    } while (rr.next_in_ms == 0);
    ck_assert_uint_eq(dead, (size_t)n);
}

START_TEST(requeue_all_moves_more_than_a_batch)
{
    make_many_dead(1200);
    ck_assert_int_eq(stats().dead, 1200);
    int64_t moved = 0;
    ck_assert_int_eq(dq_requeue_all(cl, Q, &moved), DQ_OK);
    ck_assert_int_eq(moved, 1200);
    dq_stats s = stats();
    ck_assert_int_eq(s.dead, 0);
    ck_assert_int_eq(s.due, 1200);
    ck_assert_int_eq(dq_requeue_all(cl, Q, &moved), DQ_OK);
    ck_assert_int_eq(moved, 0);
}
END_TEST

START_TEST(purge_one_and_all)
{
    make_dead("p1");
    enq("alive", "x", 60000, 0);
    ck_assert_int_eq(dq_purge(cl, Q, "alive"), DQ_ERR_NOTFOUND);
    ck_assert_int_eq(dq_purge(cl, Q, "p1"), DQ_OK);
    dq_job_info info;
    ck_assert_int_eq(dq_show(cl, Q, "p1", &info), DQ_ERR_NOTFOUND);
    ck_assert_int_eq(dq_purge(cl, Q, "p1"), DQ_ERR_NOTFOUND);

    make_many_dead(1100);
    int64_t deleted = 0;
    ck_assert_int_eq(dq_purge_all(cl, Q, &deleted), DQ_OK);
    ck_assert_int_eq(deleted, 1100);
    dq_stats s = stats();
    ck_assert_int_eq(s.dead, 0);
    ck_assert_int_eq(s.delayed, 1);
    /* The records are gone, not only their place in the dead set. */
    ck_assert_int_eq(fixture_record_count(fx, Q), 1);
}
END_TEST

START_TEST(stats_count_each_state)
{
    dq_stats s = stats();
    ck_assert_int_eq(s.delayed + s.due + s.processing + s.expired + s.dead, 0);
    ck_assert_int_eq(s.next_due_in_ms, -1);

    dq_claim_result res;
    enq("held", "x", 0, 0);
    claim_n(1, 60000, 1, &res);
    dq_claim_result_free(&res);
    enq("lapsed", "x", 0, 0);
    claim_n(1, 20, 1, &res);
    dq_claim_result_free(&res);
    make_dead("dead");
    enq("due1", "x", 0, 0);
    enq("due2", "x", 0, 0);
    enq("later", "x", 60000, 0);
    tu_sleep_ms(50);

    s = stats();
    ck_assert_int_eq(s.delayed, 1);
    ck_assert_int_eq(s.due, 2);
    ck_assert_int_eq(s.processing, 2);
    ck_assert_int_eq(s.expired, 1);
    ck_assert_int_eq(s.dead, 1);
    ck_assert_int_eq(s.next_due_in_ms, 0);   /* jobs are due now */
    ck_assert_int_gt(s.now_ms, 0);

    claim_n(10, 60000, 2, &res);
    dq_claim_result_free(&res);
    s = stats();
    ck_assert_int_eq(s.due, 0);
    ck_assert_int_eq(s.processing, 4);
    ck_assert_int_gt(s.next_due_in_ms, 59000);
    ck_assert_int_le(s.next_due_in_ms, 60000);
}
END_TEST

START_TEST(queues_are_listed_sorted)
{
    const char *names[] = { "gamma", "alpha", "beta" };
    for (int i = 0; i < 3; i++) {
        dq_enqueue_req r = req_make(NULL, "x", 0, 0);
        r.queue = names[i];
        ck_assert_int_eq(dq_enqueue(cl, &r, NULL), DQ_OK);
    }
    dq_stats s;
    ck_assert_int_eq(dq_stats_get(cl, "delta", &s), DQ_OK);   /* looked at only */
    char **v;
    size_t n;
    ck_assert_int_eq(dq_queues(cl, &v, &n), DQ_OK);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(v[0], "alpha");
    ck_assert_str_eq(v[1], "beta");
    ck_assert_str_eq(v[2], "gamma");
    dq_strv_free(v, n);
}
END_TEST

/* ---- pause and resume --------------------------------------------------- */

/* While paused, a claim hands out nothing (and says nothing is delayed);
 * enqueue, cancel and show work; resume hands the due jobs out again with
 * their due times untouched.  Pause and resume report the pause's start. */
START_TEST(pause_stops_claims_until_resume)
{
    int64_t since = 0;
    ck_assert_int_eq(dq_paused(cl, Q, &since), DQ_OK);
    ck_assert_int_eq(since, -1);
    dq_enqueued due = enq("early", "x", 0, 0);
    int64_t before = server_now();
    ck_assert_int_eq(dq_pause(cl, Q, &since), DQ_OK);
    ck_assert_int_ge(since, before);
    ck_assert_int_le(since, server_now());
    int64_t again = 0;
    ck_assert_int_eq(dq_pause(cl, Q, &again), DQ_OK);       /* the first time kept */
    ck_assert_int_eq(again, since);
    int64_t state = 0;
    ck_assert_int_eq(dq_paused(cl, Q, &state), DQ_OK);
    ck_assert_int_eq(state, since);

    enq("late", "y", 0, 0);
    enq("gone", "z", 0, 0);
    ck_assert_int_eq(dq_cancel(cl, Q, "gone"), DQ_OK);
    dq_job_info info;
    show("late", &info);
    ck_assert_int_eq(info.state, DQ_STATE_DELAYED);
    dq_job_info_free(&info);
    dq_claim_result res;
    claim_n(10, 30000, 0, &res);
    ck_assert_int_eq(res.next_due_in_ms, -1);
    dq_claim_result_free(&res);
    ck_assert_int_eq(stats().due, 2);

    int64_t was = 0;
    ck_assert_int_eq(dq_resume(cl, Q, &was), DQ_OK);
    ck_assert_int_eq(was, since);
    ck_assert_int_eq(dq_resume(cl, Q, &was), DQ_OK);        /* not paused: no change */
    ck_assert_int_eq(was, -1);
    claim_n(10, 30000, 2, &res);
    ck_assert_str_eq(res.jobs[0].id, "early");
    ck_assert_int_eq(res.jobs[0].due_ms, due.due_ms);
    dq_claim_result_free(&res);
}
END_TEST

/* A queue never used can be paused (before its first deploy), and the
 * names are checked as everywhere. */
START_TEST(pause_unused_queue_and_bad_names)
{
    int64_t since = 0;
    ck_assert_int_eq(dq_pause(cl, "fresh", &since), DQ_OK);
    ck_assert_int_gt(since, 0);
    ck_assert_int_eq(dq_paused(cl, "fresh", &since), DQ_OK);
    ck_assert_int_gt(since, 0);
    ck_assert_int_eq(dq_pause(cl, "", NULL), DQ_ERR_INVALID);
    ck_assert_int_eq(dq_resume(cl, "a b", NULL), DQ_ERR_INVALID);
    ck_assert_int_eq(dq_paused(cl, "x{y}", &since), DQ_ERR_INVALID);
    ck_assert_int_eq(dq_paused(cl, "fresh", NULL), DQ_ERR_INVALID);
    ck_assert_int_eq(dq_resume(cl, "fresh", NULL), DQ_OK);
}
END_TEST

/* ---- show's calls --------------------------------------------------------- */

/* Script calls Redis counted since the last CONFIG RESETSTAT. */
static long evalsha_calls(redisContext *rc)
{
    redisReply *r = redisCommand(rc, "INFO commandstats");
    ck_assert_ptr_nonnull(r);
    const char *at = r->type == REDIS_REPLY_STRING ? strstr(r->str, "cmdstat_evalsha:calls=")
                                                   : NULL;
    long n = at ? strtol(at + strlen("cmdstat_evalsha:calls="), NULL, 10) : 0;
    freeReplyObject(r);
    return n;
}

/*
 * A producer's show of a waiting job is one script call that hands back
 * the record, which the library reads; a record it cannot vouch for costs
 * a second call, whose answer says what is wrong; a job the script cannot
 * hand back raw (a queue with expiries) is answered in full at once.
 */
START_TEST(show_reads_a_waiting_record_in_one_call)
{
    redisContext *rc = raw_connect();
    enq("s-1", "hello", 60000, 3);
    dq_job_info info;
    ck_assert_int_eq(dq_show(cl, Q, "none", &info), DQ_ERR_NOTFOUND);  /* the script loaded */
    ck_assert(raw_ok(rc, "CONFIG RESETSTAT"));
    show("s-1", &info);
    ck_assert_int_eq(info.state, DQ_STATE_DELAYED);
    ck_assert_str_eq(info.job.payload, "hello");
    ck_assert_int_eq(info.job.max_attempts, 3);
    ck_assert_int_eq(info.state_ms, info.job.due_ms);
    dq_job_info_free(&info);
    ck_assert_int_eq(evalsha_calls(rc), 1);

    /* An array 16 of six elements: no record body for the scripts. */
    static const char bad[] = "3:0:\xdc\x00\x06\xa1t\xa1x\x03\xcf\x00\x00\x01\x9b\x76\xda\xa8"
                              "\x00\xcd\xea\x60\xa0";
    redisReply *h = redisCommand(rc, "HSET dq:{" Q "}:jobs s-2 %b", bad, sizeof bad - 1);
    ck_assert(h && h->type == REDIS_REPLY_INTEGER);
    freeReplyObject(h);
    ck_assert(raw_ok(rc, "ZADD dq:{" Q "}:delayed 1 s-2"));
    ck_assert(raw_ok(rc, "CONFIG RESETSTAT"));
    show("s-2", &info);
    ck_assert_int_eq(info.state, DQ_STATE_UNREADABLE);
    ck_assert_msg(strstr(info.job.last_error, "not a MessagePack array of 6 or 7"), "%s",
                  info.job.last_error);
    dq_job_info_free(&info);
    ck_assert_int_eq(evalsha_calls(rc), 2);

    dq_enqueue_req r = req_make("s-3", "x", 60000, 0);
    r.ttl_ms = 60000;
    ck_assert_int_eq(dq_enqueue(cl, &r, NULL), DQ_OK);
    ck_assert(raw_ok(rc, "CONFIG RESETSTAT"));
    show("s-3", &info);
    ck_assert_int_eq(info.state, DQ_STATE_DELAYED);
    ck_assert_int_gt(info.expire_at_ms, 0);
    dq_job_info_free(&info);
    ck_assert_int_eq(evalsha_calls(rc), 1);
    redisFree(rc);
}
END_TEST

/* ---- the suite ---------------------------------------------------------- */

Suite *client_suite(void)
{
    Suite *s = suite_create("client_admin");
    TCase *tc = tcase(s, "operate", 20);
    tcase_add_test(tc, requeue_one_dead_job);
    tcase_add_test(tc, requeue_all_moves_more_than_a_batch);
    tcase_add_test(tc, purge_one_and_all);
    tcase_add_test(tc, stats_count_each_state);
    tcase_add_test(tc, queues_are_listed_sorted);
    tcase_add_test(tc, pause_stops_claims_until_resume);
    tcase_add_test(tc, pause_unused_queue_and_bad_names);
    tcase_add_test(tc, show_reads_a_waiting_record_in_one_call);
    return s;
}
