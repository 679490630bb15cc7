/*
 * Several worker processes on one queue: no job is claimed twice, none is
 * lost, and a worker whose lease ran out cannot finish a job another worker
 * holds.  Each child process opens its own client and logs what it did to
 * its own file; the parent checks the logs against Redis.
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fixture.h"

#define Q "stress"
#define CHILD_DEADLINE_MS 40000   /* a child gives up after this long */

static struct redis_fixture fixture;
static struct redis_fixture *const fx = &fixture;
static dq_client *cl;

static void server_up(void)
{
    fixture_redis_start(fx);
}

static void server_down(void)
{
    fixture_redis_stop(fx);
}

static void test_setup(void)
{
    fixture_redis_flush(fx);
    cl = fixture_client(fx);
}

static void test_teardown(void)
{
    dq_close(cl);
    cl = NULL;
}

/* Enqueue `n` jobs with ids "j<i>" (i from 0), job i due after i * step_ms,
 * in one pipeline. */
static void enqueue_jobs(int n, int max_attempts, int step_ms)
{
    dq_enqueue_req *reqs = calloc((size_t)n, sizeof *reqs);
    char (*ids)[16] = calloc((size_t)n, sizeof *ids);
    ck_assert(reqs && ids);
    for (int i = 0; i < n; i++) {
        snprintf(ids[i], sizeof ids[i], "j%d", i);
        reqs[i] = (dq_enqueue_req){ .queue = Q, .type = "t", .id = ids[i],
                                    .payload = ids[i], .payload_len = strlen(ids[i]),
                                    .delay_ms = (int64_t)i * step_ms,
                                    .max_attempts = max_attempts };
    }
    ck_assert_int_eq(dq_enqueue_many(cl, reqs, (size_t)n, NULL, NULL), DQ_OK);
    free(reqs);
    free(ids);
}

/* ---- children ----------------------------------------------------------- */

/* A child's own client; exits 2 when it cannot connect. */
static dq_client *child_client(void)
{
    dq_options opt;
    fixture_options(fx, &opt);
    char err[256];
    dq_client *c = dq_connect(&opt, err, sizeof err, NULL);
    if (!c) {
        fprintf(stderr, "child %d: %s\n", (int)getpid(), err);
        _exit(2);
    }
    return c;
}

static void child_fail(dq_client *c, const char *what)
{
    fprintf(stderr, "child %d: %s: %s\n", (int)getpid(), what, dq_errmsg(c));
    _exit(3);
}

/* Whether the queue holds nothing but dead jobs. */
static int queue_settled(dq_client *c)
{
    dq_stats s;
    if (dq_stats_get(c, Q, &s) != DQ_OK)
        child_fail(c, "stats");
    return s.delayed + s.due + s.processing == 0;
}

/*
 * Claim in batches of 1, 7 and 32 in turn and ack each batch, logging
 * "C id fence" for every job claimed and "A id fence" for every job acked,
 * until the queue is empty.
 */
static void drain_worker(FILE *log)
{
    static const int batches[] = { 1, 7, 32 };
    dq_client *c = child_client();
    int64_t deadline = tu_mono_ms() + CHILD_DEADLINE_MS;
    for (unsigned round = 0; tu_mono_ms() < deadline; round++) {
        dq_claim_result res;
        if (dq_claim(c, Q, batches[round % 3], 60000, &res) != DQ_OK)
            child_fail(c, "claim");
        if (res.n == 0) {
            int64_t next = res.next_due_in_ms;
            dq_claim_result_free(&res);
            if (next == -1)
                break;   /* every job is taken and none is delayed */
            tu_sleep_ms(1);
            continue;
        }
        for (size_t i = 0; i < res.n; i++)
            fprintf(log, "C %s %lld\n", res.jobs[i].id, (long long)res.jobs[i].fence);
        bool acked[32];
        if (dq_ack_many(c, Q, res.jobs, res.n, acked) != DQ_OK)
            child_fail(c, "ack");
        for (size_t i = 0; i < res.n; i++)
            if (acked[i])
                fprintf(log, "A %s %lld\n", res.jobs[i].id, (long long)res.jobs[i].fence);
        dq_claim_result_free(&res);
    }
    dq_close(c);
    fflush(log);
    _exit(0);
}

/*
 * Claim with a 30 ms lease, "work" a random 0-60 ms, then ack: about half
 * the leases run out first.  Logs "C id fence" for every claim, "A id
 * fence" for every ack that succeeded and "S id fence" for every ack
 * refused as stale.
 */
static void slow_worker(FILE *log)
{
    dq_client *c = child_client();
    srand((unsigned)getpid());
    int64_t deadline = tu_mono_ms() + CHILD_DEADLINE_MS;
    while (tu_mono_ms() < deadline) {
        dq_claim_result res;
        if (dq_claim(c, Q, 1 + rand() % 8, 30, &res) != DQ_OK)
            child_fail(c, "claim");
        if (res.n == 0) {
            dq_claim_result_free(&res);
            if (queue_settled(c))
                break;
            tu_sleep_ms(2);
            continue;
        }
        for (size_t i = 0; i < res.n; i++)
            fprintf(log, "C %s %lld\n", res.jobs[i].id, (long long)res.jobs[i].fence);
        tu_sleep_ms(rand() % 61);
        bool acked[8];
        if (dq_ack_many(c, Q, res.jobs, res.n, acked) != DQ_OK)
            child_fail(c, "ack");
        for (size_t i = 0; i < res.n; i++)
            fprintf(log, "%c %s %lld\n", acked[i] ? 'A' : 'S', res.jobs[i].id,
                    (long long)res.jobs[i].fence);
        dq_claim_result_free(&res);
    }
    dq_close(c);
    fflush(log);
    _exit(0);
}

/* Reap expired leases until every job is acked or dead; logs "R n" for
 * each call that moved n jobs. */
static void reaper(FILE *log)
{
    dq_client *c = child_client();
    dq_retry_policy p;
    dq_retry_policy_init(&p);
    p.base_ms = 1;
    p.cap_ms = 5;
    int64_t deadline = tu_mono_ms() + CHILD_DEADLINE_MS;
    while (tu_mono_ms() < deadline && !queue_settled(c)) {
        dq_reap_result rr;
        if (dq_reap(c, Q, 100, &p, &rr) != DQ_OK)
            child_fail(c, "reap");
        if (rr.retried + rr.dead)
            fprintf(log, "R %zu\n", rr.retried + rr.dead);
        tu_sleep_ms(3);
    }
    dq_close(c);
    fflush(log);
    _exit(0);
}

/* ---- the parent's side -------------------------------------------------- */

struct child {
    pid_t pid;
    FILE *log;
};

static void start_child(struct child *ch, void (*body)(FILE *))
{
    ch->log = tmpfile();
    ck_assert_ptr_nonnull(ch->log);
    fflush(NULL);
    ch->pid = fork();
    ck_assert_int_ge(ch->pid, 0);
    if (ch->pid == 0)
        body(ch->log);
}

/* Wait for every child; all must exit 0. */
static void wait_children(struct child *kids, int n)
{
    for (int i = 0; i < n; i++) {
        int status;
        ck_assert_int_eq(waitpid(kids[i].pid, &status, 0), kids[i].pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "child %d ended with status %#x", i, status);
    }
}

/* Per-job tallies from the children's logs, indexed by the job number. */
struct tally {
    int *claimed;
    int *acked;
    long long *last_claim;   /* the highest fence a claim got */
    long long *ack_fence;    /* the fence of the successful ack */
    long stale;
    long reaped;
};

static void tally_free(struct tally *t)
{
    free(t->claimed);
    free(t->acked);
    free(t->last_claim);
    free(t->ack_fence);
}

static void tally_logs(struct child *kids, int nkids, int njobs, struct tally *t)
{
    t->claimed = calloc((size_t)njobs, sizeof *t->claimed);
    t->acked = calloc((size_t)njobs, sizeof *t->acked);
    t->last_claim = calloc((size_t)njobs, sizeof *t->last_claim);
    t->ack_fence = calloc((size_t)njobs, sizeof *t->ack_fence);
    ck_assert(t->claimed && t->acked && t->last_claim && t->ack_fence);
    t->stale = t->reaped = 0;
    for (int k = 0; k < nkids; k++) {
        rewind(kids[k].log);
        char kind;
        long v;
        while (fscanf(kids[k].log, " %c", &kind) == 1) {
            if (kind == 'R') {
                ck_assert_int_eq(fscanf(kids[k].log, "%ld", &v), 1);
                t->reaped += v;
                continue;
            }
            long long fence;
            ck_assert_int_eq(fscanf(kids[k].log, " j%ld %lld", &v, &fence), 2);
            ck_assert_msg(v >= 0 && v < njobs, "unknown job j%ld", v);
            if (kind == 'C') {
                t->claimed[v]++;
                if (fence > t->last_claim[v])
                    t->last_claim[v] = fence;
            } else if (kind == 'A') {
                t->acked[v]++;
                t->ack_fence[v] = fence;
            } else if (kind == 'S')
                t->stale++;
            else
                ck_abort_msg("bad log line kind '%c'", kind);
        }
        fclose(kids[k].log);
    }
}

/* ---- tests -------------------------------------------------------------- */

START_TEST(no_job_is_claimed_twice)
{
    enum { JOBS = 5000, KIDS = 6 };
    enqueue_jobs(JOBS, 0, 0);
    struct child kids[KIDS];
    for (int i = 0; i < KIDS; i++)
        start_child(&kids[i], drain_worker);
    wait_children(kids, KIDS);

    struct tally t;
    tally_logs(kids, KIDS, JOBS, &t);
    for (int i = 0; i < JOBS; i++) {
        ck_assert_msg(t.claimed[i] == 1, "j%d claimed %d times", i, t.claimed[i]);
        ck_assert_msg(t.acked[i] == 1, "j%d acked %d times", i, t.acked[i]);
    }
    tally_free(&t);

    dq_stats s;
    ck_assert_int_eq(dq_stats_get(cl, Q, &s), DQ_OK);
    ck_assert_int_eq(s.delayed + s.due + s.processing + s.expired + s.dead, 0);
    ck_assert_int_eq(fixture_record_count(fx, Q), 0);
}
END_TEST

START_TEST(expired_leases_cannot_be_acked_twice)
{
    enum { JOBS = 1000, WORKERS = 4 };
    /* Jobs fall due over 3 s rather than all at once, so that a job whose
     * lease ran out is not queued behind hundreds of others: it is soon
     * claimed again while its first worker still holds the old fence. */
    enqueue_jobs(JOBS, 3, 3);
    struct child kids[WORKERS + 1];
    for (int i = 0; i < WORKERS; i++)
        start_child(&kids[i], slow_worker);
    start_child(&kids[WORKERS], reaper);
    wait_children(kids, WORKERS + 1);

    struct tally t;
    tally_logs(kids, WORKERS + 1, JOBS, &t);

    /* The dead set, read back whole. */
    char *dead = calloc(JOBS, 1);
    ck_assert_ptr_nonnull(dead);
    dq_dead_page page;
    ck_assert_int_eq(dq_dead_list(cl, Q, 0, JOBS, &page), DQ_OK);
    ck_assert_int_eq(page.total, (int64_t)page.n);
    for (size_t i = 0; i < page.n; i++) {
        int v = atoi(page.entries[i].id + 1);
        ck_assert(v >= 0 && v < JOBS && !dead[v]);
        ck_assert_str_eq(page.entries[i].last_error, "lease expired");
        ck_assert_int_eq(page.entries[i].attempts, 3);
        dead[v] = 1;
    }

    int acked = 0, reclaimed = 0;
    for (int i = 0; i < JOBS; i++) {
        ck_assert_msg(t.acked[i] <= 1, "j%d acked %d times", i, t.acked[i]);
        ck_assert_msg(t.acked[i] + dead[i] == 1, "j%d: acked %d, dead %d", i,
                      t.acked[i], dead[i]);
        /* Only the job's last claim could finish it: an earlier holder,
         * whose lease ran out, was refused. */
        if (t.acked[i])
            ck_assert_msg(t.ack_fence[i] == t.last_claim[i],
                          "j%d acked under fence %lld, but claimed last under %lld", i,
                          t.ack_fence[i], t.last_claim[i]);
        acked += t.acked[i];
        reclaimed += t.acked[i] && t.claimed[i] > 1;
    }
    dq_stats s;
    ck_assert_int_eq(dq_stats_get(cl, Q, &s), DQ_OK);
    ck_assert_int_eq(s.delayed + s.due + s.processing, 0);
    ck_assert_int_eq(acked + s.dead, JOBS);
    ck_assert_int_eq(fixture_record_count(fx, Q), s.dead);
    /* The race was real: leases ran out, and late acks were refused. */
    ck_assert_int_gt(t.reaped, 0);
    ck_assert_int_gt(t.stale, 0);
    ck_assert_int_gt(reclaimed, 0);   /* finished by a second worker */
    dq_dead_page_free(&page);
    free(dead);
    tally_free(&t);
}
END_TEST

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    Suite *s = suite_create("stress");
    TCase *tc = fixture_tcase(s, "workers", 60, server_up, server_down, test_setup,
                              test_teardown);
    tcase_add_test(tc, no_job_is_claimed_twice);
    tcase_add_test(tc, expired_leases_cannot_be_acked_twice);
    return fixture_run_suite(s);
}
