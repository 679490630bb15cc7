/*
 * delayq partitions and stats --partitions, run as a user runs them
 * against a real redis-server: showing and setting a queue's partition
 * count, its refusals and exit codes, and the per-partition figures.
 */
#include "config.h"

#include <check.h>
#include <signal.h>
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

/* The counts of the row of `queue` and `part` in a stats --partitions
 * table: delayed, due, processing, dead. */
static void part_row(const char *out, const char *queue, const char *part, long long v[4])
{
    char head[64];
    snprintf(head, sizeof head, "\n%s ", queue);
    for (const char *p = strstr(out, head); p; p = strstr(p + 1, head)) {
        char q[64], pt[16];
        if (sscanf(p + 1, "%63s %15s %lld %lld %lld %lld", q, pt, &v[0], &v[1], &v[2],
                   &v[3]) == 6 && strcmp(pt, part) == 0)
            return;
    }
    ck_abort_msg("no row %s %s in:\n%s", queue, part, out);
}

START_TEST(show_and_set_the_count)
{
    struct run_result *r = CLI("partitions", "work");
    assert_ok(r);
    ck_assert_str_eq(r->out, "1\n");
    r = CLI("partitions", "work", "4");
    assert_ok(r);
    ck_assert_str_eq(r->out, "queue work: 4 partitions (was 1)\n");
    r = CLI("partitions", "-q", "work");
    assert_ok(r);
    ck_assert_str_eq(r->out, "4\n");
    r = CLI("partitions", "work", "4");
    assert_ok(r);
    ck_assert_str_eq(r->out, "queue work has 4 partitions already\n");
    assert_ok(CLI("partitions", "work", "1"));
    ck_assert_str_eq(CLI("partitions", "work")->out, "1\n");
}
END_TEST

START_TEST(a_queue_with_jobs_keeps_its_count)
{
    char id[64];
    add_id(CLI("add", "-q", "work", "-t", "t", "-d", "1h", "x"), id, sizeof id);
    assert_fails(CLI("partitions", "work", "4"), 1, "drain it first");
    ck_assert_str_eq(CLI("partitions", "work")->out, "1\n");
    assert_ok(CLI("cancel", "-q", "work", id));
    assert_ok(CLI("partitions", "work", "3"));
    add_id(CLI("add", "-q", "work", "-t", "t", "-d", "1h", "x"), id, sizeof id);
    assert_fails(CLI("partitions", "work", "2"), 1, "holds 1 job in its 3 partitions");
    assert_fails(CLI("partitions", "work", "1"), 1, "drain it first");
    ck_assert_str_eq(CLI("partitions", "work")->out, "3\n");
}
END_TEST

START_TEST(bad_arguments_exit_2)
{
    assert_fails(CLI("partitions"), 2, "missing QUEUE");
    assert_fails(CLI("partitions", "work", "0"), 2, "1 to 256");
    assert_fails(CLI("partitions", "work", "257"), 2, "bad partition count '257'");
    assert_fails(CLI("partitions", "work", "x"), 2, "bad partition count 'x'");
    assert_fails(CLI("partitions", "work", "2", "3"), 2, "unexpected argument '3'");
    assert_fails(CLI("partitions", "bad{name}"), 2, "bad queue");
    struct run_result *r = CLI("partitions", "--help");
    assert_ok(r);
    ck_assert_ptr_nonnull(strstr(r->out, "Usage: delayq partitions QUEUE [N]"));
}
END_TEST

START_TEST(stats_shows_each_partition_and_the_total)
{
    assert_ok(CLI("partitions", "work", "3"));
    char id[64];
    for (int i = 0; i < 6; i++)
        add_id(CLI("add", "-q", "work", "-t", "t", "x"), id, sizeof id);
    add_id(CLI("add", "-q", "work", "-t", "t", "-d", "1h", "--id", "later", "x"), id,
           sizeof id);
    add_id(CLI("add", "-q", "plain", "-t", "t", "x"), id, sizeof id);
    struct run_result *r = CLI("stats", "--partitions");
    assert_ok(r);
    ck_assert_msg(strncmp(r->out, "QUEUE ", 6) == 0 && strstr(r->out, " PART "), "%s",
                  r->out);
    long long v[4], sum[4] = { 0 };
    for (int p = 0; p < 3; p++) {
        char part[4];
        snprintf(part, sizeof part, "%d", p);
        part_row(r->out, "work", part, v);
        for (int k = 0; k < 4; k++)
            sum[k] += v[k];
    }
    part_row(r->out, "work", "total", v);
    ck_assert_int_eq(v[0], 1);
    ck_assert_int_eq(v[1], 6);
    for (int k = 0; k < 4; k++)
        ck_assert_int_eq(v[k], sum[k]);
    part_row(r->out, "plain", "0", v);
    ck_assert_int_eq(v[1], 1);
    part_row(r->out, "plain", "total", v);
    ck_assert_int_eq(v[1], 1);

    r = CLI("stats", "-q", "work", "--partitions", "--json");
    assert_ok(r);
    ck_assert_msg(strncmp(r->out, "[{\"queue\":\"work\",\"partitions\":3,\"total\":"
                  "{\"delayed\":1,\"due\":6,", 55) == 0, "%s", r->out);
    ck_assert_ptr_nonnull(strstr(r->out, "\"by_partition\":[{"));
    /* the plain table is the total */
    r = CLI("stats", "-q", "work");
    assert_ok(r);
    ck_assert_msg(strstr(r->out, "\nwork ") != NULL, "%s", r->out);
}
END_TEST

static TCase *tcase(Suite *s, const char *name, int timeout)
{
    return fixture_tcase(s, name, timeout, NULL, NULL, clean_redis, NULL);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    fixture_redis_start(&fx);
    cli_run_socket(fx.sock);
    Suite *s = suite_create("cli_partitions");
    TCase *tc = tcase(s, "partitions", 30);
    tcase_add_test(tc, show_and_set_the_count);
    tcase_add_test(tc, a_queue_with_jobs_keeps_its_count);
    tcase_add_test(tc, bad_arguments_exit_2);
    tcase_add_test(tc, stats_shows_each_partition_and_the_total);
    int status = fixture_run_suite(s);
    fixture_redis_stop(&fx);
    return status;
}
