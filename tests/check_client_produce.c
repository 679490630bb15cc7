/*
 * libdelayq against a real redis-server, producing
 * (src/lib/ops_produce.c): dq_enqueue, dq_enqueue_many, dq_cancel,
 * dq_run_now and the wake-up an enqueue publishes.
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
#include "lib/scripts.h"

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

/* "." and "..": path segments a browser rewrites, so no URL could name
 * the job; refused like all-digit ids, by the library and by the scripts
 * (for producers in other languages), nothing written. */
START_TEST(dot_ids_are_refused_everywhere)
{
    const char *dots[] = { ".", ".." };
    for (size_t i = 0; i < 2; i++) {
        dq_enqueue_req r = req_make(dots[i], "x", 0, 0);
        ck_assert_int_eq(dq_enqueue(cl, &r, NULL), DQ_ERR_INVALID);
        ck_assert_msg(strstr(dq_errmsg(cl), "'.' or '..'"), "%s", dq_errmsg(cl));
        dq_status st;
        ck_assert_int_eq(dq_enqueue_many(cl, &r, 1, NULL, &st), DQ_ERR_INVALID);
        redisContext *rc = raw_connect();
        redisReply *rep = redisCommand(rc, "EVAL %s 6 %s %s %s %s %s %s %s %s t x delay 0 0 0",
                                       dq_scripts[DQ_SCRIPT_ENQUEUE].text,
                                       "dq:{" Q "}:jobs", "dq:{" Q "}:delayed",
                                       "dq:{" Q "}:processing", "dq:{" Q "}:dead",
                                       "dq:{" Q "}:meta", "dq:{" Q "}:lease", "", dots[i]);
        ck_assert_int_eq(rep->type, REDIS_REPLY_ERROR);
        ck_assert_msg(strstr(rep->str, "enqueue: id") && strstr(rep->str, "'.' or '..'")
                          && !strchr(rep->str, '\n'), "%s", rep->str);
        freeReplyObject(rep);
        rep = redisCommand(rc, "EVAL %s 6 %s %s %s %s %s %s %s %s %s %b",
                           dq_scripts[DQ_SCRIPT_ENQUEUE_MANY].text,
                           "dq:{" Q "}:jobs", "dq:{" Q "}:delayed",
                           "dq:{" Q "}:processing", "dq:{" Q "}:dead",
                           "dq:{" Q "}:meta", "dq:{" Q "}:lease", "", dots[i], "0",
                           "\x96\xa1t\xa1x\x00", (size_t)6);
        ck_assert_int_eq(rep->type, REDIS_REPLY_ERROR);
        ck_assert_msg(strstr(rep->str, "job 1 id") && strstr(rep->str, "'.' or '..'"), "%s",
                      rep->str);
        freeReplyObject(rep);
        redisFree(rc);
    }
    ck_assert_int_eq(fixture_redis_int(fx, "EXISTS dq:{" Q "}:jobs"), 0);
    dq_stats s = stats();
    ck_assert_int_eq(s.due + s.delayed, 0);
    /* Ids that merely hold dots are fine. */
    enq(".hidden", "x", 0, 0);
    enq("a..b", "x", 0, 0);
    enq("...", "x", 0, 0);
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

/* ---- cancelling --------------------------------------------------------- */

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
    ck_assert_int_eq(dq_cancel(cl, Q, "running"), DQ_OK);
    show("running", &info);
    ck_assert_int_eq(info.state, DQ_STATE_CANCELLED);
    ck_assert_int_eq(info.job.fence, res.jobs[0].fence);
    dq_job_info_free(&info);
    ck_assert_int_eq(dq_cancel(cl, Q, "dead"), DQ_ERR_DEAD);
    show("dead", &info);
    ck_assert_int_eq(info.state, DQ_STATE_DEAD);
    dq_job_info_free(&info);
    ck_assert_int_eq(dq_cancel(cl, Q, "nosuch"), DQ_ERR_NOTFOUND);
    ck_assert_int_eq(dq_cancel(cl, Q, "waiting"), DQ_ERR_NOTFOUND);
    /* The run's ack comes too late: the job ended when it was cancelled. */
    ck_assert_int_eq(dq_ack(cl, Q, "running", res.jobs[0].fence), DQ_ERR_STALE);
    dq_claim_result_free(&res);
    dq_stats s = stats();
    ck_assert_int_eq(s.delayed + s.due + s.processing, 0);
    ck_assert_int_eq(s.dead, 1);
    ck_assert_int_eq(s.jobs_cancelled, 2);
}
END_TEST

/* ---- running now ---------------------------------------------------------- */

START_TEST(run_now_depends_on_state)
{
    make_dead("dead");
    enq("running", "x", 0, 0);
    dq_claim_result res;
    claim_n(1, 30000, 1, &res);
    dq_enqueue_req r = req_make("later", "x", 3600 * 1000, 0);
    r.priority = DQ_PRIORITY(2);
    dq_enqueued e;
    ck_assert_int_eq(dq_enqueue(cl, &r, &e), DQ_OK);

    int64_t before = server_now();
    ck_assert_int_eq(dq_run_now(cl, Q, "later"), DQ_OK);
    dq_job_info info;
    show("later", &info);
    ck_assert_int_eq(info.state, DQ_STATE_DELAYED);
    ck_assert_int_eq(info.job.priority, 2);
    ck_assert_int_ge(info.state_ms, before - 1000);
    ck_assert_int_le(info.state_ms, server_now());
    ck_assert_int_eq(info.job.due_ms, info.state_ms);
    ck_assert_int_eq(info.job.attempt, 0);
    dq_job_info_free(&info);
    ck_assert_int_eq(dq_run_now(cl, Q, "later"), DQ_OK);    /* due already: stays */
    dq_claim_result got;
    claim_n(5, 30000, 1, &got);
    ck_assert_str_eq(got.jobs[0].id, "later");
    dq_claim_result_free(&got);

    ck_assert_int_eq(dq_run_now(cl, Q, "running"), DQ_ERR_RUNNING);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(cl), "running"));
    ck_assert_int_eq(dq_run_now(cl, Q, "dead"), DQ_ERR_DEAD);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(cl), "requeue"));
    ck_assert_int_eq(dq_run_now(cl, Q, "nosuch"), DQ_ERR_NOTFOUND);
    ck_assert_int_eq(dq_run_now(cl, Q, ""), DQ_ERR_INVALID);
    ck_assert_int_eq(dq_run_now(cl, "bad queue", "x"), DQ_ERR_INVALID);
    show("dead", &info);
    ck_assert_int_eq(info.state, DQ_STATE_DEAD);
    dq_job_info_free(&info);
    dq_claim_result_free(&res);
}
END_TEST

/* The job is found in its partition; an unreadable record is refused
 * with the reason and left where it is. */
START_TEST(run_now_partitioned_and_unreadable)
{
    ck_assert_int_eq(dq_queue_set_partitions(cl, Q, 3), DQ_OK);
    for (int i = 0; i < 6; i++) {
        char id[8];
        snprintf(id, sizeof id, "k%d", i);
        enq(id, "x", 3600 * 1000, 0);
    }
    for (int i = 0; i < 6; i++) {
        char id[8];
        snprintf(id, sizeof id, "k%d", i);
        ck_assert_msg(dq_run_now(cl, Q, id) == DQ_OK, "%s: %s", id, dq_errmsg(cl));
    }
    ck_assert_int_eq(stats().due, 6);

    ck_assert_int_eq(dq_queue_set_partitions(cl, "other", 1), DQ_OK);
    dq_enqueue_req r = req_make("bad", "x", 3600 * 1000, 0);
    r.queue = "other";
    dq_enqueued e;
    ck_assert_int_eq(dq_enqueue(cl, &r, &e), DQ_OK);
    redisContext *rc = raw_connect();
    ck_assert(raw_ok(rc, "HSET dq:{other}:jobs bad garbage"));
    ck_assert_int_eq(dq_run_now(cl, "other", "bad"), DQ_ERR_REDIS);
    ck_assert_msg(strstr(dq_errmsg(cl), "cannot be read"), "%s", dq_errmsg(cl));
    redisReply *z = redisCommand(rc, "ZSCORE dq:{other}:delayed bad");
    ck_assert(z && z->type == REDIS_REPLY_STRING);
    ck_assert_int_eq(atoll(z->str), e.due_ms);
    freeReplyObject(z);
    redisFree(rc);
}
END_TEST

/* ---- the suite ---------------------------------------------------------- */

Suite *client_suite(void)
{
    Suite *s = suite_create("client_produce");
    TCase *tc = tcase(s, "produce", 10);
    tcase_add_test(tc, enqueue_generates_ids_and_keeps_chosen_ones);
    tcase_add_test(tc, dot_ids_are_refused_everywhere);
    tcase_add_test(tc, identical_payloads_stay_two_jobs);
    tcase_add_test(tc, payload_is_binary_safe);
    tcase_add_test(tc, oversized_payload_is_refused_and_not_stored);
    tcase_add_test(tc, duplicate_id_is_refused_and_original_kept);
    tcase_add_test(tc, replace_reschedules_with_new_payload);
    tcase_add_test(tc, replace_of_processing_job_is_refused);
    tcase_add_test(tc, bad_names_are_invalid);

    tc = tcase(s, "pipeline", 20);
    tcase_add_test(tc, enqueue_many_reports_bad_request_and_stores_rest);
    tcase_add_test(tc, enqueue_many_chunks_by_queue);
    tcase_add_test(tc, enqueue_many_results_match_stored_jobs);
    tcase_add_test(tc, wake_is_published_only_for_a_sooner_job);

    tc = tcase(s, "cancel", 20);
    tcase_add_test(tc, cancel_depends_on_state);
    tcase_add_test(tc, run_now_depends_on_state);
    tcase_add_test(tc, run_now_partitioned_and_unreadable);
    return s;
}
