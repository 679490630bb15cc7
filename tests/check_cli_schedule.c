/*
 * delayq schedule, run as users run it: the built binary against a real
 * redis-server (no daemon: what the command stores and refuses; the
 * firing is in check_schedule.c).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_run.h"
#include "fixture.h"

static struct redis_fixture fx;

static void clean_redis(void)
{
    fixture_redis_flush(&fx);
}

START_TEST(add_list_run_now_remove)
{
    struct run_result *r = CLI("schedule", "add", "-q", "rep", "--name", "daily", "-t",
                               "report", "--cron", "0 9 * * mon-fri", "--tz",
                               "Europe/Berlin", "--catch-up", "all", "hello");
    assert_ok(r);
    ck_assert_ptr_nonnull(strstr(r->out, "schedule daily: next tick 20"));
    assert_ok(CLI_HOW(&(struct cli_run){ .in = "from stdin", .in_len = 10 },
                      "schedule", "add", "-q", "rep", "--name", "fast", "-t", "t",
                      "--cron", "@every 90s", "-"));
    assert_fails(CLI("schedule", "add", "-q", "rep", "--name", "fast", "-t", "t",
                     "--cron", "@hourly"), 1, "schedule fast already exists");
    assert_ok(CLI("schedule", "add", "-q", "rep", "--name", "fast", "-t", "t",
                  "--cron", "@every 90s", "--replace", "-"));
    r = CLI("schedule", "list", "-q", "rep");
    assert_ok(r);
    ck_assert_ptr_nonnull(strstr(r->out, "NAME"));
    ck_assert_ptr_nonnull(strstr(r->out, "0 9 * * mon-fri"));
    ck_assert_ptr_nonnull(strstr(r->out, "Europe/Berlin"));
    r = CLI("schedule", "list", "-q", "rep", "--json");
    assert_ok(r);
    ck_assert_ptr_nonnull(strstr(r->out, "\"name\":\"daily\",\"expr\":\"0 9 * * mon-fri\","
                                         "\"tz\":\"Europe/Berlin\",\"type\":\"report\","
                                         "\"payload\":\"hello\",\"max_attempts\":0,"
                                         "\"catch_up\":\"all\",\"next_ms\":"));
    /* --replace with "-" and no input stores an empty payload. */
    ck_assert_ptr_nonnull(strstr(r->out, "\"name\":\"fast\""));
    r = CLI("schedule", "run-now", "-q", "rep", "daily");
    assert_ok(r);
    ck_assert_ptr_nonnull(strstr(r->out, "daily@now-20"));
    char id[300];
    snprintf(id, sizeof id, "%.*s", (int)strcspn(r->out, "\n"), r->out);
    r = CLI("show", "-q", "rep", id);
    assert_ok(r);
    ck_assert_ptr_nonnull(strstr(r->out, "payload: hello"));
    assert_ok(CLI("schedule", "remove", "-q", "rep", "daily"));
    assert_fails(CLI("schedule", "remove", "-q", "rep", "daily"), 1,
                 "no schedule daily in queue rep");
    assert_fails(CLI("schedule", "run-now", "-q", "rep", "daily"), 1, "no schedule daily");
    r = CLI("schedule", "list", "-q", "rep", "--json");
    assert_ok(r);
    ck_assert_ptr_null(strstr(r->out, "daily"));
}
END_TEST

/* pause and resume: said, listed (text and --json), kept by --replace;
 * an unknown name exits 1. */
START_TEST(pause_and_resume)
{
    assert_ok(CLI("schedule", "add", "-q", "rep", "--name", "p", "-t", "t", "--cron",
                  "@hourly"));
    struct run_result *r = CLI("schedule", "pause", "-q", "rep", "p");
    assert_ok(r);
    ck_assert_ptr_nonnull(strstr(r->out, "schedule p: paused since 20"));
    r = CLI("schedule", "list", "-q", "rep");
    assert_ok(r);
    ck_assert_ptr_nonnull(strstr(r->out, "paused"));
    r = CLI("schedule", "add", "-q", "rep", "--name", "p", "-t", "t", "--cron", "@daily",
            "--replace");
    assert_ok(r);
    ck_assert_ptr_nonnull(strstr(r->out, "it stays paused"));
    r = CLI("schedule", "list", "-q", "rep", "--json");
    assert_ok(r);
    ck_assert_ptr_nonnull(strstr(r->out, "\"expr\":\"@daily\""));
    ck_assert_ptr_nonnull(strstr(r->out, "\"next_ms\":null,\"next\":null,"
                                         "\"paused_since_ms\":1"));
    r = CLI("schedule", "resume", "-q", "rep", "p");
    assert_ok(r);
    ck_assert_ptr_nonnull(strstr(r->out, "schedule p: next tick 20"));
    ck_assert_ptr_nonnull(strstr(r->out, "T00:00:00.000Z"));
    r = CLI("schedule", "list", "-q", "rep", "--json");
    ck_assert_ptr_nonnull(strstr(r->out, "\"paused_since_ms\":null"));
    assert_fails(CLI("schedule", "pause", "-q", "rep", "q"), 1, "no schedule q in queue rep");
    assert_fails(CLI("schedule", "resume", "-q", "rep", "q"), 1, "no schedule q in queue rep");
    assert_fails(CLI("schedule", "pause", "-q", "rep"), 2, "missing the schedule NAME");
}
END_TEST

START_TEST(bad_input_is_one_line_and_exit_2)
{
    assert_fails(CLI("schedule", "add", "-q", "u", "--name", "n", "-t", "t", "--cron",
                     "*/5 * * *"), 2, "bad --cron '*/5 * * *': expected 5 fields");
    struct run_result *r = CLI("schedule", "add", "-q", "u", "--name", "n", "-t", "t",
                               "--cron", "0 9 * * fri-mon");
    assert_fails(r, 2, "");
    ck_assert_str_eq(r->err, "delayq: schedule: bad --cron '0 9 * * fri-mon': field 5 "
                             "(day-of-week) \"fri-mon\": range 5-1 runs backwards\n");
    assert_fails(CLI("schedule", "add", "-q", "u", "--name", "n", "-t", "t", "--cron",
                     "@every 0s"), 2, "at least 1s");
    assert_fails(CLI("schedule", "add", "-q", "u", "--name", "n", "-t", "t", "--cron",
                     "@daily", "--tz", "Europe/Atlantis"), 2, "not in the system's tzdata");
    assert_fails(CLI("schedule", "add", "-q", "u", "--name", "n", "-t", "t", "--cron",
                     "@daily", "--catch-up", "some"), 2, "bad --catch-up 'some'");
    assert_fails(CLI("schedule", "add", "-q", "u", "--name", "a@b", "-t", "t", "--cron",
                     "@daily"), 2, "contains '@'");
    assert_fails(CLI("schedule", "add", "-q", "u", "-t", "t", "--cron", "@daily"), 2,
                 "missing --name");
    assert_fails(CLI("schedule", "add", "-q", "u", "--name", "n", "--cron", "@daily"), 2,
                 "missing -t TYPE");
    assert_fails(CLI("schedule", "add", "-q", "u", "--name", "n", "-t", "t"), 2,
                 "missing --cron");
    assert_fails(CLI("schedule", "add", "-q", "u", "--name", "n", "-t", "t", "--cron",
                     "@daily", "a", "b"), 2, "more than one payload");
    assert_fails(CLI("schedule", "-q", "u"), 2, "missing the action");
    assert_fails(CLI("schedule", "-q", "u", "halt"), 2, "unknown action 'halt'");
    assert_fails(CLI("schedule", "list"), 2, "missing -q QUEUE");
    assert_fails(CLI("schedule", "list", "-q", "u", "--cron", "@daily"), 2, "go with add");
    assert_fails(CLI("schedule", "remove", "-q", "u"), 2, "missing the schedule NAME");
    assert_fails(CLI("schedule", "remove", "-q", "u", "--json", "n"), 2,
                 "--json goes with list");
    assert_fails(CLI("schedule", "run-now", "-q", "u", "a", "b"), 2, "give one schedule");
    /* Nothing reached Redis. */
    ck_assert_int_eq(fixture_redis_int(&fx, "DBSIZE"), 0);
}
END_TEST

int main(void)
{
    fixture_redis_start(&fx);
    cli_run_socket(fx.sock);
    Suite *s = suite_create("cli_schedule");
    TCase *tc = fixture_tcase(s, "schedule", 30, NULL, NULL, clean_redis, NULL);
    tcase_add_test(tc, add_list_run_now_remove);
    tcase_add_test(tc, pause_and_resume);
    tcase_add_test(tc, bad_input_is_one_line_and_exit_2);
    int status = fixture_run_suite(s);
    fixture_redis_stop(&fx);
    return status;
}
