/* Recurring schedules' plan (lib/sched.c): which ticks a daemon fires,
 * on time and after a missed period, under each catch-up policy; and the
 * ids of the ticks' jobs. */
#include <check.h>
#include <string.h>

#include "fixture.h"
#include "lib/sched.h"
#include "util/timefmt.h"

#define MIN INT64_C(60000)

static struct sched_step steps[DQ_SCHEDULE_CATCH_UP_MAX];

static int64_t at(const char *iso)
{
    int64_t ms;
    const char *why;
    ck_assert_msg(timefmt_parse_time(iso, &ms, &why) == 0, "%s: %s", iso, why);
    return ms;
}

static struct cron_expr expr(const char *s)
{
    struct cron_expr e;
    char err[256];
    ck_assert_msg(cron_parse(s, &e, err, sizeof err) == 0, "%s", err);
    return e;
}

START_TEST(tick_ids_name_the_tick)
{
    char id[SCHED_ID_MAX];
    sched_tick_id(id, sizeof id, "nightly", at("2026-11-23T10:05:00Z"));
    ck_assert_str_eq(id, "nightly@2026-11-23T10:05:00Z");
    sched_now_id(id, sizeof id, "nightly", at("2026-11-23T10:05:00.123Z"));
    ck_assert_str_eq(id, "nightly@now-2026-11-23T10:05:00.123Z");
    ck_assert_ptr_null(sched_check_name("nightly-report.v2"));
    ck_assert_ptr_nonnull(sched_check_name("a@b"));
    ck_assert_ptr_nonnull(sched_check_name("a b"));
    ck_assert_ptr_nonnull(sched_check_name(""));
}
END_TEST

START_TEST(a_tick_on_time_fires_once_and_moves_on)
{
    struct cron_expr e = expr("* * * * *");
    int64_t t0 = at("2026-11-23T10:05:00Z");
    /* A daemon that looks 2 s early, or 20 s late: the tick itself. */
    for (int64_t now = t0 - 2000; now <= t0 + 20000; now += 22000) {
        size_t n = sched_plan(&e, NULL, DQ_CATCH_UP_NONE, t0, now, steps, 1000);
        ck_assert_uint_eq(n, 1);
        ck_assert_int_eq(steps[0].expected_ms, t0);
        ck_assert_int_eq(steps[0].tick_ms, t0);
        ck_assert_int_eq(steps[0].next_ms, t0 + MIN);
    }
    /* Nothing due within the look-ahead: nothing. */
    ck_assert_uint_eq(sched_plan(&e, NULL, DQ_CATCH_UP_ONE, t0, t0 - 10000, steps, 1000), 0);
    /* Fast ticks within the look-ahead are chained, each expecting the
     * one before to have moved the schedule. */
    e = expr("@every 1s");
    size_t n = sched_plan(&e, NULL, DQ_CATCH_UP_ONE, t0, t0, steps, 1000);
    ck_assert_uint_eq(n, 1 + SCHED_LOOKAHEAD_MS / 1000);
    for (size_t i = 1; i < n; i++) {
        ck_assert_int_eq(steps[i].expected_ms, steps[i - 1].next_ms);
        ck_assert_int_eq(steps[i].tick_ms, t0 + (int64_t)i * 1000);
    }
}
END_TEST

START_TEST(a_missed_period_follows_the_policy)
{
    struct cron_expr e = expr("*/10 * * * *");
    int64_t t0 = at("2026-11-23T08:00:00Z");
    int64_t now = at("2026-11-23T10:05:00Z");       /* 13 ticks missed */
    int64_t resume = at("2026-11-23T10:10:00Z");
    size_t n = sched_plan(&e, NULL, DQ_CATCH_UP_ONE, t0, now, steps, 1000);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(steps[0].tick_ms, t0);
    ck_assert_int_eq(steps[0].next_ms, resume);
    n = sched_plan(&e, NULL, DQ_CATCH_UP_NONE, t0, now, steps, 1000);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(steps[0].expected_ms, t0);
    ck_assert_int_eq(steps[0].tick_ms, -1);
    ck_assert_int_eq(steps[0].next_ms, resume);
    n = sched_plan(&e, NULL, DQ_CATCH_UP_ALL, t0, now, steps, 1000);
    ck_assert_uint_eq(n, 13);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(steps[i].tick_ms, t0 + (int64_t)i * 10 * MIN);
    ck_assert_int_eq(steps[n - 1].next_ms, resume);
    /* The bound: the oldest ticks fire, the rest of the period is skipped. */
    n = sched_plan(&e, NULL, DQ_CATCH_UP_ALL, t0, now, steps, 5);
    ck_assert_uint_eq(n, 5);
    ck_assert_int_eq(steps[4].tick_ms, t0 + 40 * MIN);
    ck_assert_int_eq(steps[4].next_ms, resume);
    /* @every keeps its phase across the gap. */
    e = expr("@every 7s");
    n = sched_plan(&e, NULL, DQ_CATCH_UP_NONE, t0, t0 + 100000, steps, 1000);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(steps[0].next_ms, t0 + 105000);
}
END_TEST

START_TEST(a_year_of_every_second_is_bounded)
{
    struct cron_expr e = expr("@every 1s");
    int64_t t0 = at("2025-11-23T00:00:00Z"), now = at("2026-11-23T00:00:00.500Z");
    size_t n = sched_plan(&e, NULL, DQ_CATCH_UP_ALL, t0, now, steps,
                          DQ_SCHEDULE_CATCH_UP_MAX);
    ck_assert_uint_eq(n, DQ_SCHEDULE_CATCH_UP_MAX);
    ck_assert_int_eq(steps[n - 1].next_ms, at("2026-11-23T00:00:01Z"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sched");
    TCase *tc = fixture_tcase(s, "plan", 20, NULL, NULL, NULL, NULL);
    tcase_add_test(tc, tick_ids_name_the_tick);
    tcase_add_test(tc, a_tick_on_time_fires_once_and_moves_on);
    tcase_add_test(tc, a_missed_period_follows_the_policy);
    tcase_add_test(tc, a_year_of_every_second_is_bounded);
    return fixture_run_suite(s);
}
