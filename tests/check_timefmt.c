/* Durations and times as users type them: `delayq add -d`, `--at`, config. */
#include <check.h>
#include <stdlib.h>

#include "fixture.h"
#include "util/timefmt.h"

static int64_t dur(const char *s)
{
    int64_t ms = -42;
    const char *why = NULL;
    ck_assert_msg(timefmt_parse_duration(s, &ms, &why) == 0, "'%s' refused: %s", s, why);
    return ms;
}

static void dur_bad(const char *s)
{
    int64_t ms;
    const char *why = NULL;
    ck_assert_msg(timefmt_parse_duration(s, &ms, &why) == -1, "'%s' accepted", s);
    ck_assert_ptr_nonnull(why);
}

START_TEST(durations_in_each_unit)
{
    ck_assert_int_eq(dur("500ms"), 500);
    ck_assert_int_eq(dur("30s"), 30000);
    ck_assert_int_eq(dur("15m"), 900000);
    ck_assert_int_eq(dur("2h"), 7200000);
    ck_assert_int_eq(dur("1d"), 86400000);
    ck_assert_int_eq(dur("0"), 0);
    ck_assert_int_eq(dur("0s"), 0);
}
END_TEST

START_TEST(compound_and_bare_durations)
{
    ck_assert_int_eq(dur("1h30m"), 5400000);
    ck_assert_int_eq(dur("1m500ms"), 60500);
    ck_assert_int_eq(dur("45"), 45000); /* bare number: seconds, like sleep(1) */
}
END_TEST

START_TEST(bad_durations_are_refused)
{
    dur_bad("");
    dur_bad("abc");
    dur_bad("10x");
    dur_bad("-5s");
    dur_bad("5 s");
    dur_bad("1h30");       /* a bare number only stands alone */
    dur_bad("s");
    dur_bad("99999999999999999999d");
    dur_bad("36600d");     /* over a century */
}
END_TEST

static int64_t at(const char *s)
{
    int64_t ms = -42;
    const char *why = NULL;
    ck_assert_msg(timefmt_parse_time(s, &ms, &why) == 0, "'%s' refused: %s", s, why);
    return ms;
}

static void at_bad(const char *s)
{
    int64_t ms;
    const char *why = NULL;
    ck_assert_msg(timefmt_parse_time(s, &ms, &why) == -1, "'%s' accepted", s);
    ck_assert_ptr_nonnull(why);
}

START_TEST(unix_seconds)
{
    ck_assert_int_eq(at("1767225600"), INT64_C(1767225600000));
    ck_assert_int_eq(at("1767225600.25"), INT64_C(1767225600250));
    ck_assert_int_eq(at("0"), 0);
}
END_TEST

START_TEST(iso8601_with_zones)
{
    ck_assert_int_eq(at("2026-01-01T00:00:00Z"), INT64_C(1767225600000));
    ck_assert_int_eq(at("2026-01-01T00:00:00.5Z"), INT64_C(1767225600500));
    ck_assert_int_eq(at("2026-01-01T02:00:00+02:00"), INT64_C(1767225600000));
    ck_assert_int_eq(at("2026-01-01 02:00:00+0200"), INT64_C(1767225600000));
    ck_assert_int_eq(at("2025-12-31T19:00-05:00"), INT64_C(1767225600000));
    ck_assert_int_eq(at("2026-01-01Z"), INT64_C(1767225600000));
}
END_TEST

START_TEST(iso8601_without_zone_is_local_time)
{
    setenv("TZ", "Europe/Paris", 1);
    ck_assert_int_eq(at("2026-01-01T01:00:00"), INT64_C(1767225600000));
    setenv("TZ", "UTC", 1);
    ck_assert_int_eq(at("2026-01-01T00:00:00"), INT64_C(1767225600000));
}
END_TEST

START_TEST(bad_times_are_refused)
{
    at_bad("");
    at_bad("tomorrow");
    at_bad("2026-13-01T00:00:00Z");
    at_bad("2026-02-30T00:00:00Z");
    at_bad("2026-01-01T25:00:00Z");
    at_bad("2026-01-01T00:00:00+25:00");
    at_bad("2026-01-01T00:00:00Zjunk");
    at_bad("1767225600s");
    at_bad("-5");
}
END_TEST

START_TEST(durations_print_short)
{
    char buf[32];
    timefmt_duration(buf, sizeof buf, 350);
    ck_assert_str_eq(buf, "350ms");
    timefmt_duration(buf, sizeof buf, 42300);
    ck_assert_str_eq(buf, "42.3s");
    timefmt_duration(buf, sizeof buf, 903000);
    ck_assert_str_eq(buf, "15m 3s");
    timefmt_duration(buf, sizeof buf, 7500000);
    ck_assert_str_eq(buf, "2h 5m");
    timefmt_duration(buf, sizeof buf, 273600000);
    ck_assert_str_eq(buf, "3d 4h");
    timefmt_iso(buf, sizeof buf, INT64_C(1767225600123));
    ck_assert_str_eq(buf, "2026-01-01T00:00:00.123Z");
}
END_TEST

/* A record's times come from Redis and may be anything: one before 1970
 * prints as the second before plus a positive fraction. */
START_TEST(times_before_1970_print_whole)
{
    char buf[40];
    timefmt_iso(buf, sizeof buf, -250);
    ck_assert_str_eq(buf, "1969-12-31T23:59:59.750Z");
    timefmt_iso(buf, sizeof buf, -1000);
    ck_assert_str_eq(buf, "1969-12-31T23:59:59.000Z");
}
END_TEST

/* Durations from Redis may be any int64, the smallest included. */
START_TEST(extreme_durations_print)
{
    char buf[40];
    timefmt_duration(buf, sizeof buf, INT64_MIN);
    ck_assert_str_eq(buf, "-106751991167d 7h");
    timefmt_duration(buf, sizeof buf, -1500);
    ck_assert_str_eq(buf, "-1.5s");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("timefmt");
    TCase *tc = fixture_tcase(s, "parse", 10, NULL, NULL, NULL, NULL);
    tcase_add_test(tc, durations_in_each_unit);
    tcase_add_test(tc, compound_and_bare_durations);
    tcase_add_test(tc, bad_durations_are_refused);
    tcase_add_test(tc, unix_seconds);
    tcase_add_test(tc, iso8601_with_zones);
    tcase_add_test(tc, iso8601_without_zone_is_local_time);
    tcase_add_test(tc, bad_times_are_refused);
    tcase_add_test(tc, durations_print_short);
    tcase_add_test(tc, times_before_1970_print_whole);
    tcase_add_test(tc, extreme_durations_print);
    return fixture_run_suite(s);
}
