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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_test.h"

#include "lib/keys.h"

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

static void set_parts(unsigned n)
{
    ck_assert_msg(dq_queue_set_partitions(cl, Q, n) == DQ_OK, "%s", dq_errmsg(cl));
}

/* ---- the stored count --------------------------------------------------- */

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

Suite *client_suite(void)
{
    Suite *s = suite_create("partitions");
    TCase *tc = tcase(s, "count", 20);
    tcase_add_test(tc, count_is_one_until_set);
    tcase_add_test(tc, bad_counts_are_refused);
    tcase_add_test(tc, change_over_jobs_is_refused);
    tcase_add_test(tc, stats_partition_sees_one_partition);
    return s;
}
