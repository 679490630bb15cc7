/*
 * /ui/api/history of the real delayqd (test handler, real redis-server):
 * the supervisor's once-a-second samples count the jobs its workers ran
 * and failed, for one queue and for all; a worker killed and restarted
 * takes nothing back, nor does a reload; an unknown queue is 404 and no
 * credentials 401.
 *
 * Each test starts its own redis-server and daemon in Check's forked
 * child (daemon_harness.h).
 */
#include "config.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "http_client.h"
#include "testutil.h"

#define TOKEN "0123456789abcdef-history"
#define AUTH "Authorization: Bearer " TOKEN "\r\n"

static struct harness H;
static int PORT;

static void setup(void)
{
    h_setup(&H);
    PORT = fixture_free_port();
    char token[300], extra[700];
    snprintf(token, sizeof token, "%s/ui.token", H.fx.dir);
    h_write_file(token, TOKEN "\n");
    ck_assert_int_eq(chmod(token, 0600), 0);
    snprintf(extra, sizeof extra,
             "admin = { listen = \"127.0.0.1:%d\"; ui = true; token_file = \"%s\"; };\n",
             PORT, token);
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.max_attempts = 1;        /* "fail" is dead at once */
    hc.extra = extra;
    h_write_conf(&H, &hc);
    h_start(&H, hc.workers);
}

static void teardown(void)
{
    h_teardown(&H);
}

/* One series of a /ui/api/history answer. */
struct series {
    int found;
    long n;                     /* elements */
    long long sum;              /* of the numbers */
    long nulls;
};

/* Read the array "name":[...] of `json`. */
static struct series series_of(const char *json, const char *name)
{
    struct series s = { 0 };
    char key[64];
    snprintf(key, sizeof key, "\"%s\":[", name);
    const char *p = strstr(json, key);
    if (!p)
        return s;
    s.found = 1;
    p += strlen(key);
    while (*p && *p != ']') {
        if (strncmp(p, "null", 4) == 0) {
            s.nulls++;
            p += 4;
        } else {
            char *end;
            double v = strtod(p, &end);
            if (end == p)
                break;
            s.sum += (long long)v;
            p = end;
        }
        s.n++;
        if (*p == ',')
            p++;
    }
    return s;
}

/* GET /ui/api/history[?queue=Q] with the token; the body (malloc'd) or
 * NULL when the status is not `want`. */
static char *history(const char *query, int want)
{
    char path[200];
    snprintf(path, sizeof path, "/ui/api/history%s", query ? query : "");
    struct http_reply r;
    int rc = http_request(PORT, "GET", path, AUTH, NULL, 0, 5000, &r);
    char *body = NULL;
    if (rc == 0 && r.status == want)
        body = strdup(r.body);
    ck_assert_msg(rc == 0 && r.status == want, "GET %s: %d (want %d): %s", path, r.status,
                  want, r.body ? r.body : "");
    char type[100];
    if (want == 200) {
        ck_assert_ptr_nonnull(http_header(&r, "Content-Type", type, sizeof type));
        ck_assert_str_eq(type, "application/json; charset=utf-8");
    }
    http_reply_free(&r);
    return body;
}

struct want {
    const char *query;
    long long done, failed;
};

/* The history's sums are what `w` says (within a few seconds: the
 * samples come once a second). */
static int sums_reached(void *arg)
{
    const struct want *w = arg;
    char *body = history(w->query, 200);
    struct series d = series_of(body, "done"), f = series_of(body, "failed");
    free(body);
    return d.sum == w->done && f.sum == w->failed;
}

static void wait_sums(const char *query, long long done, long long failed)
{
    struct want w = { query, done, failed };
    if (h_wait(10000, sums_reached, &w) == 1)
        return;
    char *body = history(query, 200);
    struct series d = series_of(body, "done"), f = series_of(body, "failed");
    free(body);
    ck_abort_msg("history%s: done %lld failed %lld, expected %lld and %lld; log: %s",
                 query ? query : "", d.sum, f.sum, done, failed, h_log_tail(&H));
}

static void enqueue(int n, const char *payload)
{
    for (int i = 0; i < n; i++)
        h_enqueue(&H, NULL, NULL, payload, 0, 0);
}

START_TEST(history_counts_jobs_run_and_failed)
{
    enqueue(20, "ok");
    enqueue(3, "fail");
    ck_assert(h_wait_idle(&H, 15000));
    wait_sums(NULL, 23, 3);
    wait_sums("?queue=" H_QUEUE, 23, 3);
    wait_sums("?queue=", 23, 3);            /* empty: every queue */

    char *body = history("?queue=" H_QUEUE, 200);
    ck_assert_ptr_nonnull(strstr(body, "{\"queue\":\"" H_QUEUE "\",\"seconds\":3600,"));
    ck_assert_ptr_nonnull(strstr(body, "\"now_ms\":"));
    static const char *const names[] = { "done", "failed", "p50_ms", "p99_ms" };
    for (int i = 0; i < 4; i++) {
        struct series s = series_of(body, names[i]);
        ck_assert_msg(s.found, "no %s", names[i]);
        ck_assert_int_eq(s.n, 3600);
    }
    /* Lateness where jobs started, null where none did. */
    struct series p50 = series_of(body, "p50_ms"), p99 = series_of(body, "p99_ms");
    ck_assert_int_lt(p50.nulls, 3600);
    ck_assert_int_gt(p50.nulls, 3000);
    ck_assert_int_eq(p50.nulls, p99.nulls);
    free(body);
    body = history(NULL, 200);
    ck_assert_ptr_nonnull(strstr(body, "{\"queue\":null,"));
    free(body);
}
END_TEST

START_TEST(history_refuses_unknown_queue_and_strangers)
{
    free(history("?queue=nope", 404));
    free(history("?queue=%3Cscript%3E", 404));
    struct http_reply r;
    ck_assert_int_eq(http_request(PORT, "GET", "/ui/api/history", NULL, NULL, 0, 5000, &r), 0);
    ck_assert_int_eq(r.status, 401);
    http_reply_free(&r);
}
END_TEST

/* The pid of one worker of the daemon (not the reaper: either will do
 * for the test, as both are restarted; a worker carries the counts). */
static pid_t some_child(void)
{
    pid_t kids[16];
    size_t n = tu_children(H.pid, kids, NULL, 16);
    ck_assert_uint_gt(n, 0);
    return kids[0];
}

START_TEST(worker_restart_takes_nothing_back)
{
    enqueue(10, "ok");
    ck_assert(h_wait_idle(&H, 15000));
    wait_sums(NULL, 10, 0);
    /* Kill every child in turn; each is restarted with a zeroed slot. */
    pid_t kids[16];
    size_t n = tu_children(H.pid, kids, NULL, 16);
    ck_assert_uint_ge(n, 2);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(kill(kids[i], SIGKILL), 0);
    /* Over the next 3 s (3 samples) the hour's sums never drop. */
    for (int i = 0; i < 6; i++) {
        tu_sleep_ms(500);
        char *body = history(NULL, 200);
        struct series d = series_of(body, "done");
        free(body);
        ck_assert_msg(d.sum == 10, "after the restart: done %lld, expected 10", d.sum);
    }
    ck_assert_int_gt(some_child(), 0);
    enqueue(5, "ok");
    ck_assert(h_wait_idle(&H, 15000));
    wait_sums(NULL, 15, 0);
}
END_TEST

START_TEST(reload_keeps_the_history)
{
    enqueue(6, "ok");
    enqueue(1, "fail");
    ck_assert(h_wait_idle(&H, 15000));
    wait_sums("?queue=" H_QUEUE, 7, 1);
    /* A new generation: every worker replaced, the queue kept by name. */
    ck_assert_int_eq(kill(H.pid, SIGHUP), 0);
    ck_assert_int_ge(h_wait_log(&H, "reloaded", 1, 10000), 1);
    for (int i = 0; i < 4; i++) {
        tu_sleep_ms(500);
        char *body = history("?queue=" H_QUEUE, 200);
        struct series d = series_of(body, "done");
        free(body);
        ck_assert_msg(d.sum == 7, "after the reload: done %lld, expected 7", d.sum);
    }
    enqueue(4, "ok");
    ck_assert(h_wait_idle(&H, 15000));
    wait_sums("?queue=" H_QUEUE, 11, 1);
    wait_sums(NULL, 11, 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ui_api");
    TCase *tc = fixture_tcase(s, "history", 60, NULL, NULL, setup, teardown);
    tcase_add_test(tc, history_counts_jobs_run_and_failed);
    tcase_add_test(tc, history_refuses_unknown_queue_and_strangers);
    tcase_add_test(tc, worker_restart_takes_nothing_back);
    tcase_add_test(tc, reload_keeps_the_history);
    return fixture_run_suite(s);
}
