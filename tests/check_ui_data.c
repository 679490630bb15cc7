/*
 * ui_data (the dashboard's questions to Redis) against a real
 * redis-server, on a real libevent loop: pages of delayed, processing and
 * dead jobs in list order for a queue of one and of three partitions
 * (priority levels and partitions merged by time, paging, totals, the
 * type filter), one job shown, every action's effect in Redis, and what a
 * call sees when Redis stops answering or is gone; and the overview's
 * oldest due job as qstats reads it over partitions.
 */
#include <check.h>
#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_test.h"

#include "daemon/admin/qstats.h"
#include "daemon/admin/ui_data.h"
#include "lib/keys.h"

#define JOBS 7              /* delayed jobs j0..j6, one second apart */
#define WAIT_MS 5000        /* the longest a call may take here */

static struct event_base *base;
static struct daemon_conf dc;
static struct queue_conf qc;
static struct ui_data *ui;
static unsigned nparts;

/* ---- what a callback saw ---------------------------------------------- */

#define SEEN_MAX UI_PAGE_MAX

static struct seen {
    int calls;
    int failed;
    char err[300];
    size_t n;
    char ids[SEEN_MAX][64];
    struct ui_entry e[SEEN_MAX];    /* strings not kept */
    char last_error[SEEN_MAX][64];
    int64_t total, matched, now_ms;
    dq_status st;
    dq_status action_st;            /* the last action's */
    int64_t count;
    dq_job_info info;
    int have_info;
} seen;

static void on_page(const struct ui_page *p, const char *err, void *arg)
{
    (void)arg;
    seen.calls++;
    if (!p) {
        seen.failed = 1;
        snprintf(seen.err, sizeof seen.err, "%s", err ? err : "(no reason)");
        return;
    }
    seen.n = p->n;
    seen.total = p->total;
    seen.matched = p->matched;
    seen.now_ms = p->now_ms;
    for (size_t i = 0; i < p->n && i < SEEN_MAX; i++) {
        snprintf(seen.ids[i], sizeof seen.ids[i], "%s", p->e[i].id);
        snprintf(seen.last_error[i], sizeof seen.last_error[i], "%s", p->e[i].last_error);
        seen.e[i] = p->e[i];
        seen.e[i].id = seen.e[i].type = seen.e[i].last_error = NULL;
    }
}

static void on_show(const dq_job_info *info, dq_status st, const char *err, void *arg)
{
    (void)arg;
    seen.calls++;
    seen.st = st;
    if (err)
        snprintf(seen.err, sizeof seen.err, "%s", err);
    if (info) {
        seen.have_info = 1;
        seen.info = *info;
        seen.info.job.id = strdup(info->job.id);
        seen.info.job.type = strdup(info->job.type);
        seen.info.job.payload = NULL;
        seen.info.job.last_error = NULL;
    }
}

static void on_action(dq_status st, int64_t count, const char *err, void *arg)
{
    (void)arg;
    seen.calls++;
    seen.st = seen.action_st = st;
    seen.count = count;
    if (err)
        snprintf(seen.err, sizeof seen.err, "%s", err);
}

static void on_schedules(const dq_schedule_list *list, const char *err, void *arg)
{
    (void)arg;
    seen.calls++;
    seen.failed = !list;
    seen.n = list ? list->n : 0;
    if (err)
        snprintf(seen.err, sizeof seen.err, "%s", err);
}

static void seen_reset(void)
{
    free(seen.info.job.id);
    free(seen.info.job.type);
    memset(&seen, 0, sizeof seen);
}

/* Turn the loop until a callback ran (or WAIT_MS passed). */
static void wait_call(void)
{
    int64_t until = tu_mono_ms() + WAIT_MS;
    while (seen.calls == 0 && tu_mono_ms() < until) {
        struct timeval tv = { 0, 20000 };
        event_base_loopexit(base, &tv);
        event_base_dispatch(base);
    }
    ck_assert_msg(seen.calls == 1, "callback ran %d times", seen.calls);
}

static void wait_up(void)
{
    for (int i = 0; i < 250 && !ui_data_is_up(ui); i++) {
        struct timeval tv = { 0, 20000 };
        event_base_loopexit(base, &tv);
        event_base_dispatch(base);
    }
    ck_assert_msg(ui_data_is_up(ui), "the dashboard's connection did not come up");
}

/* ---- setting up a queue ------------------------------------------------ */

static void ui_open(void)
{
    base = event_base_new();
    ck_assert_ptr_nonnull(base);
    memset(&dc, 0, sizeof dc);
    redis_conf_init(&dc.redis);
    dc.redis.prefix = DQ_DEFAULT_PREFIX;  /* as redis_conf_read resolves it */
    dc.redis.unix_socket = fx->sock;
    dc.redis.command_timeout_ms = 1000;
    dc.redis.connect_timeout_ms = 1000;
    ui = ui_data_new(base, &dc);
    ck_assert_ptr_nonnull(ui);
    wait_up();
}

static void ui_close(void)
{
    seen_reset();
    ui_data_free(ui);
    ui = NULL;
    event_base_free(base);
    base = NULL;
}

/* The queue Q of `n` partitions, with JOBS delayed jobs j0..j6 due a
 * second apart an hour from now (j0, j3 and j6 at priority level 1, the
 * rest normal; the odd ones of type "sms", the others "email"), four
 * dead x0..x3 (died in that order) and two processing p0, p1. */
static void fill_queue(unsigned n)
{
    nparts = n;
    qc.name = (char *)Q;
    qc.partitions = (int)n;
    if (n > 1)
        ck_assert_int_eq(dq_queue_set_partitions(cl, Q, n), DQ_OK);
    int64_t at = server_now() + 3600 * 1000;
    for (int i = 0; i < JOBS; i++) {
        char id[16];
        snprintf(id, sizeof id, "j%d", i);
        dq_enqueue_req r = { .queue = Q, .type = i % 2 ? "sms" : "email", .id = id,
                             .payload = "hello", .payload_len = 5,
                             .at_ms = at + i * 1000,
                             .priority = i % 3 == 0 ? DQ_PRIORITY(1) : 0 };
        dq_enqueued e;
        ck_assert_msg(dq_enqueue(cl, &r, &e) == DQ_OK, "%s", dq_errmsg(cl));
    }
    for (int i = 0; i < 4; i++) {
        char id[16];
        snprintf(id, sizeof id, "x%d", i);
        make_dead(id);
        usleep(3000);           /* distinct times of death */
    }
    enq("p0", "x", 0, 0);
    enq("p1", "x", 0, 0);
    dq_claim_result res;
    claim_n(10, 60000, 2, &res);
    dq_claim_result_free(&res);
    ui_open();
}

static void page(enum ui_list which, int64_t offset, int count, const char *type)
{
    seen_reset();
    ck_assert_int_eq(ui_data_page(ui, &qc, which, offset, count, type, on_page, NULL), 0);
    wait_call();
    ck_assert_msg(!seen.failed, "page failed: %s", seen.err);
}

static void expect_ids(const char *const *ids, size_t n)
{
    ck_assert_uint_eq(seen.n, n);
    for (size_t i = 0; i < n; i++)
        ck_assert_str_eq(seen.ids[i], ids[i]);
}

static void action(enum ui_action a, const char *id)
{
    seen_reset();
    ck_assert_int_eq(ui_data_action(ui, &qc, a, id, on_action, NULL), 0);
    wait_call();
}

/* The score of `id` in the set `set` (delayed, delayed:1, dead ...) of
 * its partition; -1 when it is not there. */
static long long score(const char *set, const char *id)
{
    struct queue_keys k;
    unsigned part = keys_partition_of(id, nparts);
    keys_build_part(&k, "dq", Q, part, nparts);
    char key[KEYS_NAME_MAX + 8];
    /* KEYS[2] is delayed; a level's set is delayed:P */
    const char *base_key = strncmp(set, "delayed", 7) == 0 ? k.key[1]
                           : strcmp(set, "processing") == 0 ? k.key[2] : k.key[3];
    snprintf(key, sizeof key, "%s%s", base_key,
             strncmp(set, "delayed", 7) == 0 ? set + 7 : "");
    redisContext *rc = raw_connect();
    redisReply *r = redisCommand(rc, "ZSCORE %s %s", key, id);
    ck_assert_ptr_nonnull(r);
    long long v = r->type == REDIS_REPLY_STRING ? atoll(r->str) : -1;
    freeReplyObject(r);
    redisFree(rc);
    return v;
}

/* Whether the record of `id` (not all digits) exists. */
static int record_exists(const char *id)
{
    struct queue_keys k;
    keys_build_part(&k, "dq", Q, keys_partition_of(id, nparts), nparts);
    return (int)fixture_redis_int(fx, "HEXISTS %s %s", k.key[0], id);
}

/* ---- pages ------------------------------------------------------------- */

static void check_pages(unsigned n)
{
    fill_queue(n);
    static const char *const all[] = { "j0", "j1", "j2", "j3", "j4", "j5", "j6" };
    page(UI_LIST_DELAYED, 0, UI_PAGE_MAX, NULL);
    expect_ids(all, JOBS);
    ck_assert_int_eq(seen.total, JOBS);
    ck_assert_int_eq(seen.matched, JOBS);
    ck_assert_int_gt(seen.now_ms, 0);
    ck_assert_int_eq(seen.e[0].priority, 1);
    ck_assert_int_eq(seen.e[1].priority, 5);
    ck_assert_int_lt(seen.e[0].at_ms, seen.e[1].at_ms);
    ck_assert_uint_eq(seen.e[2].payload_len, 5);
    ck_assert_int_eq(seen.e[2].attempts, 0);

    page(UI_LIST_DELAYED, 2, 3, NULL);
    expect_ids(all + 2, 3);
    ck_assert_int_eq(seen.total, JOBS);
    page(UI_LIST_DELAYED, 6, 5, NULL);
    expect_ids(all + 6, 1);
    page(UI_LIST_DELAYED, 10, 5, NULL);
    ck_assert_uint_eq(seen.n, 0);
    ck_assert_int_eq(seen.total, JOBS);

    static const char *const sms[] = { "j1", "j3", "j5" };
    page(UI_LIST_DELAYED, 0, 10, "sms");
    expect_ids(sms, 3);
    ck_assert_int_eq(seen.matched, 3);
    ck_assert_int_eq(seen.total, JOBS);
    page(UI_LIST_DELAYED, 1, 1, "sms");
    expect_ids(sms + 1, 1);
    page(UI_LIST_DELAYED, 0, 10, "fax");
    ck_assert_uint_eq(seen.n, 0);
    ck_assert_int_eq(seen.matched, 0);

    static const char *const dead[] = { "x0", "x1", "x2", "x3" };
    page(UI_LIST_DEAD, 0, 10, NULL);
    expect_ids(dead, 4);
    ck_assert_int_eq(seen.total, 4);
    ck_assert_str_eq(seen.last_error[0], "broken");
    ck_assert_int_eq(seen.e[0].attempts, 1);
    page(UI_LIST_DEAD, 1, 2, NULL);
    expect_ids(dead + 1, 2);

    page(UI_LIST_PROCESSING, 0, 10, NULL);
    ck_assert_uint_eq(seen.n, 2);
    ck_assert_int_eq(seen.total, 2);       /* the pin is no job */
    ck_assert_int_eq(seen.e[0].attempts, 1);
    ck_assert_int_gt(seen.e[0].at_ms, seen.now_ms);
    ui_close();
}

START_TEST(pages_one_partition)
{
    check_pages(1);
}
END_TEST

START_TEST(pages_three_partitions)
{
    check_pages(3);
}
END_TEST

/* The type filter looks at a bounded head of the list (1000 entries per
 * partition): past it, matched says -1 (not known), and the page holds
 * what the head had. */
START_TEST(type_filter_examines_a_bounded_head)
{
    enum { N = 1100 };
    dq_enqueue_req *reqs = calloc(N, sizeof *reqs);
    ck_assert_ptr_nonnull(reqs);
    for (int i = 0; i < N; i++)
        reqs[i] = (dq_enqueue_req){ .queue = Q, .delay_ms = 3600 * 1000 + i,
                                    .type = i == 10 || i == N - 1 ? "sms" : "email" };
    ck_assert_int_eq(dq_enqueue_many(cl, reqs, N, NULL, NULL), DQ_OK);
    free(reqs);
    nparts = 1;
    qc.name = (char *)Q;
    qc.partitions = 1;
    ui_open();
    page(UI_LIST_DELAYED, 0, 10, "sms");
    ck_assert_uint_eq(seen.n, 1);           /* the last one is past the head */
    ck_assert_int_eq(seen.matched, -1);
    ck_assert_int_eq(seen.total, N);
    page(UI_LIST_DELAYED, N - 3, 10, NULL); /* no filter: any depth */
    ck_assert_uint_eq(seen.n, 3);
    ui_close();
}
END_TEST

/* ---- paging against the order of the sets ---------------------------------- */

#define TIES 240                /* jobs, three at each due time */

struct ref {
    char id[8];
    int64_t at;
    unsigned part;
    int level;
};

/* The list's order: due time, then partition, then level (more urgent
 * first), then id. */
static int ref_cmp(const void *a, const void *b)
{
    const struct ref *x = a, *y = b;
    if (x->at != y->at)
        return x->at < y->at ? -1 : 1;
    if (x->part != y->part)
        return x->part < y->part ? -1 : 1;
    if (x->level != y->level)
        return x->level < y->level ? -1 : 1;
    return strcmp(x->id, y->id);
}

/* Every page of 7 from every offset step holds what the sorted list
 * holds there: ties of due time on two levels (and over partitions) come
 * out in one order. */
static void check_paging(unsigned n)
{
    static struct ref refs[TIES];
    nparts = n;
    qc.name = (char *)Q;
    qc.partitions = (int)n;
    if (n > 1)
        ck_assert_int_eq(dq_queue_set_partitions(cl, Q, n), DQ_OK);
    int64_t base_at = server_now() + 3600 * 1000;
    for (int i = 0; i < TIES; i++) {
        struct ref *r = &refs[i];
        snprintf(r->id, sizeof r->id, "t%03d", (i * 7) % TIES);
        r->at = base_at + (i / 3) * 1000;
        r->level = i % 2 ? 0 : 5;
        r->part = keys_partition_of(r->id, n);
        dq_enqueue_req q = { .queue = Q, .type = "email", .id = r->id, .at_ms = r->at,
                             .priority = r->level == 0 ? DQ_PRIORITY(0) : 0 };
        dq_enqueued e;
        ck_assert_msg(dq_enqueue(cl, &q, &e) == DQ_OK, "%s", dq_errmsg(cl));
    }
    qsort(refs, TIES, sizeof refs[0], ref_cmp);
    ui_open();
    for (int off = 0; off < TIES; off += 5) {
        page(UI_LIST_DELAYED, off, 7, NULL);
        size_t want = off + 7 <= TIES ? 7 : (size_t)(TIES - off);
        ck_assert_uint_eq(seen.n, want);
        for (size_t i = 0; i < want; i++)
            ck_assert_msg(strcmp(seen.ids[i], refs[off + (int)i].id) == 0,
                          "offset %d entry %zu: %s, want %s", off, i, seen.ids[i],
                          refs[off + (int)i].id);
    }
    ui_close();
}

START_TEST(paging_one_partition)
{
    check_paging(1);
}
END_TEST

START_TEST(paging_three_partitions)
{
    check_paging(3);
}
END_TEST

/* An unreadable record shows as such, and never fails the page. */
START_TEST(page_with_an_unreadable_record)
{
    fill_queue(1);
    redisContext *rc = raw_connect();
    ck_assert(raw_ok(rc, "HSET dq:{" Q "}:jobs j2 garbage"));
    redisFree(rc);
    page(UI_LIST_DELAYED, 0, 10, NULL);
    ck_assert_uint_eq(seen.n, JOBS);
    ck_assert(seen.e[2].unreadable);
    ck_assert(!seen.e[1].unreadable);
    ck_assert_ptr_nonnull(strstr(seen.last_error[2], "format-3"));
    ui_close();
}
END_TEST

/* ---- show, schedules ----------------------------------------------------- */

static void check_show(unsigned n)
{
    fill_queue(n);
    seen_reset();
    ck_assert_int_eq(ui_data_show(ui, &qc, "j3", on_show, NULL), 0);
    wait_call();
    ck_assert_int_eq(seen.st, DQ_OK);
    ck_assert(seen.have_info);
    ck_assert_str_eq(seen.info.job.id, "j3");
    ck_assert_str_eq(seen.info.job.type, "sms");
    ck_assert_int_eq(seen.info.state, DQ_STATE_DELAYED);
    ck_assert_int_eq(seen.info.job.priority, 1);

    seen_reset();
    ck_assert_int_eq(ui_data_show(ui, &qc, "x1", on_show, NULL), 0);
    wait_call();
    ck_assert_int_eq(seen.info.state, DQ_STATE_DEAD);

    seen_reset();
    ck_assert_int_eq(ui_data_show(ui, &qc, "nosuch", on_show, NULL), 0);
    wait_call();
    ck_assert_int_eq(seen.st, DQ_ERR_NOTFOUND);
    ck_assert(!seen.have_info);

    seen_reset();
    ck_assert_int_eq(ui_data_schedules(ui, &qc, on_schedules, NULL), 0);
    wait_call();
    ck_assert_msg(!seen.failed, "%s", seen.err);
    ck_assert_uint_eq(seen.n, 0);
    ui_close();
}

START_TEST(show_one_partition)
{
    check_show(1);
}
END_TEST

START_TEST(show_three_partitions)
{
    check_show(3);
}
END_TEST

/* ---- actions ------------------------------------------------------------- */

/* Claim the `n` jobs due now and fail each for good. */
static void bury_due(size_t n)
{
    dq_claim_result res;
    claim_n(10, 30000, n, &res);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(dq_fail(cl, Q, res.jobs[i].id, res.jobs[i].fence, "again",
                                 DQ_FAIL_DEAD, -1, NULL, NULL), DQ_OK);
    dq_claim_result_free(&res);
}

static void check_actions(unsigned n)
{
    fill_queue(n);
    action(UI_ACT_RUN_NOW, "p0");
    ck_assert_int_eq(seen.st, DQ_ERR_RUNNING);
    action(UI_ACT_RUN_NOW, "x0");
    ck_assert_int_eq(seen.st, DQ_ERR_DEAD);
    action(UI_ACT_RUN_NOW, "nosuch");
    ck_assert_int_eq(seen.st, DQ_ERR_NOTFOUND);
    ck_assert_ptr_nonnull(strstr(seen.err, "nosuch"));

    action(UI_ACT_CANCEL, "j5");
    ck_assert_int_eq(seen.st, DQ_OK);
    ck_assert_int_eq(score("delayed", "j5"), -1);
    ck_assert_int_eq(record_exists("j5"), 0);
    ck_assert_int_eq(record_exists("j6"), 1);
    action(UI_ACT_CANCEL, "p1");        /* running: it ends at once */
    ck_assert_int_eq(seen.st, DQ_OK);
    ck_assert_int_eq(score("processing", "p1"), -1);
    action(UI_ACT_CANCEL, "x0");
    ck_assert_int_eq(seen.st, DQ_ERR_DEAD);

    action(UI_ACT_PURGE, "x1");
    ck_assert_int_eq(seen.st, DQ_OK);
    ck_assert_int_eq(seen.count, 1);
    ck_assert_int_eq(score("dead", "x1"), -1);
    action(UI_ACT_PURGE, "j0");
    ck_assert_int_eq(seen.st, DQ_ERR_NOTFOUND);
    action(UI_ACT_REQUEUE, "x0");
    ck_assert_int_eq(seen.st, DQ_OK);
    ck_assert_int_eq(seen.count, 1);
    ck_assert_int_eq(score("dead", "x0"), -1);
    ck_assert_int_ge(score("delayed", "x0"), 0);
    action(UI_ACT_REQUEUE, "x0");           /* not dead any more */
    ck_assert_int_eq(seen.st, DQ_ERR_NOTFOUND);

    action(UI_ACT_REQUEUE_ALL, NULL);       /* x2, x3, over the partitions */
    ck_assert_int_eq(seen.st, DQ_OK);
    ck_assert_int_eq(seen.count, 2);
    ck_assert_int_eq(stats().dead, 0);
    ck_assert_int_eq(stats().due, 3);
    bury_due(3);
    action(UI_ACT_PURGE_ALL, NULL);
    ck_assert_int_eq(seen.st, DQ_OK);
    ck_assert_int_eq(seen.count, 3);
    ck_assert_int_eq(stats().dead, 0);

    int64_t before = server_now();
    action(UI_ACT_RUN_NOW, "j3");           /* level 1: stays there */
    ck_assert_int_eq(seen.st, DQ_OK);
    ck_assert_int_eq(seen.count, 1);
    ck_assert_int_le(score("delayed:1", "j3"), server_now());
    ck_assert_int_ge(score("delayed:1", "j3"), before - 1000);
    action(UI_ACT_RUN_NOW, "j4");           /* normal */
    ck_assert_int_le(score("delayed", "j4"), server_now());
    dq_job_info info;
    show("j3", &info);
    ck_assert_int_le(info.job.due_ms, server_now());
    ck_assert_int_eq(info.job.priority, 1);
    dq_job_info_free(&info);

    action(UI_ACT_PAUSE, NULL);
    ck_assert_int_eq(seen.st, DQ_OK);
    int64_t since = 0;
    ck_assert_int_eq(dq_paused(cl, Q, &since), DQ_OK);
    ck_assert_int_gt(since, 0);
    for (unsigned p = 0; p < n; p++) {      /* every partition's meta */
        struct queue_keys k;
        keys_build_part(&k, "dq", Q, p, n);
        ck_assert_int_eq(fixture_redis_int(fx, "HEXISTS %s paused", k.key[4]), 1);
    }
    action(UI_ACT_RESUME, NULL);
    ck_assert_int_eq(seen.st, DQ_OK);
    ck_assert_int_eq(dq_paused(cl, Q, &since), DQ_OK);
    ck_assert_int_eq(since, -1);
    ui_close();
}

START_TEST(actions_one_partition)
{
    check_actions(1);
}
END_TEST

START_TEST(actions_three_partitions)
{
    check_actions(3);
}
END_TEST

/* A call with missing or bad arguments is refused at once, and its
 * callback never runs. */
START_TEST(bad_calls_are_refused)
{
    fill_queue(1);
    seen_reset();
    ck_assert_int_eq(ui_data_page(ui, &qc, UI_LIST_DEAD, -1, 10, NULL, on_page, NULL), -1);
    ck_assert_int_eq(ui_data_page(ui, &qc, UI_LIST_DEAD, UI_OFFSET_MAX + 1, 10, NULL,
                                  on_page, NULL), -1);
    ck_assert_int_eq(ui_data_page(ui, &qc, UI_LIST_DEAD, 0, 0, NULL, on_page, NULL), -1);
    ck_assert_int_eq(ui_data_page(ui, &qc, UI_LIST_DEAD, 0, UI_PAGE_MAX + 1, NULL,
                                  on_page, NULL), -1);
    ck_assert_int_eq(ui_data_action(ui, &qc, UI_ACT_CANCEL, NULL, on_action, NULL), -1);
    ck_assert_int_eq(ui_data_show(ui, &qc, "", on_show, NULL), -1);
    struct timeval tv = { 0, 100000 };
    event_base_loopexit(base, &tv);
    event_base_dispatch(base);
    ck_assert_int_eq(seen.calls, 0);
    ui_close();
}
END_TEST

/* ---- Redis away -------------------------------------------------------- */

/* Redis stops answering (SIGSTOP): the call fails at its deadline with a
 * reason, once.  Freeing the ui_data with a call in flight runs its
 * callback once, with a failure. */
START_TEST(stalled_redis_fails_the_call_once)
{
    fill_queue(3);
    ck_assert_int_eq(kill(*live_pid, SIGSTOP), 0);
    seen_reset();
    ck_assert_int_eq(ui_data_page(ui, &qc, UI_LIST_DELAYED, 0, 10, NULL, on_page, NULL), 0);
    wait_call();
    ck_assert(seen.failed);
    ck_assert_msg(strstr(seen.err, "no answer") != NULL, "%s", seen.err);

    /* in flight when freed */
    kill(*live_pid, SIGCONT);
    wait_up();
    kill(*live_pid, SIGSTOP);
    seen_reset();
    ck_assert_int_eq(ui_data_action(ui, &qc, UI_ACT_PAUSE, NULL, on_action, NULL), 0);
    ck_assert_int_eq(ui_data_page(ui, &qc, UI_LIST_DEAD, 0, 10, NULL, on_page, NULL), 0);
    ck_assert_int_eq(ui_data_show(ui, &qc, "j1", on_show, NULL), 0);
    ui_data_free(ui);
    ui = NULL;
    ck_assert_int_eq(seen.calls, 3);        /* each once, each a failure */
    ck_assert(seen.failed);
    ck_assert_int_ne(seen.st, DQ_OK);
    ck_assert_msg(strstr(seen.err, "closing") != NULL, "%s", seen.err);
    /* The action was sent: it may have run (ui_actions.c says so). */
    ck_assert_int_eq(seen.action_st, DQ_ERR_TIMEOUT);
    kill(*live_pid, SIGCONT);
    event_base_free(base);
}
END_TEST

/* Redis killed: the call in flight fails, later calls are refused at once
 * (never called back) until the connection is back, then work again. */
START_TEST(redis_gone_and_back)
{
    signal(SIGPIPE, SIG_IGN);
    fill_queue(1);
    ck_assert_int_eq(kill(*live_pid, SIGSTOP), 0);
    seen_reset();
    ck_assert_int_eq(ui_data_page(ui, &qc, UI_LIST_DEAD, 0, 10, NULL, on_page, NULL), 0);
    ck_assert_int_eq(kill(*live_pid, SIGKILL), 0);
    wait_call();
    ck_assert(seen.failed);
    for (int i = 0; i < 100 && ui_data_is_up(ui); i++) {
        struct timeval tv = { 0, 20000 };
        event_base_loopexit(base, &tv);
        event_base_dispatch(base);
    }
    ck_assert(!ui_data_is_up(ui));
    seen_reset();
    ck_assert_int_eq(ui_data_page(ui, &qc, UI_LIST_DEAD, 0, 10, NULL, on_page, NULL), -1);
    restart_server();
    wait_up();
    page(UI_LIST_DEAD, 0, 10, NULL);
    ck_assert_uint_eq(seen.n, 0);           /* the new server is empty */
    ui_close();
}
END_TEST

/* ---- the overview's oldest due job (qstats) ------------------------------ */

/* Turn the loop for `ms`. */
static void spin(int ms)
{
    struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
    event_base_loopexit(base, &tv);
    event_base_dispatch(base);
}

/* Enqueue `id` due at `at_ms` (in the past: due already). */
static dq_enqueued enq_at(const char *id, int64_t at_ms)
{
    dq_enqueue_req r = { .queue = Q, .type = "email", .id = id, .at_ms = at_ms };
    dq_enqueued e;
    ck_assert_msg(dq_enqueue(cl, &r, &e) == DQ_OK, "%s", dq_errmsg(cl));
    return e;
}

/* The figures' oldest due time of the queue, once a refresh after now has
 * them (-2 when none came within 5 s). */
static int64_t oldest_due_after(struct qstats *qs, int64_t want)
{
    struct qstats_view v;
    for (int i = 0; i < 50; i++) {
        spin(100);
        qstats_read(qs, &v);
        if (v.fresh && v.oldest_due_ms && v.oldest_due_ms[0] == want)
            return want;
    }
    return v.oldest_due_ms ? v.oldest_due_ms[0] : -2;
}

START_TEST(oldest_due_over_partitions)
{
    fill_queue(3);              /* nothing due: p0, p1 are claimed */
    dc.queues = &qc;
    dc.nqueues = 1;
    struct qstats *qs = qstats_new(base, &dc);
    ck_assert_ptr_nonnull(qs);
    ck_assert_int_eq(oldest_due_after(qs, -1), -1);
    /* ids in two different partitions, the older in the higher one */
    const char *older = "d0", *newer = "d1";
    for (int i = 0; keys_partition_of(older, 3) <= keys_partition_of(newer, 3); i++) {
        static char buf[16];
        ck_assert_int_lt(i, 100);
        snprintf(buf, sizeof buf, "d%d", i + 2);
        older = buf;
    }
    int64_t now = server_now();
    dq_enqueued o = enq_at(older, now - 5000);
    enq_at(newer, now - 2000);
    ck_assert_int_eq(oldest_due_after(qs, o.due_ms), o.due_ms);
    qstats_free(qs);
    ui_close();
}
END_TEST

Suite *client_suite(void)
{
    Suite *s = suite_create("ui_data");
    TCase *tc = tcase(s, "pages", 60);
    tcase_add_test(tc, pages_one_partition);
    tcase_add_test(tc, pages_three_partitions);
    tcase_add_test(tc, page_with_an_unreadable_record);
    tcase_add_test(tc, type_filter_examines_a_bounded_head);
    tcase_add_test(tc, paging_one_partition);
    tcase_add_test(tc, paging_three_partitions);
    tc = tcase(s, "show", 60);
    tcase_add_test(tc, show_one_partition);
    tcase_add_test(tc, show_three_partitions);
    tc = tcase(s, "actions", 60);
    tcase_add_test(tc, actions_one_partition);
    tcase_add_test(tc, actions_three_partitions);
    tcase_add_test(tc, bad_calls_are_refused);
    tc = tcase(s, "oldest_due", 60);
    tcase_add_test(tc, oldest_due_over_partitions);
    tc = tcase(s, "redis_away", 60);
    tcase_add_test(tc, stalled_redis_fails_the_call_once);
    tcase_add_test(tc, redis_gone_and_back);
    return s;
}
