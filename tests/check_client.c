/*
 * libdelayq against a real redis-server: what producers, workers and
 * operators see through the public API (include/delayq/client.h).
 *
 * Each TCase starts its own server (unchecked fixture); every test starts
 * from an empty, password-free server and a fresh client (checked fixture).
 */
#include <check.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "fixture.h"

#define Q "jobs"
#define TEST_PASSWORD "s3cret-pw"

static struct redis_fixture fixture;
static struct redis_fixture *const fx = &fixture;
/* The server's pid, in MAP_SHARED memory: a test that restarts the server
 * runs in Check's forked child, and the parent must know the new one. */
static pid_t *live_pid;
static dq_client *cl;   /* the test's client, made by setup */

/* ---- helpers ------------------------------------------------------------ */

static int64_t server_now(void)
{
    int64_t now = 0;
    ck_assert_int_eq(dq_server_time(cl, &now), DQ_OK);
    return now;
}

/* A raw connection to the fixture, for what the API does not offer. */
static redisContext *raw_connect(void)
{
    return fixture_redis_connect(fx);
}

/* Run a raw command (printf-style, as redisCommand: "%s" for an empty
 * argument) and return whether Redis accepted it. */
__attribute__((format(printf, 2, 3)))
static int raw_ok(redisContext *rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(rc, fmt, ap);
    va_end(ap);
    int ok = r && r->type != REDIS_REPLY_ERROR;
    if (r)
        freeReplyObject(r);
    return ok;
}

static dq_enqueue_req req_make(const char *id, const char *payload,
                               int64_t delay_ms, int max_attempts)
{
    dq_enqueue_req r = {
        .queue = Q, .type = "email", .id = id, .payload = payload,
        .payload_len = payload ? strlen(payload) : 0, .delay_ms = delay_ms,
        .max_attempts = max_attempts,
    };
    return r;
}

/* Enqueue on Q and insist on DQ_OK. */
static dq_enqueued enq(const char *id, const char *payload, int64_t delay_ms,
                       int max_attempts)
{
    dq_enqueue_req r = req_make(id, payload, delay_ms, max_attempts);
    dq_enqueued out;
    memset(&out, 0, sizeof out);
    dq_status st = dq_enqueue(cl, &r, &out);
    ck_assert_msg(st == DQ_OK, "enqueue %s: %s: %s", id ? id : "(generated)",
                  dq_status_str(st), dq_errmsg(cl));
    return out;
}

/* Claim up to `max` from Q and insist on DQ_OK and exactly `n` jobs. */
static void claim_n(int max, int64_t lease_ms, size_t n, dq_claim_result *res)
{
    dq_status st = dq_claim(cl, Q, max, lease_ms, res);
    ck_assert_msg(st == DQ_OK, "claim: %s", dq_errmsg(cl));
    ck_assert_uint_eq(res->n, n);
}

/* Poll until one job is claimable (within `within_ms`) and claim it. */
static void claim_wait(int64_t lease_ms, int within_ms, dq_claim_result *res)
{
    int64_t until = tu_mono_ms() + within_ms;
    for (;;) {
        ck_assert_int_eq(dq_claim(cl, Q, 1, lease_ms, res), DQ_OK);
        if (res->n == 1)
            return;
        dq_claim_result_free(res);
        ck_assert_msg(tu_mono_ms() < until, "no job became due within %d ms", within_ms);
        tu_sleep_ms(5);
    }
}

static void show(const char *id, dq_job_info *info)
{
    dq_status st = dq_show(cl, Q, id, info);
    ck_assert_msg(st == DQ_OK, "show %s: %s", id, dq_errmsg(cl));
}

static dq_stats stats(void)
{
    dq_stats s;
    ck_assert_int_eq(dq_stats_get(cl, Q, &s), DQ_OK);
    return s;
}

static void policy_make(dq_retry_policy *p, int64_t base, int64_t cap, double jitter,
                        int default_max)
{
    dq_retry_policy_init(p);
    p->base_ms = base;
    p->cap_ms = cap;
    p->jitter = jitter;
    p->default_max_attempts = default_max;
}

/* ---- fixtures ----------------------------------------------------------- */

static void server_up(void)
{
    fixture_redis_start(fx);
    *live_pid = fx->pid;
}

static void server_down(void)
{
    fx->pid = *live_pid;
    if (fx->pid > 0)
        kill(fx->pid, SIGCONT);
    fixture_redis_stop(fx);
}

static void restart_server(void)
{
    fixture_redis_restart(fx);
    *live_pid = fx->pid;
}

/* Undo what any earlier test may have left (a stopped server, a password,
 * an ACL user), empty the server and make the test's client. */
static void test_setup(void)
{
    fx->pid = *live_pid;
    kill(fx->pid, SIGCONT);
    redisContext *rc = raw_connect();
    raw_ok(rc, "AUTH " TEST_PASSWORD);
    ck_assert(raw_ok(rc, "CONFIG SET requirepass %s", ""));
    raw_ok(rc, "ACL DELUSER alice");
    ck_assert(raw_ok(rc, "FLUSHALL"));
    redisFree(rc);
    cl = fixture_client(fx);
}

static void test_teardown(void)
{
    dq_close(cl);
    cl = NULL;
}

/* ---- producing ---------------------------------------------------------- */

START_TEST(enqueue_generates_ids_and_keeps_chosen_ones)
{
    int64_t now = server_now();
    dq_enqueued a = enq(NULL, "x", 0, 0);
    dq_enqueued b = enq("", "x", 0, 0);
    ck_assert_uint_gt(strlen(a.id), 0);
    ck_assert_uint_eq(strspn(a.id, "0123456789"), strlen(a.id));
    ck_assert_str_ne(a.id, b.id);
    ck_assert(!a.replaced);
    ck_assert_int_ge(a.due_ms, now);
    ck_assert_int_lt(a.due_ms, now + 1000);

    dq_enqueued c = enq("order:1234:cancel", "x", 0, 0);
    ck_assert_str_eq(c.id, "order:1234:cancel");
    dq_job_info info;
    show("order:1234:cancel", &info);
    ck_assert_str_eq(info.job.type, "email");
    dq_job_info_free(&info);

    dq_enqueue_req r = req_make("12345", "x", 0, 0);
    ck_assert_int_eq(dq_enqueue(cl, &r, NULL), DQ_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(cl), "digits"));
    ck_assert_int_eq(dq_show(cl, Q, "12345", &info), DQ_ERR_NOTFOUND);
    ck_assert_int_eq(stats().due, 3);
}
END_TEST

START_TEST(identical_payloads_stay_two_jobs)
{
    dq_enqueued a = enq(NULL, "same", 0, 0);
    dq_enqueued b = enq(NULL, "same", 0, 0);
    ck_assert_str_ne(a.id, b.id);
    enq(NULL, "same", 60000, 0);
    enq(NULL, "same", 60000, 0);
    dq_stats s = stats();
    ck_assert_int_eq(s.due, 2);
    ck_assert_int_eq(s.delayed, 2);

    dq_claim_result res;
    claim_n(10, 30000, 2, &res);
    ck_assert_str_ne(res.jobs[0].id, res.jobs[1].id);
    ck_assert_str_eq(res.jobs[0].payload, "same");
    ck_assert_str_eq(res.jobs[1].payload, "same");
    dq_claim_result_free(&res);
}
END_TEST

START_TEST(payload_is_binary_safe)
{
    unsigned char bytes[256];
    for (int i = 0; i < 256; i++)
        bytes[i] = (unsigned char)i;
    dq_enqueue_req r = req_make("bin", NULL, 0, 0);
    r.payload = bytes;
    r.payload_len = sizeof bytes;
    ck_assert_int_eq(dq_enqueue(cl, &r, NULL), DQ_OK);

    dq_job_info info;
    show("bin", &info);
    ck_assert_uint_eq(info.job.payload_len, 256);
    ck_assert_mem_eq(info.job.payload, bytes, 256);
    dq_job_info_free(&info);

    dq_claim_result res;
    claim_n(1, 30000, 1, &res);
    ck_assert_uint_eq(res.jobs[0].payload_len, 256);
    ck_assert_mem_eq(res.jobs[0].payload, bytes, 256);
    ck_assert_int_eq(((char *)res.jobs[0].payload)[256], '\0');
    dq_claim_result_free(&res);

    /* An empty payload is a payload too. */
    dq_enqueue_req e = req_make("empty", NULL, 0, 0);
    ck_assert_int_eq(dq_enqueue(cl, &e, NULL), DQ_OK);
    claim_n(1, 30000, 1, &res);
    ck_assert_uint_eq(res.jobs[0].payload_len, 0);
    ck_assert_str_eq(res.jobs[0].payload, "");
    dq_claim_result_free(&res);
}
END_TEST

START_TEST(oversized_payload_is_refused_and_not_stored)
{
    dq_options opt;
    fixture_options(fx, &opt);
    opt.max_payload = 100;
    char err[256];
    dq_client *small = dq_connect(&opt, err, sizeof err, NULL);
    ck_assert_msg(small != NULL, "%s", err);
    char buf[101];
    memset(buf, 'p', sizeof buf);

    dq_enqueue_req r = req_make("big", NULL, 0, 0);
    r.payload = buf;
    r.payload_len = 101;
    ck_assert_int_eq(dq_enqueue(small, &r, NULL), DQ_ERR_TOO_LARGE);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(small), "100"));
    r.replace = true;
    ck_assert_int_eq(dq_enqueue(small, &r, NULL), DQ_ERR_TOO_LARGE);
    dq_job_info info;
    ck_assert_int_eq(dq_show(cl, Q, "big", &info), DQ_ERR_NOTFOUND);
    dq_stats s = stats();
    ck_assert_int_eq(s.due + s.delayed, 0);

    r.payload_len = 100;   /* at the limit is fine */
    r.replace = false;
    ck_assert_int_eq(dq_enqueue(small, &r, NULL), DQ_OK);
    show("big", &info);
    ck_assert_uint_eq(info.job.payload_len, 100);
    dq_job_info_free(&info);
    dq_close(small);
}
END_TEST

START_TEST(duplicate_id_is_refused_and_original_kept)
{
    dq_enqueued first = enq("dup", "original", 60000, 4);
    dq_enqueue_req r = req_make("dup", "impostor", 0, 1);
    dq_enqueued out;
    ck_assert_int_eq(dq_enqueue(cl, &r, &out), DQ_ERR_EXISTS);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(cl), "dup"));

    dq_job_info info;
    show("dup", &info);
    ck_assert_int_eq(info.state, DQ_STATE_DELAYED);
    ck_assert_str_eq(info.job.payload, "original");
    ck_assert_int_eq(info.job.max_attempts, 4);
    ck_assert_int_eq(info.state_ms, first.due_ms);
    ck_assert_int_eq(info.job.due_ms, first.due_ms);
    dq_job_info_free(&info);
    dq_stats s = stats();
    ck_assert_int_eq(s.delayed, 1);
    ck_assert_int_eq(s.due, 0);
}
END_TEST

START_TEST(replace_reschedules_with_new_payload)
{
    enq("rep", "old", 0, 3);
    dq_claim_result res;
    claim_n(1, 30000, 1, &res);
    ck_assert_int_eq(dq_fail(cl, Q, "rep", res.jobs[0].fence, "boom", DQ_FAIL_RETRY,
                             60000, NULL, NULL), DQ_OK);
    dq_claim_result_free(&res);
    dq_job_info info;
    show("rep", &info);
    ck_assert_int_eq(info.job.attempt, 1);
    dq_job_info_free(&info);

    int64_t now = server_now();
    dq_enqueue_req r = req_make("rep", "new", 0, 5);
    r.replace = true;
    dq_enqueued out;
    ck_assert_int_eq(dq_enqueue(cl, &r, &out), DQ_OK);
    ck_assert(out.replaced);
    ck_assert_int_ge(out.due_ms, now);
    ck_assert_int_lt(out.due_ms, now + 1000);

    show("rep", &info);
    ck_assert_int_eq(info.state, DQ_STATE_DELAYED);
    ck_assert_str_eq(info.job.payload, "new");
    ck_assert_int_eq(info.job.attempt, 0);
    ck_assert_int_eq(info.job.max_attempts, 5);
    ck_assert_int_eq(info.job.due_ms, out.due_ms);
    ck_assert_int_eq(info.state_ms, out.due_ms);
    ck_assert_int_ge(info.job.created_ms, now);
    dq_job_info_free(&info);
    dq_stats s = stats();
    ck_assert_int_eq(s.due, 1);
    ck_assert_int_eq(s.delayed, 0);

    claim_n(1, 30000, 1, &res);
    ck_assert_str_eq(res.jobs[0].payload, "new");
    ck_assert_int_eq(res.jobs[0].attempt, 1);
    dq_claim_result_free(&res);
}
END_TEST

START_TEST(replace_of_processing_job_is_refused)
{
    enq("busy", "old", 0, 0);
    dq_claim_result res;
    claim_n(1, 30000, 1, &res);
    dq_enqueue_req r = req_make("busy", "new", 0, 0);
    r.replace = true;
    ck_assert_int_eq(dq_enqueue(cl, &r, NULL), DQ_ERR_RUNNING);
    dq_job_info info;
    show("busy", &info);
    ck_assert_int_eq(info.state, DQ_STATE_PROCESSING);
    ck_assert_str_eq(info.job.payload, "old");
    ck_assert_int_eq(info.job.fence, res.jobs[0].fence);
    dq_job_info_free(&info);
    ck_assert_int_eq(dq_ack(cl, Q, "busy", res.jobs[0].fence), DQ_OK);
    dq_claim_result_free(&res);

    /* A dead job may be replaced: it is scheduled again. */
    enq("gone", "old", 0, 0);
    claim_n(1, 30000, 1, &res);
    ck_assert_int_eq(dq_fail(cl, Q, "gone", res.jobs[0].fence, "x", DQ_FAIL_DEAD,
                             -1, NULL, NULL), DQ_OK);
    dq_claim_result_free(&res);
    r.id = "gone";
    ck_assert_int_eq(dq_enqueue(cl, &r, NULL), DQ_OK);
    show("gone", &info);
    ck_assert_int_eq(info.state, DQ_STATE_DELAYED);
    ck_assert_str_eq(info.job.payload, "new");
    dq_job_info_free(&info);
    ck_assert_int_eq(stats().dead, 0);
}
END_TEST

START_TEST(bad_names_are_invalid)
{
    dq_enqueue_req r = req_make("a", "x", 0, 0);
    r.queue = "bad{queue";
    ck_assert_int_eq(dq_enqueue(cl, &r, NULL), DQ_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(cl), "{"));
    dq_claim_result res;
    ck_assert_int_eq(dq_claim(cl, "bad{queue", 1, 1000, &res), DQ_ERR_INVALID);
    dq_claim_result_free(&res);
    dq_stats s;
    ck_assert_int_eq(dq_stats_get(cl, "bad}queue", &s), DQ_ERR_INVALID);
    ck_assert_int_eq(dq_cancel(cl, "", "a"), DQ_ERR_INVALID);
    r = req_make("a", "x", 0, 0);
    r.type = "";
    ck_assert_int_eq(dq_enqueue(cl, &r, NULL), DQ_ERR_INVALID);
    r = req_make("has space", "x", 0, 0);
    ck_assert_int_eq(dq_enqueue(cl, &r, NULL), DQ_ERR_INVALID);
    ck_assert_int_eq(fixture_redis_int(fx, "DBSIZE"), 0);
}
END_TEST

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

/* ---- operating ---------------------------------------------------------- */

/* Enqueue `id` due now, claim it and fail it for good. */
static void make_dead(const char *id)
{
    enq(id, "x", 0, 0);
    dq_claim_result res;
    claim_n(1, 30000, 1, &res);
    ck_assert_str_eq(res.jobs[0].id, id);
    ck_assert_int_eq(dq_fail(cl, Q, id, res.jobs[0].fence, "broken", DQ_FAIL_DEAD,
                             -1, NULL, NULL), DQ_OK);
    dq_claim_result_free(&res);
}

START_TEST(cancel_depends_on_state)
{
    make_dead("dead");
    enq("waiting", "x", 60000, 0);
    enq("running", "x", 0, 0);
    dq_claim_result res;
    claim_n(1, 30000, 1, &res);

    dq_job_info info;
    ck_assert_int_eq(dq_cancel(cl, Q, "waiting"), DQ_OK);
    ck_assert_int_eq(dq_show(cl, Q, "waiting", &info), DQ_ERR_NOTFOUND);
    ck_assert_int_eq(dq_cancel(cl, Q, "running"), DQ_ERR_RUNNING);
    show("running", &info);
    ck_assert_int_eq(info.state, DQ_STATE_PROCESSING);
    dq_job_info_free(&info);
    ck_assert_int_eq(dq_cancel(cl, Q, "dead"), DQ_ERR_DEAD);
    show("dead", &info);
    ck_assert_int_eq(info.state, DQ_STATE_DEAD);
    dq_job_info_free(&info);
    ck_assert_int_eq(dq_cancel(cl, Q, "nosuch"), DQ_ERR_NOTFOUND);
    ck_assert_int_eq(dq_cancel(cl, Q, "waiting"), DQ_ERR_NOTFOUND);
    ck_assert_int_eq(dq_ack(cl, Q, "running", res.jobs[0].fence), DQ_OK);
    dq_claim_result_free(&res);
    dq_stats s = stats();
    ck_assert_int_eq(s.delayed + s.due + s.processing, 0);
    ck_assert_int_eq(s.dead, 1);
}
END_TEST

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

/* ---- scripts vanish, Redis restarts ------------------------------------- */

static void script_flush(void)
{
    ck_assert_int_eq(fixture_redis_int(fx, "SCRIPT FLUSH"), 0);
}

START_TEST(scripts_reload_after_script_flush)
{
    script_flush();
    enq("a", "x", 0, 0);
    script_flush();
    dq_claim_result res;
    claim_n(1, 30000, 1, &res);
    script_flush();
    ck_assert_int_eq(dq_ack(cl, Q, "a", res.jobs[0].fence), DQ_OK);
    dq_claim_result_free(&res);
    script_flush();
    dq_stats s = stats();
    ck_assert_int_eq(s.due + s.processing, 0);
    script_flush();
    dq_job_info info;
    ck_assert_int_eq(dq_show(cl, Q, "a", &info), DQ_ERR_NOTFOUND);
    script_flush();
    make_dead("d");
    script_flush();
    ck_assert_int_eq(dq_requeue(cl, Q, "d"), DQ_OK);
}
END_TEST

START_TEST(pipeline_reloads_after_script_flush)
{
    dq_enqueue_req reqs[50];
    dq_status sts[50];
    for (int i = 0; i < 50; i++)
        reqs[i] = req_make(NULL, "x", 0, 0);
    script_flush();
    ck_assert_int_eq(dq_enqueue_many(cl, reqs, 50, NULL, sts), DQ_OK);
    for (int i = 0; i < 50; i++)
        ck_assert_int_eq(sts[i], DQ_OK);
    ck_assert_int_eq(stats().due, 50);
}
END_TEST

START_TEST(client_recovers_after_redis_restart)
{
    enq("before", "x", 0, 0);
    restart_server();

    /* The call that meets the dead connection may fail; the next works. */
    dq_stats s;
    dq_status st = dq_stats_get(cl, Q, &s);
    if (st != DQ_OK) {
        ck_assert_msg(st == DQ_ERR_CONNECT, "after restart: %s", dq_errmsg(cl));
        ck_assert_str_ne(dq_errmsg(cl), "");
        st = dq_stats_get(cl, Q, &s);
    }
    ck_assert_msg(st == DQ_OK, "no recovery: %s", dq_errmsg(cl));
    ck_assert_int_eq(s.due, 0);   /* no persistence: the job is gone */

    /* A new server has no scripts loaded: every path loads its own. */
    enq("after", "x", 0, 0);
    dq_claim_result res;
    claim_n(1, 30000, 1, &res);
    ck_assert_str_eq(res.jobs[0].id, "after");
    ck_assert_int_eq(dq_ack(cl, Q, "after", res.jobs[0].fence), DQ_OK);
    dq_claim_result_free(&res);

    /* Same again, with the pipeline being the first to meet the break. */
    restart_server();
    dq_enqueue_req reqs[3] = { req_make("p1", "x", 0, 0), req_make("p2", "x", 0, 0),
                               req_make("p3", "x", 0, 0) };
    st = dq_enqueue_many(cl, reqs, 3, NULL, NULL);
    if (st != DQ_OK) {
        ck_assert_msg(st == DQ_ERR_CONNECT, "after restart: %s", dq_errmsg(cl));
        st = dq_enqueue_many(cl, reqs, 3, NULL, NULL);
    }
    ck_assert_msg(st == DQ_OK, "no recovery: %s", dq_errmsg(cl));
    ck_assert_int_eq(stats().due, 3);
    char **v;
    size_t n;
    ck_assert_int_eq(dq_queues(cl, &v, &n), DQ_OK);   /* re-registered */
    ck_assert_uint_eq(n, 1);
    dq_strv_free(v, n);
}
END_TEST

/* ---- connecting --------------------------------------------------------- */

START_TEST(unreachable_socket_is_connect_error)
{
    dq_options opt;
    dq_options_init(&opt);
    opt.unix_path = "/nonexistent/delayq-test/redis.sock";
    char err[256] = "";
    dq_status st = DQ_OK;
    dq_client *c = dq_connect(&opt, err, sizeof err, &st);
    ck_assert_ptr_null(c);
    ck_assert_int_eq(st, DQ_ERR_CONNECT);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/delayq-test/redis.sock"));

    opt.unix_path = fx->sock;
    opt.prefix = "bad{prefix";
    c = dq_connect(&opt, err, sizeof err, &st);
    ck_assert_ptr_null(c);
    ck_assert_int_eq(st, DQ_ERR_INVALID);
}
END_TEST

/* Connect with a user and password; return the status (closing any client). */
static dq_status try_connect(const char *user, const char *password, char *err,
                             size_t errlen)
{
    dq_options opt;
    fixture_options(fx, &opt);
    opt.user = user;
    opt.password = password;
    dq_status st = DQ_ERR_REDIS;
    dq_client *c = dq_connect(&opt, err, errlen, &st);
    if (c) {
        dq_stats s;
        dq_status used = dq_stats_get(c, Q, &s);
        ck_assert_msg(used == DQ_OK, "connected but unusable: %s", dq_errmsg(c));
        dq_close(c);
    } else {
        ck_assert_int_ne(st, DQ_OK);
    }
    return st;
}

START_TEST(requirepass_is_enforced)
{
    char err[256];
    ck_assert_int_eq(fixture_redis_int(fx, "CONFIG SET requirepass %s", TEST_PASSWORD), 0);
    ck_assert_int_eq(try_connect(NULL, NULL, err, sizeof err), DQ_ERR_AUTH);
    ck_assert_int_eq(try_connect(NULL, "wrong", err, sizeof err), DQ_ERR_AUTH);
    ck_assert_int_eq(try_connect(NULL, TEST_PASSWORD, err, sizeof err), DQ_OK);

    /* A client that connected before the password was set, and loses its
     * connection, is refused once it reconnects. */
    redisContext *rc = raw_connect();
    ck_assert(raw_ok(rc, "AUTH " TEST_PASSWORD));
    ck_assert(raw_ok(rc, "CLIENT KILL TYPE normal SKIPME yes"));
    int64_t now;
    dq_status st = dq_server_time(cl, &now);
    if (st == DQ_ERR_CONNECT)
        st = dq_server_time(cl, &now);
    ck_assert_msg(st == DQ_ERR_AUTH, "got %s: %s", dq_status_str(st), dq_errmsg(cl));
    ck_assert(raw_ok(rc, "CONFIG SET requirepass %s", ""));
    redisFree(rc);
    ck_assert_int_eq(try_connect(NULL, NULL, err, sizeof err), DQ_OK);
    ck_assert_int_eq(dq_server_time(cl, &now), DQ_OK);
}
END_TEST

START_TEST(acl_user_authenticates)
{
    char err[256];
    ck_assert_int_eq(fixture_redis_int(fx, "ACL SETUSER alice on >pw ~* &* +@all"), 0);
    ck_assert_int_eq(try_connect("alice", "pw", err, sizeof err), DQ_OK);
    ck_assert_int_eq(try_connect("alice", "nope", err, sizeof err), DQ_ERR_AUTH);
    ck_assert_int_eq(try_connect("mallory", "pw", err, sizeof err), DQ_ERR_AUTH);
    ck_assert_int_eq(try_connect("alice", NULL, err, sizeof err), DQ_ERR_INVALID);
}
END_TEST

START_TEST(db_option_selects_database)
{
    dq_options opt;
    fixture_options(fx, &opt);
    opt.db = 3;
    char err[256];
    dq_client *c3 = dq_connect(&opt, err, sizeof err, NULL);
    ck_assert_msg(c3 != NULL, "%s", err);
    dq_enqueue_req r = req_make("in3", "x", 0, 0);
    ck_assert_int_eq(dq_enqueue(c3, &r, NULL), DQ_OK);
    dq_stats s;
    ck_assert_int_eq(dq_stats_get(c3, Q, &s), DQ_OK);
    ck_assert_int_eq(s.due, 1);

    ck_assert_int_eq(stats().due, 0);
    dq_job_info info;
    ck_assert_int_eq(dq_show(cl, Q, "in3", &info), DQ_ERR_NOTFOUND);
    char **v;
    size_t n;
    ck_assert_int_eq(dq_queues(cl, &v, &n), DQ_OK);
    ck_assert_uint_eq(n, 0);
    dq_strv_free(v, n);
    dq_close(c3);

    opt.db = 100000;   /* no such database */
    dq_status st;
    ck_assert_ptr_null(dq_connect(&opt, err, sizeof err, &st));
    ck_assert_int_eq(st, DQ_ERR_AUTH);
    ck_assert_ptr_nonnull(strstr(err, "SELECT"));
}
END_TEST

START_TEST(hung_server_times_out_and_client_recovers)
{
    dq_options opt;
    fixture_options(fx, &opt);
    opt.command_timeout_ms = 200;
    char err[256];
    dq_client *c = dq_connect(&opt, err, sizeof err, NULL);
    ck_assert_msg(c != NULL, "%s", err);
    dq_stats s;
    ck_assert_int_eq(dq_stats_get(c, Q, &s), DQ_OK);

    ck_assert_int_eq(kill(fx->pid, SIGSTOP), 0);
    int64_t t0 = tu_mono_ms();
    dq_status st = dq_stats_get(c, Q, &s);
    int64_t took = tu_mono_ms() - t0;
    dq_status again = dq_stats_get(c, Q, &s);   /* reconnects, times out too */
    ck_assert_int_eq(kill(fx->pid, SIGCONT), 0);
    ck_assert_msg(st == DQ_ERR_TIMEOUT, "got %s: %s", dq_status_str(st), dq_errmsg(c));
    ck_assert_int_ge(took, 150);
    ck_assert_int_lt(took, 2000);
    ck_assert_int_eq(again, DQ_ERR_TIMEOUT);

    st = dq_stats_get(c, Q, &s);
    ck_assert_msg(st == DQ_OK, "after SIGCONT: %s", dq_errmsg(c));
    dq_enqueue_req r = req_make("x", "x", 0, 0);
    ck_assert_int_eq(dq_enqueue(c, &r, NULL), DQ_OK);
    dq_close(c);
}
END_TEST

/* ---- pipelines and wake-ups --------------------------------------------- */

START_TEST(enqueue_many_reports_bad_request_and_stores_rest)
{
    enum { N = 1000, BAD = 500 };
    dq_enqueue_req *reqs = calloc(N, sizeof *reqs);
    dq_enqueued *out = calloc(N, sizeof *out);
    dq_status *sts = calloc(N, sizeof *sts);
    char (*ids)[16] = calloc(N, sizeof *ids);
    ck_assert(reqs && out && sts && ids);
    for (int i = 0; i < N; i++) {
        snprintf(ids[i], sizeof ids[i], "job-%d", i);
        reqs[i] = req_make(i % 2 ? ids[i] : NULL, "x", i % 3 ? 0 : 60000, 0);
    }
    reqs[BAD].type = "has space";
    ck_assert_int_eq(dq_enqueue_many(cl, reqs, N, out, sts), DQ_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(cl), "type"));
    for (int i = 0; i < N; i++) {
        if (i == BAD) {
            ck_assert_int_eq(sts[i], DQ_ERR_INVALID);
            continue;
        }
        ck_assert_msg(sts[i] == DQ_OK, "job %d: %s", i, dq_status_str(sts[i]));
        if (i % 2)
            ck_assert_str_eq(out[i].id, ids[i]);
        else
            ck_assert_uint_gt(strlen(out[i].id), 0);
    }
    dq_stats s = stats();
    ck_assert_int_eq(s.due + s.delayed, N - 1);
    ck_assert_int_eq(s.delayed, 334);   /* i % 3 == 0; BAD is not among them */

    /* A refusal from Redis (EXISTS) in the middle is reported the same way. */
    dq_enqueue_req again[3] = { req_make("new-1", "x", 0, 0), req_make("job-1", "x", 0, 0),
                                req_make("new-2", "x", 0, 0) };
    ck_assert_int_eq(dq_enqueue_many(cl, again, 3, NULL, sts), DQ_ERR_EXISTS);
    ck_assert_int_eq(sts[0], DQ_OK);
    ck_assert_int_eq(sts[1], DQ_ERR_EXISTS);
    ck_assert_int_eq(sts[2], DQ_OK);
    ck_assert_int_eq(stats().due + stats().delayed, N + 1);
    free(reqs);
    free(out);
    free(sts);
    free(ids);
}
END_TEST

/* enqueue_many's reply names only what the library cannot know, so the
 * ids and due times it reports are worked out on the client: they must be
 * those of the stored jobs, for delays, absolute times, producers' ids and
 * generated ids, including generated ids drawn again because a record
 * holds them already (here: the queue's id counter was set back). */
START_TEST(enqueue_many_results_match_stored_jobs)
{
    for (int i = 0; i < 3; i++)
        enq(NULL, "first", 0, 0);              /* generated ids 1, 2, 3 */
    redisContext *rc = raw_connect();
    ck_assert(raw_ok(rc, "HSET dq:{%s}:meta seq 1", Q));
    redisFree(rc);

    int64_t at = server_now() + 3600 * 1000;
    dq_enqueue_req reqs[5] = {
        req_make(NULL, "gen-now", 0, 0),     /* would be 2: drawn again */
        req_make(NULL, "gen-at", 0, 7),      /* would be 3: drawn again */
        req_make("named", "named", 5000, 0),
        req_make(NULL, "gen-later", 60000, 0),
        req_make("named", "again", 0, 0),    /* taken in this call */
    };
    reqs[1].at_ms = at;
    dq_enqueued out[5];
    dq_status sts[5];
    int64_t before = server_now();
    ck_assert_int_eq(dq_enqueue_many(cl, reqs, 5, out, sts), DQ_ERR_EXISTS);
    int64_t after = server_now();
    ck_assert_int_eq(sts[4], DQ_ERR_EXISTS);
    ck_assert_str_eq(out[2].id, "named");
    ck_assert_int_eq(out[1].due_ms, at);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(sts[i], DQ_OK);
        for (int j = 0; j < i; j++)
            ck_assert_str_ne(out[i].id, out[j].id);
        ck_assert(strcmp(out[i].id, "1") && strcmp(out[i].id, "2") && strcmp(out[i].id, "3"));
        dq_job_info info;
        ck_assert_int_eq(dq_show(cl, Q, out[i].id, &info), DQ_OK);
        ck_assert_int_eq(info.state_ms, out[i].due_ms);
        ck_assert_int_eq(info.job.due_ms, out[i].due_ms);
        ck_assert_int_eq((int64_t)info.job.payload_len, (int64_t)strlen(reqs[i].payload));
        ck_assert(memcmp(info.job.payload, reqs[i].payload, info.job.payload_len) == 0);
        ck_assert_str_eq(info.job.type, "email");
        ck_assert_int_eq(info.job.max_attempts, reqs[i].max_attempts);
        ck_assert_int_eq(info.job.attempt, 0);
        ck_assert_int_ge(info.job.created_ms, before);
        ck_assert_int_le(info.job.created_ms, after);
        if (i != 1) {
            ck_assert_int_ge(out[i].due_ms, before + reqs[i].delay_ms);
            ck_assert_int_le(out[i].due_ms, after + reqs[i].delay_ms);
        }
        dq_job_info_free(&info);
    }
    ck_assert_int_eq(stats().due + stats().delayed, 3 + 4);
}
END_TEST

/* Bulk enqueue is sent in chunks, one script call per run of one queue:
 * across chunk and queue boundaries every job is stored once, generated
 * ids never collide, a repeated id inside one call is refused like any
 * taken id, and replace works inside a batch. */
START_TEST(enqueue_many_chunks_by_queue)
{
    enum { N = 2600 };
    dq_enqueue_req *reqs = calloc(N, sizeof *reqs);
    dq_enqueued *out = calloc(N, sizeof *out);
    dq_status *sts = calloc(N, sizeof *sts);
    ck_assert(reqs && out && sts);
    for (int i = 0; i < N; i++) {
        reqs[i] = req_make(NULL, "p", 0, 0);
        reqs[i].queue = i < 1300 ? Q : "other";   /* 1000 + 300, then 1000 + 300 */
    }
    reqs[10].id = "dup:1";
    reqs[20].id = "dup:1";              /* same call, same queue: taken */
    reqs[30].id = "rep:1";
    reqs[40].id = "rep:1";
    reqs[40].replace = true;            /* same call: rescheduled */
    reqs[40].payload = "second";
    reqs[40].payload_len = 6;
    ck_assert_int_eq(dq_enqueue_many(cl, reqs, N, out, sts), DQ_ERR_EXISTS);
    int ok = 0;
    for (int i = 0; i < N; i++)
        ok += sts[i] == DQ_OK;
    ck_assert_int_eq(ok, N - 1);
    ck_assert_int_eq(sts[20], DQ_ERR_EXISTS);
    ck_assert(out[40].replaced);
    /* Generated ids are unique within each queue. */
    for (int i = 1; i < N; i++)
        if (!reqs[i].id && !reqs[i - 1].id && reqs[i].queue == reqs[i - 1].queue)
            ck_assert_str_ne(out[i].id, out[i - 1].id);
    dq_stats a, b;
    ck_assert_int_eq(dq_stats_get(cl, Q, &a), DQ_OK);
    ck_assert_int_eq(dq_stats_get(cl, "other", &b), DQ_OK);
    ck_assert_int_eq(a.due + a.delayed + b.due + b.delayed, N - 2);
    dq_job_info info;
    ck_assert_int_eq(dq_show(cl, Q, "rep:1", &info), DQ_OK);
    ck_assert_int_eq(info.job.payload_len, 6);
    ck_assert_mem_eq(info.job.payload, "second", 6);
    dq_job_info_free(&info);
    free(reqs);
    free(out);
    free(sts);
}
END_TEST

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

/* Read one wake message: its payload (the due time) as a number, or -1
 * when none arrives within the subscriber's timeout. */
static long long wake_read(redisContext *sub)
{
    void *reply = NULL;
    if (redisGetReply(sub, &reply) != REDIS_OK)
        return -1;
    redisReply *r = reply;
    ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
    ck_assert_uint_eq(r->elements, 3);
    ck_assert_str_eq(r->element[0]->str, "message");
    ck_assert_str_eq(r->element[1]->str, "dq:{" Q "}:wake");
    long long due = strtoll(r->element[2]->str, NULL, 10);
    freeReplyObject(r);
    return due;
}

START_TEST(wake_is_published_only_for_a_sooner_job)
{
    redisContext *sub = raw_connect();
    redisReply *r = redisCommand(sub, "SUBSCRIBE dq:{" Q "}:wake");
    ck_assert_ptr_nonnull(r);
    freeReplyObject(r);
    struct timeval tv = { 0, 300 * 1000 };
    redisSetTimeout(sub, tv);

    dq_enqueued head = enq("head", "x", 30000, 0);       /* empty queue: wake */
    ck_assert_int_eq(wake_read(sub), head.due_ms);
    enq("later", "x", 60000, 0);                        /* not sooner: quiet */
    dq_enqueued sooner = enq("sooner", "x", 10000, 0);  /* sooner: wake */
    ck_assert_int_eq(wake_read(sub), sooner.due_ms);    /* nothing in between */
    enq("same", "x", 20000, 0);
    ck_assert_int_eq(wake_read(sub), -1);
    redisFree(sub);
}
END_TEST

/* ---- the suite ---------------------------------------------------------- */

static TCase *tcase(Suite *s, const char *name, int timeout)
{
    return fixture_tcase(s, name, timeout, server_up, server_down, test_setup,
                         test_teardown);
}

static Suite *client_suite(void)
{
    Suite *s = suite_create("client");
    TCase *tc = tcase(s, "produce", 10);
    tcase_add_test(tc, enqueue_generates_ids_and_keeps_chosen_ones);
    tcase_add_test(tc, identical_payloads_stay_two_jobs);
    tcase_add_test(tc, payload_is_binary_safe);
    tcase_add_test(tc, oversized_payload_is_refused_and_not_stored);
    tcase_add_test(tc, duplicate_id_is_refused_and_original_kept);
    tcase_add_test(tc, replace_reschedules_with_new_payload);
    tcase_add_test(tc, replace_of_processing_job_is_refused);
    tcase_add_test(tc, bad_names_are_invalid);

    tc = tcase(s, "claim", 10);
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

    tc = tcase(s, "operate", 20);
    tcase_add_test(tc, cancel_depends_on_state);
    tcase_add_test(tc, requeue_one_dead_job);
    tcase_add_test(tc, requeue_all_moves_more_than_a_batch);
    tcase_add_test(tc, purge_one_and_all);
    tcase_add_test(tc, stats_count_each_state);
    tcase_add_test(tc, queues_are_listed_sorted);

    tc = tcase(s, "reload", 20);
    tcase_add_test(tc, scripts_reload_after_script_flush);
    tcase_add_test(tc, pipeline_reloads_after_script_flush);
    tcase_add_test(tc, client_recovers_after_redis_restart);

    tc = tcase(s, "connect", 10);
    tcase_add_test(tc, unreachable_socket_is_connect_error);
    tcase_add_test(tc, requirepass_is_enforced);
    tcase_add_test(tc, acl_user_authenticates);
    tcase_add_test(tc, db_option_selects_database);
    tcase_add_test(tc, hung_server_times_out_and_client_recovers);

    tc = tcase(s, "pipeline", 20);
    tcase_add_test(tc, enqueue_many_reports_bad_request_and_stores_rest);
    tcase_add_test(tc, enqueue_many_chunks_by_queue);
    tcase_add_test(tc, enqueue_many_results_match_stored_jobs);
    tcase_add_test(tc, claimed_records_decode_at_every_size);
    tcase_add_test(tc, corrupt_records_are_not_lost);
    tcase_add_test(tc, wake_is_published_only_for_a_sooner_job);
    return s;
}

int main(void)
{
    /* SIGPIPE stays at its default on purpose: a write to a connection
     * Redis closed (the restart test) must fail in the library, not kill
     * the program that uses it. */
    signal(SIGPIPE, SIG_DFL);
    live_pid = mmap(NULL, sizeof *live_pid, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (live_pid == MAP_FAILED) {
        perror("mmap");
        return EXIT_FAILURE;
    }
    int status = fixture_run_suite(client_suite());
    munmap(live_pid, sizeof *live_pid);
    return status;
}
