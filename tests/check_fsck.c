/*
 * fsck (issue 10, finding 8): dq_fsck and `delayq fsck` against a real
 * redis-server, and the real delayqd's reaper repairing on its own, with
 * /metrics counting the repairs and /healthz naming a key of the wrong
 * type.
 *
 * The library and CLI tests share one server (started in main, flushed
 * before each test); each daemon test starts its own (daemon_harness.c) in
 * Check's forked child, whose process group Check kills afterwards.
 */
#include "config.h"

#include <check.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "fixture.h"
#include "lib/scripts.h"
#include "run_prog.h"

#define Q "orders"

static struct redis_fixture fx;

/* ---- helpers ---------------------------------------------------------------- */

static void clean_redis(void)
{
    fixture_redis_flush(&fx);
}

/* A job on queue `q` (id NULL: generated), due after delay_ms; its id into
 * `id` (may be NULL). */
static void enqueue(dq_client *c, const char *q, const char *want, int64_t delay_ms,
                    char *id, size_t len)
{
    dq_enqueue_req req = { .queue = q, .type = "t", .id = want, .payload = "p",
                           .payload_len = 1, .delay_ms = delay_ms };
    dq_enqueued out;
    ck_assert_msg(dq_enqueue(c, &req, &out) == DQ_OK, "enqueue: %s", dq_errmsg(c));
    if (id)
        snprintf(id, len, "%s", out.id);
}

static dq_fsck_result fsck(dq_client *c, const char *q, bool repair, int count)
{
    dq_fsck_result r;
    dq_status st = dq_fsck(c, q, repair, count, &r);
    ck_assert_msg(st == DQ_OK, "dq_fsck: %s", dq_errmsg(c));
    return r;
}

/* Is there a finding of `kind` for (key, id)? */
static int has_finding(const dq_fsck_result *r, dq_fsck_kind kind, const char *key,
                       const char *id)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->findings[i].kind == kind && strcmp(r->findings[i].key, key) == 0
            && strcmp(r->findings[i].id, id) == 0)
            return 1;
    return 0;
}

/* Every key and its DUMP, sorted, as one string (malloc'd): equal
 * snapshots mean nothing in the keyspace changed. */
static char *snapshot(void)
{
    redisContext *rc = fixture_redis_connect(&fx);
    redisReply *keys = redisCommand(rc, "EVAL %s 0",
                                    "local k = redis.call('KEYS', '*') table.sort(k) return k");
    ck_assert(keys && keys->type == REDIS_REPLY_ARRAY);
    size_t cap = 1024, len = 0;
    char *out = malloc(cap);
    ck_assert(out);
    for (size_t i = 0; i < keys->elements; i++) {
        redisReply *d = redisCommand(rc, "DUMP %b", keys->element[i]->str,
                                     keys->element[i]->len);
        ck_assert(d && d->type == REDIS_REPLY_STRING);
        size_t need = keys->element[i]->len + d->len + 2;
        while (len + need + 1 > cap)
            ck_assert((out = realloc(out, cap *= 2)) != NULL);
        memcpy(out + len, keys->element[i]->str, keys->element[i]->len);
        len += keys->element[i]->len;
        out[len++] = '=';
        memcpy(out + len, d->str, d->len);
        len += d->len;
        out[len++] = '\n';
        freeReplyObject(d);
    }
    out[len] = '\0';
    freeReplyObject(keys);
    redisFree(rc);
    return out;
}

/* Take every due job of `q` and ack it; returns how many. */
static size_t drain(dq_client *c, const char *q)
{
    size_t n = 0;
    for (;;) {
        dq_claim_result cr;
        ck_assert_msg(dq_claim(c, q, 100, 30000, &cr) == DQ_OK, "claim: %s", dq_errmsg(c));
        size_t got = cr.n;
        for (size_t i = 0; i < cr.n; i++)
            ck_assert_int_eq(dq_ack(c, q, cr.jobs[i].id, cr.jobs[i].fence), DQ_OK);
        dq_claim_result_free(&cr);
        n += got;
        if (got == 0)
            return n;
    }
}

/* ---- the library ------------------------------------------------------------ */

/* One of each kind next to healthy jobs: found and counted, nothing
 * changed without repair; repaired with it, a second pass clean, and the
 * healthy jobs still claim and ack. */
START_TEST(finds_each_kind_and_repairs)
{
    dq_client *c = fixture_client(&fx);
    char lost_gen[DQ_ID_MAX + 1];
    for (int i = 0; i < 5; i++)
        enqueue(c, Q, NULL, 0, NULL, 0);
    dq_claim_result cr;
    ck_assert_int_eq(dq_claim(c, Q, 1, 60000, &cr), DQ_OK);
    ck_assert_uint_eq(cr.n, 1);
    /* Records in no set: a generated id (in a bucket) and a producer's. */
    enqueue(c, Q, NULL, 3600000, lost_gen, sizeof lost_gen);
    enqueue(c, Q, "lost:1", 3600000, NULL, 0);
    ck_assert_int_eq(fixture_redis_int(&fx, "ZREM dq:{%s}:delayed %s lost:1", Q, lost_gen), 2);
    /* Members without a record, in each set; a lease field without one. */
    ck_assert_int_eq(fixture_redis_int(&fx, "ZADD dq:{%s}:delayed 0 ghost:d 1 987654", Q), 2);
    ck_assert_int_eq(fixture_redis_int(&fx, "ZADD dq:{%s}:processing 9999999999999 ghost:p", Q), 1);
    ck_assert_int_eq(fixture_redis_int(&fx, "HSET dq:{%s}:lease ghost:p 7 ghost:l 8", Q), 2);
    ck_assert_int_eq(fixture_redis_int(&fx, "ZADD dq:{%s}:dead 5 ghost:x", Q), 1);
    /* A bucket of the wrong type that no job needs. */
    ck_assert_int_eq(fixture_redis_int(&fx, "SET dq:{%s}:jobs:4242 x", Q), 0);

    char *before = snapshot();
    dq_fsck_result r = fsck(c, Q, false, 0);
    char *after = snapshot();
    ck_assert_msg(strcmp(before, after) == 0, "a check without repair changed the keyspace");
    ck_assert_int_eq(r.records, 2);
    ck_assert_int_eq(r.members, 4);
    ck_assert_int_eq(r.leases, 1);
    ck_assert_int_eq(r.wrong_types, 1);
    ck_assert_int_eq(r.repaired, 0);
    char bucket[DQ_ID_MAX + 64];
    int digits = (int)strlen(lost_gen) - 2;     /* ids under 100: bucket "jobs:" */
    snprintf(bucket, sizeof bucket, "dq:{%s}:jobs:%.*s", Q, digits > 0 ? digits : 0, lost_gen);
    ck_assert(has_finding(&r, DQ_FSCK_RECORD, bucket, lost_gen));
    ck_assert(has_finding(&r, DQ_FSCK_RECORD, "dq:{" Q "}:jobs", "lost:1"));
    ck_assert(has_finding(&r, DQ_FSCK_MEMBER, "dq:{" Q "}:delayed", "ghost:d"));
    ck_assert(has_finding(&r, DQ_FSCK_MEMBER, "dq:{" Q "}:delayed", "987654"));
    ck_assert(has_finding(&r, DQ_FSCK_MEMBER, "dq:{" Q "}:processing", "ghost:p"));
    ck_assert(has_finding(&r, DQ_FSCK_MEMBER, "dq:{" Q "}:dead", "ghost:x"));
    ck_assert(has_finding(&r, DQ_FSCK_LEASE, "dq:{" Q "}:lease", "ghost:l"));
    ck_assert(has_finding(&r, DQ_FSCK_WRONG_TYPE, "dq:{" Q "}:jobs:4242", "string"));
    dq_fsck_result_free(&r);
    free(before);
    free(after);

    r = fsck(c, Q, true, 0);
    ck_assert_int_eq(r.repaired, 7);
    ck_assert_int_eq(r.wrong_types, 1);
    dq_fsck_result_free(&r);
    r = fsck(c, Q, true, 0);
    ck_assert_int_eq(r.records + r.members + r.leases + r.repaired, 0);
    ck_assert_int_eq(r.wrong_types, 1);     /* reported, never deleted */
    dq_fsck_result_free(&r);
    ck_assert_int_eq(fixture_redis_int(&fx, "EXISTS dq:{%s}:jobs:4242", Q), 1);
    ck_assert_int_eq(fixture_redis_int(&fx, "HEXISTS dq:{%s}:lease ghost:p", Q), 0);

    /* The orphan records are dead, visible and requeue-able. */
    dq_job_info info;
    ck_assert_int_eq(dq_show(c, Q, lost_gen, &info), DQ_OK);
    ck_assert_int_eq(info.state, DQ_STATE_DEAD);
    ck_assert_str_eq(info.job.last_error, "orphan record");
    dq_job_info_free(&info);
    dq_dead_page page;
    ck_assert_int_eq(dq_dead_list(c, Q, 0, 10, &page), DQ_OK);
    ck_assert_int_eq(page.total, 2);
    dq_dead_page_free(&page);
    ck_assert_int_eq(dq_requeue(c, Q, "lost:1"), DQ_OK);

    /* The healthy jobs: the held one acks, the 4 due and the requeued run. */
    ck_assert_int_eq(dq_ack(c, Q, cr.jobs[0].id, cr.jobs[0].fence), DQ_OK);
    dq_claim_result_free(&cr);
    ck_assert_uint_eq(drain(c, Q), 5);
    dq_close(c);
}
END_TEST

/* A queue key of the wrong type is reported and left alone, repair or
 * not; records are then not judged (no set can be read to judge them). */
START_TEST(wrong_type_queue_key_is_only_reported)
{
    dq_client *c = fixture_client(&fx);
    enqueue(c, "broken", "a:1", 0, NULL, 0);
    ck_assert_int_eq(fixture_redis_int(&fx, "DEL dq:{broken}:delayed"), 1);
    ck_assert_int_eq(fixture_redis_int(&fx, "SET dq:{broken}:delayed oops"), 0);
    char *before = snapshot();
    dq_fsck_result r = fsck(c, "broken", true, 0);
    char *after = snapshot();
    ck_assert_msg(strcmp(before, after) == 0, "repair touched a queue with a bad key");
    ck_assert_int_eq(r.wrong_types, 1);
    ck_assert_int_eq(r.records + r.members + r.leases + r.repaired, 0);
    ck_assert_uint_eq(r.n, 1);
    ck_assert_str_eq(r.findings[0].key, "dq:{broken}:delayed");
    ck_assert_str_eq(r.findings[0].id, "string");
    ck_assert_str_eq(r.findings[0].expected, "zset");
    dq_fsck_result_free(&r);
    free(before);
    free(after);
    dq_close(c);
}
END_TEST

/* Delayed, due, claimed and dead jobs are where they belong: nothing is
 * reported and a repair changes nothing. */
START_TEST(jobs_in_their_sets_are_not_orphans)
{
    dq_client *c = fixture_client(&fx);
    enqueue(c, Q, NULL, 3600000, NULL, 0);
    enqueue(c, Q, "later", 3600000, NULL, 0);
    enqueue(c, Q, NULL, 0, NULL, 0);
    enqueue(c, Q, NULL, 0, NULL, 0);
    enqueue(c, Q, "doomed", 0, NULL, 0);
    dq_claim_result cr;
    ck_assert_int_eq(dq_claim(c, Q, 3, 60000, &cr), DQ_OK);
    ck_assert_uint_eq(cr.n, 3);
    dq_retry_policy p;
    dq_retry_policy_init(&p);
    for (size_t i = 0; i < cr.n; i++)
        if (strcmp(cr.jobs[i].id, "doomed") == 0)
            ck_assert_int_eq(dq_fail(c, Q, "doomed", cr.jobs[i].fence, "no", DQ_FAIL_DEAD,
                                     -1, &p, NULL), DQ_OK);
    char *before = snapshot();
    dq_fsck_result r = fsck(c, Q, true, 1);
    char *after = snapshot();
    ck_assert_int_eq(r.records + r.members + r.leases + r.wrong_types, 0);
    ck_assert_int_ge(r.scanned, 5);
    ck_assert_msg(strcmp(before, after) == 0, "repair changed a healthy queue");
    dq_fsck_result_free(&r);
    free(before);
    free(after);
    dq_claim_result_free(&cr);
    dq_close(c);
}
END_TEST

/* Jobs moving between sets all the time (another process enqueues,
 * claims, acks, fails, requeues) while fsck repairs in small steps: it
 * never finds one, and no job is buried as an orphan. */
START_TEST(moving_jobs_are_never_repaired)
{
    fflush(NULL);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        dq_client *w = fixture_client(&fx);
        dq_retry_policy p;
        dq_retry_policy_init(&p);
        p.base_ms = 1;
        p.jitter = 0;
        for (int round = 0; round < 100000; round++) {
            enqueue(w, Q, NULL, 0, NULL, 0);
            enqueue(w, Q, NULL, round % 3, NULL, 0);
            dq_claim_result cr;
            if (dq_claim(w, Q, 4, 60000, &cr) != DQ_OK)
                _exit(1);
            for (size_t i = 0; i < cr.n; i++) {
                if (i % 3 == 0)
                    dq_ack(w, Q, cr.jobs[i].id, cr.jobs[i].fence);
                else
                    dq_fail(w, Q, cr.jobs[i].id, cr.jobs[i].fence, "x",
                            i % 3 == 1 ? DQ_FAIL_RETRY : DQ_FAIL_DEAD, -1, &p, NULL);
            }
            dq_claim_result_free(&cr);
            if (round % 10 == 0)
                dq_requeue_all(w, Q, NULL);
        }
        _exit(0);
    }
    dq_client *c = fixture_client(&fx);
    int64_t end = tu_mono_ms() + 3000, passes = 0, scanned = 0;
    while (tu_mono_ms() < end) {
        dq_fsck_result r = fsck(c, Q, true, 3);
        ck_assert_msg(r.records + r.members + r.leases + r.wrong_types == 0,
                      "pass %lld found %lld records, %lld members, %lld leases (first: %s %s)",
                      (long long)passes, (long long)r.records, (long long)r.members,
                      (long long)r.leases, r.n ? r.findings[0].key : "",
                      r.n ? r.findings[0].id : "");
        scanned += r.scanned;
        passes++;
        dq_fsck_result_free(&r);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    ck_assert_int_gt(passes, 3);
    ck_assert_int_gt(scanned, 100);
    dq_dead_page page;
    ck_assert_int_eq(dq_dead_list(c, Q, 0, 10000, &page), DQ_OK);
    for (size_t i = 0; i < page.n; i++)
        ck_assert_str_ne(page.entries[i].last_error, "orphan record");
    dq_dead_page_free(&page);
    dq_close(c);
}
END_TEST

/* 20,000 jobs: fsck in steps of 10 takes many calls and still finds the
 * one orphan planted among them, and only it. */
START_TEST(large_queue_is_checked_in_steps)
{
    enum { N = 20000 };
    dq_client *c = fixture_client(&fx);
    dq_enqueue_req *reqs = calloc(N, sizeof *reqs);
    ck_assert(reqs);
    for (int i = 0; i < N; i++)
        reqs[i] = (dq_enqueue_req){ .queue = Q, .type = "t", .payload = "p",
                                    .payload_len = 1, .delay_ms = 3600000 };
    ck_assert_int_eq(dq_enqueue_many(c, reqs, N, NULL, NULL), DQ_OK);
    free(reqs);
    ck_assert_int_eq(fixture_redis_int(&fx, "ZREM dq:{%s}:delayed 12345", Q), 1);
    dq_fsck_result r = fsck(c, Q, false, 10);
    ck_assert_int_eq(r.records, 1);
    ck_assert_int_eq(r.members + r.leases + r.wrong_types, 0);
    ck_assert(has_finding(&r, DQ_FSCK_RECORD, "dq:{" Q "}:jobs:123", "12345"));
    ck_assert_int_ge(r.scanned, 2 * N - 1);     /* the records, then the set */
    ck_assert_uint_gt(r.calls, 200);
    dq_fsck_result_free(&r);
    dq_close(c);
}
END_TEST

/* A pass over a queue that fits in one call's count takes one call (each
 * call checks the type of every key of the queue first): an idle reaper
 * asks each queue once a pass, not once per set.  A finding ends its
 * call, and the pass goes on in the next. */
START_TEST(small_queue_is_checked_in_one_call)
{
    dq_client *c = fixture_client(&fx);
    dq_fsck_result r = fsck(c, Q, true, 0);
    ck_assert_uint_eq(r.calls, 1);
    dq_fsck_result_free(&r);
    for (int i = 0; i < 5; i++) {
        char id[16];
        snprintf(id, sizeof id, "order:%d", i);
        enqueue(c, Q, i % 2 ? id : NULL, 3600000, NULL, 0);
    }
    r = fsck(c, Q, true, 0);
    ck_assert_uint_eq(r.calls, 1);
    ck_assert_int_ge(r.scanned, 5);
    ck_assert_int_eq(r.repaired, 0);
    dq_fsck_result_free(&r);
    ck_assert_int_eq(fixture_redis_int(&fx, "ZADD dq:{%s}:delayed 1 ghost", Q), 1);
    r = fsck(c, Q, true, 0);
    ck_assert_int_eq(r.members, 1);
    ck_assert_int_eq(r.repaired, 1);
    ck_assert_uint_eq(r.calls, 2);
    dq_fsck_result_free(&r);
    dq_close(c);
}
END_TEST

START_TEST(bad_arguments_are_refused)
{
    dq_client *c = fixture_client(&fx);
    dq_fsck_result r;
    ck_assert_int_eq(dq_fsck(c, Q, false, 1001, &r), DQ_ERR_INVALID);
    dq_fsck_result_free(&r);
    ck_assert_int_eq(dq_fsck(c, "a{b}", false, 0, &r), DQ_ERR_INVALID);
    dq_fsck_result_free(&r);
    /* The script checks its arguments before it writes anything. */
    ck_assert_int_eq(fixture_redis_int(&fx, "ZADD dq:{%s}:delayed 0 ghost", Q), 1);
    redisContext *rc = fixture_redis_connect(&fx);
    static const char *const bad[][3] = { { "z9", "10", "repair" }, { "0", "0", "repair" },
                                          { "0", "10", "fix" }, { "d", "10", "repair" } };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        redisReply *x = redisCommand(rc, "EVAL %s 6 dq:{%s}:jobs dq:{%s}:delayed "
                                     "dq:{%s}:processing dq:{%s}:dead dq:{%s}:meta "
                                     "dq:{%s}:lease %s %s %s",
                                     dq_scripts[DQ_SCRIPT_FSCK].text, Q, Q, Q, Q, Q, Q,
                                     bad[i][0], bad[i][1], bad[i][2]);
        ck_assert_msg(x && x->type == REDIS_REPLY_ERROR, "arguments %s %s %s accepted",
                      bad[i][0], bad[i][1], bad[i][2]);
        freeReplyObject(x);
    }
    redisFree(rc);
    ck_assert_int_eq(fixture_redis_int(&fx, "ZCARD dq:{%s}:delayed", Q), 1);
    dq_close(c);
}
END_TEST

/* ---- the command line ----------------------------------------------------------- */

static struct run_result *cli(const char *a1, const char *a2, const char *a3,
                              const char *a4)
{
    static struct run_result r;
    char *argv[] = { (char *)fixture_build_path("delayq"), "-s", fx.sock, (char *)a1,
                     (char *)a2, (char *)a3, (char *)a4, NULL };
    struct run_opts o = { .env = { "DELAYQ_PASSWORD" } };
    run_prog(&o, argv, &r);
    return &r;
}

START_TEST(cli_exit_codes_and_repair)
{
    dq_client *c = fixture_client(&fx);
    enqueue(c, Q, NULL, 0, NULL, 0);
    struct run_result *r = cli("fsck", "-q", Q, NULL);
    ck_assert_msg(r->status == 0, "clean queue: exit %d: %s", r->status, r->err);
    ck_assert_ptr_nonnull(strstr(r->out, "clean"));

    ck_assert_int_eq(fixture_redis_int(&fx, "ZADD dq:{%s}:delayed 0 ghost", Q), 1);
    r = cli("fsck", "-q", Q, NULL);
    ck_assert_msg(r->status == 1, "orphan: exit %d: %s", r->status, r->err);
    ck_assert_ptr_nonnull(strstr(r->out, "member  dq:{orders}:delayed  ghost"));
    ck_assert_int_eq(fixture_redis_int(&fx, "ZCARD dq:{%s}:delayed", Q), 2);
    r = cli("fsck", "-q", Q, "--json");
    ck_assert_int_eq(r->status, 1);
    ck_assert_ptr_nonnull(strstr(r->out, "\"members\":1,"));
    ck_assert_ptr_nonnull(strstr(r->out, "{\"kind\":\"member\",\"key\":\"dq:{orders}:delayed\","
                                         "\"id\":\"ghost\",\"repaired\":false}"));

    r = cli("fsck", "-q", Q, "--repair");
    ck_assert_msg(r->status == 0, "repair: exit %d: %s", r->status, r->err);
    ck_assert_ptr_nonnull(strstr(r->out, "1 repaired"));
    ck_assert_int_eq(fixture_redis_int(&fx, "ZCARD dq:{%s}:delayed", Q), 1);
    r = cli("fsck", "-q", Q, NULL);
    ck_assert_int_eq(r->status, 0);

    /* A wrong-type key is never repaired: exit 1 even with --repair. */
    ck_assert_int_eq(fixture_redis_int(&fx, "SET dq:{%s}:jobs:77 x", Q), 0);
    r = cli("fsck", "-q", Q, "--repair");
    ck_assert_int_eq(r->status, 1);
    ck_assert_ptr_nonnull(strstr(r->out, "dq:{orders}:jobs:77 has type string, expected hash"));

    r = cli("fsck", NULL, NULL, NULL);
    ck_assert_int_eq(r->status, 2);
    r = cli("fsck", "-q", Q, "extra");
    ck_assert_int_eq(r->status, 2);
    char *argv[] = { (char *)fixture_build_path("delayq"), "-s", "/nonexistent/redis.sock",
                     "fsck", "-q", Q, NULL };
    struct run_opts o = { .env = { "DELAYQ_PASSWORD" } };
    static struct run_result down;
    run_prog(&o, argv, &down);
    ck_assert_int_eq(down.status, 69);
    dq_close(c);
}
END_TEST

/* ---- the daemon ------------------------------------------------------------------ */

static struct harness H;

static void h_up(void)
{
    h_setup(&H);
}

static void h_down(void)
{
    h_teardown(&H);
}

/* The value of a series in a /metrics page; -1 when absent. */
static double metric(const char *page, const char *series)
{
    size_t n = strlen(series);
    for (const char *p = page; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, series, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    return -1;
}

static void start_daemon(int port)
{
    char handlers[1024], text[8192];
    h_handler(&H, handlers, sizeof handlers, "*", "1s", 0);
    snprintf(text, sizeof text,
             "redis = { unix_socket = \"%s\"; };\n"
             "handler_dir = \"%s\";\n"
             "queues = ( { name = \"" H_QUEUE "\"; workers = 2; lease = \"3s\"; batch = 8; } );\n"
             "handlers = ( %s );\n"
             "reaper = { interval = \"200ms\"; batch = 50; fsck_interval = \"200ms\"; };\n"
             "metrics = { listen = \"127.0.0.1:%d\"; };\n"
             "log = { level = \"info\"; target = \"stderr\"; };\n",
             H.fx.sock, H.handler_dir, handlers, port);
    h_write_file(H.conf, text);
    h_start(&H, 2);
}

struct page_wait {
    int port;
    const char *path;
    int status;
    const char *needle;
    char body[262144];
};

static int page_is(void *arg)
{
    struct page_wait *w = arg;
    return fixture_http_get(w->port, w->path, w->body, sizeof w->body) == w->status
           && strstr(w->body, w->needle) != NULL;
}

static int repaired_total(struct page_wait *w, double want)
{
    w->status = 200;
    w->path = "/metrics";
    w->needle = "delayq_orphans_repaired_total";
    return page_is(w) && metric(w->body, "delayq_orphans_repaired_total{queue=\"orders\"}")
                             == want;
}

static int repaired_is_2(void *arg)
{
    return repaired_total(arg, 2);
}

static int repaired_is_5(void *arg)
{
    return repaired_total(arg, 5);
}

/* The reaper repairs on its own and counts it (with the claim script's
 * drops); a wrong-type bucket turns /healthz to 503 naming it, is logged
 * once however many passes see it, and healthy jobs run meanwhile. */
START_TEST(reaper_repairs_and_reports)
{
    static struct page_wait w;
    w.port = fixture_free_port();
    char lost[DQ_ID_MAX + 1];
    ck_assert_int_eq(fixture_redis_int(&H.fx, "HSET dq:{orders}:meta orphans_removed 5"), 1);
    start_daemon(w.port);
    dq_enqueue_req req = { .queue = H_QUEUE, .type = "t", .payload = "p", .payload_len = 1,
                           .delay_ms = 3600000 };
    dq_enqueued out;
    ck_assert_int_eq(dq_enqueue(H.c, &req, &out), DQ_OK);
    snprintf(lost, sizeof lost, "%s", out.id);
    ck_assert_int_eq(fixture_redis_int(&H.fx, "ZREM dq:{orders}:delayed %s", lost), 1);
    /* Due in an hour, so that only the reaper meets the ghost: a worker's
     * claim would drop a due one itself, count it, and log nothing. */
    ck_assert_int_eq(fixture_redis_int(&H.fx, "ZADD dq:{orders}:delayed %lld ghost",
                                       (long long)tu_now_ms() + 3600000), 1);
    ck_assert_msg(h_wait_state(&H, lost, DQ_STATE_DEAD, 5000), "orphan record not buried: %s",
                  h_log_tail(&H));
    ck_assert_msg(h_wait(5000, repaired_is_2, &w) == 1, "/metrics: %s", w.body);
    /* Claims dropped 3 more ids since the reaper first read the field. */
    ck_assert_int_eq(fixture_redis_int(&H.fx, "HINCRBY dq:{orders}:meta orphans_removed 3"), 8);
    dq_job_info info;
    ck_assert_int_eq(h_state(&H, lost, &info), DQ_STATE_DEAD);
    ck_assert_str_eq(info.job.last_error, "orphan record");
    dq_job_info_free(&info);
    ck_assert_int_eq(fixture_redis_int(&H.fx, "ZSCORE dq:{orders}:delayed ghost"), -1);
    ck_assert_msg(h_wait(5000, repaired_is_5, &w) == 1, "/metrics: %s", w.body);
    ck_assert_int_ge(h_log_count(&H, "member ghost of dq:{orders}:delayed had no record"), 1);

    ck_assert_int_eq(fixture_redis_int(&H.fx, "SET dq:{orders}:jobs:4242 x"), 0);
    w.path = "/healthz";
    w.status = 503;
    w.needle = "queue orders: key dq:{orders}:jobs:4242 has type string, expected hash\n";
    ck_assert_msg(h_wait(5000, page_is, &w) == 1, "/healthz: %s", w.body);
    for (int i = 0; i < 10; i++)
        h_enqueue(&H, NULL, NULL, "ok", 0, 0);
    ck_assert_msg(h_wait_idle(&H, 10000), "healthy jobs did not run: %s", h_log_tail(&H));
    tu_sleep_ms(1500);       /* several passes */
    ck_assert_int_eq(h_log_count(&H, "key dq:{orders}:jobs:4242 has type string"), 1);
    ck_assert_int_eq(fixture_http_get(w.port, "/healthz", w.body, sizeof w.body), 503);

    ck_assert_int_eq(fixture_redis_int(&H.fx, "DEL dq:{orders}:jobs:4242"), 1);
    w.status = 200;
    w.needle = "ok";
    ck_assert_msg(h_wait(5000, page_is, &w) == 1, "/healthz after the fix: %s", w.body);
    ck_assert_int_eq(h_log_count(&H, "key dq:{orders}:jobs:4242 no longer has the wrong type"), 1);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

/* fsck_interval = "0" turns the reaper's passes off. */
START_TEST(fsck_interval_zero_is_off)
{
    char handlers[1024], text[8192];
    h_handler(&H, handlers, sizeof handlers, "*", "1s", 0);
    snprintf(text, sizeof text,
             "redis = { unix_socket = \"%s\"; };\nhandler_dir = \"%s\";\n"
             "queues = ( { name = \"" H_QUEUE "\"; workers = 1; } );\nhandlers = ( %s );\n"
             "reaper = { interval = \"200ms\"; fsck_interval = \"0\"; };\n"
             "log = { level = \"info\"; target = \"stderr\"; };\n",
             H.fx.sock, H.handler_dir, handlers);
    h_write_file(H.conf, text);
    ck_assert_int_eq(fixture_redis_int(&H.fx, "ZADD dq:{orders}:dead 0 ghost"), 1);
    h_start(&H, 1);
    tu_sleep_ms(1000);
    ck_assert_int_eq(fixture_redis_int(&H.fx, "ZCARD dq:{orders}:dead"), 1);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

/* delayqd -t refuses a fsck_interval that is not a duration, at its line. */
START_TEST(bad_fsck_interval_is_refused)
{
    char text[1024], err[2048], want[512];
    snprintf(text, sizeof text,
             "redis = { unix_socket = \"%s\"; };\n"
             "queues = ( { name = \"" H_QUEUE "\"; } );\n"
             "reaper = {\n  fsck_interval = 60;\n};\n", H.fx.sock);
    h_write_file(H.conf, text);
    const char *args[] = { "-t", "-c", H.conf, NULL };
    ck_assert_int_eq(h_run_delayqd(args, err, sizeof err), 78);
    snprintf(want, sizeof want, "%s:4: reaper.fsck_interval: expected a duration", H.conf);
    ck_assert_msg(strstr(err, want) != NULL, "stderr: %s", err);
}
END_TEST

static Suite *fsck_suite(void)
{
    Suite *s = suite_create("fsck");
    TCase *tc = fixture_tcase(s, "library", 60, NULL, NULL, clean_redis, NULL);
    tcase_add_test(tc, finds_each_kind_and_repairs);
    tcase_add_test(tc, wrong_type_queue_key_is_only_reported);
    tcase_add_test(tc, jobs_in_their_sets_are_not_orphans);
    tcase_add_test(tc, moving_jobs_are_never_repaired);
    tcase_add_test(tc, large_queue_is_checked_in_steps);
    tcase_add_test(tc, small_queue_is_checked_in_one_call);
    tcase_add_test(tc, bad_arguments_are_refused);
    tc = fixture_tcase(s, "cli", 60, NULL, NULL, clean_redis, NULL);
    tcase_add_test(tc, cli_exit_codes_and_repair);
    tc = fixture_tcase(s, "daemon", 60, NULL, NULL, h_up, h_down);
    tcase_add_test(tc, reaper_repairs_and_reports);
    tcase_add_test(tc, fsck_interval_zero_is_off);
    tcase_add_test(tc, bad_fsck_interval_is_refused);
    return s;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    fixture_redis_start(&fx);
    int status = fixture_run_suite(fsck_suite());
    fixture_redis_stop(&fx);
    return status;
}
