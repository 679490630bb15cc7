/* Recurring schedules' expressions: the syntax, its refusals, and the next
 * fire time, across the daylight-saving changes of two zones. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "util/cron.h"
#include "util/timefmt.h"

static int64_t at(const char *iso)
{
    int64_t ms;
    const char *why;
    ck_assert_msg(timefmt_parse_time(iso, &ms, &why) == 0, "%s: %s", iso, why);
    return ms;
}

/* The next fire time of `expr` in `tz` after `after`, as ISO UTC. */
static const char *next_of(const char *expr, const char *tz, const char *after)
{
    static char buf[64];
    struct cron_expr e;
    char err[256];
    ck_assert_msg(cron_parse(expr, &e, err, sizeof err) == 0, "%s: %s", expr, err);
    int64_t t = cron_next(&e, tz, at(after));
    if (t < 0)
        return "never";
    timefmt_iso(buf, sizeof buf, t);
    return buf;
}

/* `expr` is refused with a message containing `want`. */
static void refused(const char *expr, const char *want)
{
    struct cron_expr e;
    char err[256] = "";
    ck_assert_msg(cron_parse(expr, &e, err, sizeof err) == -1, "\"%s\" accepted", expr);
    ck_assert_msg(strstr(err, want), "\"%s\": \"%s\" lacks \"%s\"", expr, err, want);
    ck_assert_ptr_null(strchr(err, '\n'));
}

START_TEST(fields_lists_ranges_steps)
{
    ck_assert_str_eq(next_of("*/5 * * * *", NULL, "2026-11-23T10:03:10Z"),
                     "2026-11-23T10:05:00.000Z");
    ck_assert_str_eq(next_of("* * * * *", NULL, "2026-11-23T10:05:00Z"),
                     "2026-11-23T10:06:00.000Z");
    ck_assert_str_eq(next_of("10-50/20 * * * *", NULL, "2026-11-23T10:31:00Z"),
                     "2026-11-23T10:50:00.000Z");
    ck_assert_str_eq(next_of("5/20 * * * *", NULL, "2026-11-23T10:26:00Z"),
                     "2026-11-23T10:45:00.000Z");
    ck_assert_str_eq(next_of("0 9,17 * * *", NULL, "2026-11-23T09:00:00Z"),
                     "2026-11-23T17:00:00.000Z");
    /* 2026-11-23 is a Monday. */
    ck_assert_str_eq(next_of("0 9 * * sat,sun", NULL, "2026-11-23T10:00:00Z"),
                     "2026-11-28T09:00:00.000Z");
    ck_assert_str_eq(next_of("0 9 * * 7", NULL, "2026-11-23T10:00:00Z"),
                     "2026-11-29T09:00:00.000Z");
    ck_assert_str_eq(next_of("0 0 1 Jan *", NULL, "2026-11-23T10:00:00Z"),
                     "2027-01-01T00:00:00.000Z");
    ck_assert_str_eq(next_of("0 0 29 2 *", NULL, "2026-11-23T10:00:00Z"),
                     "2028-02-29T00:00:00.000Z");
    ck_assert_str_eq(next_of("0 0 31 2 *", NULL, "2026-11-23T10:00:00Z"), "never");
}
END_TEST

START_TEST(day_fields_follow_vixie_cron)
{
    /* Both restricted: the 13th or a Friday, whichever comes first. */
    ck_assert_str_eq(next_of("0 0 13 * fri", NULL, "2026-11-23T10:00:00Z"),
                     "2026-11-27T00:00:00.000Z");
    ck_assert_str_eq(next_of("0 0 13 * fri", NULL, "2026-12-11T10:00:00Z"),
                     "2026-12-13T00:00:00.000Z");
    /* A starred field (even stepped) restricts nothing: both must match. */
    ck_assert_str_eq(next_of("0 0 */2 * fri", NULL, "2026-11-28T10:00:00Z"),
                     "2026-12-11T00:00:00.000Z");
}
END_TEST

START_TEST(macros_and_every)
{
    ck_assert_str_eq(next_of("@hourly", NULL, "2026-11-23T10:05:00Z"),
                     "2026-11-23T11:00:00.000Z");
    ck_assert_str_eq(next_of("@daily", NULL, "2026-11-23T10:05:00Z"),
                     "2026-11-24T00:00:00.000Z");
    ck_assert_str_eq(next_of("@weekly", NULL, "2026-11-23T10:05:00Z"),
                     "2026-11-29T00:00:00.000Z");
    ck_assert_str_eq(next_of("@monthly", NULL, "2026-11-23T10:05:00Z"),
                     "2026-12-01T00:00:00.000Z");
    ck_assert_str_eq(next_of("@every 90s", NULL, "2026-11-23T10:05:00Z"),
                     "2026-11-23T10:06:30.000Z");
    ck_assert_str_eq(next_of("@every 1h30m", "Europe/Berlin", "2026-03-29T00:30:00Z"),
                     "2026-03-29T02:00:00.000Z");
}
END_TEST

START_TEST(bad_expressions_name_the_field)
{
    refused("61 * * * *", "field 1 (minute) \"61\": 61 is not in 0..59");
    refused("* 25 * * *", "field 2 (hour)");
    refused("* * 0 * *", "field 3 (day-of-month)");
    refused("* * * foo *", "field 4 (month) \"foo\": expected a number or a name");
    refused("* * * * 8", "field 5 (day-of-week)");
    refused("*/0 * * * *", "step \"0\"");
    refused("5-1 * * * *", "runs backwards");
    refused("* * * * sat-sun", "range 6-0 runs backwards");
    refused("1,,2 * * * *", "empty list item");
    refused("1x * * * *", "unexpected \"x\"");
    refused("* * * *", "expected 5 fields");
    refused("* * * * * *", "got more than 5");
    refused("", "got 0");
    refused("@sometimes", "is not one of");
    refused("@every 500ms", "whole seconds");
    refused("@every 1500ms", "whole seconds");
    refused("@every soon", "@every \"soon\"");
}
END_TEST

START_TEST(zones_are_checked)
{
    char err[256];
    ck_assert_int_eq(cron_check_zone(NULL, err, sizeof err), 0);
    ck_assert_int_eq(cron_check_zone("UTC", err, sizeof err), 0);
    ck_assert_int_eq(cron_check_zone("Mars/Olympus_Mons", err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "not in the system's tzdata"));
    ck_assert_int_eq(cron_check_zone("../../etc/passwd", err, sizeof err), -1);
    ck_assert_int_eq(cron_check_zone("/etc/localtime", err, sizeof err), -1);
}
END_TEST

/* Whether this machine has the tzdata of `zone`; says so when not. */
static int have_zone(const char *zone)
{
    char err[256];
    if (cron_check_zone(zone, err, sizeof err) == 0)
        return 1;
    printf("SKIP daylight-saving cases of %s: %s\n", zone, err);
    return 0;
}

START_TEST(berlin_daylight_saving)
{
    if (!have_zone("Europe/Berlin"))
        return;
    const char *z = "Europe/Berlin";
    ck_assert_str_eq(next_of("30 2 * * *", z, "2026-03-27T12:00:00Z"),
                     "2026-03-28T01:30:00.000Z");      /* 02:30 CET */
    /* 2026-03-29: 02:00 CET jumps to 03:00 CEST; 02:30 fires once, at 03:00. */
    ck_assert_str_eq(next_of("30 2 * * *", z, "2026-03-28T01:30:00Z"),
                     "2026-03-29T01:00:00.000Z");
    ck_assert_str_eq(next_of("30 2 * * *", z, "2026-03-29T01:00:00Z"),
                     "2026-03-30T00:30:00.000Z");      /* 02:30 CEST */
    ck_assert_str_eq(next_of("*/15 * * * *", z, "2026-03-29T00:45:00Z"),
                     "2026-03-29T01:00:00.000Z");
    ck_assert_str_eq(next_of("*/15 * * * *", z, "2026-03-29T01:00:00Z"),
                     "2026-03-29T01:15:00.000Z");
    /* 2026-10-25: 03:00 CEST goes back to 02:00 CET; 02:30 fires once,
     * the first time. */
    ck_assert_str_eq(next_of("30 2 * * *", z, "2026-10-24T12:00:00Z"),
                     "2026-10-25T00:30:00.000Z");
    ck_assert_str_eq(next_of("30 2 * * *", z, "2026-10-25T00:30:00Z"),
                     "2026-10-26T01:30:00.000Z");
    ck_assert_str_eq(next_of("* * * * *", z, "2026-10-25T00:59:00Z"),
                     "2026-10-25T02:00:00.000Z");      /* 03:00 CET */
    ck_assert_str_eq(next_of("0 * * * *", z, "2026-10-25T00:00:00Z"),
                     "2026-10-25T02:00:00.000Z");
}
END_TEST

START_TEST(new_york_daylight_saving)
{
    if (!have_zone("America/New_York"))
        return;
    const char *z = "America/New_York";
    ck_assert_str_eq(next_of("0 9 * * *", z, "2026-03-07T12:00:00Z"),
                     "2026-03-07T14:00:00.000Z");      /* 09:00 EST */
    /* 2026-03-08: 02:00 EST jumps to 03:00 EDT. */
    ck_assert_str_eq(next_of("30 2 * * *", z, "2026-03-07T12:00:00Z"),
                     "2026-03-08T07:00:00.000Z");
    ck_assert_str_eq(next_of("30 2 * * *", z, "2026-03-08T07:00:00Z"),
                     "2026-03-09T06:30:00.000Z");
    ck_assert_str_eq(next_of("0 9 * * *", z, "2026-03-08T07:00:00Z"),
                     "2026-03-08T13:00:00.000Z");      /* 09:00 EDT */
    /* 2026-11-01: 02:00 EDT goes back to 01:00 EST. */
    ck_assert_str_eq(next_of("30 1 * * *", z, "2026-10-31T12:00:00Z"),
                     "2026-11-01T05:30:00.000Z");
    ck_assert_str_eq(next_of("30 1 * * *", z, "2026-11-01T05:30:00Z"),
                     "2026-11-02T06:30:00.000Z");
}
END_TEST

START_TEST(the_callers_zone_is_kept)
{
    setenv("TZ", "Asia/Tokyo", 1);
    next_of("0 0 * * *", "Europe/Berlin", "2026-11-23T10:00:00Z");
    ck_assert_str_eq(getenv("TZ"), "Asia/Tokyo");
    unsetenv("TZ");
    next_of("0 0 * * *", "Europe/Berlin", "2026-11-23T10:00:00Z");
    ck_assert_ptr_null(getenv("TZ"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cron");
    TCase *tc = fixture_tcase(s, "cron", 20, NULL, NULL, NULL, NULL);
    tcase_add_test(tc, fields_lists_ranges_steps);
    tcase_add_test(tc, day_fields_follow_vixie_cron);
    tcase_add_test(tc, macros_and_every);
    tcase_add_test(tc, bad_expressions_name_the_field);
    tcase_add_test(tc, zones_are_checked);
    tcase_add_test(tc, berlin_daylight_saving);
    tcase_add_test(tc, new_york_daylight_saving);
    tcase_add_test(tc, the_callers_zone_is_kept);
    return fixture_run_suite(s);
}
