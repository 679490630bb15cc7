/*
 * The rows an outbox relay holds back while their partition's master is
 * out of reach (src/daemon/relay/relay_defer.c): a held partition holds
 * every later row of it until the time to try again, when its rows come
 * back to be taken; it is tried every 1 s doubling to 10 s while it stays
 * out of reach, said once per outage, and reported back only once a row
 * of it went through; at most RELAY_HELD_MAX rows are held, and the take's
 * array literal names each of them.  End to end, over a real cluster and
 * a real PostgreSQL: tests/check_cluster.c.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/relay/relay_defer.h"
#include "fixture.h"

static struct relay_defer *D;

static void setup(void)
{
    D = calloc(1, sizeof *D);
    ck_assert(D != NULL);
}

static void teardown(void)
{
    free(D);
}

START_TEST(a_held_partition_holds_its_later_rows_until_it_is_tried_again)
{
    ck_assert(!relay_defer_holds(D, "orders", 4));
    ck_assert_int_eq(relay_defer_hold(D, "orders", 4, 10, 1000), 1);
    ck_assert(relay_defer_holds(D, "orders", 4));
    ck_assert(!relay_defer_holds(D, "orders", 5));
    ck_assert(!relay_defer_holds(D, "mail", 4));
    ck_assert_int_eq(relay_defer_hold(D, "orders", 4, 12, 1100), 0);
    ck_assert_str_eq(relay_defer_ids(D), "{10,12}");
    ck_assert_uint_eq(relay_defer_count(D), 2);
    /* Not before its time: the rows stay out of the take. */
    ck_assert(!relay_defer_retry_due(D, 1999));
    ck_assert(relay_defer_holds(D, "orders", 4));
    ck_assert(relay_defer_retry_due(D, 2000));
    ck_assert_str_eq(relay_defer_ids(D), "{}");
    /* Let go: its rows still wait until the batches have taken them
     * again. */
    ck_assert_uint_eq(relay_defer_count(D), 2);
    ck_assert_uint_eq(relay_defer_count(NULL), 0);
    /* Nothing of it tried yet: not back. */
    struct relay_held_part back;
    ck_assert(!relay_defer_next_back(D, &back));
    /* Its first row goes through. */
    ck_assert(!relay_defer_holds(D, "orders", 4));
    ck_assert(relay_defer_next_back(D, &back));
    ck_assert_str_eq(back.queue, "orders");
    ck_assert_uint_eq(back.part, 4);
    ck_assert(!relay_defer_next_back(D, &back));
    ck_assert_uint_eq(relay_defer_count(D), 0);
    ck_assert(!relay_defer_holds(D, "orders", 4));
    ck_assert_str_eq(relay_defer_ids(D), "{}");
    ck_assert_str_eq(relay_defer_ids(NULL), "{}");
}
END_TEST

START_TEST(a_partition_that_stays_out_of_reach_is_tried_less_often_and_said_once)
{
    static const int64_t gaps[] = { 1000, 2000, 4000, 8000, 10000, 10000 };
    int64_t now = 0;
    ck_assert_int_eq(relay_defer_hold(D, "orders", 0, 1, now), 1);
    ck_assert_int_eq(relay_defer_hold(D, "orders", 0, 2, now), 0);
    for (size_t i = 0; i < sizeof gaps / sizeof gaps[0]; i++) {
        ck_assert(!relay_defer_retry_due(D, now + gaps[i] - 1));
        now += gaps[i];
        ck_assert(relay_defer_retry_due(D, now));
        ck_assert(!relay_defer_holds(D, "orders", 0));
        /* Out of reach again: held, not said again; its other row,
         * not taken again yet, still counts. */
        ck_assert_int_eq(relay_defer_hold(D, "orders", 0, 1, now), 0);
        ck_assert_uint_eq(relay_defer_count(D), 2);
        ck_assert_int_eq(relay_defer_hold(D, "orders", 0, 2, now), 0);
        ck_assert_uint_eq(relay_defer_count(D), 2);
        struct relay_held_part back;
        ck_assert(!relay_defer_next_back(D, &back));
    }
    /* Back, then down again: a new outage, said, tried after 1 s. */
    ck_assert(relay_defer_retry_due(D, now + 10000));
    ck_assert(!relay_defer_holds(D, "orders", 0));
    struct relay_held_part back;
    ck_assert(relay_defer_next_back(D, &back));
    now += 20000;
    ck_assert_int_eq(relay_defer_hold(D, "orders", 0, 7, now), 1);
    ck_assert(!relay_defer_retry_due(D, now + 999));
    ck_assert(relay_defer_retry_due(D, now + 1000));
}
END_TEST

START_TEST(the_rows_waiting_are_counted_per_partition_as_one_comes_back)
{
    ck_assert_int_eq(relay_defer_hold(D, "orders", 1, 1, 0), 1);
    ck_assert_int_eq(relay_defer_hold(D, "orders", 2, 2, 0), 1);
    ck_assert_int_eq(relay_defer_hold(D, "orders", 1, 3, 0), 0);
    ck_assert_int_eq(relay_defer_hold(D, "orders", 2, 4, 0), 0);
    ck_assert_uint_eq(relay_defer_count(D), 4);
    ck_assert(relay_defer_retry_due(D, 1000));
    /* Partition 1's first row goes through; partition 2's rows are not
     * taken again yet: they still wait. */
    ck_assert(!relay_defer_holds(D, "orders", 1));
    struct relay_held_part back;
    ck_assert(relay_defer_next_back(D, &back));
    ck_assert_uint_eq(back.part, 1);
    ck_assert_uint_eq(relay_defer_count(D), 2);
    /* Partition 2 taken again, out of reach: held once each. */
    ck_assert(!relay_defer_holds(D, "orders", 2));
    ck_assert_int_eq(relay_defer_hold(D, "orders", 2, 2, 1000), 0);
    ck_assert_uint_eq(relay_defer_count(D), 2);
    ck_assert_int_eq(relay_defer_hold(D, "orders", 2, 4, 1000), 0);
    ck_assert_int_eq(relay_defer_hold(D, "orders", 2, 5, 1000), 0);
    ck_assert_uint_eq(relay_defer_count(D), 3);
}
END_TEST

START_TEST(at_most_relay_held_max_rows_are_held_and_the_take_names_each)
{
    for (int64_t id = 0; id < RELAY_HELD_MAX; id++)
        ck_assert_int_ge(relay_defer_hold(D, "orders", (unsigned)(id % 3),
                                          9000000000000000000LL + id, 0), 0);
    ck_assert_int_eq(relay_defer_hold(D, "orders", 0, 1, 0), -1);
    const char *lit = relay_defer_ids(D);
    ck_assert(lit[0] == '{' && lit[strlen(lit) - 1] == '}');
    const char *p = lit + 1;
    for (int64_t id = 0; id < RELAY_HELD_MAX; id++) {
        char *end;
        long long v = strtoll(p, &end, 10);
        ck_assert_int_eq(v, 9000000000000000000LL + id);
        ck_assert(*end == (id + 1 < RELAY_HELD_MAX ? ',' : '}'));
        p = end + 1;
    }
    /* A partition more than the bound refuses too (once the first three
     * went through). */
    ck_assert(relay_defer_retry_due(D, 1000000));
    struct relay_held_part back;
    for (unsigned part = 0; part < 3; part++) {
        ck_assert(!relay_defer_holds(D, "orders", part));
        ck_assert(relay_defer_next_back(D, &back));
    }
    for (unsigned part = 0; part < RELAY_HELD_PARTS_MAX; part++)
        ck_assert_int_eq(relay_defer_hold(D, "mail", part, part, 1000000), 1);
    ck_assert_int_eq(relay_defer_hold(D, "mail", RELAY_HELD_PARTS_MAX, 99, 1000000), -1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("relay_defer");
    TCase *tc = fixture_tcase(s, "defer", 10, NULL, NULL, setup, teardown);
    tcase_add_test(tc, a_held_partition_holds_its_later_rows_until_it_is_tried_again);
    tcase_add_test(tc, a_partition_that_stays_out_of_reach_is_tried_less_often_and_said_once);
    tcase_add_test(tc, the_rows_waiting_are_counted_per_partition_as_one_comes_back);
    tcase_add_test(tc, at_most_relay_held_max_rows_are_held_and_the_take_names_each);
    return fixture_run_suite(s);
}
