/*
 * libdelayq's partitioned queues against a real redis-server
 * (src/lib/partitions.c and the partition-aware calls): the stored count
 * and its refusals, ids and their partitions, every call reaching a job
 * by its id, claims over all partitions, the aggregated operator calls.
 *
 * Fixtures, helpers and main() are in client_test.c.
 */
#include <check.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client_test.h"

#include "redis/cluster_map.h"
#include "lib/keys.h"
#include "lib/scripts.h"

/* Whether a raw key exists. */
static int key_exists(const char *key)
{
    redisContext *rc = raw_connect();
    redisReply *r = redisCommand(rc, "EXISTS %s", key);
    ck_assert_ptr_nonnull(r);
    int yes = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    redisFree(rc);
    return yes;
}

/* The score of `id` in partition `part`'s set `set` (delayed, dead ...),
 * -1 when it is not there. */
static long long score_in(unsigned part, const char *set, const char *id)
{
    redisContext *rc = raw_connect();
    redisReply *r = redisCommand(rc, "ZSCORE dq:{%s:%u}:%s %s", Q, part, set, id);
    ck_assert_ptr_nonnull(r);
    long long v = r->type == REDIS_REPLY_STRING ? atoll(r->str) : -1;
    freeReplyObject(r);
    redisFree(rc);
    return v;
}

static void set_parts(unsigned n)
{
    ck_assert_msg(dq_queue_set_partitions(cl, Q, n) == DQ_OK, "%s", dq_errmsg(cl));
}

/* ---- the stored count --------------------------------------------------- */

START_TEST(count_is_read_again_after_reconnect)
{
    dq_stats st;
    ck_assert_int_eq(dq_stats_get(cl, Q, &st), DQ_OK);   /* reads 1 */
    dq_client *other = fixture_client(fx);
    ck_assert_int_eq(dq_queue_set_partitions(other, Q, 4), DQ_OK);
    dq_close(other);
    /* the cached count holds until the connection is made again */
    redisContext *rc = raw_connect();
    ck_assert(raw_ok(rc, "CLIENT KILL TYPE normal"));
    redisFree(rc);
    dq_status ignored = dq_stats_get(cl, Q, &st);   /* meets the closed one */
    (void)ignored;
    dq_enqueued e = enq(NULL, "x", 60000, 0);
    ck_assert_int_ge(score_in(keys_partition_of(e.id, 4), "delayed", e.id), 0);
    ck_assert(!key_exists("dq:{" Q "}:delayed"));
}
END_TEST

/* Run script `s` (its text, as EVAL) on the keys `k` with `args`, and
 * return its reply's first element, then a space and its second, or
 * "error" for an error reply (static). */
static const char *eval_words(enum dq_script_id s, const struct queue_keys *k,
                              const char *const *args, int nargs)
{
    static char words[64];
    const char *argv[3 + KEYS_PER_SCRIPT + 16] = { "EVAL", dq_scripts[s].text, "6" };
    int argc = 3;
    ck_assert_int_le(nargs, 16);
    for (int i = 0; i < KEYS_PER_SCRIPT; i++)
        argv[argc++] = k->key[i];
    for (int i = 0; i < nargs; i++)
        argv[argc++] = args[i];
    redisContext *rc = raw_connect();
    redisReply *r = redisCommandArgv(rc, argc, argv, NULL);
    ck_assert_ptr_nonnull(r);
    if (r->type == REDIS_REPLY_ERROR)
        snprintf(words, sizeof words, "error");
    else
        snprintf(words, sizeof words, "%s %s", r->element[0]->str, r->element[1]->str);
    freeReplyObject(r);
    redisFree(rc);
    return words;
}

/* The partitions script run as a caller that read `expected` would: its
 * status word. */
static const char *cas(const char *expected, const char *n)
{
    struct queue_keys k;
    keys_build(&k, "dq", Q);
    const char *args[] = { expected, n };
    static char word[32];
    snprintf(word, sizeof word, "%s", eval_words(DQ_SCRIPT_PARTITIONS, &k, args, 2));
    word[strcspn(word, " ")] = '\0';
    return word;
}

START_TEST(partitions_script_compares_and_sets)
{
    ck_assert_str_eq(cas("2", "4"), "changed");   /* stored is 1 */
    ck_assert_str_eq(cas("1", "4"), "ok");
    ck_assert_str_eq(cas("1", "8"), "changed");   /* a concurrent setter lost */
    unsigned n;
    ck_assert_int_eq(dq_queue_partitions(cl, Q, &n), DQ_OK);
    ck_assert_uint_eq(n, 4);
    ck_assert_str_eq(cas("4", "1"), "ok");
    /* arguments are checked before anything is read or written */
    ck_assert_str_eq(cas("1", "0"), "error");
    ck_assert_str_eq(cas("1", "257"), "error");
    ck_assert_str_eq(cas("x", "2"), "error");
    /* jobs in the unpartitioned keys: no N > 1 */
    redisContext *rc = raw_connect();
    ck_assert(raw_ok(rc, "ZADD dq:{%s}:processing 1 busy", Q));
    redisFree(rc);
    ck_assert_str_eq(cas("1", "2"), "jobs");
}
END_TEST

/* The enqueue script on partition `part`'s keys (of 4) with the
 * partition arguments `n` and `p`: "ok ID", or "error". */
static const char *raw_enqueue(unsigned part, const char *n, const char *p)
{
    struct queue_keys k;
    keys_build_part(&k, "dq", Q, part, 4);
    const char *args[] = { k.wake, "", "t", "x", "delay", "0", "0", "0", "5", n, p };
    return eval_words(DQ_SCRIPT_ENQUEUE, &k, args, 11);
}

/* The count's epoch field of partition `part`'s meta hash ("" when
 * absent; static). */
static const char *epoch_of(unsigned part)
{
    static char v[16];
    redisContext *rc = raw_connect();
    redisReply *r = redisCommand(rc, "HGET dq:{%s:%u}:meta partitions", Q, part);
    ck_assert_ptr_nonnull(r);
    snprintf(v, sizeof v, "%s", r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
    redisFree(rc);
    return v;
}

/* A producer that read a count another client then changed follows the
 * change at its next write, with no reconnect: the scripts refuse the old
 * count (nothing written) and the library reads the count again.  Growing
 * from 1 to 4, then shrinking to 2, with enqueue and enqueue_many. */
START_TEST(a_producer_follows_a_count_changed_under_it)
{
    dq_stats st;
    ck_assert_int_eq(dq_stats_get(cl, Q, &st), DQ_OK);     /* reads 1 */
    dq_client *other = fixture_client(fx);
    ck_assert_int_eq(dq_queue_set_partitions(other, Q, 4), DQ_OK);
    for (unsigned p = 0; p < 4; p++)
        ck_assert_str_eq(epoch_of(p), "4");
    dq_enqueued a = enq("order:2", "x", 60000, 0);
    dq_enqueued b = enq(NULL, "x", 60000, 0);
    ck_assert_int_ge(score_in(keys_partition_of("order:2", 4), "delayed", "order:2"), 0);
    ck_assert_int_ge(score_in(keys_partition_of(b.id, 4), "delayed", b.id), 0);
    ck_assert(!key_exists("dq:{" Q "}:delayed"));
    ck_assert(!key_exists("dq:{" Q "}:jobs"));

    ck_assert_int_eq(dq_cancel(other, Q, a.id), DQ_OK);
    ck_assert_int_eq(dq_cancel(other, Q, b.id), DQ_OK);
    ck_assert_int_eq(dq_queue_set_partitions(other, Q, 2), DQ_OK);
    ck_assert_str_eq(epoch_of(3), "2");       /* the old layout refuses 4 */
    enum { N = 10 };
    dq_enqueue_req reqs[N];
    char ids[N][16];
    for (int i = 0; i < N; i++) {
        snprintf(ids[i], sizeof ids[i], "j%d", i);
        reqs[i] = req_make(i % 2 ? ids[i] : NULL, "x", 60000, 0);
    }
    dq_enqueued out[N];
    dq_status sts[N];
    ck_assert_msg(dq_enqueue_many(cl, reqs, N, out, sts) == DQ_OK, "%s", dq_errmsg(cl));
    for (int i = 0; i < N; i++)
        ck_assert_msg(score_in(keys_partition_of(out[i].id, 2), "delayed", out[i].id) >= 0,
                      "job %s is not in its partition of 2", out[i].id);
    unsigned n;
    ck_assert_int_eq(dq_queue_partitions(cl, Q, &n), DQ_OK);
    ck_assert_uint_eq(n, 2);
    dq_close(other);
}
END_TEST

/* Partitions that disagree with the stored count (a change under way
 * when read twice): the script answers the count its meta holds and
 * writes nothing, and the library gives up after reading the count again
 * once (DQ_ERR_STALE); the stored count set again ends that.  A change
 * the partitions script refuses gives the partitions back the count that
 * is stored. */
START_TEST(a_count_changing_twice_is_refused_and_writes_nothing)
{
    set_parts(3);
    redisContext *rc = raw_connect();
    for (unsigned p = 0; p < 3; p++)
        ck_assert(raw_ok(rc, "HSET dq:{%s:%u}:meta partitions 5", Q, p));
    ck_assert_str_eq(raw_enqueue(2, "3", "2"), "partitions 5");
    dq_enqueue_req req = req_make("order:1", "x", 60000, 0);
    ck_assert_int_eq(dq_enqueue(cl, &req, NULL), DQ_ERR_STALE);
    ck_assert_msg(strstr(dq_errmsg(cl), "changed twice") != NULL, "%s", dq_errmsg(cl));
    dq_status st;
    ck_assert_int_eq(dq_enqueue_many(cl, &req, 1, NULL, &st), DQ_ERR_STALE);
    ck_assert_int_eq(st, DQ_ERR_STALE);
    for (unsigned p = 0; p < 3; p++) {
        char key[64];
        snprintf(key, sizeof key, "dq:{%s:%u}:jobs", Q, p);
        ck_assert_msg(!key_exists(key), "%s written", key);
    }
    /* These marks are what a setter killed between its marks and its
     * store leaves: the stored count, set again, writes them back. */
    set_parts(3);
    for (unsigned p = 0; p < 3; p++)
        ck_assert_str_eq(epoch_of(p), "3");
    dq_enqueued e = enq("order:1", "x", 60000, 0);
    ck_assert_int_ge(score_in(keys_partition_of(e.id, 3), "delayed", e.id), 0);
    ck_assert_int_eq(dq_cancel(cl, Q, e.id), DQ_OK);

    set_parts(1);
    ck_assert(raw_ok(rc, "ZADD dq:{%s}:delayed 1 old", Q));
    ck_assert_int_eq(dq_queue_set_partitions(cl, Q, 4), DQ_ERR_EXISTS);
    for (unsigned p = 0; p < 4; p++)
        ck_assert_str_eq(epoch_of(p), "1");
    redisFree(rc);
    enq("order:7", "x", 60000, 0);     /* where the stored count (1) says */
    rc = raw_connect();
    redisReply *r = redisCommand(rc, "ZSCORE dq:{%s}:delayed order:7", Q);
    ck_assert(r && r->type == REDIS_REPLY_STRING);
    freeReplyObject(r);
    redisFree(rc);
}
END_TEST

START_TEST(enqueue_script_checks_its_partition)
{
    ck_assert_str_eq(raw_enqueue(2, "4", "2"), "ok 6");   /* seq 1: 1 * 4 + 2 */
    ck_assert_str_eq(raw_enqueue(2, "4", "2"), "ok 10");
    ck_assert_str_eq(raw_enqueue(3, "4", "3"), "ok 7");   /* its own seq */
    ck_assert_str_eq(raw_enqueue(2, "4", "4"), "error");
    ck_assert_str_eq(raw_enqueue(2, "4", "-1"), "error");
    ck_assert_str_eq(raw_enqueue(2, "0", "0"), "error");
    ck_assert_str_eq(raw_enqueue(2, "257", "0"), "error");
    ck_assert_str_eq(raw_enqueue(2, "4", "x"), "error");
}
END_TEST

START_TEST(count_is_one_until_set)
{
    unsigned n = 0;
    ck_assert_int_eq(dq_queue_partitions(cl, Q, &n), DQ_OK);
    ck_assert_uint_eq(n, 1);
    set_parts(4);
    ck_assert_int_eq(dq_queue_partitions(cl, Q, &n), DQ_OK);
    ck_assert_uint_eq(n, 4);
    ck_assert(key_exists("dq:{" Q "}:meta"));
    set_parts(4);           /* the same: nothing changes */
    set_parts(1);           /* back: the field goes, as before partitions */
    ck_assert_int_eq(dq_queue_partitions(cl, Q, &n), DQ_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert(!key_exists("dq:{" Q "}:meta"));
}
END_TEST

START_TEST(bad_counts_are_refused)
{
    ck_assert_int_eq(dq_queue_set_partitions(cl, Q, 0), DQ_ERR_INVALID);
    ck_assert_int_eq(dq_queue_set_partitions(cl, Q, DQ_PARTITIONS_MAX + 1), DQ_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(cl), "1..256"));
    ck_assert_int_eq(dq_queue_set_partitions(cl, "bad queue", 2), DQ_ERR_INVALID);
    redisContext *rc = raw_connect();
    ck_assert(raw_ok(rc, "HSET dq:{%s}:meta partitions 0x10", Q));
    redisFree(rc);
    unsigned n;
    ck_assert_int_eq(dq_queue_partitions(cl, Q, &n), DQ_ERR_REDIS);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(cl), "not a partition count"));
}
END_TEST

START_TEST(change_over_jobs_is_refused)
{
    enq("a", "x", 60000, 0);
    ck_assert_int_eq(dq_queue_set_partitions(cl, Q, 4), DQ_ERR_EXISTS);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(cl), "drain it first"));
    unsigned n;
    ck_assert_int_eq(dq_queue_partitions(cl, Q, &n), DQ_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(dq_cancel(cl, Q, "a"), DQ_OK);
    set_parts(4);

    /* a job in one partition of four: no change to 2, nor back to 1 (raw
     * members: the sets are what the count looks at) */
    redisContext *rc = raw_connect();
    ck_assert(raw_ok(rc, "ZADD dq:{%s:1}:delayed 1 b", Q));
    ck_assert_int_eq(dq_queue_set_partitions(cl, Q, 2), DQ_ERR_EXISTS);
    ck_assert_int_eq(dq_queue_set_partitions(cl, Q, 1), DQ_ERR_EXISTS);
    ck_assert_int_eq(dq_queue_partitions(cl, Q, &n), DQ_OK);
    ck_assert_uint_eq(n, 4);
    /* a dead job counts as well */
    ck_assert(raw_ok(rc, "DEL dq:{%s:1}:delayed", Q));
    ck_assert(raw_ok(rc, "ZADD dq:{%s:3}:dead 1 c", Q));
    ck_assert_int_eq(dq_queue_set_partitions(cl, Q, 2), DQ_ERR_EXISTS);
    ck_assert(raw_ok(rc, "DEL dq:{%s:3}:dead", Q));
    redisFree(rc);
    set_parts(2);
}
END_TEST

START_TEST(stats_partition_sees_one_partition)
{
    dq_stats s;
    ck_assert_int_eq(dq_stats_partition(cl, Q, 0, &s), DQ_OK);
    ck_assert_int_eq(dq_stats_partition(cl, Q, 1, &s), DQ_ERR_INVALID);
    set_parts(3);
    ck_assert_int_eq(dq_stats_partition(cl, Q, 3, &s), DQ_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(cl), "no partition 3"));
    /* a raw job in partition 2's keys */
    redisContext *rc = raw_connect();
    ck_assert(raw_ok(rc, "ZADD dq:{%s:2}:delayed 1 x", Q));
    redisFree(rc);
    ck_assert_int_eq(dq_stats_partition(cl, Q, 2, &s), DQ_OK);
    ck_assert_int_eq(s.due, 1);
    ck_assert_int_eq(dq_stats_partition(cl, Q, 0, &s), DQ_OK);
    ck_assert_int_eq(s.due, 0);
}
END_TEST


/* ---- where jobs go ------------------------------------------------------- */

START_TEST(generated_ids_name_their_partition)
{
    set_parts(4);
    int per[4] = { 0 };
    for (int i = 0; i < 8; i++) {
        dq_enqueued e = enq(NULL, "x", 60000, 0);
        unsigned p = keys_partition_of(e.id, 4);
        ck_assert_int_ge(score_in(p, "delayed", e.id), 0);
        per[p]++;
    }
    for (int p = 0; p < 4; p++)   /* round robin: two each */
        ck_assert_int_eq(per[p], 2);

    dq_enqueue_req reqs[41];
    dq_enqueued outs[41];
    dq_status sts[41];
    for (int i = 0; i < 40; i++)
        reqs[i] = req_make(NULL, "y", 60000, 0);
    reqs[40] = req_make("mine", "y", 60000, 0);
    ck_assert_int_eq(dq_enqueue_many(cl, reqs, 41, outs, sts), DQ_OK);
    int many[4] = { 0 };
    for (int i = 0; i < 41; i++) {
        ck_assert_int_eq(sts[i], DQ_OK);
        unsigned p = keys_partition_of(outs[i].id, 4);
        ck_assert_msg(score_in(p, "delayed", outs[i].id) >= 0, "%s not in %u",
                      outs[i].id, p);
        if (i < 40)
            many[p]++;
    }
    ck_assert_str_eq(outs[40].id, "mine");
    for (int p = 0; p < 4; p++)
        ck_assert_int_eq(many[p], 10);
    ck_assert_int_eq(stats().delayed, 49);
}
END_TEST

START_TEST(enqueue_many_mixes_queues_and_partitions)
{
    set_parts(3);
    enum { N = 30 };
    dq_enqueue_req reqs[N];
    dq_enqueued outs[N];
    dq_status sts[N];
    char ids[N][16];
    for (int i = 0; i < N; i++) {
        snprintf(ids[i], sizeof ids[i], "m-%d", i);
        reqs[i] = req_make(i % 4 == 0 ? ids[i] : NULL, "x", 60000, 0);
        if (i % 3 == 1)
            reqs[i].queue = "other";   /* unpartitioned, between Q's jobs */
    }
    reqs[7].type = "bad type";         /* refused alone */
    ck_assert_int_eq(dq_enqueue_many(cl, reqs, N, outs, sts), DQ_ERR_INVALID);
    redisContext *rc = raw_connect();
    for (int i = 0; i < N; i++) {
        if (i == 7) {
            ck_assert_int_eq(sts[i], DQ_ERR_INVALID);
            continue;
        }
        ck_assert_int_eq(sts[i], DQ_OK);
        if (reqs[i].id)
            ck_assert_str_eq(outs[i].id, reqs[i].id);
        char key[64];
        if (strcmp(reqs[i].queue, "other") == 0)
            snprintf(key, sizeof key, "dq:{other}:delayed");
        else
            snprintf(key, sizeof key, "dq:{%s:%u}:delayed", Q,
                     keys_partition_of(outs[i].id, 3));
        redisReply *r = redisCommand(rc, "ZSCORE %s %s", key, outs[i].id);
        ck_assert_msg(r->type == REDIS_REPLY_STRING, "%s not in %s", outs[i].id, key);
        ck_assert_int_eq(atoll(r->str), outs[i].due_ms);
        freeReplyObject(r);
    }
    redisFree(rc);
    ck_assert_int_eq(stats().delayed, 20);
    dq_stats o;
    ck_assert_int_eq(dq_stats_get(cl, "other", &o), DQ_OK);
    ck_assert_int_eq(o.delayed, 9);   /* job 7 was refused */
}
END_TEST

START_TEST(producer_ids_go_by_their_hash)
{
    set_parts(8);
    int used[8] = { 0 }, parts = 0;
    for (int i = 0; i < 40; i++) {
        char id[32];
        snprintf(id, sizeof id, "order-%d", i);
        enq(id, "x", 60000, 0);
        unsigned p = keys_partition_of(id, 8);
        ck_assert_int_ge(score_in(p, "delayed", id), 0);
        parts += !used[p]++;
    }
    ck_assert_int_gt(parts, 4);   /* spread, not all in one */
}
END_TEST

START_TEST(unpartitioned_layout_is_unchanged)
{
    dq_enqueued e = enq(NULL, "x", 60000, 0);
    ck_assert_str_eq(e.id, "1");
    enq("a", "x", 60000, 0);
    ck_assert(key_exists("dq:{" Q "}:delayed"));
    ck_assert(key_exists("dq:{" Q "}:jobs"));
    ck_assert(!key_exists("dq:{" Q ":0}:delayed"));
    ck_assert(!key_exists("dq:{" Q ":0}:meta"));
}
END_TEST

/* ---- reaching a job by its id ------------------------------------------ */

START_TEST(show_replace_cancel_reach_the_partition)
{
    set_parts(5);
    for (int i = 0; i < 10; i++) {
        char id[16];
        snprintf(id, sizeof id, "job-%d", i);
        enq(id, "first", 60000, 0);
        dq_job_info info;
        show(id, &info);
        ck_assert_int_eq(info.state, DQ_STATE_DELAYED);
        ck_assert_str_eq(info.job.payload, "first");
        dq_job_info_free(&info);

        dq_enqueue_req r = req_make(id, "second", 120000, 0);
        r.replace = true;
        dq_enqueued out;
        ck_assert_int_eq(dq_enqueue(cl, &r, &out), DQ_OK);
        ck_assert(out.replaced);
        show(id, &info);
        ck_assert_str_eq(info.job.payload, "second");
        dq_job_info_free(&info);
        ck_assert_int_eq(dq_enqueue(cl, &(dq_enqueue_req){ .queue = Q, .type = "t",
                                                           .id = id }, NULL),
                         DQ_ERR_EXISTS);
        ck_assert_int_eq(dq_cancel(cl, Q, id), DQ_OK);
        ck_assert_int_eq(dq_show(cl, Q, id, &info), DQ_ERR_NOTFOUND);
    }
    dq_enqueued e = enq(NULL, "gen", 60000, 0);
    dq_job_info info;
    show(e.id, &info);
    ck_assert_str_eq(info.job.payload, "gen");
    dq_job_info_free(&info);
    ck_assert_int_eq(dq_cancel(cl, Q, e.id), DQ_OK);
    ck_assert_int_eq(stats().delayed, 0);
}
END_TEST

START_TEST(ack_and_fail_reach_the_partition)
{
    set_parts(3);
    for (int i = 0; i < 6; i++)
        enq(NULL, "x", 0, 3);
    dq_claim_result res;
    claim_n(6, 30000, 6, &res);
    /* ack half (one call: several partitions), fail the rest */
    bool acked[3] = { false, false, false };
    ck_assert_int_eq(dq_ack_many(cl, Q, res.jobs, 3, acked), DQ_OK);
    ck_assert(acked[0] && acked[1] && acked[2]);
    for (size_t i = 3; i < 6; i++) {
        dq_fail_result fr;
        ck_assert_int_eq(dq_fail(cl, Q, res.jobs[i].id, res.jobs[i].fence, "no",
                                 DQ_FAIL_RETRY, 60000, NULL, &fr), DQ_OK);
        ck_assert(!fr.dead);
        unsigned p = keys_partition_of(res.jobs[i].id, 3);
        ck_assert_int_ge(score_in(p, "delayed", res.jobs[i].id), 0);
    }
    ck_assert_int_eq(dq_ack(cl, Q, res.jobs[0].id, res.jobs[0].fence), DQ_ERR_STALE);
    dq_claim_result_free(&res);
    dq_stats s = stats();
    ck_assert_int_eq(s.processing, 0);
    ck_assert_int_eq(s.delayed, 3);
}
END_TEST

START_TEST(release_gives_back_to_each_partition)
{
    set_parts(4);
    for (int i = 0; i < 8; i++)
        enq(NULL, "x", 0, 0);
    dq_claim_result res;
    claim_n(8, 30000, 8, &res);
    size_t back = 0;
    ck_assert_int_eq(dq_release(cl, Q, res.jobs, res.n, &back), DQ_OK);
    ck_assert_uint_eq(back, 8);
    dq_claim_result_free(&res);
    dq_stats s = stats();
    ck_assert_int_eq(s.due, 8);
    ck_assert_int_eq(s.processing, 0);
}
END_TEST

/* ---- claims ------------------------------------------------------------- */

/*
 * A consumer process: claims batches of 7 from Q, each job leased for
 * `lease_ms`, until it has found Q empty three times in a row.  It writes
 * each job's id, one a line, to `fd`, sleeps `pause_ms`, then acks the
 * batch: killed in that window, its batch is left to the reaper.
 */
static void consume(int fd, int pause_ms, int64_t lease_ms)
{
    dq_client *c = fixture_client(fx);
    for (int empty = 0; empty < 3;) {
        dq_claim_result res;
        if (dq_claim(c, Q, 7, lease_ms, &res) != DQ_OK)
            _exit(2);
        empty = res.n ? 0 : empty + 1;
        for (size_t i = 0; i < res.n; i++)
            dprintf(fd, "%s\n", res.jobs[i].id);
        struct timespec ts = { pause_ms / 1000, (pause_ms % 1000) * 1000L * 1000L };
        nanosleep(&ts, NULL);
        for (size_t i = 0; i < res.n; i++)
            if (dq_ack(c, Q, res.jobs[i].id, res.jobs[i].fence) != DQ_OK)
                _exit(3);
        dq_claim_result_free(&res);
    }
    dq_close(c);
    _exit(0);
}

/* Lines in the file at `path` (0 when there is none). */
static int count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    int n = 0;
    for (int ch; f && (ch = getc(f)) != EOF;)
        n += ch == '\n';
    if (f)
        fclose(f);
    return n;
}

START_TEST(consumers_drain_every_partition_once)
{
    enum { JOBS = 600, CONSUMERS = 3 };
    set_parts(6);
    dq_enqueue_req reqs[JOBS];
    char ids[JOBS][16];
    for (int i = 0; i < JOBS; i++) {
        /* a third with producer ids */
        snprintf(ids[i], sizeof ids[i], "p-%d", i);
        reqs[i] = req_make(i % 3 == 0 ? ids[i] : NULL, "x", 0, 0);
    }
    ck_assert_int_eq(dq_enqueue_many(cl, reqs, JOBS, NULL, NULL), DQ_OK);
    char path[256];
    snprintf(path, sizeof path, "%s/claimed", fx->dir);
    FILE *f = fopen(path, "w+");
    ck_assert_ptr_nonnull(f);
    pid_t pids[CONSUMERS];
    for (int k = 0; k < CONSUMERS; k++) {
        pids[k] = fork();
        ck_assert_int_ge(pids[k], 0);
        if (pids[k] == 0)
            consume(fileno(f), 0, 30000);
    }
    for (int k = 0; k < CONSUMERS; k++) {
        int status;
        ck_assert_int_eq(waitpid(pids[k], &status, 0), pids[k]);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    /* every id exactly once (each line is one write by dprintf to the
     * shared file; lines are short) */
    rewind(f);
    int count = 0, producer = 0;
    char line[64];
    redisContext *rc = raw_connect();
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        redisReply *r = redisCommand(rc, "SADD seen %s", line);
        ck_assert_int_eq(r->integer, 1);
        freeReplyObject(r);
        count++;
        producer += line[0] == 'p';
    }
    redisFree(rc);
    fclose(f);
    ck_assert_int_eq(count, JOBS);
    ck_assert_int_eq(producer, JOBS / 3);
    dq_stats s = stats();
    ck_assert_int_eq(s.due + s.delayed + s.processing + s.dead, 0);
}
END_TEST

START_TEST(a_killed_consumer_loses_no_job)
{
    enum { JOBS = 300 };
    set_parts(4);
    dq_enqueue_req reqs[JOBS];
    for (int i = 0; i < JOBS; i++)
        reqs[i] = req_make(NULL, "x", 0, 0);
    ck_assert_int_eq(dq_enqueue_many(cl, reqs, JOBS, NULL, NULL), DQ_OK);
    char path[3][256];
    pid_t pids[3];
    for (int k = 0; k < 3; k++) {
        snprintf(path[k], sizeof path[k], "%s/claimed-%d", fx->dir, k);
        FILE *f = fopen(path[k], "w");
        ck_assert_ptr_nonnull(f);
        pids[k] = fork();
        ck_assert_int_ge(pids[k], 0);
        if (pids[k] == 0)
            consume(fileno(f), k == 0 ? 2000 : 1, k == 0 ? 500 : 30000);
        fclose(f);
        /* the slow one first holds a batch it has not acked */
        for (int waited = 0; k == 0 && count_lines(path[0]) == 0 && waited < 10000;
             waited += 5) {
            struct timespec ts = { 0, 5 * 1000 * 1000 };
            nanosleep(&ts, NULL);
        }
    }
    ck_assert_int_gt(count_lines(path[0]), 0);
    ck_assert_int_eq(kill(pids[0], SIGKILL), 0);
    for (int k = 0; k < 3; k++) {
        int status;
        ck_assert_int_eq(waitpid(pids[k], &status, 0), pids[k]);
        if (k > 0)
            ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    /* its leases expire; the reaper returns the jobs to their partitions */
    struct timespec ts = { 0, 600 * 1000 * 1000 };
    nanosleep(&ts, NULL);
    dq_retry_policy now;
    policy_make(&now, 0, 0, 0, 5);
    dq_reap_result rr;
    ck_assert_int_eq(dq_reap(cl, Q, 100, &now, &rr), DQ_OK);
    ck_assert_uint_ge(rr.retried, 1);
    char again[256];
    snprintf(again, sizeof again, "%s/claimed-again", fx->dir);
    FILE *f = fopen(again, "w");
    ck_assert_ptr_nonnull(f);
    pid_t last = fork();
    if (last == 0)
        consume(fileno(f), 0, 30000);
    fclose(f);
    int status;
    ck_assert_int_eq(waitpid(last, &status, 0), last);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    /* every job ran at least once; only the killed batch twice */
    redisContext *rc = raw_connect();
    int lines = 0;
    const char *files[] = { path[0], path[1], path[2], again };
    for (int k = 0; k < 4; k++) {
        FILE *in = fopen(files[k], "r");
        ck_assert_ptr_nonnull(in);
        char line[64];
        while (fgets(line, sizeof line, in)) {
            line[strcspn(line, "\n")] = '\0';
            freeReplyObject(redisCommand(rc, "SADD seen %s", line));
            lines++;
        }
        fclose(in);
    }
    redisReply *r = redisCommand(rc, "SCARD seen");
    ck_assert_int_eq(r->integer, JOBS);
    freeReplyObject(r);
    redisFree(rc);
    ck_assert_int_le(lines - JOBS, 7);
    dq_stats s = stats();
    ck_assert_int_eq(s.due + s.delayed + s.processing + s.dead, 0);
}
END_TEST

START_TEST(claims_rotate_over_partitions)
{
    set_parts(4);
    for (int i = 0; i < 8; i++)
        enq(NULL, "x", 0, 0);
    /* one job per claim: four claims take one from each partition */
    int seen[4] = { 0 };
    for (int i = 0; i < 4; i++) {
        dq_claim_result res;
        claim_n(1, 30000, 1, &res);
        seen[keys_partition_of(res.jobs[0].id, 4)]++;
        dq_claim_result_free(&res);
    }
    for (int p = 0; p < 4; p++)
        ck_assert_int_eq(seen[p], 1);
    /* a claim of more fills from several partitions */
    dq_claim_result res;
    claim_n(10, 30000, 4, &res);
    ck_assert_int_eq(res.next_due_in_ms, -1);
    dq_claim_result_free(&res);
}
END_TEST

START_TEST(priority_orders_within_a_partition)
{
    set_parts(2);
    /* ids of one partition, enqueued least urgent first */
    const char *ids[3];
    char buf[3][16];
    int found = 0;
    for (int i = 0; found < 3; i++) {
        snprintf(buf[found], sizeof buf[found], "pr-%d", i);
        if (keys_partition_of(buf[found], 2) == 1) {
            ids[found] = buf[found];
            found++;
        }
    }
    int prio[3] = { DQ_PRIORITY_LOW, DQ_PRIORITY_NORMAL, DQ_PRIORITY_HIGH };
    for (int i = 0; i < 3; i++) {
        dq_enqueue_req r = req_make(ids[i], "x", 0, 0);
        r.priority = prio[i];
        ck_assert_int_eq(dq_enqueue(cl, &r, NULL), DQ_OK);
    }
    dq_claim_result res;
    claim_n(3, 30000, 3, &res);
    ck_assert_str_eq(res.jobs[0].id, ids[2]);
    ck_assert_str_eq(res.jobs[1].id, ids[1]);
    ck_assert_str_eq(res.jobs[2].id, ids[0]);
    ck_assert_int_eq(res.jobs[0].priority, 0);
    dq_claim_result_free(&res);
}
END_TEST

START_TEST(a_failed_claim_gives_back_what_it_took)
{
    set_parts(2);
    /* jobs in partition 0 only; partition 1's processing set is broken */
    int added = 0;
    char other[16] = "";
    for (int i = 0; added < 4 || !*other; i++) {
        char id[16];
        snprintf(id, sizeof id, "z-%d", i);
        if (keys_partition_of(id, 2) == 0 && added < 4) {
            enq(id, "x", 0, 0);
            added++;
        } else if (keys_partition_of(id, 2) == 1 && !*other) {
            enq(id, "x", 0, 0);   /* a due job there: its claim must write */
            snprintf(other, sizeof other, "%s", id);
        }
    }
    redisContext *rc = raw_connect();
    ck_assert(raw_ok(rc, "SET dq:{%s:1}:processing broken", Q));
    /* whichever partition a claim starts at, it meets the broken one
     * before it is done; two claims start at both */
    for (int round = 0; round < 2; round++) {
        /* the failed claim script took the job off its delayed set (a
         * script's writes before an error stay): put it back */
        ck_assert(raw_ok(rc, "ZADD dq:{%s:1}:delayed 1 %s", Q, other));
        dq_claim_result res;
        ck_assert_int_eq(dq_claim(cl, Q, 10, 30000, &res), DQ_ERR_REDIS);
        ck_assert_uint_eq(res.n, 0);
        dq_claim_result_free(&res);
        dq_stats one;
        ck_assert_int_eq(dq_stats_partition(cl, Q, 0, &one), DQ_OK);
        ck_assert_int_eq(one.processing, 0);
        ck_assert_int_eq(one.due, 4);
    }
    redisFree(rc);
}
END_TEST

/* ---- operating ---------------------------------------------------------- */

/* The read events redis-server has processed (INFO stats, on `rc`, the
 * INFO that asks included). */
static long long reads_processed(redisContext *rc)
{
    redisReply *r = redisCommand(rc, "INFO stats");
    ck_assert(r && r->type == REDIS_REPLY_STRING);
    const char *at = strstr(r->str, "total_reads_processed:");
    ck_assert_ptr_nonnull(at);
    long long v = atoll(at + strlen("total_reads_processed:"));
    freeReplyObject(r);
    return v;
}

/* A script that keeps Redis busy for 300 ms: it reads no connection
 * meanwhile, so what clients send waits in their sockets. */
#define BUSY_300MS "local s = redis.call('TIME') repeat local t = redis.call('TIME') " \
                   "until (t[1] - s[1]) * 1000000 + t[2] - s[2] > 300000 return 1"

/* The calls that span a queue's partitions. */
enum spanning { STATS, PAUSE, DEAD_LIST, REQUEUE_ALL, PURGE_ALL, REAP, ACK, RELEASE, FSCK,
                SPANNING };
static const char *const spanning_names[SPANNING] = {
    "stats", "pause", "dead list", "requeue all", "purge all", "reap", "ack", "release", "fsck"
};

/* The jobs the ack and release calls below hand back: one claimed in
 * each of the 12 partitions (set up by the test). */
static dq_claim_result held_jobs;

static dq_status spanning_call(enum spanning call, const char *queue)
{
    dq_stats st;
    int64_t since, moved;
    dq_dead_page page = { 0 };
    dq_fsck_result fsck = { 0 };
    dq_reap_result reaped;
    bool acked[12];
    size_t released;
    dq_status got = call == STATS ? dq_stats_get(cl, queue, &st)
                    : call == PAUSE ? dq_pause(cl, queue, &since)
                    : call == DEAD_LIST ? dq_dead_list(cl, queue, 0, 10, &page)
                    : call == REQUEUE_ALL ? dq_requeue_all(cl, queue, &moved)
                    : call == PURGE_ALL ? dq_purge_all(cl, queue, &moved)
                    : call == REAP ? dq_reap(cl, queue, 100, NULL, &reaped)
                    : call == ACK ? dq_ack_many(cl, queue, held_jobs.jobs, held_jobs.n, acked)
                    : call == RELEASE ? dq_release(cl, queue, held_jobs.jobs, held_jobs.n,
                                                   &released)
                    : dq_fsck(cl, queue, true, 0, &fsck);
    dq_dead_page_free(&page);
    dq_fsck_result_free(&fsck);
    return got;
}

/* How many reads of its connection Redis needed for call `call` of `cl`
 * on `queue`, made while Redis was busy: 1 when every partition's script
 * was sent before the first reply came, one per partition when each
 * waited for the last's reply (fsck: one per round of steps). */
static long long reads_of_call(redisContext *rc, redisContext *busy, enum spanning call,
                               const char *queue)
{
    long long before = reads_processed(rc);
    ck_assert_int_eq(redisAppendCommand(busy, "EVAL %s 0", BUSY_300MS), REDIS_OK);
    int done = 0;
    while (!done)
        ck_assert_int_eq(redisBufferWrite(busy, &done), REDIS_OK);
    tu_sleep_ms(50);                    /* Redis is in the script */
    dq_status got = spanning_call(call, queue);
    ck_assert_msg(got == DQ_OK, "%s: %s", spanning_names[call], dq_errmsg(cl));
    redisReply *r;
    ck_assert_int_eq(redisGetReply(busy, (void **)&r), REDIS_OK);
    freeReplyObject(r);
    return reads_processed(rc) - before - 2;      /* less the script's and the INFO's */
}

/* Claim one job in each of Q's 12 partitions into held_jobs. */
static void hold_one_per_partition(void)
{
    for (int i = 0; i < 12; i++)
        enq(NULL, "x", 0, 0);       /* generated ids: the partitions in turn */
    claim_n(12, 60000, 12, &held_jobs);
    bool seen[12] = { false };
    for (size_t i = 0; i < held_jobs.n; i++)
        seen[keys_partition_of(held_jobs.jobs[i].id, 12)] = true;
    for (int p = 0; p < 12; p++)
        ck_assert_msg(seen[p], "no job claimed in partition %d", p);
}

/* A call that spans the partitions sends its scripts in one pipeline
 * (one round trip; under Cluster one per master): over 12 partitions,
 * stats, pause, the dead list, requeue and purge of every dead job, a
 * reap, and an ack or a release of jobs held in every partition each
 * reach Redis in one read, where one call at a time would take 12; fsck
 * takes about as many reads as its steps over one partition. */
START_TEST(calls_over_partitions_take_one_round_trip)
{
    set_parts(12);
    redisContext *rc = raw_connect(), *busy = raw_connect();
    hold_one_per_partition();
    for (enum spanning call = 0; call < SPANNING; call++)     /* the scripts loaded */
        ck_assert_int_eq(spanning_call(call, Q), DQ_OK);
    ck_assert_int_eq(dq_resume(cl, Q, NULL), DQ_OK);
    for (enum spanning call = 0; call < FSCK; call++) {
        if (call == ACK || call == RELEASE) {   /* acked or given back before: held anew */
            dq_claim_result_free(&held_jobs);
            hold_one_per_partition();
        }
        long long reads = reads_of_call(rc, busy, call, Q);
        ck_assert_msg(reads == 1, "%s: %lld reads of its connection", spanning_names[call],
                      reads);
        if (call == PAUSE)
            ck_assert_int_eq(dq_resume(cl, Q, NULL), DQ_OK);
    }
    dq_claim_result_free(&held_jobs);
    /* Every ack took (none held), every release gave back (12 due). */
    dq_stats all;
    ck_assert_int_eq(dq_stats_get(cl, Q, &all), DQ_OK);
    ck_assert_int_eq(all.processing, 0);
    ck_assert_int_eq(all.due, 12);
    long long steps = reads_of_call(rc, busy, FSCK, Q "-one");
    long long reads = reads_of_call(rc, busy, FSCK, Q);
    /* (A step's SCAN of the keyspace takes one more or less as keys come
     * and go, and only the first round meets Redis busy: on a loaded
     * machine (the sanitizer build beside another test) a later round's
     * commands, built on the way, may be read in two or three reads.  One
     * partition after another would take 12 times as many.) */
    ck_assert_msg(steps >= 1 && reads < 4 * steps, "fsck: %lld reads over 12 partitions, "
                  "%lld over one", reads, steps);
    redisFree(rc);
    redisFree(busy);
}
END_TEST

START_TEST(stats_sum_the_partitions)
{
    set_parts(3);
    for (int i = 0; i < 9; i++)
        enq(NULL, "x", 0, 0);
    for (int i = 0; i < 4; i++)
        enq(NULL, "x", 60000, 0);
    dq_claim_result res;
    claim_n(5, 30000, 5, &res);
    dq_stats all = stats(), sum = { .next_due_in_ms = -1 };
    for (unsigned p = 0; p < 3; p++) {
        dq_stats one;
        ck_assert_int_eq(dq_stats_partition(cl, Q, p, &one), DQ_OK);
        sum.delayed += one.delayed;
        sum.due += one.due;
        sum.processing += one.processing;
        sum.dead += one.dead;
        sum.due_by_priority[5] += one.due_by_priority[5];
        if (one.next_due_in_ms >= 0 && (sum.next_due_in_ms < 0
                                        || one.next_due_in_ms < sum.next_due_in_ms))
            sum.next_due_in_ms = one.next_due_in_ms;
    }
    ck_assert_int_eq(all.delayed, 4);
    ck_assert_int_eq(all.due, 4);
    ck_assert_int_eq(all.processing, 5);
    ck_assert_int_eq(all.delayed, sum.delayed);
    ck_assert_int_eq(all.due, sum.due);
    ck_assert_int_eq(all.processing, sum.processing);
    ck_assert_int_eq(all.dead, sum.dead);
    ck_assert_int_eq(all.due_by_priority[5], sum.due_by_priority[5]);
    ck_assert_int_le(all.next_due_in_ms, sum.next_due_in_ms);
    ck_assert_int_eq(all.next_due_in_ms, 0);   /* jobs are due */
    dq_claim_result_free(&res);
}
END_TEST

START_TEST(dead_letters_across_partitions)
{
    set_parts(4);
    /* eight dead jobs, dying in this order, in several partitions */
    char ids[8][16];
    for (int i = 0; i < 8; i++) {
        snprintf(ids[i], sizeof ids[i], "dead-%d", i);
        make_dead(ids[i]);
        if (i % 3 == 0) {
            struct timespec ts = { 0, 3 * 1000 * 1000 };
            nanosleep(&ts, NULL);   /* distinct times of death */
        }
    }
    dq_dead_page page;
    ck_assert_int_eq(dq_dead_list(cl, Q, 0, 100, &page), DQ_OK);
    ck_assert_int_eq(page.total, 8);
    ck_assert_uint_eq(page.n, 8);
    for (size_t i = 1; i < page.n; i++)
        ck_assert_int_ge(page.entries[i].died_ms, page.entries[i - 1].died_ms);
    ck_assert(!dq_dead_page_unreadable(&page, 0));
    ck_assert_str_eq(page.entries[0].id, "dead-0");
    ck_assert_str_eq(page.entries[0].last_error, "broken");
    /* a page from the middle is that part of the whole */
    dq_dead_page mid;
    ck_assert_int_eq(dq_dead_list(cl, Q, 3, 2, &mid), DQ_OK);
    ck_assert_uint_eq(mid.n, 2);
    ck_assert_int_eq(mid.total, 8);
    ck_assert_str_eq(mid.entries[0].id, page.entries[3].id);
    ck_assert_str_eq(mid.entries[1].id, page.entries[4].id);
    dq_dead_page_free(&mid);
    dq_dead_page_free(&page);
    ck_assert_int_eq(dq_dead_list(cl, Q, 8, 5, &page), DQ_OK);
    ck_assert_uint_eq(page.n, 0);
    dq_dead_page_free(&page);

    ck_assert_int_eq(dq_requeue(cl, Q, "dead-5"), DQ_OK);
    ck_assert_int_eq(dq_requeue(cl, Q, "dead-5"), DQ_ERR_NOTFOUND);
    ck_assert_int_eq(dq_purge(cl, Q, "dead-6"), DQ_OK);
    int64_t moved = 0, deleted = 0;
    ck_assert_int_eq(dq_requeue_all(cl, Q, &moved), DQ_OK);
    ck_assert_int_eq(moved, 6);
    dq_stats s = stats();
    ck_assert_int_eq(s.dead, 0);
    ck_assert_int_eq(s.due, 7);
    dq_claim_result res;
    claim_n(10, 1, 7, &res);
    for (size_t i = 0; i < res.n; i++)
        ck_assert_int_eq(dq_fail(cl, Q, res.jobs[i].id, res.jobs[i].fence, "again",
                                 DQ_FAIL_DEAD, -1, NULL, NULL), DQ_OK);
    dq_claim_result_free(&res);
    ck_assert_int_eq(dq_purge_all(cl, Q, &deleted), DQ_OK);
    ck_assert_int_eq(deleted, 7);
    ck_assert_int_eq(stats().dead, 0);
}
END_TEST

START_TEST(pause_holds_every_partition)
{
    set_parts(3);
    for (int i = 0; i < 6; i++)
        enq(NULL, "x", 0, 0);
    int64_t since = 0, state = 0;
    ck_assert_int_eq(dq_pause(cl, Q, &since), DQ_OK);
    ck_assert_int_gt(since, 0);
    for (unsigned p = 0; p < 3; p++) {
        char key[64];
        snprintf(key, sizeof key, "dq:{%s:%u}:meta", Q, p);
        ck_assert(key_exists(key));
    }
    ck_assert_int_eq(dq_paused(cl, Q, &state), DQ_OK);
    ck_assert_int_eq(state, since);
    dq_claim_result res;
    claim_n(10, 30000, 0, &res);
    ck_assert_int_eq(res.next_due_in_ms, -1);
    dq_claim_result_free(&res);
    int64_t was = 0;
    ck_assert_int_eq(dq_resume(cl, Q, &was), DQ_OK);
    ck_assert_int_eq(was, since);
    ck_assert_int_eq(dq_paused(cl, Q, &state), DQ_OK);
    ck_assert_int_eq(state, -1);
    claim_n(10, 30000, 6, &res);
    dq_claim_result_free(&res);
}
END_TEST

START_TEST(reap_and_fsck_cover_every_partition)
{
    set_parts(3);
    for (int i = 0; i < 6; i++)
        enq(NULL, "x", 0, 5);
    dq_claim_result res;
    claim_n(6, 1, 6, &res);
    dq_claim_result_free(&res);
    struct timespec ts = { 0, 20 * 1000 * 1000 };
    nanosleep(&ts, NULL);
    dq_reap_result rr;
    ck_assert_int_eq(dq_reap(cl, Q, 100, NULL, &rr), DQ_OK);
    ck_assert_uint_eq(rr.retried, 6);
    ck_assert_int_eq(stats().processing, 0);

    /* a stray member in partition 2 is found and removed */
    redisContext *rc = raw_connect();
    ck_assert(raw_ok(rc, "ZADD dq:{%s:2}:delayed 1 ghost", Q));
    redisFree(rc);
    dq_fsck_result fr;
    ck_assert_int_eq(dq_fsck(cl, Q, true, 0, &fr), DQ_OK);
    ck_assert_int_eq(fr.members, 1);
    ck_assert_int_eq(fr.repaired, 1);
    ck_assert_uint_ge(fr.calls, 3);
    dq_fsck_result_free(&fr);
    ck_assert_int_eq(score_in(2, "delayed", "ghost"), -1);
}
END_TEST

START_TEST(schedules_live_and_fire_in_partition_0)
{
    dq_schedule_req req = {
        .queue = Q, .name = "nightly", .type = "report", .expr = "@daily",
        .payload = "p", .payload_len = 1,
    };
    /* a schedule of the unpartitioned queue would be left behind */
    ck_assert_int_eq(dq_schedule_add(cl, &req, NULL), DQ_OK);
    ck_assert_int_eq(dq_queue_set_partitions(cl, Q, 4), DQ_ERR_EXISTS);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(cl), "1 recurring schedule:"));
    ck_assert_int_eq(dq_schedule_remove(cl, Q, "nightly"), DQ_OK);
    set_parts(4);
    ck_assert_int_eq(dq_schedule_add(cl, &req, NULL), DQ_OK);
    ck_assert(key_exists("dq:{" Q ":0}:schedules"));
    ck_assert(!key_exists("dq:{" Q "}:schedules"));
    dq_schedule_list l;
    ck_assert_int_eq(dq_schedule_list_get(cl, Q, &l), DQ_OK);
    ck_assert_uint_eq(l.n, 1);
    dq_schedule_list_free(&l);
    dq_enqueued out;
    ck_assert_int_eq(dq_schedule_run_now(cl, Q, "nightly", &out), DQ_OK);
    ck_assert_uint_eq(keys_partition_of(out.id, 4), 0);
    ck_assert_int_ge(score_in(0, "delayed", out.id), 0);
    dq_job_info info;
    show(out.id, &info);
    ck_assert_str_eq(info.job.type, "report");
    dq_job_info_free(&info);
    ck_assert_int_eq(dq_cancel(cl, Q, out.id), DQ_OK);
    ck_assert_int_eq(dq_queue_set_partitions(cl, Q, 8), DQ_OK);   /* still at {Q:0} */
    ck_assert_int_eq(dq_queue_set_partitions(cl, Q, 1), DQ_ERR_EXISTS);
    ck_assert_int_eq(dq_schedule_remove(cl, Q, "nightly"), DQ_OK);
    set_parts(1);
}
END_TEST

START_TEST(schedule_ids_map_to_partition_0)
{
    ck_assert(keys_is_schedule_id("nightly@2026-11-23T00:00:00Z"));
    ck_assert(keys_is_schedule_id("n@now-2026-11-23T10:05:00.123Z"));
    ck_assert(!keys_is_schedule_id("@2026-11-23T00:00:00Z"));
    ck_assert(!keys_is_schedule_id("nightly@2026-11-23T00:00:00"));
    ck_assert(!keys_is_schedule_id("nightly@2026-11-23"));
    ck_assert(!keys_is_schedule_id("user@example.com"));
    ck_assert(!keys_is_schedule_id("n@now-2026-11-23T10:05:00.Z"));
    ck_assert_uint_eq(keys_partition_of("nightly@2026-11-23T00:00:00Z", 16), 0);
    ck_assert_uint_eq(keys_partition_of("1234", 16), 1234 % 16);
    /* longer than any integer type: (10^23 - 1) mod 7 is 4 */
    ck_assert_uint_eq(keys_partition_of("99999999999999999999999", 7), 4);
    /* A producer may not take that form (it would route to partition 0,
     * not by its CRC16); a near miss is an ordinary id. */
    ck_assert_ptr_nonnull(keys_check_id("invoice@2026-01-06T00:00:00Z"));
    ck_assert_ptr_nonnull(keys_check_id("invoice@now-2026-01-06T00:00:00.5Z"));
    ck_assert_ptr_null(keys_check_id("invoice@2026-01-06T00:00:00"));
    ck_assert_ptr_null(keys_check_id("a@b@2026-01-06T00:00:00Z"));
    ck_assert_uint_eq(keys_partition_of("a@b@2026-01-06T00:00:00Z", 16),
                      cluster_crc16("a@b@2026-01-06T00:00:00Z", 24) % 16);
}
END_TEST

Suite *client_suite(void)
{
    Suite *s = suite_create("partitions");
    TCase *tc = tcase(s, "count", 20);
    tcase_add_test(tc, count_is_one_until_set);
    tcase_add_test(tc, a_producer_follows_a_count_changed_under_it);
    tcase_add_test(tc, a_count_changing_twice_is_refused_and_writes_nothing);
    tcase_add_test(tc, bad_counts_are_refused);
    tcase_add_test(tc, change_over_jobs_is_refused);
    tcase_add_test(tc, stats_partition_sees_one_partition);
    tcase_add_test(tc, schedule_ids_map_to_partition_0);
    tcase_add_test(tc, count_is_read_again_after_reconnect);
    tcase_add_test(tc, partitions_script_compares_and_sets);
    tcase_add_test(tc, enqueue_script_checks_its_partition);
    tc = tcase(s, "jobs", 30);
    tcase_add_test(tc, generated_ids_name_their_partition);
    tcase_add_test(tc, producer_ids_go_by_their_hash);
    tcase_add_test(tc, enqueue_many_mixes_queues_and_partitions);
    tcase_add_test(tc, unpartitioned_layout_is_unchanged);
    tcase_add_test(tc, show_replace_cancel_reach_the_partition);
    tcase_add_test(tc, ack_and_fail_reach_the_partition);
    tcase_add_test(tc, release_gives_back_to_each_partition);
    tcase_add_test(tc, consumers_drain_every_partition_once);
    tcase_add_test(tc, a_killed_consumer_loses_no_job);
    tcase_add_test(tc, claims_rotate_over_partitions);
    tcase_add_test(tc, priority_orders_within_a_partition);
    tcase_add_test(tc, a_failed_claim_gives_back_what_it_took);
    tc = tcase(s, "operate", 30);
    tcase_add_test(tc, stats_sum_the_partitions);
    tcase_add_test(tc, calls_over_partitions_take_one_round_trip);
    tcase_add_test(tc, dead_letters_across_partitions);
    tcase_add_test(tc, pause_holds_every_partition);
    tcase_add_test(tc, reap_and_fsck_cover_every_partition);
    tcase_add_test(tc, schedules_live_and_fire_in_partition_0);
    return s;
}
