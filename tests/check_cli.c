/*
 * The delayq command line, run as users run it: the built binary against a
 * real redis-server, checking its output, its one-line errors, its exit
 * codes and, through libdelayq, what it left in Redis.  How it connects
 * (options, the -c file, passwords) is in check_cli_conn.c.
 */
#include "config.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli_run.h"
#include "fixture.h"

#define FAKETIME_LIB "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

static struct redis_fixture fx;

/* A number field of a JSON object in `text` ("due_ms":123); fails when
 * absent. */
static long long json_num(const char *text, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(text, pat);
    ck_assert_msg(p != NULL, "no %s in %s", key, text);
    return strtoll(p + strlen(pat), NULL, 10);
}

/* ---- fixtures ----------------------------------------------------------- */

static void start_redis(void)
{
    fixture_redis_start(&fx);
    cli_run_socket(fx.sock);
}

static void stop_redis(void)
{
    fixture_redis_stop(&fx);
}

static void clean_redis(void)
{
    fixture_redis_flush(&fx);
}

/* ---- library helpers ---------------------------------------------------- */

static dq_job_info show_job(const char *queue, const char *id)
{
    dq_client *c = fixture_client(&fx);
    dq_job_info info;
    dq_status st = dq_show(c, queue, id, &info);
    ck_assert_msg(st == DQ_OK, "show %s: %s", id, dq_errmsg(c));
    dq_close(c);
    return info;
}

static dq_stats queue_stats(const char *queue)
{
    dq_client *c = fixture_client(&fx);
    dq_stats st;
    ck_assert_int_eq(dq_stats_get(c, queue, &st), DQ_OK);
    dq_close(c);
    return st;
}

/* Claim the `n` due jobs of `queue` and make them dead ("boom"). */
static void kill_due(dq_client *c, const char *queue, int n)
{
    dq_claim_result cr;
    ck_assert_int_eq(dq_claim(c, queue, n, 60000, &cr), DQ_OK);
    ck_assert_uint_eq(cr.n, (size_t)n);
    dq_retry_policy pol;
    dq_retry_policy_init(&pol);
    for (size_t i = 0; i < cr.n; i++)
        ck_assert_int_eq(dq_fail(c, queue, cr.jobs[i].id, cr.jobs[i].fence, "boom",
                                 DQ_FAIL_DEAD, -1, &pol, NULL), DQ_OK);
    dq_claim_result_free(&cr);
}

/* Enqueue `n` due jobs "dead-1".. in `queue` and make them dead ("boom"). */
static void make_dead(const char *queue, int n)
{
    dq_client *c = fixture_client(&fx);
    for (int i = 1; i <= n; i++) {
        char id[32];
        snprintf(id, sizeof id, "dead-%d", i);
        dq_enqueue_req req = { .queue = queue, .type = "t", .id = id, .replace = true };
        ck_assert_msg(dq_enqueue(c, &req, NULL) == DQ_OK, "%s", dq_errmsg(c));
    }
    kill_due(c, queue, n);
    dq_close(c);
}

/* ---- add, show, cancel -------------------------------------------------- */

START_TEST(add_prints_id_and_show_reports_it)
{
    char id[64];
    add_id(CLI("add", "-q", "emails", "-t", "send", "-d", "30m", "hello world"), id, sizeof id);

    struct run_result *r = CLI("show", "-q", "emails", id);
    assert_ok(r);
    ck_assert_msg(strstr(r->out, "state: delayed\n"), "%s", r->out);
    ck_assert_msg(strstr(r->out, "type: send\n"), "%s", r->out);
    ck_assert_msg(strstr(r->out, "payload: hello world\n"), "%s", r->out);
    ck_assert_msg(strstr(r->out, "attempts: 0/default\n"), "%s", r->out);
    ck_assert_msg(strstr(r->out, "(in 29m 5"), "due not ~30 min ahead: %s", r->out);

    r = CLI("show", "-q", "emails", id, "--json");
    assert_ok(r);
    ck_assert_msg(strstr(r->out, "\"state\":\"delayed\""), "%s", r->out);
    ck_assert_msg(strstr(r->out, "\"payload\":\"hello world\""), "%s", r->out);
    long long due = json_num(r->out, "due_ms"), now = json_num(r->out, "now_ms");
    ck_assert_int_ge(due - now, 30 * 60000 - 5000);
    ck_assert_int_le(due - now, 30 * 60000);
}
END_TEST

START_TEST(same_payload_twice_gives_two_jobs)
{
    char a[64], b[64];
    add_id(CLI("add", "-q", "emails", "-t", "send", "-d", "1h", "same"), a, sizeof a);
    add_id(CLI("add", "-q", "emails", "-t", "send", "-d", "1h", "same"), b, sizeof b);
    ck_assert_str_ne(a, b);
    struct run_result *r = CLI("stats", "-q", "emails", "--json");
    assert_ok(r);
    ck_assert_int_eq(json_num(r->out, "delayed"), 2);
}
END_TEST

START_TEST(taken_id_exits_1)
{
    char id[64];
    add_id(CLI("add", "-q", "orders", "-t", "cancel", "--id", "order:1", "-d", "1h", "a"),
           id, sizeof id);
    ck_assert_str_eq(id, "order:1");
    struct run_result *r = CLI("add", "-q", "orders", "-t", "cancel", "--id", "order:1", "b");
    assert_fails(r, 1, "already exists");
    ck_assert_str_eq(r->out, "");
    dq_job_info info = show_job("orders", "order:1");
    ck_assert_str_eq(info.job.payload, "a");
    dq_job_info_free(&info);
}
END_TEST

START_TEST(replace_reschedules)
{
    char id[64];
    add_id(CLI("add", "-q", "orders", "-t", "cancel", "--id", "order:2", "-d", "1h", "a"),
           id, sizeof id);
    add_id(CLI("add", "-q", "orders", "-t", "cancel", "--id", "order:2", "--replace",
               "-d", "0", "b"), id, sizeof id);
    ck_assert_str_eq(id, "order:2");
    dq_job_info info = show_job("orders", "order:2");
    ck_assert_str_eq(info.job.payload, "b");
    ck_assert_int_le(info.job.due_ms, info.now_ms);
    dq_job_info_free(&info);
    dq_stats st = queue_stats("orders");
    ck_assert_int_eq(st.due, 1);
    ck_assert_int_eq(st.delayed, 0);
}
END_TEST

START_TEST(replace_of_running_job_exits_1)
{
    char id[64];
    add_id(CLI("add", "-q", "orders", "-t", "cancel", "--id", "order:3", "x"), id, sizeof id);
    dq_client *c = fixture_client(&fx);
    dq_claim_result cr;
    ck_assert_int_eq(dq_claim(c, "orders", 1, 60000, &cr), DQ_OK);
    ck_assert_uint_eq(cr.n, 1);
    dq_claim_result_free(&cr);
    dq_close(c);
    assert_fails(CLI("add", "-q", "orders", "-t", "cancel", "--id", "order:3", "--replace",
                     "y"), 1, "running");
}
END_TEST

START_TEST(delay_zero_is_due_now)
{
    char id[64];
    add_id(CLI("add", "-q", "now", "-t", "t", "-d", "0"), id, sizeof id);
    struct run_result *r = CLI("stats", "-q", "now", "--json");
    assert_ok(r);
    ck_assert_int_eq(json_num(r->out, "due"), 1);
    ck_assert_int_eq(json_num(r->out, "delayed"), 0);
    dq_job_info info = show_job("now", id);
    ck_assert_uint_eq(info.job.payload_len, 0); /* no payload argument: empty */
    dq_job_info_free(&info);
}
END_TEST

/* Add a job --at `when` and return its due_ms as `show --json` prints it. */
static long long due_at(const char *when, const char *id)
{
    char got[64];
    add_id(CLI("add", "-q", "at", "-t", "t", "--id", id, "--at", when), got, sizeof got);
    struct run_result *r = CLI("show", "-q", "at", id, "--json");
    assert_ok(r);
    return json_num(r->out, "due_ms");
}

START_TEST(at_takes_iso_and_unix_seconds)
{
    ck_assert_int_eq(due_at("2030-01-01T00:00:00Z", "iso"), 1893456000000LL);
    ck_assert_int_eq(due_at("2030-01-01T02:00:00+02:00", "iso-offset"), 1893456000000LL);
    ck_assert_int_eq(due_at("1893456000", "unix"), 1893456000000LL);
    ck_assert_int_eq(due_at("1893456000.5", "unix-frac"), 1893456000500LL);
}
END_TEST

START_TEST(payload_from_stdin_is_binary_safe)
{
    static const char bytes[] = { 'a', 0, (char)0xff, '\n', (char)0x80, 'z', 0 };
    struct cli_run how = { .in = bytes, .in_len = sizeof bytes };
    char id[64];
    add_id(CLI_HOW(&how, "add", "-q", "bin", "-t", "t", "-"), id, sizeof id);
    dq_job_info info = show_job("bin", id);
    ck_assert_uint_eq(info.job.payload_len, sizeof bytes);
    ck_assert_int_eq(memcmp(info.job.payload, bytes, sizeof bytes), 0);
    dq_job_info_free(&info);

    struct run_result *r = CLI("show", "-q", "bin", id);
    assert_ok(r);
    ck_assert_msg(strstr(r->out, "payload: (7 bytes binary)\n"), "%s", r->out);
    r = CLI("show", "-q", "bin", id, "--json");
    assert_ok(r);
    ck_assert_msg(strstr(r->out, "\"payload_base64\":\"YQD/CoB6AA==\""), "%s", r->out);
}
END_TEST

START_TEST(show_escapes_text_and_json)
{
    char id[64];
    add_id(CLI("add", "-q", "txt", "-t", "t", "line 1\nsay \"hi\"\ttab"), id, sizeof id);
    struct run_result *r = CLI("show", "-q", "txt", id);
    assert_ok(r);
    ck_assert_msg(strstr(r->out, "payload: line 1\\nsay \"hi\"\\ttab\n"), "%s", r->out);
    r = CLI("show", "-q", "txt", id, "--json");
    assert_ok(r);
    ck_assert_msg(strstr(r->out, "\"payload\":\"line 1\\nsay \\\"hi\\\"\\ttab\""), "%s", r->out);
}
END_TEST

START_TEST(max_attempts_is_kept)
{
    char id[64];
    add_id(CLI("add", "-q", "ma", "-t", "t", "--max-attempts", "3", "-d", "1m"), id, sizeof id);
    struct run_result *r = CLI("show", "-q", "ma", id);
    assert_ok(r);
    ck_assert_msg(strstr(r->out, "attempts: 0/3\n"), "%s", r->out);
}
END_TEST

START_TEST(priority_is_kept_and_shown)
{
    char id[64], low[64];
    add_id(CLI("add", "-q", "pr", "-t", "t", "--priority", "low", "a"), low, sizeof low);
    add_id(CLI("add", "-q", "pr", "-t", "t", "--priority", "high", "b"), id, sizeof id);
    struct run_result *r = CLI("show", "-q", "pr", id);
    assert_ok(r);
    ck_assert_msg(strstr(r->out, "priority: 0 (high)\n"), "%s", r->out);
    r = CLI("show", "-q", "pr", "--json", low);
    assert_ok(r);
    ck_assert_msg(strstr(r->out, "\"priority\":9"), "%s", r->out);
    add_id(CLI("add", "-q", "pr", "-t", "t", "--priority", "3", "c"), id, sizeof id);
    r = CLI("show", "-q", "pr", id);
    ck_assert_msg(strstr(r->out, "priority: 3\n"), "%s", r->out);
    add_id(CLI("add", "-q", "pr", "-t", "t", "d"), id, sizeof id);
    r = CLI("show", "-q", "pr", id);
    ck_assert_msg(strstr(r->out, "priority: 5 (normal)\n"), "%s", r->out);
    r = CLI("stats", "-q", "pr");
    assert_ok(r);
    ck_assert_msg(strstr(r->out, "\npr due by priority: 0:1 3:1 5:1 9:1\n"), "%s", r->out);
    r = CLI("stats", "-q", "pr", "--json");
    ck_assert_msg(strstr(r->out, "\"due_by_priority\":[1,0,0,1,0,1,0,0,0,1]"), "%s", r->out);
}
END_TEST

START_TEST(cancel_delayed_job)
{
    char id[64];
    add_id(CLI("add", "-q", "emails", "-t", "send", "-d", "1h", "x"), id, sizeof id);
    struct run_result *r = CLI("cancel", "-q", "emails", id);
    assert_ok(r);
    ck_assert_str_eq(r->out, "");
    assert_fails(CLI("show", "-q", "emails", id), 1, id);
    dq_client *c = fixture_client(&fx);
    dq_job_info info;
    ck_assert_int_eq(dq_show(c, "emails", id, &info), DQ_ERR_NOTFOUND);
    dq_job_info_free(&info);
    dq_close(c);
}
END_TEST

/* A running job is cancelled (exit 0): show then says so, with the fence
 * of the run stopped; a second cancel finds nothing (exit 1). */
START_TEST(cancel_running_job_ends_it)
{
    char id[64];
    add_id(CLI("add", "-q", "emails", "-t", "send", "--id", "mail:1", "x"), id, sizeof id);
    dq_client *c = fixture_client(&fx);
    dq_claim_result cr;
    ck_assert_int_eq(dq_claim(c, "emails", 1, 60000, &cr), DQ_OK);
    ck_assert_uint_eq(cr.n, 1);
    ck_assert_str_eq(cr.jobs[0].id, id);
    int64_t fence = cr.jobs[0].fence;
    dq_claim_result_free(&cr);
    assert_ok(CLI("cancel", "-q", "emails", id));
    dq_job_info info = show_job("emails", id);
    ck_assert_int_eq(info.state, DQ_STATE_CANCELLED);
    ck_assert_int_eq(info.job.fence, fence);
    dq_job_info_free(&info);
    struct run_result *r = CLI("show", "-q", "emails", id);
    assert_ok(r);
    ck_assert_msg(strstr(r->out, "state: cancelled\n"), "%s", r->out);
    ck_assert_int_eq(dq_ack(c, "emails", id, fence), DQ_ERR_STALE);
    dq_close(c);
    assert_fails(CLI("cancel", "-q", "emails", id), 1, "it finished, or was never added");
    /* Its id is kept while the stopped run's lease lasts. */
    assert_fails(CLI("add", "-q", "emails", "-t", "send", "--id", id, "y"), 1,
                 "cancelled while running");
}
END_TEST

START_TEST(cancel_and_show_unknown_exit_1)
{
    assert_fails(CLI("cancel", "-q", "emails", "nope"), 1, "no job nope in queue emails");
    assert_fails(CLI("show", "-q", "emails", "nope"), 1, "no job nope in queue emails");
    assert_fails(CLI("show", "-q", "emails", "nope", "--json"), 1, "no job nope");
}
END_TEST

START_TEST(run_now_makes_a_waiting_job_due)
{
    char id[64];
    add_id(CLI("add", "-q", "emails", "-t", "send", "-d", "1h", "--priority", "2", "x"),
           id, sizeof id);
    struct run_result *r = CLI("run-now", "-q", "emails", id);
    assert_ok(r);
    ck_assert_str_eq(r->out, "");
    dq_job_info info = show_job("emails", id);
    ck_assert_int_eq(info.state, DQ_STATE_DELAYED);
    ck_assert_int_le(info.state_ms, info.now_ms);
    ck_assert_int_eq(info.job.priority, 2);
    dq_job_info_free(&info);
    assert_ok(CLI("run-now", "emails", id));        /* the queue as an operand */
    assert_fails(CLI("run-now", "-q", "emails", "nope"), 1, "no job nope in queue emails");
    assert_fails(CLI("run-now", "-q", "emails"), 2, "missing the job ID");
    assert_fails(CLI("run-now", "emails", id, "extra"), 2, "");
    dq_client *c = fixture_client(&fx);
    dq_claim_result cr;
    ck_assert_int_eq(dq_claim(c, "emails", 1, 60000, &cr), DQ_OK);
    ck_assert_uint_eq(cr.n, 1);
    dq_claim_result_free(&cr);
    dq_close(c);
    assert_fails(CLI("run-now", "-q", "emails", id), 1, "running");
}
END_TEST

/* ---- stats and dlq ------------------------------------------------------ */

/* The row of `queue` in the stats table: delayed, due, processing, dead
 * and the text of the NEXT DUE column (`next`, 32 bytes) and of the PAUSED
 * one (`paused`, 64 bytes; may be NULL): two spaces end the NEXT DUE. */
static void table_row(const char *out, const char *queue, long long v[4], char *next,
                      char *paused)
{
    char name[200], rest[128];
    for (const char *line = out; *line; line = strchr(line, '\n') + 1) {
        if (sscanf(line, "%199s %lld %lld %lld %lld %127[^\n]", name, &v[0], &v[1],
                   &v[2], &v[3], rest) == 6 && strcmp(name, queue) == 0) {
            char *gap = strstr(rest, "  ");
            ck_assert_msg(gap, "no PAUSED column in: %s", line);
            *gap = '\0';
            snprintf(next, 32, "%.31s", rest);
            gap += strspn(gap + 1, " ") + 1;
            if (paused)
                snprintf(paused, 64, "%s", gap);
            return;
        }
        if (!strchr(line, '\n'))
            break;
    }
    ck_abort_msg("no row for %s in:\n%s", queue, out);
}

START_TEST(stats_table_and_json)
{
    char id[64];
    add_id(CLI("add", "-q", "alpha", "-t", "t", "-d", "1h", "1"), id, sizeof id);
    add_id(CLI("add", "-q", "alpha", "-t", "t", "-d", "2h", "2"), id, sizeof id);
    add_id(CLI("add", "-q", "beta", "-t", "t", "3"), id, sizeof id);
    add_id(CLI("add", "-q", "gamma", "-t", "t", "-d", "1h", "4"), id, sizeof id);
    assert_ok(CLI("cancel", "-q", "gamma", id));
    make_dead("delta", 2);

    struct run_result *r = CLI("stats");
    assert_ok(r);
    ck_assert_msg(strncmp(r->out, "QUEUE ", 6) == 0, "%s", r->out);
    ck_assert_msg(strstr(r->out, "DELAYED") && strstr(r->out, "NEXT DUE"), "%s", r->out);
    long long v[4];
    char next[32];
    table_row(r->out, "alpha", v, next, NULL);
    ck_assert_int_eq(v[0], 2);
    ck_assert_int_eq(v[1], 0);
    ck_assert_msg(strncmp(next, "59m", 3) == 0, "alpha next due: %s", next);
    table_row(r->out, "beta", v, next, NULL);
    ck_assert_int_eq(v[1], 1);
    ck_assert_str_eq(next, "now");
    table_row(r->out, "gamma", v, next, NULL);
    ck_assert_int_eq(v[0] + v[1] + v[2] + v[3], 0);
    ck_assert_str_eq(next, "-");
    table_row(r->out, "delta", v, next, NULL);
    ck_assert_int_eq(v[3], 2);

    r = CLI("stats", "--json");
    assert_ok(r);
    ck_assert_msg(r->out[0] == '[', "%s", r->out);
    ck_assert_msg(strstr(r->out, "{\"queue\":\"alpha\",\"delayed\":2,\"due\":0,"), "%s", r->out);
    ck_assert_msg(strstr(r->out, "{\"queue\":\"beta\",\"delayed\":0,\"due\":1,"), "%s", r->out);
    ck_assert_msg(strstr(r->out, "\"queue\":\"gamma\",\"delayed\":0,\"due\":0,\"processing\":0,"
                         "\"expired\":0,\"dead\":0,\"next_due_in_ms\":null,\"paused\":false,"
                         "\"paused_since_ms\":null,\"due_by_priority\":[0,0,0,0,0,0,0,0,0,0]}"), "%s", r->out);
    ck_assert_msg(strstr(r->out, "\"dead\":2"), "%s", r->out);
    long long next_ms = json_num(r->out, "next_due_in_ms"); /* alpha comes first */
    ck_assert_int_gt(next_ms, 3500000);
    ck_assert_int_le(next_ms, 3600000);
}
END_TEST

START_TEST(stats_without_queues)
{
    struct run_result *r = CLI("stats");
    assert_ok(r);
    ck_assert_msg(strncmp(r->out, "QUEUE ", 6) == 0, "%s", r->out);
    ck_assert_ptr_eq(strchr(r->out, '\n'), r->out + strlen(r->out) - 1); /* one line */
    r = CLI("stats", "--json");
    assert_ok(r);
    ck_assert_str_eq(r->out, "[]\n");
}
END_TEST

START_TEST(dlq_list)
{
    make_dead("work", 3);
    struct run_result *r = CLI("dlq", "-q", "work", "list");
    assert_ok(r);
    ck_assert_msg(strncmp(r->out, "ID ", 3) == 0, "%s", r->out);
    for (int i = 1; i <= 3; i++) {
        char id[16];
        snprintf(id, sizeof id, "dead-%d ", i);
        ck_assert_msg(strstr(r->out, id), "no %s in %s", id, r->out);
    }
    ck_assert_msg(strstr(r->out, "  1  boom\n"), "%s", r->out);

    r = CLI("dlq", "-q", "work", "list", "--json");
    assert_ok(r);
    ck_assert_int_eq(json_num(r->out, "total"), 3);
    ck_assert_msg(strstr(r->out, "\"last_error\":\"boom\""), "%s", r->out);

    r = CLI("dlq", "-q", "work", "list", "--limit", "1", "--offset", "1");
    assert_ok(r);
    ck_assert_msg(strstr(r->out, "dead-2 ") && !strstr(r->out, "dead-1 "), "%s", r->out);
    ck_assert_msg(strstr(r->out, "(1 more: --offset 2)\n"), "%s", r->out);
}
END_TEST

START_TEST(dlq_requeue_and_purge)
{
    make_dead("work", 3);
    struct run_result *r = CLI("dlq", "-q", "work", "requeue", "dead-1");
    assert_ok(r);
    ck_assert_str_eq(r->out, "requeued job dead-1\n");
    assert_fails(CLI("dlq", "-q", "work", "requeue", "dead-1"), 1, "dead-1");
    dq_stats st = queue_stats("work");
    ck_assert_int_eq(st.dead, 2);
    ck_assert_int_eq(st.due, 1);

    r = CLI("dlq", "-q", "work", "requeue", "--all");
    assert_ok(r);
    ck_assert_str_eq(r->out, "requeued 2 jobs\n");
    st = queue_stats("work");
    ck_assert_int_eq(st.dead, 0);
    ck_assert_int_eq(st.due, 3);

    make_dead("work", 3);
    r = CLI("dlq", "-q", "work", "purge", "dead-3");
    assert_ok(r);
    ck_assert_str_eq(r->out, "purged job dead-3\n");
    assert_fails(CLI("dlq", "-q", "work", "purge", "dead-3"), 1, "dead-3");
    r = CLI("dlq", "-q", "work", "purge");
    assert_ok(r);
    ck_assert_str_eq(r->out, "purged 2 jobs\n");
    st = queue_stats("work");
    ck_assert_int_eq(st.dead + st.due + st.delayed + st.processing, 0);
}
END_TEST

/* "@wake" is a valid job id like any other: it must never be taken for the
 * queue's wake channel on its way to a script. */
START_TEST(job_named_at_wake_is_itself)
{
    char id[64];
    add_id(CLI("add", "-q", "w", "-t", "t", "--id", "@wake", "hello"), id, sizeof id);
    ck_assert_str_eq(id, "@wake");
    struct run_result *r = CLI("show", "-q", "w", "@wake", "--json");
    assert_ok(r);
    ck_assert_msg(strstr(r->out, "{\"id\":\"@wake\"") && strstr(r->out, "\"payload\":\"hello\""),
                  "%s", r->out);

    dq_client *c = fixture_client(&fx);
    kill_due(c, "w", 1);
    r = CLI("dlq", "-q", "w", "requeue", "@wake");
    assert_ok(r);
    ck_assert_str_eq(r->out, "requeued job @wake\n");
    dq_stats st = queue_stats("w");
    ck_assert_int_eq(st.dead, 0);
    ck_assert_int_eq(st.due, 1);

    kill_due(c, "w", 1);
    dq_close(c);
    r = CLI("dlq", "-q", "w", "purge", "@wake");
    assert_ok(r);
    ck_assert_str_eq(r->out, "purged job @wake\n");
    ck_assert_int_eq(fixture_record_count(&fx, "w"), 0);
    assert_fails(CLI("show", "-q", "w", "@wake"), 1, "no job @wake");
}
END_TEST

/* ---- usage errors: exit 2, one line, nothing sent ----------------------- */

START_TEST(usage_errors)
{
    assert_fails(CLI("add", "-q", "u", "-t", "t", "--frob"), 2, "unknown option '--frob'");
    assert_fails(CLI("--frob", "stats"), 2, "unknown option '--frob' (see delayq --help)");
    assert_fails(CLI("add", "-t", "t", "x"), 2, "add: missing -q QUEUE");
    assert_fails(CLI("add", "-q", "u", "x"), 2, "add: missing -t TYPE");
    struct run_result *r = CLI("add", "-q", "u", "-t", "t", "-d", "10x");
    assert_fails(r, 2, "");
    ck_assert_str_eq(r->err, "delayq: add: bad delay '10x': unknown unit (use ms, s, m, h or d)\n");
    assert_fails(CLI("add", "-q", "u", "-t", "t", "--at", "tomorrow"), 2,
                 "add: bad time 'tomorrow'");
    assert_fails(CLI("add", "-q", "u", "-t", "t", "-d", "1m", "--at", "1893456000"), 2,
                 "not both");
    assert_fails(CLI("add", "-q", "u", "-t", "t", "--max-attempts", "-1"), 2,
                 "bad --max-attempts '-1'");
    struct run_result *p = CLI("add", "-q", "u", "-t", "t", "--priority", "10");
    assert_fails(p, 2, "");
    ck_assert_str_eq(p->err, "delayq: add: bad --priority '10': expected high, normal, "
                     "low or a level 0..9 (0 the most urgent)\n");
    assert_fails(CLI("add", "-q", "u", "-t", "t", "--priority", "urgent"), 2,
                 "bad --priority 'urgent'");
    assert_fails(CLI("add", "-q", "u", "-t", "t", "--priority", "-1"), 2,
                 "bad --priority '-1'");
    assert_fails(CLI("add", "-q", "u{x}", "-t", "t"), 2, "queue name contains '{'");
    assert_fails(CLI("add", "-q", "u", "-t", "has space"), 2, "bad type");
    assert_fails(CLI("add", "-q", "u", "-t", "t", "--id", "123"), 2, "all digits");
    assert_fails(CLI("add", "-q", "u", "-t", "t", "--id", "."), 2, "'.' or '..'");
    assert_fails(CLI("add", "-q", "u", "-t", "t", "--id", ".."), 2, "'.' or '..'");
    assert_fails(CLI("add", "-q", "u", "-t", "t", "a", "b"), 2, "more than one payload");
    assert_fails(CLI("add", "-q"), 2, "option '-q' needs a value");
    assert_fails(CLI("frobnicate"), 2, "unknown command 'frobnicate'");
    assert_fails(CLI("dlq", "-q", "u", "requeue"), 2, "requeue needs a job ID or --all");
    assert_fails(CLI("dlq", "-q", "u", "list", "--limit", "0"), 2, "bad --limit");
    assert_fails(CLI("stats", "-p", "abc"), 2, "bad port 'abc'");
    assert_fails(CLI("stats", "--timeout", "soon"), 2, "bad timeout");
    /* Nothing reached Redis. */
    ck_assert_int_eq(fixture_redis_int(&fx, "DBSIZE"), 0);
}
END_TEST

START_TEST(payload_over_the_limit)
{
    size_t n = 1024 * 1024 + 1;
    char *big = malloc(n);
    ck_assert_ptr_nonnull(big);
    memset(big, 'x', n);
    struct cli_run how = { .in = big, .in_len = n };
    struct run_result *r = CLI_HOW(&how, "add", "-q", "big", "-t", "t", "-");
    free(big);
    assert_fails(r, 2, "");
    ck_assert_str_eq(r->err, "delayq: add: payload is 1048577 bytes, over the limit of 1048576\n");
    ck_assert_int_eq(fixture_redis_int(&fx, "DBSIZE"), 0);
}
END_TEST

START_TEST(help_and_version)
{
    struct run_result *r = CLI("--help");
    assert_ok(r);
    ck_assert_msg(strstr(r->out, "Usage: delayq") && strstr(r->out, "Exit codes:")
                  && strstr(r->out, "69") && strstr(r->out, "78"), "%s", r->out);
    r = CLI("add", "--help");
    assert_ok(r);
    ck_assert_msg(strstr(r->out, "Usage: delayq add"), "%s", r->out);
    r = CLI("dlq", "-h");
    assert_ok(r);
    ck_assert_msg(strstr(r->out, "Usage: delayq dlq"), "%s", r->out);
    r = CLI("--version");
    assert_ok(r);
    ck_assert_str_eq(r->out, "delayq " PACKAGE_VERSION "\n");
    /* Every command's --help is all it does: exit 0, nothing on stderr
     * (show and cancel used to go on, and fail, after their help). */
    static const char *const commands[] = { "add", "cancel", "run-now", "show", "stats",
                                            "partitions", "dlq", "fsck", "pause", "resume",
                                            "schedule", "outbox" };
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        r = CLI(commands[i], "--help");
        assert_ok(r);
        char want[64];
        snprintf(want, sizeof want, "Usage: delayq %s", commands[i]);
        ck_assert_msg(strstr(r->out, want), "%s --help: %s", commands[i], r->out);
    }
}
END_TEST

/* delayq outbox sql: the DDL for the names given, checked; no Redis is
 * reached (this one has none). */
START_TEST(outbox_sql_prints_the_ddl_for_checked_names)
{
    struct run_result *r = CLI("-p", "1", "outbox", "sql", "--schema", "shop", "--table",
                               "jobs_out");
    assert_ok(r);
    ck_assert_msg(strstr(r->out, "CREATE TABLE IF NOT EXISTS shop.jobs_out (")
                  && strstr(r->out, "CREATE TABLE IF NOT EXISTS shop.jobs_out_dead (")
                  && strstr(r->out, "FUNCTION shop.delayq_enqueue(")
                  && strstr(r->out, "FUNCTION shop.delayq_cancel(")
                  && strstr(r->out, "pg_notify('jobs_out'"), "%s", r->out);
    r = CLI("outbox", "sql", "--table", "x; DROP TABLE orders");
    assert_fails(r, 2, "delayq: outbox: --table \"x; DROP TABLE orders\": the name may "
                       "hold only a-z, 0-9 and _\n");
    r = CLI("outbox", "sql", "--schema", "1abc");
    assert_fails(r, 2, "starts with a digit");
    r = CLI("outbox", "drop");
    assert_fails(r, 2, "unknown subcommand 'drop'");
    r = CLI("outbox");
    assert_fails(r, 2, "'delayq outbox sql' is the only one");
}
END_TEST

/* ---- the delay is counted on the server's clock ------------------------- */

START_TEST(delay_uses_the_server_clock)
{
    ck_assert_msg(access(FAKETIME_LIB, R_OK) == 0,
                  "%s is missing: apt-get install faketime", FAKETIME_LIB);
    struct cli_run how = { .env = { "LD_PRELOAD=" FAKETIME_LIB, "FAKETIME=-1d",
                                    "ASAN_OPTIONS=verify_asan_link_order=0" } };
    /* The mechanism works here: date(1) under it is a day behind. */
    FILE *p = popen("LD_PRELOAD=" FAKETIME_LIB " FAKETIME=-1d date +%s", "r");
    ck_assert_ptr_nonnull(p);
    long long faked = 0;
    ck_assert_int_eq(fscanf(p, "%lld", &faked), 1);
    pclose(p);
    ck_assert_int_lt(faked, (long long)time(NULL) - 86000);

    char id[64];
    add_id(CLI_HOW(&how, "add", "-q", "clock", "-t", "t", "-d", "30s"), id, sizeof id);
    dq_client *c = fixture_client(&fx);
    int64_t server_now;
    ck_assert_int_eq(dq_server_time(c, &server_now), DQ_OK);
    dq_close(c);
    dq_job_info info = show_job("clock", id);
    int64_t expect = server_now + 30000;
    ck_assert_msg(info.job.due_ms <= expect && info.job.due_ms >= expect - 5000,
                  "due %lld, server time + 30 s = %lld (off by %lld ms)",
                  (long long)info.job.due_ms, (long long)expect,
                  (long long)(info.job.due_ms - expect));
    dq_job_info_free(&info);
}
END_TEST

static TCase *tcase(Suite *s, const char *name, int timeout)
{
    return fixture_tcase(s, name, timeout, NULL, NULL, clean_redis, NULL);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    start_redis();
    Suite *s = suite_create("cli");
    TCase *tc = tcase(s, "jobs", 30);
    tcase_add_test(tc, add_prints_id_and_show_reports_it);
    tcase_add_test(tc, same_payload_twice_gives_two_jobs);
    tcase_add_test(tc, taken_id_exits_1);
    tcase_add_test(tc, replace_reschedules);
    tcase_add_test(tc, replace_of_running_job_exits_1);
    tcase_add_test(tc, delay_zero_is_due_now);
    tcase_add_test(tc, at_takes_iso_and_unix_seconds);
    tcase_add_test(tc, payload_from_stdin_is_binary_safe);
    tcase_add_test(tc, show_escapes_text_and_json);
    tcase_add_test(tc, max_attempts_is_kept);
    tcase_add_test(tc, priority_is_kept_and_shown);
    tcase_add_test(tc, cancel_delayed_job);
    tcase_add_test(tc, cancel_running_job_ends_it);
    tcase_add_test(tc, cancel_and_show_unknown_exit_1);
    tcase_add_test(tc, run_now_makes_a_waiting_job_due);
    tc = tcase(s, "ops", 30);
    tcase_add_test(tc, stats_table_and_json);
    tcase_add_test(tc, stats_without_queues);
    tcase_add_test(tc, dlq_list);
    tcase_add_test(tc, dlq_requeue_and_purge);
    tcase_add_test(tc, job_named_at_wake_is_itself);
    tc = tcase(s, "usage", 30);
    tcase_add_test(tc, usage_errors);
    tcase_add_test(tc, payload_over_the_limit);
    tcase_add_test(tc, help_and_version);
    tcase_add_test(tc, outbox_sql_prints_the_ddl_for_checked_names);
    tc = tcase(s, "clock", 30);
    tcase_add_test(tc, delay_uses_the_server_clock);
    int status = fixture_run_suite(s);
    stop_redis();
    return status;
}
