/*
 * Recurring schedules end to end: real redis-server, real delayqd (one or
 * two on the same server), the test handler recording each run.  Each
 * tick must make exactly one job, whatever the daemons do; missed periods
 * follow the catch-up policy; a removed schedule fires no more.
 */
#include <check.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "util/timefmt.h"

#define MAX_TICKS 512
#define LOOKAHEAD_MS 3000       /* SCHED_LOOKAHEAD_MS: ticks fire this early */

static struct harness H;
static struct harness H2;       /* a second daemon on the same server */

static void setup(void)
{
    h_setup(&H);
    H2 = H;
    H2.pid = 0;
    snprintf(H2.log, sizeof H2.log, "%s/delayqd2.log", H.fx.dir);
}

static void teardown(void)
{
    h_stop(&H2, 10000);
    h_teardown(&H);
}

static void add_schedule(const char *name, const char *expr, dq_catch_up cu)
{
    dq_schedule_req r = { .queue = H_QUEUE, .name = name, .type = "t", .expr = expr,
                          .payload = "ok", .payload_len = 2, .catch_up = cu };
    ck_assert_msg(dq_schedule_add(H.c, &r, NULL) == DQ_OK, "%s", dq_errmsg(H.c));
}

static int64_t server_now(void)
{
    int64_t now;
    ck_assert_int_eq(dq_server_time(H.c, &now), DQ_OK);
    return now;
}

/*
 * The ticks of schedule `name` that ran (the test handler's start lines),
 * sorted, each once, in ticks[] (MAX_TICKS); *dups counts ticks that ran
 * more than once (it must stay 0).  Returns how many ticks ran.
 */
static int ticks_run(const char *name, int64_t *ticks, int *dups)
{
    struct h_run *r;
    size_t n = h_records(&H, &r);
    int count = 0;
    *dups = 0;
    size_t len = strlen(name);
    for (size_t i = 0; i < n; i++) {
        if (r[i].end != 0 || strncmp(r[i].id, name, len) != 0 || r[i].id[len] != '@'
            || strncmp(r[i].id + len + 1, "now-", 4) == 0)
            continue;
        int64_t t;
        const char *why;
        ck_assert_msg(timefmt_parse_time(r[i].id + len + 1, &t, &why) == 0, "%s: %s",
                      r[i].id, why);
        int seen = 0;
        for (int k = 0; k < count; k++)
            if (ticks[k] == t)
                seen = 1;
        if (seen) {
            (*dups)++;
            continue;
        }
        ck_assert_int_lt(count, MAX_TICKS);
        int k = count++;
        for (; k > 0 && ticks[k - 1] > t; k--)
            ticks[k] = ticks[k - 1];
        ticks[k] = t;
    }
    free(r);
    return count;
}

/* Every tick of `name` ran once, `step_ms` apart, none missing; returns
 * how many. */
static int assert_every_tick_once(const char *name, int64_t step_ms)
{
    int64_t ticks[MAX_TICKS];
    int dups;
    int n = ticks_run(name, ticks, &dups);
    ck_assert_msg(dups == 0, "%s: %d ticks ran twice; log:\n%s", name, dups, h_log_tail(&H));
    for (int i = 1; i < n; i++) {
        char a[40], b[40];
        timefmt_iso(a, sizeof a, ticks[i - 1]);
        timefmt_iso(b, sizeof b, ticks[i]);
        ck_assert_msg(ticks[i] - ticks[i - 1] == step_ms, "%s: ticks %s and %s: a tick "
                      "is missing", name, a, b);
    }
    return n;
}

/* How many ticks of `name` ran at or before `until_ms`, and the first. */
static int ticks_until(const char *name, int64_t until_ms, int64_t *first)
{
    int64_t ticks[MAX_TICKS];
    int dups;
    int n = ticks_run(name, ticks, &dups);
    ck_assert_int_eq(dups, 0);
    int c = 0;
    for (int i = 0; i < n; i++)
        if (ticks[i] <= until_ms) {
            if (c++ == 0 && first)
                *first = ticks[i];
        }
    return c;
}

struct ticks_arg {
    const char *name;
    int n;
};

static int has_ticks(void *arg)
{
    struct ticks_arg *a = arg;
    int64_t ticks[MAX_TICKS];
    int dups;
    return ticks_run(a->name, ticks, &dups) >= a->n;
}

static void start_daemon(struct harness *h)
{
    h_start(h, 2);
}

START_TEST(two_daemons_fire_each_tick_once_across_restarts)
{
    struct h_conf hc;
    h_conf_defaults(&hc);
    h_write_conf(&H, &hc);
    add_schedule("minute", "* * * * *", DQ_CATCH_UP_ONE);
    add_schedule("every5", "@every 5s", DQ_CATCH_UP_ONE);
    start_daemon(&H);
    start_daemon(&H2);
    tu_sleep_ms(12000);
    /* One daemon restarted across ticks ... */
    ck_assert_int_ne(h_stop(&H, 10000), -1);
    tu_sleep_ms(6000);
    start_daemon(&H);
    tu_sleep_ms(12000);
    /* ... and both down over two ticks, for less than the grace period:
     * the late ticks still fire, each once. */
    ck_assert_int_ne(h_stop(&H, 10000), -1);
    ck_assert_int_ne(h_stop(&H2, 10000), -1);
    tu_sleep_ms(11000);
    start_daemon(&H2);
    start_daemon(&H);
    /* A minute tick (a cron expression's: the one the restarts may fall
     * on) and 9 of the 5 s ticks (the ones they do fall between), each
     * fired once by two daemons.  The cron's intervals are check_cron's
     * and the catch-up test's. */
    struct ticks_arg a_minute = { "minute", 1 }, nine = { "every5", 9 };
    ck_assert_msg(h_wait(75000, has_ticks, &a_minute), "no minute tick; log:\n%s",
                  h_log_tail(&H));
    ck_assert_msg(h_wait(30000, has_ticks, &nine), "fewer than 9 5-second ticks; log:\n%s",
                  h_log_tail(&H));
    tu_sleep_ms(1000);
    int minutes = assert_every_tick_once("minute", 60000);
    int fives = assert_every_tick_once("every5", 5000);
    ck_assert_int_ge(minutes, 1);
    ck_assert_int_ge(fives, 9);
    printf("two daemons: %d minute ticks and %d 5-second ticks, each once\n", minutes,
           fives);
}
END_TEST

/* Put a schedule's next tick at `t0` (as though no daemon ran since). */
static void set_next(const char *name, int64_t t0)
{
    ck_assert_int_eq(fixture_redis_int(&H.fx, "ZADD dq:{" H_QUEUE "}:schedule_due XX CH "
                                       "%lld %s", (long long)t0, name), 1);
}

START_TEST(missed_ticks_follow_the_catch_up_policy)
{
    struct h_conf hc;
    h_conf_defaults(&hc);
    h_write_conf(&H, &hc);
    add_schedule("one", "* * * * *", DQ_CATCH_UP_ONE);
    add_schedule("all", "* * * * *", DQ_CATCH_UP_ALL);
    add_schedule("none", "* * * * *", DQ_CATCH_UP_NONE);
    int64_t now = server_now();
    int64_t minute = now - now % 60000;
    int64_t t0 = minute - 10 * 60000;   /* 11 ticks missed: t0 .. minute */
    set_next("one", t0);
    set_next("all", t0);
    set_next("none", t0);
    start_daemon(&H);
    struct ticks_arg eleven = { "all", 11 };
    ck_assert_msg(h_wait(15000, has_ticks, &eleven), "catch_up=all did not fire 11 "
                  "ticks; log:\n%s", h_log_tail(&H));
    ck_assert_int_ge(h_wait_log(&H, "missed its ticks", 3, 5000), 3);
    tu_sleep_ms(1000);
    int64_t first = 0;
    ck_assert_int_eq(ticks_until("all", minute, &first), 11);
    ck_assert_int_eq(first, t0);
    assert_every_tick_once("all", 60000);
    ck_assert_int_eq(ticks_until("one", minute, &first), 1);
    ck_assert_int_eq(first, t0);
    ck_assert_int_eq(ticks_until("none", minute, NULL), 0);
    /* Each resumes after now, on its grid. */
    dq_schedule_list l;
    ck_assert_int_eq(dq_schedule_list_get(H.c, H_QUEUE, &l), DQ_OK);
    ck_assert_int_eq(l.n, 3);
    for (size_t i = 0; i < l.n; i++) {
        ck_assert_int_gt(l.items[i].next_ms, minute);
        ck_assert_int_eq(l.items[i].next_ms % 60000, 0);
    }
    dq_schedule_list_free(&l);
}
END_TEST

/* A tick fires up to LOOKAHEAD_MS ahead: with one every 1 or 2 s, a job made
 * for the next tick is (nearly always) waiting within a few seconds. */
static void wait_fired_ahead(void)
{
    long long waiting = 0;
    for (int tries = 0; tries < 50 && waiting < 1; tries++) {
        if (tries)
            tu_sleep_ms(100);
        waiting = fixture_redis_int(&H.fx, "ZCOUNT dq:{" H_QUEUE "}:delayed (%lld +inf",
                                    (long long)server_now());
    }
    ck_assert_msg(waiting >= 1, "no job fired ahead of its tick; log:\n%s", h_log_tail(&H));
}

START_TEST(remove_stops_the_ticks_and_run_now_fires_once)
{
    struct h_conf hc;
    h_conf_defaults(&hc);
    h_write_conf(&H, &hc);
    add_schedule("rm", "@every 2s", DQ_CATCH_UP_ONE);
    start_daemon(&H);
    struct ticks_arg two = { "rm", 2 };
    ck_assert_msg(h_wait(10000, has_ticks, &two), "no ticks; log:\n%s", h_log_tail(&H));
    dq_schedule_list before, after;
    ck_assert_int_eq(dq_schedule_list_get(H.c, H_QUEUE, &before), DQ_OK);
    dq_enqueued out;
    ck_assert_int_eq(dq_schedule_run_now(H.c, H_QUEUE, "rm", &out), DQ_OK);
    ck_assert_ptr_nonnull(strstr(out.id, "rm@now-"));
    ck_assert_int_eq(dq_schedule_list_get(H.c, H_QUEUE, &after), DQ_OK);
    /* run-now leaves the ticks alone (unless one fired meanwhile). */
    ck_assert_int_eq(after.n, 1);
    ck_assert(after.items[0].next_ms == before.items[0].next_ms
              || after.items[0].next_ms == before.items[0].next_ms + 2000);
    dq_schedule_list_free(&before);
    dq_schedule_list_free(&after);
    ck_assert_int_eq(h_wait_record(&H, out.id, 0, 1, 5000), 1);

    /* The next tick's job is waiting when the schedule goes, and goes
     * with it. */
    wait_fired_ahead();
    ck_assert_int_eq(dq_schedule_remove(H.c, H_QUEUE, "rm"), DQ_OK);
    int64_t removed = server_now();
    ck_assert_int_eq(fixture_redis_int(&H.fx, "ZCOUNT dq:{" H_QUEUE "}:delayed (%lld +inf",
                                       (long long)removed), 0);
    ck_assert_int_eq(dq_schedule_remove(H.c, H_QUEUE, "rm"), DQ_ERR_NOTFOUND);
    ck_assert_int_eq(dq_schedule_run_now(H.c, H_QUEUE, "rm", NULL), DQ_ERR_NOTFOUND);
    tu_sleep_ms(LOOKAHEAD_MS + 4000);
    /* No tick after the removal runs, not even one fired ahead of it. */
    int64_t ticks[MAX_TICKS];
    int dups;
    int n = ticks_run("rm", ticks, &dups);
    ck_assert_int_eq(dups, 0);
    ck_assert_msg(ticks[n - 1] <= removed, "a tick %lld ms after the removal ran",
                  (long long)(ticks[n - 1] - removed));
    ck_assert_int_eq(fixture_redis_int(&H.fx, "EXISTS dq:{" H_QUEUE "}:schedules"), 0);
}
END_TEST

/*
 * A stored schedule the daemon cannot read (written by a newer version, or
 * damaged) is listed at every poll: the operator is warned once, not every
 * second, and told again when it fires once more after a fix.
 */
START_TEST(an_unreadable_schedule_is_warned_about_once)
{
    struct h_conf hc;
    h_conf_defaults(&hc);
    h_write_conf(&H, &hc);
    add_schedule("bad", "@every 1s", DQ_CATCH_UP_ONE);
    ck_assert_int_eq(fixture_redis_int(&H.fx, "HSET dq:{" H_QUEUE "}:schedules bad 1:junk"),
                     0);
    start_daemon(&H);
    ck_assert_int_eq(h_wait_log(&H, "schedule bad cannot be fired: unreadable definition",
                                1, 10000), 1);
    tu_sleep_ms(3500);  /* three more polls list it again */
    ck_assert_int_eq(h_log_count(&H, "schedule bad cannot be fired"), 1);
    int64_t ticks[MAX_TICKS];
    int dups;
    ck_assert_int_eq(ticks_run("bad", ticks, &dups), 0);

    dq_schedule_req r = { .queue = H_QUEUE, .name = "bad", .type = "t",
                          .expr = "@every 1s", .payload = "ok", .payload_len = 2,
                          .replace = true };
    ck_assert_int_eq(dq_schedule_add(H.c, &r, NULL), DQ_OK);
    ck_assert_int_eq(h_wait_log(&H, "schedule bad can be fired again", 1, 10000), 1);
    struct ticks_arg one = { "bad", 1 };
    ck_assert_msg(h_wait(10000, has_ticks, &one), "no ticks; log:\n%s", h_log_tail(&H));
}
END_TEST

START_TEST(bad_schedules_are_refused_with_the_reason)
{
    dq_schedule_req r = { .queue = H_QUEUE, .name = "x", .type = "t",
                          .expr = "* 24 * * *" };
    ck_assert_int_eq(dq_schedule_add(H.c, &r, NULL), DQ_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(H.c), "field 2 (hour)"));
    r.expr = "@daily";
    r.tz = "Nowhere/Atlantis";
    ck_assert_int_eq(dq_schedule_add(H.c, &r, NULL), DQ_ERR_INVALID);
    r.tz = NULL;
    r.name = "a@b";
    ck_assert_int_eq(dq_schedule_add(H.c, &r, NULL), DQ_ERR_INVALID);
    r.name = "x";
    r.expr = "0 0 30 2 *";
    ck_assert_int_eq(dq_schedule_add(H.c, &r, NULL), DQ_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(H.c), "fires at no time"));
    r.expr = "@daily";
    ck_assert_int_eq(dq_schedule_add(H.c, &r, NULL), DQ_OK);
    ck_assert_int_eq(dq_schedule_add(H.c, &r, NULL), DQ_ERR_EXISTS);
    r.replace = true;
    r.expr = "@hourly";
    int64_t next;
    ck_assert_int_eq(dq_schedule_add(H.c, &r, &next), DQ_OK);
    ck_assert_int_eq(next % 3600000, 0);
    /* Nothing was written for the refused ones. */
    ck_assert_int_eq(fixture_redis_int(&H.fx, "HLEN dq:{" H_QUEUE "}:schedules"), 1);
}
END_TEST

/* The harness's configuration with a schedules list after it. */
static void write_conf_with(const char *schedules)
{
    struct h_conf hc;
    h_conf_defaults(&hc);
    h_write_conf(&H, &hc);
    FILE *fp = fopen(H.conf, "a");
    ck_assert_ptr_nonnull(fp);
    fprintf(fp, "schedules = ( %s );\n", schedules);
    ck_assert_int_eq(fclose(fp), 0);
}

/* The stored expression of schedule `name`, in `buf`. */
static const char *stored_expr(const char *name, char *buf, size_t len)
{
    dq_schedule_list l;
    ck_assert_int_eq(dq_schedule_list_get(H.c, H_QUEUE, &l), DQ_OK);
    snprintf(buf, len, "(none)");
    for (size_t i = 0; i < l.n; i++)
        if (strcmp(l.items[i].name, name) == 0)
            snprintf(buf, len, "%s", l.items[i].expr);
    dq_schedule_list_free(&l);
    return buf;
}

START_TEST(config_schedules_are_stored_at_start_and_reload)
{
    write_conf_with("{ queue = \"" H_QUEUE "\"; name = \"cfg\"; cron = \"@every 2s\"; "
                    "type = \"t\"; payload = \"ok\"; catch_up = \"all\"; }");
    start_daemon(&H);
    struct ticks_arg two = { "cfg", 2 };
    ck_assert_msg(h_wait(10000, has_ticks, &two), "no ticks; log:\n%s", h_log_tail(&H));
    ck_assert_int_eq(h_log_count(&H, "schedule cfg from the config file added"), 1);
    char buf[64];
    ck_assert_str_eq(stored_expr("cfg", buf, sizeof buf), "@every 2s");
    /* A reload with the same file leaves it alone ... */
    kill(H.pid, SIGHUP);
    ck_assert_int_ge(h_wait_log(&H, "reloaded", 1, 10000), 1);
    tu_sleep_ms(1500);
    ck_assert_int_eq(h_log_count(&H, "from the config file"), 1);
    /* ... and one that changes it changes it. */
    write_conf_with("{ queue = \"" H_QUEUE "\"; name = \"cfg\"; cron = \"@every 3s\"; "
                    "type = \"t\"; payload = \"ok\"; }");
    kill(H.pid, SIGHUP);
    ck_assert_int_ge(h_wait_log(&H, "schedule cfg from the config file changed", 1, 10000),
                     1);
    ck_assert_str_eq(stored_expr("cfg", buf, sizeof buf), "@every 3s");
    int64_t ticks[MAX_TICKS];
    int dups;
    ticks_run("cfg", ticks, &dups);
    ck_assert_int_eq(dups, 0);
}
END_TEST

/* No tick of `name` later than `t` ran; returns how many ticks ran. */
static int no_tick_after(const char *name, int64_t t)
{
    int64_t ticks[MAX_TICKS];
    int dups;
    int n = ticks_run(name, ticks, &dups);
    ck_assert_int_eq(dups, 0);
    ck_assert_msg(n == 0 || ticks[n - 1] <= t, "a tick %lld ms after the pause ran",
                  (long long)(ticks[n - 1] - t));
    return n;
}

/* A schedule from the config file is paused: the job it fired ahead goes,
 * no tick fires; a restart with a changed declaration keeps it paused;
 * resume fires again from the next tick, without making up the missed
 * ones. */
START_TEST(a_paused_schedule_fires_no_tick_until_resumed)
{
    write_conf_with("{ queue = \"" H_QUEUE "\"; name = \"pz\"; cron = \"@every 1s\"; "
                    "type = \"t\"; payload = \"ok\"; catch_up = \"all\"; }");
    start_daemon(&H);
    struct ticks_arg two = { "pz", 2 };
    ck_assert_msg(h_wait(10000, has_ticks, &two), "no ticks; log:\n%s", h_log_tail(&H));
    wait_fired_ahead();
    int64_t since;
    ck_assert_int_eq(dq_schedule_pause(H.c, H_QUEUE, "pz", &since), DQ_OK);
    int64_t paused = server_now();
    ck_assert_int_eq(fixture_redis_int(&H.fx, "ZCOUNT dq:{" H_QUEUE "}:delayed (%lld +inf",
                                       (long long)paused), 0);
    int64_t again;
    ck_assert_int_eq(dq_schedule_pause(H.c, H_QUEUE, "pz", &again), DQ_OK);
    ck_assert_int_eq(again, since);             /* paused already: the first time */
    dq_schedule_list l;
    ck_assert_int_eq(dq_schedule_list_get(H.c, H_QUEUE, &l), DQ_OK);
    ck_assert_int_eq(l.n, 1);
    ck_assert_int_eq(l.items[0].paused_since_ms, since);
    ck_assert_int_eq(l.items[0].next_ms, -1);
    dq_schedule_list_free(&l);

    /* Restarted with a changed declaration: stored, still paused. */
    ck_assert_int_eq(h_stop(&H, 10000), 0);
    write_conf_with("{ queue = \"" H_QUEUE "\"; name = \"pz\"; cron = \"@every 1s\"; "
                    "type = \"t\"; payload = \"ok2\"; catch_up = \"all\"; }");
    start_daemon(&H);
    ck_assert_int_ge(h_wait_log(&H, "schedule pz from the config file changed", 1, 10000), 1);
    ck_assert_int_eq(dq_schedule_list_get(H.c, H_QUEUE, &l), DQ_OK);
    ck_assert_int_eq(l.n, 1);
    ck_assert_int_eq(l.items[0].payload_len, 3);      /* the new declaration's "ok2" */
    ck_assert_int_eq(l.items[0].next_ms, -1);         /* still paused */
    dq_schedule_list_free(&l);
    tu_sleep_ms(LOOKAHEAD_MS + 1500);
    int before = no_tick_after("pz", paused);

    int64_t next;
    ck_assert_int_eq(dq_schedule_resume(H.c, H_QUEUE, "pz", &next), DQ_OK);
    int64_t resumed = server_now();
    ck_assert_msg(next > resumed && next <= resumed + 1000, "next tick %lld ms after resume",
                  (long long)(next - resumed));
    struct ticks_arg more = { "pz", before + 2 };
    ck_assert_msg(h_wait(10000, has_ticks, &more), "no tick after resume; log:\n%s",
                  h_log_tail(&H));
    /* The missed ticks (catch_up all) are not made up: the first tick
     * after the pause is the first one after the resume. */
    int64_t ticks[MAX_TICKS];
    int dups;
    int n = ticks_run("pz", ticks, &dups);
    ck_assert_int_eq(ticks[before], next);
    ck_assert_int_eq(n, before + (int)((ticks[n - 1] - next) / 1000) + 1);
    ck_assert_int_eq(dq_schedule_resume(H.c, H_QUEUE, "nope", NULL), DQ_ERR_NOTFOUND);
    ck_assert_int_eq(dq_schedule_pause(H.c, H_QUEUE, "nope", NULL), DQ_ERR_NOTFOUND);
}
END_TEST

START_TEST(bad_config_schedules_are_refused_with_file_and_line)
{
    static const struct { const char *entry; const char *what; } cases[] = {
        { "{ queue = \"" H_QUEUE "\"; name = \"x\"; cron = \"* * 32 * *\"; type = \"t\"; }",
          "schedules.[0].cron: field 3 (day-of-month) \"32\"" },
        { "{ queue = \"" H_QUEUE "\"; name = \"x\"; cron = \"@daily\"; type = \"t\"; "
          "tz = \"Mars/Base\"; }", "schedules.[0].tz: time zone \"Mars/Base\"" },
        { "{ queue = \"nosuch\"; name = \"x\"; cron = \"@daily\"; type = \"t\"; }",
          "\"nosuch\" is not one of the queues" },
        { "{ queue = \"" H_QUEUE "\"; name = \"x\"; cron = \"@daily\"; type = \"t\"; "
          "catch_up = \"most\"; }", "schedules.[0].catch_up: expected" },
        { "{ queue = \"" H_QUEUE "\"; cron = \"@daily\"; type = \"t\"; }",
          "schedules.[0].name: missing" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_conf_with(cases[i].entry);
        const char *args[] = { "-t", "-c", H.conf, NULL };
        char err[4096];
        ck_assert_int_eq(h_run_delayqd(args, err, sizeof err), 78);
        ck_assert_msg(strstr(err, cases[i].what) && strstr(err, H.conf), "%zu: %s", i, err);
        ck_assert_ptr_eq(strchr(err, '\n'), err + strlen(err) - 1);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("schedule");
    TCase *tc = fixture_tcase(s, "schedule", 330, NULL, NULL, setup, teardown);
    tcase_add_test(tc, bad_schedules_are_refused_with_the_reason);
    tcase_add_test(tc, an_unreadable_schedule_is_warned_about_once);
    tcase_add_test(tc, bad_config_schedules_are_refused_with_file_and_line);
    tcase_add_test(tc, config_schedules_are_stored_at_start_and_reload);
    tcase_add_test(tc, remove_stops_the_ticks_and_run_now_fires_once);
    tcase_add_test(tc, a_paused_schedule_fires_no_tick_until_resumed);
    tcase_add_test(tc, missed_ticks_follow_the_catch_up_policy);
    tcase_add_test(tc, two_daemons_fire_each_tick_once_across_restarts);
    return fixture_run_suite(s);
}
