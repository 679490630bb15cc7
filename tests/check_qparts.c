/*
 * The order a worker claims a partitioned queue's partitions in
 * (src/daemon/qparts.c): homes in turn, the others only when the homes
 * have nothing due, and with one partition exactly the unpartitioned
 * worker's behaviour (claim again only when a claim found more due); a
 * partition known to have nothing due yet is not asked before its time or
 * a wake from it.
 */
#include <check.h>
#include <string.h>

#include "daemon/qparts.h"
#include "fixture.h"

static struct redis_conf RC = { .prefix = DQ_DEFAULT_PREFIX };

#define NOW 1000                /* server ms, before any due time below */

/* One sweep's claims, each answered `more`/`due` as given, into out[]. */
static unsigned sweep(struct qparts *p, unsigned *out, unsigned max, int64_t due)
{
    unsigned n = 0;
    do {
        out[n++] = qparts_next_claim(p, NOW);
        qparts_claimed(p, false, due);
    } while (qparts_claim_now(p) && n < max);
    return n;
}

START_TEST(one_partition_claims_again_only_when_more_is_due)
{
    struct qparts p;
    ck_assert_int_eq(qparts_init(&p, &RC, "q", 1, 0, 3), 0);
    for (int i = 0; i < 3; i++) {
        ck_assert_uint_eq(qparts_next_claim(&p, NOW), 0);
        qparts_claimed(&p, true, -1);
        ck_assert(qparts_claim_now(&p));
    }
    ck_assert_uint_eq(qparts_next_claim(&p, NOW), 0);
    qparts_claimed(&p, false, 5000);
    ck_assert(!qparts_claim_now(&p));
    ck_assert_int_eq(qparts_next_due(&p), 5000);
    ck_assert_str_eq(qparts_keys(&p, 0)->key[0], "dq:{q}:jobs");
    qparts_free(&p);
}
END_TEST

START_TEST(homes_first_then_every_other_partition)
{
    struct qparts p;
    ck_assert_int_eq(qparts_init(&p, &RC, "q", 8, 1, 3), 0);
    unsigned got[16];
    unsigned n = sweep(&p, got, 16, 7000);
    ck_assert_uint_eq(n, 8);
    ck_assert_uint_eq(got[0], 1);   /* homes of worker 1 of 3: 1, 4, 7 */
    ck_assert_uint_eq(got[1], 4);
    ck_assert_uint_eq(got[2], 7);
    unsigned seen = 0;
    for (unsigned i = 0; i < n; i++)
        seen |= 1u << got[i];
    ck_assert_uint_eq(seen, 0xff);
    ck_assert_int_eq(qparts_next_due(&p), 7000);
    /* The next sweep starts with the next home. */
    ck_assert_uint_eq(qparts_next_claim(&p, NOW), 4);
    ck_assert_str_eq(qparts_keys(&p, 4)->key[0], "dq:{q:4}:jobs");
    qparts_free(&p);
}
END_TEST

START_TEST(a_busy_home_keeps_the_worker_from_stealing)
{
    struct qparts p;
    ck_assert_int_eq(qparts_init(&p, &RC, "q", 8, 0, 2), 0);   /* homes 0 2 4 6 */
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < 4; i++) {
            unsigned part = qparts_next_claim(&p, NOW);
            ck_assert_msg(part % 2 == 0, "stole %u while a home had more due", part);
            qparts_claimed(&p, part == 2, -1);
            ck_assert(qparts_claim_now(&p));
        }
    qparts_free(&p);
}
END_TEST

START_TEST(more_workers_than_partitions_share_homes)
{
    struct qparts p;
    ck_assert_int_eq(qparts_init(&p, &RC, "q", 2, 3, 4), 0);   /* home 3 % 2 = 1 */
    ck_assert_uint_eq(qparts_next_claim(&p, NOW), 1);
    qparts_claimed(&p, false, -1);
    ck_assert(qparts_claim_now(&p));
    ck_assert_uint_eq(qparts_next_claim(&p, NOW), 0);
    qparts_claimed(&p, false, -1);
    ck_assert(!qparts_claim_now(&p));
    ck_assert_int_eq(qparts_next_due(&p), -1);
    qparts_free(&p);
}
END_TEST

/* Four partitions, one worker: a sweep answered with each partition's
 * next due time; the next sweeps ask only the partition whose time has
 * come, and the worker sleeps towards the soonest of them all. */
START_TEST(a_partition_is_not_asked_before_its_next_due_time)
{
    struct qparts p;
    ck_assert_int_eq(qparts_init(&p, &RC, "q", 4, 0, 1), 0);
    const int64_t due[4] = { 2000, -1, 5000, 3000 };
    for (int i = 0; i < 4; i++) {
        unsigned part = qparts_next_claim(&p, NOW);
        qparts_claimed(&p, false, due[part]);
    }
    ck_assert(!qparts_claim_now(&p));
    ck_assert_int_eq(qparts_next_due(&p), 2000);
    ck_assert_uint_eq(qparts_next_claim(&p, 2000), 0);     /* only partition 0 */
    qparts_claimed(&p, false, -1);
    ck_assert(!qparts_claim_now(&p));
    ck_assert_int_eq(qparts_next_due(&p), 3000);
    ck_assert_uint_eq(qparts_next_claim(&p, 3000), 3);
    qparts_claimed(&p, false, 4000);
    ck_assert_int_eq(qparts_next_due(&p), 4000);
    /* Both due by 5000: one sweep asks both (in the worker's turn). */
    unsigned a = qparts_next_claim(&p, 5000);
    qparts_claimed(&p, false, -1);
    ck_assert(qparts_claim_now(&p));
    unsigned b = qparts_next_claim(&p, 5000);
    qparts_claimed(&p, false, -1);
    ck_assert(!qparts_claim_now(&p));
    ck_assert_uint_eq((1u << a) | (1u << b), (1u << 2) | (1u << 3));
    ck_assert_int_eq(qparts_next_due(&p), -1);
    qparts_free(&p);
}
END_TEST

/* A wake from a partition known to be empty (or due later) makes it the
 * next one asked at that time; one heard while its claim was out is kept
 * over the claim's older answer. */
START_TEST(a_wake_reopens_its_partition)
{
    struct qparts p;
    ck_assert_int_eq(qparts_init(&p, &RC, "q", 4, 0, 1), 0);
    for (int i = 0; i < 4; i++) {
        qparts_next_claim(&p, NOW);
        qparts_claimed(&p, false, -1);
    }
    ck_assert_int_eq(qparts_next_due(&p), -1);
    qparts_woken(&p, 1, 1500);
    ck_assert_int_eq(qparts_next_due(&p), 1500);
    ck_assert_uint_eq(qparts_next_claim(&p, 1500), 1);
    qparts_woken(&p, 1, 1700);              /* while the claim is out */
    qparts_claimed(&p, false, -1);          /* it read the set before the add */
    ck_assert_int_eq(qparts_next_due(&p), 1700);
    ck_assert_uint_eq(qparts_next_claim(&p, 1700), 1);
    qparts_free(&p);
}
END_TEST

/* Nothing known to be due when the worker looks (its idle cap ran out,
 * or it woke early), or messages maybe lost (qparts_forget): every
 * partition is asked. */
START_TEST(knowing_of_nothing_due_asks_every_partition)
{
    struct qparts p;
    ck_assert_int_eq(qparts_init(&p, &RC, "q", 4, 0, 1), 0);
    unsigned got[8];
    ck_assert_uint_eq(sweep(&p, got, 8, 9000), 4);
    ck_assert_uint_eq(sweep(&p, got, 8, 9000), 4);     /* at NOW none is due: all */
    for (int i = 0; i < 4; i++) {
        unsigned part = qparts_next_claim(&p, NOW);
        qparts_claimed(&p, false, part == 2 ? NOW : 9000);
    }
    ck_assert_uint_eq(sweep(&p, got, 8, 9000), 1);     /* only partition 2 is due */
    ck_assert_uint_eq(got[0], 2);
    qparts_forget(&p);
    ck_assert_uint_eq(sweep(&p, got, 8, 9000), 4);
    qparts_free(&p);
}
END_TEST

/* A partition whose master is out of reach is left out of the sweeps
 * until its retry time, the others are asked meanwhile, and it is said
 * back in reach (once) when a claim from it is answered. */
START_TEST(a_partition_out_of_reach_is_asked_again_at_its_retry_time)
{
    struct qparts p;
    ck_assert_int_eq(qparts_init(&p, &RC, "q", 3, 0, 1), 0);
    ck_assert_uint_eq(qparts_next_claim(&p, NOW), 0);
    ck_assert(qparts_out_of_reach(&p, NOW + 1000));     /* newly out of reach */
    ck_assert(qparts_claim_now(&p));
    ck_assert_uint_eq(qparts_next_claim(&p, NOW), 1);
    qparts_claimed(&p, false, NOW + 5000);
    ck_assert_uint_eq(qparts_next_claim(&p, NOW), 2);
    qparts_claimed(&p, false, NOW + 5000);
    ck_assert(!qparts_claim_now(&p));
    ck_assert_int_eq(qparts_next_due(&p), NOW + 1000);  /* the retry, first */
    /* Still out of reach at its retry: said once only. */
    ck_assert_uint_eq(qparts_next_claim(&p, NOW + 1000), 0);
    ck_assert(!qparts_out_of_reach(&p, NOW + 2000));
    ck_assert(!qparts_claim_now(&p));
    /* Back: the claim is answered. */
    ck_assert_uint_eq(qparts_next_claim(&p, NOW + 2000), 0);
    ck_assert(qparts_claimed(&p, false, -1));
    ck_assert_uint_eq(qparts_next_claim(&p, NOW + 6000), 1);
    ck_assert(!qparts_claimed(&p, false, -1));
    qparts_free(&p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("qparts");
    TCase *tc = tcase_create("order");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, one_partition_claims_again_only_when_more_is_due);
    tcase_add_test(tc, homes_first_then_every_other_partition);
    tcase_add_test(tc, a_busy_home_keeps_the_worker_from_stealing);
    tcase_add_test(tc, more_workers_than_partitions_share_homes);
    tcase_add_test(tc, a_partition_is_not_asked_before_its_next_due_time);
    tcase_add_test(tc, a_wake_reopens_its_partition);
    tcase_add_test(tc, knowing_of_nothing_due_asks_every_partition);
    tcase_add_test(tc, a_partition_out_of_reach_is_asked_again_at_its_retry_time);
    suite_add_tcase(s, tc);
    return fixture_run_suite(s);
}
