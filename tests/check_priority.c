/*
 * Job priorities (src/scripts: claim and every script that files a job in
 * a delayed set; src/lib: dq_enqueue_req.priority) against a real
 * redis-server: due jobs by level, never early; a backlog of low jobs does
 * not hold back a high one; the level survives retry, reap, release,
 * requeue and replace; bad levels are refused; fsck scans every level.
 *
 * Fixtures, helpers and main() are in client_test.c.
 */
#include <check.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_test.h"
#include "lib/scripts.h"

#define BACKLOG 10000

/* Enqueue on Q at `level` (-1: leave the request's priority 0, normal),
 * due at `at_ms` (0: now + delay_ms). */
static dq_enqueued enq_prio(const char *id, int level, int64_t at_ms, int64_t delay_ms)
{
    dq_enqueue_req r = req_make(id, "x", delay_ms, 0);
    r.at_ms = at_ms;
    if (level >= 0)
        r.priority = DQ_PRIORITY(level);
    dq_enqueued out;
    dq_status st = dq_enqueue(cl, &r, &out);
    ck_assert_msg(st == DQ_OK, "enqueue %s: %s", id ? id : "-", dq_errmsg(cl));
    return out;
}

static int priority_of(const char *id)
{
    dq_job_info info;
    show(id, &info);
    int p = info.job.priority;
    dq_job_info_free(&info);
    return p;
}

/* Claim one job and check its id and level. */
static void claim_one_is(const char *id, int level, dq_claim_result *res)
{
    claim_n(1, 30000, 1, res);
    ck_assert_str_eq(res->jobs[0].id, id);
    ck_assert_int_eq(res->jobs[0].priority, level);
}

START_TEST(due_jobs_go_most_urgent_first_then_in_due_order)
{
    int64_t now = server_now();
    enq_prio("l1", 9, now - 3000, 0);
    enq_prio("n1", -1, now - 2000, 0);
    enq_prio("h1", 0, now - 1000, 0);
    enq_prio("h2", 0, now - 1500, 0);
    enq_prio("n2", 5, now - 2500, 0);
    enq_prio("m1", 3, now - 100, 0);
    enq_prio("later", 0, 0, 3600000);  /* high, but not due: never early */
    dq_stats s = stats();
    ck_assert_int_eq(s.due, 6);
    ck_assert_int_eq(s.due_by_priority[0], 2);
    ck_assert_int_eq(s.due_by_priority[3], 1);
    ck_assert_int_eq(s.due_by_priority[5], 2);
    ck_assert_int_eq(s.due_by_priority[9], 1);
    ck_assert_int_eq(s.delayed, 1);

    dq_claim_result res;
    claim_n(10, 30000, 6, &res);
    const char *want[] = { "h2", "h1", "m1", "n2", "n1", "l1" };
    const int level[] = { 0, 0, 3, 5, 5, 9 };
    for (int i = 0; i < 6; i++) {
        ck_assert_str_eq(res.jobs[i].id, want[i]);
        ck_assert_int_eq(res.jobs[i].priority, level[i]);
    }
    /* The next due job is the high one in an hour. */
    ck_assert_int_gt(res.next_due_in_ms, 3500000);
    ck_assert_int_le(res.next_due_in_ms, 3600000);
    dq_claim_result_free(&res);
}
END_TEST

START_TEST(a_batch_fills_across_levels_and_empty_levels_are_forgotten)
{
    int64_t now = server_now();
    char id[32];
    for (int i = 0; i < 5; i++) {
        snprintf(id, sizeof id, "h%d", i);
        enq_prio(id, 0, now - 100 + i, 0);
        snprintf(id, sizeof id, "l%d", i);
        enq_prio(id, 9, now - 1000 + i, 0);
    }
    dq_claim_result res;
    claim_n(7, 30000, 7, &res);
    for (int i = 0; i < 7; i++) {
        snprintf(id, sizeof id, i < 5 ? "h%d" : "l%d", i < 5 ? i : i - 5);
        ck_assert_str_eq(res.jobs[i].id, id);
    }
    dq_claim_result_free(&res);
    claim_n(7, 30000, 3, &res);
    ck_assert_int_eq(res.next_due_in_ms, -1);
    dq_claim_result_free(&res);
    /* Both levels were found empty: meta no longer lists them. */
    redisContext *rc = raw_connect();
    redisReply *r = redisCommand(rc, "HEXISTS dq:{" Q "}:meta levels");
    ck_assert_int_eq(r->integer, 0);
    freeReplyObject(r);
    redisFree(rc);
}
END_TEST

/* 10,000 due low jobs, then 100 high ones: each high job is claimed
 * before the 200th low job claimed after it came due (claims of 64, as a
 * worker's). */
START_TEST(a_low_backlog_does_not_hold_back_high_jobs)
{
    dq_enqueue_req *reqs = calloc(BACKLOG, sizeof *reqs);
    ck_assert_ptr_nonnull(reqs);
    for (int i = 0; i < BACKLOG; i++) {
        reqs[i] = req_make(NULL, "low", 0, 0);
        reqs[i].priority = DQ_PRIORITY_LOW;
    }
    ck_assert_int_eq(dq_enqueue_many(cl, reqs, BACKLOG, NULL, NULL), DQ_OK);
    dq_claim_result res;
    claim_n(64, 30000, 64, &res);   /* the drain is under way */
    dq_claim_result_free(&res);
    for (int i = 0; i < 100; i++) {
        reqs[i] = req_make(NULL, "high", 0, 0);
        reqs[i].priority = DQ_PRIORITY_HIGH;
    }
    ck_assert_int_eq(dq_enqueue_many(cl, reqs, 100, NULL, NULL), DQ_OK);
    free(reqs);
    int high = 0, low_after = 0;
    while (high < 100) {
        claim_n(64, 30000, 64, &res);
        for (size_t i = 0; i < res.n; i++) {
            if (strcmp(res.jobs[i].payload, "high") == 0) {
                ck_assert_msg(low_after < 200, "a high job after %d low ones", low_after);
                ck_assert_int_eq(res.jobs[i].priority, 0);
                high++;
            } else {
                low_after++;
            }
        }
        dq_claim_result_free(&res);
    }
    ck_assert_int_lt(low_after, 64);
    ck_assert_int_eq(stats().due, BACKLOG - 64 - low_after);
}
END_TEST

START_TEST(retry_keeps_the_level)
{
    dq_retry_policy pol;
    policy_make(&pol, 1, 1, 0, 10);
    enq_prio("h", 0, 0, 0);
    dq_claim_result res;
    claim_one_is("h", 0, &res);
    ck_assert_int_eq(dq_fail(cl, Q, "h", res.jobs[0].fence, "boom", DQ_FAIL_RETRY, 0,
                             &pol, NULL), DQ_OK);
    dq_claim_result_free(&res);
    ck_assert_int_eq(priority_of("h"), 0);
    enq_prio("n", -1, server_now() - 5000, 0);   /* due long before */
    claim_one_is("h", 0, &res);                  /* the retry goes first */
    ck_assert_int_eq(res.jobs[0].attempt, 2);
    dq_claim_result_free(&res);
    claim_one_is("n", 5, &res);
    dq_claim_result_free(&res);
}
END_TEST

START_TEST(reap_and_release_keep_the_level)
{
    dq_retry_policy pol;
    policy_make(&pol, 1, 1, 0, 10);
    enq_prio("l", 9, 0, 0);
    enq_prio("h", 0, 0, 0);
    dq_claim_result res;
    claim_n(2, 1, 2, &res);                      /* both leases end at once */
    dq_claim_result_free(&res);
    usleep(5000);
    dq_reap_result rr;
    for (int i = 0; i < 100; i++) {
        ck_assert_int_eq(dq_reap(cl, Q, 10, &pol, &rr), DQ_OK);
        if (rr.retried)
            break;
    }
    ck_assert_uint_eq(rr.retried, 2);
    ck_assert_int_eq(priority_of("l"), 9);
    ck_assert_int_eq(priority_of("h"), 0);
    dq_claim_result a, b;
    claim_wait(30000, 2000, &a);
    ck_assert_str_eq(a.jobs[0].id, "h");
    claim_wait(30000, 2000, &b);
    ck_assert_str_eq(b.jobs[0].id, "l");
    /* Release gives both back, each to its level. */
    ck_assert_int_eq(dq_release(cl, Q, b.jobs, b.n, NULL), DQ_OK);
    ck_assert_int_eq(dq_release(cl, Q, a.jobs, a.n, NULL), DQ_OK);
    dq_claim_result_free(&a);
    dq_claim_result_free(&b);
    dq_stats s = stats();
    ck_assert_int_eq(s.due_by_priority[0], 1);
    ck_assert_int_eq(s.due_by_priority[9], 1);
    claim_n(2, 30000, 2, &res);
    ck_assert_str_eq(res.jobs[0].id, "h");
    ck_assert_str_eq(res.jobs[1].id, "l");
    dq_claim_result_free(&res);
}
END_TEST

START_TEST(requeue_keeps_the_level)
{
    enq_prio("n", -1, server_now() - 5000, 0);
    enq_prio("h", 0, 0, 0);
    dq_claim_result res;
    claim_one_is("h", 0, &res);
    ck_assert_int_eq(dq_fail(cl, Q, "h", res.jobs[0].fence, "broken", DQ_FAIL_DEAD, -1,
                             NULL, NULL), DQ_OK);
    dq_claim_result_free(&res);
    ck_assert_int_eq(priority_of("h"), 0);
    ck_assert_int_eq(dq_requeue(cl, Q, "h"), DQ_OK);
    ck_assert_int_eq(priority_of("h"), 0);
    claim_one_is("h", 0, &res);
    dq_claim_result_free(&res);
}
END_TEST

START_TEST(replace_moves_the_job_to_its_new_level)
{
    enq_prio("j", 0, 0, 0);
    dq_enqueue_req r = req_make("j", "y", 0, 0);
    r.replace = true;
    r.priority = DQ_PRIORITY_LOW;
    ck_assert_int_eq(dq_enqueue(cl, &r, NULL), DQ_OK);
    dq_stats s = stats();
    ck_assert_int_eq(s.due, 1);
    ck_assert_int_eq(s.due_by_priority[0], 0);
    ck_assert_int_eq(s.due_by_priority[9], 1);
    ck_assert_int_eq(priority_of("j"), 9);
    /* Replaced without a priority: normal again; the same in bulk. */
    r.priority = 0;
    ck_assert_int_eq(dq_enqueue(cl, &r, NULL), DQ_OK);
    ck_assert_int_eq(priority_of("j"), 5);
    r.priority = DQ_PRIORITY(2);
    dq_status st;
    ck_assert_int_eq(dq_enqueue_many(cl, &r, 1, NULL, &st), DQ_OK);
    ck_assert_int_eq(priority_of("j"), 2);
    s = stats();
    ck_assert_int_eq(s.due, 1);
    ck_assert_int_eq(s.due_by_priority[2], 1);
    ck_assert_int_eq(dq_cancel(cl, Q, "j"), DQ_OK);
    ck_assert_int_eq(stats().due, 0);
}
END_TEST

START_TEST(bad_priorities_are_refused)
{
    dq_enqueue_req r = req_make("p", "x", 0, 0);
    r.priority = DQ_PRIORITY(10);
    ck_assert_int_eq(dq_enqueue(cl, &r, NULL), DQ_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(cl), "priority 11"));
    r.priority = -1;
    ck_assert_int_eq(dq_enqueue(cl, &r, NULL), DQ_ERR_INVALID);
    dq_status st;
    ck_assert_int_eq(dq_enqueue_many(cl, &r, 1, NULL, &st), DQ_ERR_INVALID);
    ck_assert_int_eq(st, DQ_ERR_INVALID);
    ck_assert_int_eq(stats().due, 0);
    ck_assert_int_eq(dq_priority_parse("high"), 0);
    ck_assert_int_eq(dq_priority_parse("normal"), 5);
    ck_assert_int_eq(dq_priority_parse("low"), 9);
    ck_assert_int_eq(dq_priority_parse("7"), 7);
    ck_assert_int_eq(dq_priority_parse("10"), -1);
    ck_assert_int_eq(dq_priority_parse("urgent"), -1);
    ck_assert_int_eq(dq_priority_parse(""), -1);
    ck_assert_int_eq(dq_priority_parse(NULL), -1);
}
END_TEST

/* The scripts refuse a bad level from any producer, naming it. */
START_TEST(scripts_refuse_bad_priorities)
{
    redisContext *rc = raw_connect();
    const char *bad[] = { "10", "-1", "urgent", "" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        redisReply *r = redisCommand(rc, "EVAL %s 6 %s %s %s %s %s %s %s p t x delay 0 0 0 %s",
                                     dq_scripts[DQ_SCRIPT_ENQUEUE].text,
                                     "dq:{" Q "}:jobs", "dq:{" Q "}:delayed",
                                     "dq:{" Q "}:processing", "dq:{" Q "}:dead",
                                     "dq:{" Q "}:meta", "dq:{" Q "}:lease", "", bad[i]);
        ck_assert_int_eq(r->type, REDIS_REPLY_ERROR);
        ck_assert_msg(strstr(r->str, "enqueue: priority"), "%s", r->str);
        freeReplyObject(r);
        r = redisCommand(rc, "EVAL %s 6 %s %s %s %s %s %s %s %s %s %b",
                         dq_scripts[DQ_SCRIPT_ENQUEUE_MANY].text,
                         "dq:{" Q "}:jobs", "dq:{" Q "}:delayed",
                         "dq:{" Q "}:processing", "dq:{" Q "}:dead",
                         "dq:{" Q "}:meta", "dq:{" Q "}:lease", "", "",
                         i == 0 ? "0/10" : i == 1 ? "0/-1" : i == 2 ? "0/urgent" : "0/",
                         "\x96\xa1t\xa1x\x00", (size_t)6);
        ck_assert_int_eq(r->type, REDIS_REPLY_ERROR);
        ck_assert_msg(strstr(r->str, "job 1 when"), "%s", r->str);
        freeReplyObject(r);
    }
    redisFree(rc);
    ck_assert_int_eq(stats().due, 0);
}
END_TEST

START_TEST(fsck_finds_orphans_at_every_level)
{
    redisContext *rc = raw_connect();
    char id[32];
    for (int p = 0; p < 10; p++) {
        snprintf(id, sizeof id, "ghost%d", p);
        if (p == 5)
            ck_assert(raw_ok(rc, "ZADD dq:{" Q "}:delayed 1 %s", id));
        else
            ck_assert(raw_ok(rc, "ZADD dq:{" Q "}:delayed:%d 1 %s", p, id));
    }
    enq_prio("real", 3, 0, 0);   /* in its set with its record: no finding */
    redisFree(rc);
    dq_fsck_result fr;
    ck_assert_int_eq(dq_fsck(cl, Q, true, 0, &fr), DQ_OK);
    ck_assert_int_eq(fr.members, 10);
    ck_assert_int_eq(fr.records, 0);
    ck_assert_int_eq(fr.repaired, 10);
    dq_fsck_result_free(&fr);
    ck_assert_int_eq(dq_fsck(cl, Q, false, 0, &fr), DQ_OK);
    ck_assert_int_eq(fr.members + fr.records, 0);
    dq_fsck_result_free(&fr);
    ck_assert_int_eq(stats().due, 1);
}
END_TEST

/* ---- the suite ---------------------------------------------------------- */

Suite *client_suite(void)
{
    Suite *s = suite_create("priority");
    TCase *tc = tcase(s, "order", 60);
    tcase_add_test(tc, due_jobs_go_most_urgent_first_then_in_due_order);
    tcase_add_test(tc, a_batch_fills_across_levels_and_empty_levels_are_forgotten);
    tcase_add_test(tc, a_low_backlog_does_not_hold_back_high_jobs);
    tc = tcase(s, "kept", 20);
    tcase_add_test(tc, retry_keeps_the_level);
    tcase_add_test(tc, reap_and_release_keep_the_level);
    tcase_add_test(tc, requeue_keeps_the_level);
    tcase_add_test(tc, replace_moves_the_job_to_its_new_level);
    tc = tcase(s, "errors", 20);
    tcase_add_test(tc, bad_priorities_are_refused);
    tcase_add_test(tc, scripts_refuse_bad_priorities);
    tcase_add_test(tc, fsck_finds_orphans_at_every_level);
    return s;
}
