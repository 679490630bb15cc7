/*
 * One queue over a Redis Cluster, end to end: a local cluster of three
 * masters with a replica each (tests/cluster_fixture.c), the real delayqd
 * with `cluster = true` and a queue of 12 partitions, the real test
 * handler recording every run, and libdelayq producing with
 * dq_options.cluster.
 *
 * - 20,000 jobs: the queue's partitions are on all three masters, and
 *   every job runs exactly once with four workers.
 * - Slots that hold partitions move to other masters (MIGRATE, as
 *   redis-cli --cluster reshard does) while jobs are enqueued and run: none
 *   lost, none run twice, every job done within a bound.
 * - kill -9 of a master, its replica promoted: jobs lost and run twice are
 *   counted and printed ("cluster failover: lost=N dup=M"); with
 *   durability "replicated" none whose enqueue returned OK is lost and
 *   none enqueued by one call runs twice (one sent again after a failed
 *   enqueue may run twice: the failed call may have written it).
 * - The same, durability "replicated", over TLS only with client
 *   certificates required and an ACL user (the daemon's password in a
 *   password_file): 1,500 jobs drain while a master is killed, with the
 *   same promise; a client without a certificate is refused.
 * - Priority (per partition), pause and resume, and a recurring schedule
 *   on the partitioned queue.
 * - Three masters without replicas (cluster-require-full-coverage no):
 *   one killed with kill -9 for 4 s during a run of 3,000 jobs due over
 *   9 s; the other partitions' jobs run on time meanwhile (their lateness
 *   p99 printed, before and during), /healthz names the partitions out of
 *   reach and /metrics has them down; once it is started again (from its
 *   append-only file) its jobs run; none lost.  And with one worker whose
 *   batch came from that master: the worker gives up the batch's acks once
 *   its leases are over, and runs the other partitions' jobs meanwhile.
 *   And a worker killed mid-job on a live master meanwhile: its job is
 *   settled and runs again at once, not at its lease's end.
 *
 * DELAYQ_CLUSTER_JOBS changes the 20,000; DELAYQ_CLUSTER_LOG=PATH keeps
 * the daemon's log (and PATH.record, the runs) of the failover runs.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster_fixture.h"
#include "daemon_harness.h"
#include "http_client.h"
#include "lib/keys.h"
#include "testutil.h"
#ifdef HAVE_LIBPQ
#include "outbox/outbox_sql.h"
#include "pg_fixture.h"
#endif

#define NPARTS 12
#define NMASTERS 3
#define CHUNK 1000              /* jobs per dq_enqueue_many */

static struct harness H;        /* the directory, the record, the daemon */
static struct cluster_fx C;

static void setup(void)
{
    h_setup(&H);
    char err[400];
    ck_assert_msg(cluster_fx_start(&C, NMASTERS, 1, NULL, err, sizeof err) == 0, "%s", err);
}

static void teardown(void)
{
    if (H.pid > 0)
        h_stop(&H, 10000);
    cluster_fx_stop(&C);
    h_teardown(&H);
}

/* ---- the daemon on the cluster ------------------------------------------------ */

struct cl_conf {
    int workers;
    int batch;
    const char *lease;
    const char *durability;     /* "local" or "replicated" */
    const char *redis_extra;    /* more of the redis group (tls, user), or
                                   NULL */
    int partitions;             /* 0: NPARTS */
    const char *extra;          /* more top-level settings, or NULL */
};

/* delayqd.conf: the cluster's nodes as seeds, the queue in NPARTS
 * partitions (or cc->partitions), the test handler recording (and
 * holding a lock per job, to tell overlapping runs). */
static void write_conf(const struct cl_conf *cc)
{
    char nodes[CLUSTER_FX_MAX_NODES * 40] = "", locks[300];
    size_t n = 0;
    for (int i = 0; i < C.nnodes; i++)
        n += (size_t)snprintf(nodes + n, sizeof nodes - n, "%s\"%s\"", i ? ", " : "",
                              C.seeds[i]);
    snprintf(locks, sizeof locks, "%s/locks", H.fx.dir);
    if (mkdir(locks, 0755) < 0)
        ck_assert_msg(access(locks, W_OK) == 0, "%s", locks);
    char text[8192];
    snprintf(text, sizeof text,
             "redis = { cluster = true; nodes = [ %s ]; connect_timeout = \"2s\";\n"
             "          command_timeout = \"2s\"; durability = \"%s\";\n"
             "          %s };\n"
             "handler_dir = \"%s\";\n"
             "queues = ( { name = \"" H_QUEUE "\"; workers = %d; lease = \"%s\"; batch = %d;\n"
             "             max_attempts = 10; partitions = %d;\n"
             "             backoff = { base = \"100ms\"; cap = \"1s\"; jitter = 0.0; }; } );\n"
             "handlers = ( { type = \"*\"; file = \"testhandler.so\"; timeout = \"1s\";\n"
             "               settings = { record = \"%s\"; lock_dir = \"%s\"; }; } );\n"
             "reaper = { interval = \"200ms\"; batch = 100; };\n"
             "shutdown_timeout = \"10s\";\n"
             "log = { level = \"info\"; target = \"stderr\"; };\n%s",
             nodes, cc->durability ? cc->durability : "local",
             cc->redis_extra ? cc->redis_extra : "", H.handler_dir, cc->workers,
             cc->lease ? cc->lease : "10s", cc->batch ? cc->batch : 16,
             cc->partitions ? cc->partitions : NPARTS, H.record,
             locks, cc->extra ? cc->extra : "");
    h_write_file(H.conf, text);
}

/* The daemon's steady state over the whole cluster (tu_delayqd_ready's
 * counts, summed over the nodes: its connections are spread over them);
 * -1 when it exited. */
static int daemon_ready(void *arg)
{
    int workers = *(int *)arg, subs = 0, calls = 0;
    if (waitpid(H.pid, NULL, WNOHANG) == H.pid) {
        H.pid = 0;
        return -1;
    }
    for (int i = 0; i < C.nnodes; i++) {
        char err[300];
        redisContext *rc = C.pid[i] > 0 ? cluster_fx_connect(&C, i, 2000, err, sizeof err) : NULL;
        if (!rc)
            continue;
        subs += tu_redis_clients_with(rc, "cmd=subscribe");
        calls += tu_redis_clients_with(rc, "cmd=evalsha") + tu_redis_clients_with(rc, "cmd=wait");
        redisFree(rc);
    }
    return subs >= workers && calls >= workers + 1;
}

static void start_daemon(const struct cl_conf *cc)
{
    write_conf(cc);
    char *const argv[] = { (char *)fixture_build_path("delayqd"), "-f", "-c", H.conf, NULL };
    char err[300];
    H.pid = tu_spawn(argv, H.log, 0, err, sizeof err);
    ck_assert_msg(H.pid > 0, "%s", err);
    int workers = cc->workers;
    int ok = h_wait(20000, daemon_ready, &workers);
    ck_assert_msg(ok == 1, "delayqd did not get ready on the cluster (%s); its log:\n%s",
                  ok < 0 ? "it exited" : "timeout", h_log_tail(&H));
}

/* A library client routed over the cluster, every node a seed, with
 * `base`'s TLS and credentials (NULL: none). */
static dq_client *cluster_client_with(const dq_options *base, dq_durability durability)
{
    dq_options opt;
    if (base)
        opt = *base;
    else
        dq_options_init(&opt);
    opt.cluster = 1;
    opt.nodes = C.seeds;
    opt.nnodes = (size_t)C.nnodes;
    opt.connect_timeout_ms = 10000;
    opt.durability = durability;
    char err[512];
    dq_client *c = dq_connect(&opt, err, sizeof err, NULL);
    ck_assert_msg(c != NULL, "connect to the cluster: %s", err);
    return c;
}

static dq_client *cluster_client(dq_durability durability)
{
    return cluster_client_with(NULL, durability);
}

/* ---- jobs and their runs ----------------------------------------------------- */

struct jobs {
    int n;
    char (*ids)[DQ_ID_MAX + 1];
    unsigned char *accepted;    /* its enqueue returned OK (or EXISTS) */
    unsigned char *sent;        /* how many times it was sent (at most 255) */
};

static void jobs_init(struct jobs *j, int n, const char *prefix)
{
    j->n = n;
    j->ids = calloc((size_t)n, sizeof *j->ids);
    j->accepted = calloc((size_t)n, 1);
    j->sent = calloc((size_t)n, 1);
    ck_assert(j->ids && j->accepted && j->sent);
    for (int i = 0; i < n; i++)
        snprintf(j->ids[i], sizeof j->ids[i], "%s%d", prefix, i);
}

static void jobs_free(struct jobs *j)
{
    free(j->ids);
    free(j->accepted);
    free(j->sent);
}

/*
 * Enqueue jobs [first, first+n) due after `delay_ms`, sending again those
 * not taken (a failover, a migrating slot, a write not replicated in
 * time) for up to `patience_ms` (once when 0); mark those accepted.
 * `generated`: the library makes the ids (j->ids receive them), and a
 * job is sent once.  Returns how many are not accepted.
 */
static int enqueue_range(dq_client *c, struct jobs *j, int first, int n, int64_t delay_ms,
                         int generated, int patience_ms)
{
    dq_enqueue_req *reqs = calloc((size_t)n, sizeof *reqs);
    dq_enqueued *out = calloc((size_t)n, sizeof *out);
    dq_status *sts = calloc((size_t)n, sizeof *sts);
    int *which = calloc((size_t)n, sizeof *which);
    ck_assert(reqs && out && sts && which);
    int64_t deadline = tu_mono_ms() + patience_ms;
    for (int tries = 0;; tries++) {
        size_t k = 0;
        for (int i = first; i < first + n; i++)
            if (!j->accepted[i]) {
                j->sent[i] += j->sent[i] < 255;
                which[k] = i;
                reqs[k++] = (dq_enqueue_req){ .queue = H_QUEUE, .type = "t",
                                              .id = generated ? NULL : j->ids[i],
                                              .payload = "ok", .payload_len = 2,
                                              .delay_ms = delay_ms };
            }
        if (k == 0 || (tries > 0 && tu_mono_ms() > deadline))
            break;
        (void)dq_enqueue_many(c, reqs, k, out, sts);
        int failed = 0;
        for (size_t i = 0; i < k; i++) {
            int ok = sts[i] == DQ_OK || sts[i] == DQ_ERR_EXISTS;
            failed += !ok;
            /* A generated id whose enqueue failed may still have been
             * written: never sent again (that would be a second job);
             * 2 marks it tried, not accepted. */
            if (ok || generated)
                j->accepted[which[i]] = ok ? 1 : 2;
            if (ok && generated)
                snprintf(j->ids[which[i]], sizeof j->ids[which[i]], "%s", out[i].id);
        }
        if (failed)
            tu_sleep_ms(50);
    }
    int left = 0;
    for (int i = first; i < first + n; i++)
        left += j->accepted[i] != 1;
    free(reqs);
    free(out);
    free(sts);
    free(which);
    return left;
}

struct tally {
    int lost, lost_accepted, dup, overlaps, accepted;
    int dup_sent_once;          /* run twice though enqueued by one call */
    char some_dups[200];        /* the first ids run twice, for the report */
};

static int run_cmp(const void *a, const void *b)
{
    return strcmp(((const struct h_run *)a)->id, ((const struct h_run *)b)->id);
}

/* How many start lines `id` has in `runs` (sorted by id). */
static int starts_of(const struct h_run *runs, size_t n, const char *id)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(runs[mid].id, id) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    int starts = 0;
    for (size_t i = lo; i < n && strcmp(runs[i].id, id) == 0; i++)
        starts += runs[i].end == 0;
    return starts;
}

/* Count, from the record, the jobs never started and those started more
 * than once (the runs sorted by id: 20,000 jobs, twice as many lines). */
static struct tally tally_runs(const struct jobs *j)
{
    struct tally t = { 0 };
    struct h_run *runs;
    size_t nruns = h_records(&H, &runs);
    for (size_t i = 0; i < nruns; i++)
        t.overlaps += runs[i].end == H_OVERLAP;
    qsort(runs, nruns, sizeof *runs, run_cmp);
    for (int i = 0; i < j->n; i++) {
        int starts = starts_of(runs, nruns, j->ids[i]);
        int ok = j->accepted[i] == 1;
        t.accepted += ok;
        t.lost += starts == 0;
        t.lost_accepted += starts == 0 && ok;
        t.dup += starts > 1;
        t.dup_sent_once += starts > 1 && j->sent[i] == 1;
        size_t len = strlen(t.some_dups);
        if (starts > 1 && len + strlen(j->ids[i]) + 2 < sizeof t.some_dups)
            snprintf(t.some_dups + len, sizeof t.some_dups - len, " %s", j->ids[i]);
    }
    free(runs);
    return t;
}

static int queue_idle(void *arg)
{
    dq_stats st;
    return dq_stats_get(arg, H_QUEUE, &st) == DQ_OK && st.delayed == 0 && st.due == 0
           && st.processing == 0;
}

/* Wait until the queue is empty (`timeout_ms`), then for the record's
 * last lines. */
static void wait_drained(dq_client *c, int timeout_ms, const char *what)
{
    ck_assert_msg(h_wait(timeout_ms, queue_idle, c) == 1, "%s: the queue did not drain in %d s; "
                  "log:\n%s", what, timeout_ms / 1000, h_log_tail(&H));
    tu_sleep_ms(500);
}

/* The slot of partition `p`'s keys ({orders:p}). */
static int partition_slot(int p)
{
    long long s = cluster_fx_int(&C, 0, "CLUSTER KEYSLOT {" H_QUEUE ":%d}", p);
    ck_assert_int_ge(s, 0);
    return (int)s;
}

/* ---- the tests --------------------------------------------------------------- */

START_TEST(a_partitioned_queue_drains_once_over_three_masters)
{
    const char *env = getenv("DELAYQ_CLUSTER_JOBS");
    int n = env && atoi(env) > 0 ? atoi(env) : 20000;
    struct cl_conf cc = { .workers = 4, .batch = 16 };
    start_daemon(&cc);
    dq_client *c = cluster_client(DQ_DURABILITY_LOCAL);
    struct jobs j;
    jobs_init(&j, n, "j");
    /* A tenth with generated ids (which carry their partition). */
    int named = n - n / 10;
    int64_t t0 = tu_mono_ms();
    for (int first = 0; first < n; first += CHUNK) {
        int k = n - first < CHUNK ? n - first : CHUNK;
        ck_assert_msg(enqueue_range(c, &j, first, k, 3000, first >= named, 0) == 0,
                      "enqueue: %s", dq_errmsg(c));
    }
    int64_t enqueued_ms = tu_mono_ms() - t0;

    /* Every partition's keys are on the master of its slot; together
     * they are on all three masters. */
    int on_master[NMASTERS] = { 0 };
    for (int p = 0; p < NPARTS; p++) {
        int m = cluster_fx_master_of_slot(&C, partition_slot(p));
        ck_assert_msg(m >= 0 && m < NMASTERS, "partition %d: master %d", p, m);
        char pattern[64];
        snprintf(pattern, sizeof pattern, "dq:{" H_QUEUE ":%d}:*", p);
        ck_assert_msg(cluster_fx_keys_on(&C, m, pattern) >= 1, "no keys of partition %d on "
                      "master %d", p, m);
        on_master[m]++;
    }
    for (int m = 0; m < NMASTERS; m++)
        ck_assert_msg(on_master[m] > 0, "no partition on master %d", m);
    /* The generated ids name their partition. */
    for (int i = named; i < n; i++)
        ck_assert_msg(strspn(j.ids[i], "0123456789") == strlen(j.ids[i]), "%s", j.ids[i]);

    wait_drained(c, 120000, "drain");
    int64_t drained_ms = tu_mono_ms() - t0;
    struct tally t = tally_runs(&j);
    printf("cluster drain: %d jobs over %d masters, %d partitions: enqueued in %lld ms, "
           "drained %lld ms after the first enqueue (due 3 s after it); lost=%d dup=%d\n",
           n, NMASTERS, NPARTS, (long long)enqueued_ms, (long long)drained_ms, t.lost, t.dup);
    ck_assert_int_eq(t.accepted, n);
    ck_assert_int_eq(t.lost, 0);
    ck_assert_int_eq(t.dup, 0);
    ck_assert_int_eq(t.overlaps, 0);
    dq_stats st;
    ck_assert_int_eq(dq_stats_get(c, H_QUEUE, &st), DQ_OK);
    ck_assert_int_eq(st.dead, 0);
    jobs_free(&j);
    dq_close(c);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

#define RESHARD_JOBS 12000
#define RESHARD_BATCH 500

START_TEST(resharding_during_a_run_loses_and_repeats_nothing)
{
    struct cl_conf cc = { .workers = 4, .batch = 16 };
    start_daemon(&cc);
    dq_client *c = cluster_client(DQ_DURABILITY_LOCAL);
    struct jobs j;
    jobs_init(&j, RESHARD_JOBS, "r");

    /* Every partition's slot (and the queue's own {orders} slot) moves to
     * the next master, one after another, while jobs are enqueued and
     * run. */
    int slots[NPARTS + 1], to[NPARTS + 1];
    for (int p = 0; p <= NPARTS; p++) {
        long long s = p < NPARTS ? partition_slot(p)
                                 : cluster_fx_int(&C, 0, "CLUSTER KEYSLOT {" H_QUEUE "}");
        slots[p] = (int)s;
        to[p] = (cluster_fx_master_of_slot(&C, slots[p]) + 1) % NMASTERS;
    }
    /* A first batch before: the slots move with jobs in them. */
    ck_assert_int_eq(enqueue_range(c, &j, 0, RESHARD_BATCH, 300, 0, 30000), 0);
    char err[400];
    int64_t t0 = tu_mono_ms();
    ck_assert_msg(cluster_fx_reshard_start_to(&C, slots, to, NPARTS + 1, 150, err,
                                              sizeof err) == 0, "%s", err);
    for (int first = RESHARD_BATCH; first < RESHARD_JOBS; first += RESHARD_BATCH) {
        ck_assert_msg(enqueue_range(c, &j, first, RESHARD_BATCH, 300, 0, 30000) == 0,
                      "batch at %d not taken in 30 s: %s", first, dq_errmsg(c));
        tu_sleep_ms(100);
    }
    ck_assert_msg(cluster_fx_reshard_wait(&C, err, sizeof err) == 0, "%s", err);
    int64_t resharded_ms = tu_mono_ms() - t0;
    for (int p = 0; p <= NPARTS; p++)
        ck_assert_int_eq(cluster_fx_master_of_slot(&C, slots[p]), to[p]);
    ck_assert_int_eq(cluster_fx_wait_ok(&C, 10000), 0);

    /* No worker stuck: everything done within a bound, and jobs enqueued
     * after the move run at once. */
    wait_drained(c, 60000, "reshard");
    struct jobs after;
    jobs_init(&after, 400, "after");
    int64_t t1 = tu_mono_ms();
    ck_assert_int_eq(enqueue_range(c, &after, 0, after.n, 0, 0, 10000), 0);
    wait_drained(c, 10000, "after the reshard");
    int64_t after_ms = tu_mono_ms() - t1;
    struct tally t = tally_runs(&j), ta = tally_runs(&after);
    printf("cluster reshard: %d slots moved in %lld ms while %d jobs ran: lost=%d dup=%d; "
           "%d jobs after it done in %lld ms\n",
           NPARTS + 1, (long long)resharded_ms, RESHARD_JOBS, t.lost, t.dup, after.n,
           (long long)after_ms);
    ck_assert_int_eq(t.accepted, RESHARD_JOBS);
    ck_assert_int_eq(t.lost, 0);
    ck_assert_int_eq(t.dup, 0);
    ck_assert_int_eq(t.overlaps, 0);
    ck_assert_int_eq(ta.lost, 0);
    ck_assert_int_eq(ta.dup, 0);
    ck_assert_msg(tu_process_running(H.pid), "delayqd exited; log:\n%s", h_log_tail(&H));
    pid_t kids[16];
    ck_assert_int_ge(tu_children(H.pid, kids, NULL, 16), cc.workers + 1);   /* + reaper */
    jobs_free(&j);
    jobs_free(&after);
    dq_close(c);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

#define FO_JOBS 5000
#define FO_BATCH 50
#define FO_PACE_MS 40

/* Copy the daemon's log and the record to PATH and PATH.record
 * (DELAYQ_CLUSTER_LOG), to read after the test's directory is gone;
 * NULL: nothing. */
static void keep_log(const char *path)
{
    if (!path)
        return;
    const char *from[2] = { H.log, H.record };
    for (int i = 0; i < 2; i++) {
        char to[PATH_MAX];
        snprintf(to, sizeof to, "%s%s", path, i ? ".record" : "");
        (void)tu_copy_file(from[i], to);   /* a missing record is no copy */
    }
}

/* Once the killed master's replica took over (*promoted is -1 until
 * then), start the killed node again: it becomes the new master's
 * replica. */
static void follow_failover(int victim, int *promoted, int64_t *t_promoted)
{
    if (C.pid[victim] > 0 || *promoted >= 0)
        return;
    *promoted = cluster_fx_wait_promoted(&C, victim, 0);
    if (*promoted < 0)
        return;
    *t_promoted = tu_mono_ms();
    char err[400];
    ck_assert_msg(cluster_fx_restart(&C, victim, err, sizeof err) == 0, "%s", err);
}

/*
 * Jobs enqueued in paced batches while a master is killed (kill -9) after
 * two fifths of them; once its replica is promoted the killed node comes
 * back as that replica's replica ("replicated" writes need one).  Counts
 * printed, asserted as far as `durability` promises.
 */
static void failover_run(const char *durability)
{
    int replicated = strcmp(durability, "replicated") == 0;
    if (replicated)
        for (int i = 0; i < C.nnodes; i++)
            ck_assert_int_eq(cluster_fx_int(&C, i, "CONFIG SET min-replicas-to-write 1"), 0);
    struct cl_conf cc = { .workers = 4, .batch = 16, .lease = "10s", .durability = durability };
    start_daemon(&cc);
    dq_client *c = cluster_client(replicated ? DQ_DURABILITY_REPLICATED : DQ_DURABILITY_LOCAL);
    struct jobs j;
    jobs_init(&j, FO_JOBS, "f");
    int victim = cluster_fx_master_of_slot(&C, partition_slot(0));
    ck_assert_int_ge(victim, 0);
    int nbatches = FO_JOBS / FO_BATCH, kill_at = nbatches * 2 / 5, promoted = -1;
    int64_t t_kill = 0, t_promoted = 0;
    for (int b = 0; b < nbatches; b++) {
        if (b == kill_at) {
            t_kill = tu_mono_ms();
            cluster_fx_kill(&C, victim);
        }
        /* Sent again for up to 30 s, following the failover in between;
         * jobs still not taken are counted below, not failed here. */
        int64_t give_up = tu_mono_ms() + 30000;
        while (enqueue_range(c, &j, b * FO_BATCH, FO_BATCH, 1000, 0, 500) > 0
               && tu_mono_ms() < give_up)
            follow_failover(victim, &promoted, &t_promoted);
        follow_failover(victim, &promoted, &t_promoted);
        tu_sleep_ms(FO_PACE_MS);
    }
    for (int64_t until = tu_mono_ms() + 20000; promoted < 0 && tu_mono_ms() < until;
         tu_sleep_ms(50))
        follow_failover(victim, &promoted, &t_promoted);
    ck_assert_msg(promoted >= 0, "no replica took over from node %d", victim);
    wait_drained(c, 60000, "failover");
    struct tally t = tally_runs(&j);
    dq_stats st;
    ck_assert_int_eq(dq_stats_get(c, H_QUEUE, &st), DQ_OK);
    printf("cluster failover: lost=%d dup=%d (durability %s; %d jobs, %d accepted, %d of "
           "them lost; %d of the dups enqueued by one call, the others sent again after an "
           "enqueue that failed; node %d killed, node %d promoted %lld ms later; dead %lld)\n",
           t.lost, t.dup, durability, FO_JOBS, t.accepted, t.lost_accepted, t.dup_sent_once,
           victim, promoted, (long long)(t_promoted - t_kill), (long long)st.dead);
    keep_log(getenv("DELAYQ_CLUSTER_LOG"));
    ck_assert_msg(t.overlaps == 0, "%d runs overlapped a live run of the same job", t.overlaps);
    ck_assert_msg(tu_process_running(H.pid), "delayqd exited; log:\n%s", h_log_tail(&H));
    ck_assert_int_eq(st.dead, 0);
    if (replicated) {
        ck_assert_msg(t.lost_accepted == 0, "%d jobs whose enqueue returned OK never ran",
                      t.lost_accepted);
        /* A job sent again after its enqueue failed (not confirmed by a
         * replica in time, yet written) may have run and gone before the
         * second call made it anew: that second job is the caller's, so
         * it is counted, not failed. */
        ck_assert_msg(t.dup_sent_once == 0, "%d jobs enqueued once ran twice (run twice in "
                      "all:%s)", t.dup_sent_once, t.some_dups);
    }
    jobs_free(&j);
    dq_close(c);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}

START_TEST(a_master_failover_is_counted)
{
    failover_run("local");
}
END_TEST

START_TEST(a_replicated_failover_loses_and_repeats_nothing)
{
    failover_run("replicated");
}
END_TEST

/* ---- a master down, no replica to take over ------------------------------ */

#define ISO_JOBS 3000
#define ISO_LEAD_MS 2500        /* the first job is due this long after the start */
#define ISO_SPAN_MS 9000        /* ... the others over this long after it */
#define ISO_KILL_MS 2500        /* the master is killed this long after the first due */
#define ISO_DOWN_MS 4000        /* ... and started again this long after */

/* Three masters without replicas, which go on serving their slots while
 * one is down (cluster-require-full-coverage no). */
static void setup_no_replicas(void)
{
    h_setup(&H);
    char err[400];
    ck_assert_msg(cluster_fx_start(&C, NMASTERS, 0, NULL, err, sizeof err) == 0, "%s", err);
    for (int i = 0; i < C.nnodes; i++)
        ck_assert_int_eq(cluster_fx_int(&C, i, "CONFIG SET cluster-require-full-coverage no"),
                         0);
}

/* Jobs j[0..n) due at due[i] (Unix ms), by chunks; all must be taken. */
static void enqueue_at(dq_client *c, struct jobs *j, const int64_t *due)
{
    dq_enqueue_req reqs[CHUNK];
    dq_enqueued out[CHUNK];
    dq_status sts[CHUNK];
    for (int first = 0; first < j->n; first += CHUNK) {
        int k = j->n - first < CHUNK ? j->n - first : CHUNK;
        for (int i = 0; i < k; i++)
            reqs[i] = (dq_enqueue_req){ .queue = H_QUEUE, .type = "t", .id = j->ids[first + i],
                                        .payload = "ok", .payload_len = 2,
                                        .at_ms = due[first + i] };
        ck_assert_int_eq(dq_enqueue_many(c, reqs, (size_t)k, out, sts), DQ_OK);
        for (int i = 0; i < k; i++) {
            ck_assert_msg(sts[i] == DQ_OK, "%s: %s", j->ids[first + i], dq_status_str(sts[i]));
            j->accepted[first + i] = 1;
            j->sent[first + i] = 1;
        }
    }
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The 99th percentile of v[0..n) (sorted in place); -1 when empty. */
static int64_t p99_of(int64_t *v, size_t n)
{
    if (n == 0)
        return -1;
    qsort(v, n, sizeof *v, cmp_i64);
    return v[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1];
}

/* Lateness of the jobs on live masters: those due before the kill and
 * those due while the master was down. */
struct iso_lateness {
    int64_t p99_before, p99_during;
    size_t before, during;
    int dup_live;               /* live partitions' jobs started twice */
};

static struct iso_lateness lateness_of_live(const struct jobs *j, const int64_t *due,
                                            const bool *on_victim, int64_t t_kill,
                                            int64_t t_back)
{
    struct h_run *runs;
    size_t nruns = h_records(&H, &runs);
    qsort(runs, nruns, sizeof *runs, run_cmp);
    int64_t *before = calloc((size_t)j->n, sizeof *before);
    int64_t *during = calloc((size_t)j->n, sizeof *during);
    ck_assert(before && during);
    struct iso_lateness l = { 0 };
    for (int i = 0; i < j->n; i++) {
        if (on_victim[keys_partition_of(j->ids[i], NPARTS)])
            continue;
        struct h_run first;
        int starts = h_count(runs, nruns, j->ids[i], 0, &first);
        l.dup_live += starts > 1;
        if (starts == 0)
            continue;
        if (due[i] < t_kill)
            before[l.before++] = first.ms - due[i];
        else if (due[i] < t_back)
            during[l.during++] = first.ms - due[i];
    }
    l.p99_before = p99_of(before, l.before);
    l.p99_during = p99_of(during, l.during);
    free(before);
    free(during);
    free(runs);
    return l;
}

/* delayq_partition_up of partition p in /metrics at `port`, or -1. */
static int partition_up(int port, int p)
{
    static char body[256 * 1024];
    if (fixture_http_get(port, "/metrics", body, sizeof body) != 200)
        return -1;
    char series[120];
    snprintf(series, sizeof series, "delayq_partition_up{queue=\"" H_QUEUE "\",partition=\"%d\"} ",
             p);
    const char *at = strstr(body, series);
    return at ? atoi(at + strlen(series)) : -1;
}

/* What /healthz and /metrics said while a master was down. */
struct outage_seen {
    bool healthz_named;         /* 503 naming exactly the partitions on it */
    bool metrics_right;         /* delayq_partition_up 0 for those, 1 for the others */
    char healthz[1024];         /* the last /healthz body */
};

/* Poll /healthz and /metrics until both say what they should about the
 * partitions on the master down, or `until_ms` (Unix ms). */
static struct outage_seen see_outage(int port, const bool *on_victim, int64_t until_ms)
{
    struct outage_seen s = { 0 };
    while (tu_now_ms() < until_ms - 200 && !(s.healthz_named && s.metrics_right)) {
        tu_sleep_ms(100);
        if (!s.healthz_named
            && fixture_http_get(port, "/healthz", s.healthz, sizeof s.healthz) == 503
            && strstr(s.healthz, "out of reach")) {
            bool all = true;
            for (int p = 0; p < NPARTS; p++) {
                char name[40];
                snprintf(name, sizeof name, " " H_QUEUE "/%d", p);
                const char *at = strstr(s.healthz, name);
                bool named = at && (at[strlen(name)] == ' ' || at[strlen(name)] == '\n');
                all = all && named == on_victim[p];
            }
            s.healthz_named = all;
        }
        if (!s.metrics_right) {
            bool all = true;
            for (int p = 0; p < NPARTS && all; p++)
                all = partition_up(port, p) == (on_victim[p] ? 0 : 1);
            s.metrics_right = all;
        }
    }
    return s;
}

/*
 * A master killed (kill -9) with no replica to take over, during a run of
 * jobs due over 9 s: the jobs of the partitions on the other masters keep
 * running on time while it is down; once it is started again (from its
 * append-only file) its partitions' jobs run; none is lost, and none of
 * the other partitions' runs twice.
 */
START_TEST(a_master_down_stalls_only_its_own_partitions)
{
    int victim = cluster_fx_master_of_slot(&C, partition_slot(0));
    ck_assert_int_ge(victim, 0);
    bool on_victim[NPARTS];
    int nvictim = 0;
    for (int p = 0; p < NPARTS; p++)
        nvictim += on_victim[p] = cluster_fx_master_of_slot(&C, partition_slot(p)) == victim;
    char err[400];
    ck_assert_msg(cluster_fx_persist(&C, victim, err, sizeof err) == 0, "%s", err);
    int port = fixture_free_port();
    char admin[100];
    snprintf(admin, sizeof admin, "metrics = { listen = \"127.0.0.1:%d\"; };\n", port);
    struct cl_conf cc = { .workers = 4, .batch = 16, .extra = admin };
    start_daemon(&cc);
    dq_client *c = cluster_client(DQ_DURABILITY_LOCAL);
    struct jobs j;
    jobs_init(&j, ISO_JOBS, "iso");
    int64_t *due = calloc(ISO_JOBS, sizeof *due);
    ck_assert(due != NULL);
    int64_t first_due = tu_now_ms() + ISO_LEAD_MS;
    for (int i = 0; i < ISO_JOBS; i++)
        due[i] = first_due + (int64_t)i * ISO_SPAN_MS / ISO_JOBS;
    enqueue_at(c, &j, due);

    tu_sleep_ms(first_due + ISO_KILL_MS - tu_now_ms());
    int64_t t_kill = tu_now_ms();
    cluster_fx_kill(&C, victim);
    struct outage_seen seen = see_outage(port, on_victim, t_kill + ISO_DOWN_MS);
    tu_sleep_ms(t_kill + ISO_DOWN_MS - tu_now_ms());
    int64_t t_back = tu_now_ms();
    ck_assert_msg(cluster_fx_restart_master(&C, victim, err, sizeof err) == 0, "%s", err);
    int64_t back_ms = tu_now_ms() - t_back;
    wait_drained(c, 60000, "after the master came back");

    struct tally t = tally_runs(&j);
    struct iso_lateness l = lateness_of_live(&j, due, on_victim, t_kill, t_back);
    printf("cluster master down: node %d (%d of %d partitions) down for %d ms, back in "
           "%lld ms; the other partitions' lateness p99 %lld ms before (%zu jobs), %lld ms "
           "while it was down (%zu jobs); lost=%d dup=%d (of the other partitions: %d); "
           "/healthz said: %.*s\n",
           victim, nvictim, NPARTS, ISO_DOWN_MS, (long long)back_ms, (long long)l.p99_before,
           l.before, (long long)l.p99_during, l.during, t.lost, t.dup, l.dup_live,
           (int)strcspn(seen.healthz, "\n"), seen.healthz);
    ck_assert_msg(tu_process_running(H.pid), "delayqd exited; log:\n%s", h_log_tail(&H));
    ck_assert_int_eq(t.lost, 0);
    ck_assert_int_eq(t.overlaps, 0);
    ck_assert_int_eq(l.dup_live, 0);
    ck_assert_uint_gt(l.during, ISO_JOBS / 10);
    /* Down for 4 s: had the other partitions waited for it, their jobs
     * due in its first seconds would be seconds late. */
    ck_assert_msg(l.p99_during < 1000, "the other partitions' jobs waited for the master "
                  "down: p99 %lld ms late; log:\n%s", (long long)l.p99_during, h_log_tail(&H));
    ck_assert_int_ge(h_log_count(&H, "is out of reach"), 1);
    /* /healthz named the partitions out of reach, and only those, and
     * /metrics had them down and the others up; both say all is well
     * once the master is back. */
    ck_assert_msg(seen.healthz_named, "/healthz during the outage: %s", seen.healthz);
    ck_assert_msg(seen.metrics_right, "/metrics during the outage: delayq_partition_up wrong");
    char body[4096];
    int code = 0;
    for (int i = 0; i < 100 && code != 200; i++, tu_sleep_ms(100))
        code = fixture_http_get(port, "/healthz", body, sizeof body);
    ck_assert_msg(code == 200, "/healthz after the master came back: %d %s", code, body);
    ck_assert_int_eq(partition_up(port, 0), 1);
    dq_stats st;
    ck_assert_int_eq(dq_stats_get(c, H_QUEUE, &st), DQ_OK);
    ck_assert_int_eq(st.dead, 0);
    free(due);
    jobs_free(&j);
    dq_close(c);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

/* Which partitions' master is `victim` (down[p]) and which not (live[p];
 * down may be NULL). */
static void split_by_master(int victim, bool live[NPARTS], bool down[NPARTS])
{
    for (int p = 0; p < NPARTS; p++) {
        live[p] = cluster_fx_master_of_slot(&C, partition_slot(p)) != victim;
        if (down)
            down[p] = !live[p];
    }
}

/* Fill `id` with PREFIX-K for the first K whose id falls in a partition
 * for which want[partition] is true; K starts at *next, which moves on. */
static void id_where(char *id, size_t len, const char *prefix, const bool *want, int *next)
{
    do
        snprintf(id, len, "%s-%d", prefix, (*next)++);
    while (!want[keys_partition_of(id, NPARTS)]);
}

static void enqueue_one(dq_client *c, const char *id, const char *payload, int64_t at_ms)
{
    dq_enqueue_req req = { .queue = H_QUEUE, .type = "t", .id = id, .payload = payload,
                           .payload_len = strlen(payload), .at_ms = at_ms };
    dq_enqueued out;
    ck_assert_msg(dq_enqueue(c, &req, &out) == DQ_OK, "%s: %s", id, dq_errmsg(c));
}

#define SOLO_LIVE 30            /* jobs on the other masters' partitions */

struct solo_jobs {
    char slow[2][32];           /* the batch on the master killed */
    char live[SOLO_LIVE][32];
};

static int live_started(void *arg)
{
    const struct solo_jobs *sj = arg;
    struct h_run *runs;
    size_t n = h_records(&H, &runs);
    int all = 1;
    for (int i = 0; i < SOLO_LIVE && all; i++)
        all = h_count(runs, n, sj->live[i], 0, NULL) > 0;
    free(runs);
    return all;
}

/*
 * A queue with one worker, whose batch in hand came from the master
 * killed: the batch's acks (and, when its first job leaves the second too
 * little of its lease, the renewal) cannot be recorded, and once its
 * leases have run out the worker gives them up and goes on with the
 * other partitions (their jobs run while the master is down), where it
 * would wait for the master.  Once the master is back every job has run;
 * none is lost.  `slow` is the batch's jobs' handler and `lease` their
 * lease: "sleep:400" on 2.5 s leases ends the batch with 2.1 s left (it
 * reports); "sleep:700" on 2.1 s leases leaves 1.4 s before the second job,
 * less than its handler's timeout and margin (1.5 s), so the worker renews.
 */
static void single_worker_goes_on(const char *slow, const char *lease, const char *what)
{
    bool on_victim[NPARTS], live[NPARTS];
    int victim = cluster_fx_master_of_slot(&C, partition_slot(0));
    ck_assert_int_ge(victim, 0);
    for (int p = 0; p < NPARTS; p++) {
        on_victim[p] = cluster_fx_master_of_slot(&C, partition_slot(p)) == victim;
        live[p] = !on_victim[p];
    }
    char err[400];
    ck_assert_msg(cluster_fx_persist(&C, victim, err, sizeof err) == 0, "%s", err);
    struct cl_conf cc = { .workers = 1, .batch = 2, .lease = lease };
    start_daemon(&cc);
    dq_client *c = cluster_client(DQ_DURABILITY_LOCAL);
    struct solo_jobs sj;
    int next = 0;
    int64_t now = tu_now_ms();
    bool only0[NPARTS] = { [0] = true };
    for (int i = 0; i < 2; i++) {
        id_where(sj.slow[i], sizeof sj.slow[i], "slow", only0, &next);
        enqueue_one(c, sj.slow[i], slow, now + 300);
    }
    for (int i = 0; i < SOLO_LIVE; i++) {
        id_where(sj.live[i], sizeof sj.live[i], "live", live, &next);
        enqueue_one(c, sj.live[i], "ok", now + 1500 + i * 100);
    }
    ck_assert_msg(h_wait_record(&H, sj.slow[0], 0, 1, 10000) == 1, "the slow batch did not "
                  "start; log:\n%s", h_log_tail(&H));
    int64_t t_kill = tu_now_ms();
    cluster_fx_kill(&C, victim);
    /* Down for 10 s: the live jobs (due 1.5 to 4.5 s after the start) run
     * within it, once the batch's leases are over. */
    int ran = h_wait(10000, live_started, &sj);
    int64_t ran_ms = tu_now_ms() - t_kill;
    ck_assert_msg(cluster_fx_restart_master(&C, victim, err, sizeof err) == 0, "%s", err);
    wait_drained(c, 60000, "after the master came back");
    struct h_run *runs;
    size_t nruns = h_records(&H, &runs);
    int lost = 0, overlaps = 0;
    for (size_t i = 0; i < nruns; i++)
        overlaps += runs[i].end == H_OVERLAP;
    for (int i = 0; i < 2; i++)
        lost += h_count(runs, nruns, sj.slow[i], 1, NULL) == 0;
    for (int i = 0; i < SOLO_LIVE; i++)
        lost += h_count(runs, nruns, sj.live[i], 1, NULL) == 0;
    free(runs);
    printf("cluster master down, one worker %s: its batch's master killed; the other "
           "partitions' %d jobs all started %lld ms after the kill%s; lost=%d\n", what,
           SOLO_LIVE, (long long)ran_ms, ran == 1 ? "" : " (not while it was down)", lost);
    ck_assert_msg(ran == 1, "the other partitions' jobs waited for the master down; log:\n%s",
                  h_log_tail(&H));
    ck_assert_int_ge(h_log_count(&H, "past its batch's leases"), 1);
    if (strcmp(what, "renewing") == 0)     /* the second job was left to the reaper */
        ck_assert_msg(h_log_count(&H, "1 job not started") == 1, "log:\n%s", h_log_tail(&H));
    ck_assert_int_eq(lost, 0);
    ck_assert_int_eq(overlaps, 0);
    dq_close(c);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}

START_TEST(a_single_worker_goes_on_past_its_batchs_leases)
{
    single_worker_goes_on("sleep:400", "2500ms", "reporting");
}
END_TEST

START_TEST(a_single_worker_goes_on_past_its_batchs_leases_while_renewing)
{
    single_worker_goes_on("sleep:700", "2100ms", "renewing");
}
END_TEST

#define UI_TOKEN "cluster-dashboard-token-0123456789"
#define UI_BEARER "Authorization: Bearer " UI_TOKEN "\r\n"
#define UI_POST UI_BEARER "Sec-Fetch-Site: same-origin\r\n" \
    "Content-Type: application/x-www-form-urlencoded\r\n"

/* The dashboard's answer to `method` `path` (body empty): its status, the
 * Location header into loc, or the body when there is none. */
static int ui_request(int port, const char *method, const char *path, char *loc, size_t len)
{
    struct http_reply r;
    int post = strcmp(method, "POST") == 0;
    int rc = http_request(port, method, path, post ? UI_POST : UI_BEARER, post ? "" : NULL, 0,
                          10000, &r);
    ck_assert_msg(rc == 0 && r.status > 0, "%s %s: no answer; log:\n%s", method, path,
                  h_log_tail(&H));
    int st = r.status;
    if (loc && !http_header(&r, "Location", loc, len))
        snprintf(loc, len, "%s", r.body ? r.body : "");
    http_reply_free(&r);
    return st;
}

/*
 * The dashboard while a master is down: a job of a partition still up is
 * shown and cancelled as usual, where the dashboard's connection used to
 * go down with any master; a job of the partition down is refused at
 * once, naming it, and nothing is lost.  /healthz meanwhile names the
 * partitions out of reach apart from one still up whose statistics fail.
 */
START_TEST(the_dashboard_acts_on_the_partitions_still_up)
{
    bool live[NPARTS], dead[NPARTS];
    /* Not partition 0's master: a queue-wide action then finds partition
     * 0 up, and must not act on it before it finds one that is not. */
    int first = cluster_fx_master_of_slot(&C, partition_slot(0)), victim = -1;
    for (int p = 1; p < NPARTS && victim < 0; p++)
        if (cluster_fx_master_of_slot(&C, partition_slot(p)) != first)
            victim = cluster_fx_master_of_slot(&C, partition_slot(p));
    ck_assert_int_ge(victim, 0);
    split_by_master(victim, live, dead);
    char token[300], extra[800], err[400];
    snprintf(token, sizeof token, "%s/ui.token", H.fx.dir);
    FILE *f = fopen(token, "w");
    ck_assert_ptr_nonnull(f);
    fputs(UI_TOKEN "\n", f);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(chmod(token, 0600), 0);
    int port = fixture_free_port();
    snprintf(extra, sizeof extra, "admin = { listen = \"127.0.0.1:%d\"; ui = true; "
             "token_file = \"%s\"; };\n", port, token);
    ck_assert_msg(cluster_fx_persist(&C, victim, err, sizeof err) == 0, "%s", err);
    struct cl_conf cc = { .workers = 1, .batch = 4, .extra = extra };
    start_daemon(&cc);
    dq_client *c = cluster_client(DQ_DURABILITY_LOCAL);
    char up_id[32], down_id[32], path[128], loc[256];
    int next = 0;
    int64_t later = tu_now_ms() + 60000;
    id_where(up_id, sizeof up_id, "up", live, &next);
    id_where(down_id, sizeof down_id, "down", dead, &next);
    enqueue_one(c, up_id, "ok", later);
    enqueue_one(c, down_id, "ok", later);
    snprintf(path, sizeof path, "/ui/queues/" H_QUEUE "/jobs/%s", up_id);
    int64_t end = tu_mono_ms() + 10000;     /* the dashboard's connection comes up */
    while (ui_request(port, "GET", path, NULL, 0) != 200 && tu_mono_ms() < end)
        tu_sleep_ms(100);
    ck_assert_int_eq(ui_request(port, "GET", path, NULL, 0), 200);
    cluster_fx_kill(&C, victim);
    tu_sleep_ms(1500);                  /* past the node timeout: it is failed */
    ck_assert_msg(ui_request(port, "GET", path, NULL, 0) == 200, "the job page of a partition "
                  "still up failed while another master is down; log:\n%s", h_log_tail(&H));
    snprintf(path, sizeof path, "/ui/queues/" H_QUEUE "/jobs/%s/cancel", up_id);
    int st = ui_request(port, "POST", path, loc, sizeof loc);
    ck_assert_msg(st == 303 && strstr(loc, "done=cancelled"), "cancel answered %d (%s); "
                  "log:\n%s", st, loc, h_log_tail(&H));
    snprintf(path, sizeof path, "/ui/queues/" H_QUEUE "/jobs/%s/cancel", down_id);
    char page[4096], named[64];
    snprintf(named, sizeof named, "partition %u of queue " H_QUEUE " is out of reach",
             keys_partition_of(down_id, NPARTS));
    st = ui_request(port, "POST", path, page, sizeof page);
    ck_assert_msg(st == 503 && strstr(page, named) && strstr(page, "nothing was done"),
                  "a cancel on the master down answered %d:\n%s", st, page);
    /* /healthz names the partitions out of reach and, apart, a partition
     * still up whose statistics fail (a key of the wrong type), each with
     * its own reason. */
    int wrong = -1;
    for (int p = NPARTS - 1; p >= 0 && wrong < 0; p--)
        if (live[p])
            wrong = p;
    int wm = cluster_fx_master_of_slot(&C, partition_slot(wrong));
    ck_assert_int_ge(cluster_fx_int(&C, wm, "SET dq:{" H_QUEUE ":%d}:dead x", wrong), 0);
    char health[2048] = "", tail[64], item[64];
    const char *clause = "; 1 partition whose statistics fail (WRONGTYPE";
    end = tu_mono_ms() + 10000;
    while (!(fixture_http_get(port, "/healthz", health, sizeof health) == 503
             && strstr(health, clause))
           && tu_mono_ms() < end)
        tu_sleep_ms(100);
    char *sep = strstr(health, clause);
    snprintf(tail, sizeof tail, "): " H_QUEUE "/%d\n", wrong);
    ck_assert_msg(sep && strstr(health, " partitions out of reach (") && strstr(sep, tail)
                      && strlen(strstr(sep, tail)) == strlen(tail),
                  "/healthz: %s", health);
    *sep = '\0';                        /* the partitions out of reach, each then " " */
    strcat(health, " ");
    snprintf(item, sizeof item, " %s/%d ", H_QUEUE, wrong);
    ck_assert_msg(!strstr(health, item), "the partition whose statistics fail is named out "
                  "of reach: %s", health);
    ck_assert_int_ge(cluster_fx_int(&C, wm, "DEL dq:{" H_QUEUE ":%d}:dead", wrong), 0);
    /* A pause of the whole queue is refused as a whole: no partition
     * still up is paused. */
    int pst = ui_request(port, "POST", "/ui/queues/" H_QUEUE "/pause", page, sizeof page);
    ck_assert_msg(pst == 503 && strstr(page, "is out of reach"), "a pause with a master "
                  "down answered %d:\n%s", pst, page);
    for (int p = 0; p < NPARTS; p++) {
        if (!live[p])
            continue;
        int m = cluster_fx_master_of_slot(&C, partition_slot(p));
        ck_assert_int_eq(cluster_fx_int(&C, m, "HEXISTS dq:{" H_QUEUE ":%d}:meta paused", p), 0);
    }
    ck_assert_msg(cluster_fx_restart_master(&C, victim, err, sizeof err) == 0, "%s", err);
    /* Back: the job on it was not touched, the one cancelled is gone. */
    dq_job_info info;
    end = tu_mono_ms() + 20000;
    dq_status sst;
    while ((sst = dq_show(c, H_QUEUE, down_id, &info)) != DQ_OK && tu_mono_ms() < end)
        tu_sleep_ms(100);
    ck_assert_msg(sst == DQ_OK, "show %s: %s", down_id, dq_errmsg(c));
    ck_assert_int_eq(info.state, DQ_STATE_DELAYED);
    dq_job_info_free(&info);
    ck_assert_int_eq(dq_show(c, H_QUEUE, up_id, &info), DQ_ERR_NOTFOUND);
    printf("cluster master down, the dashboard: a job of a partition still up shown and "
           "cancelled; one of the partition down refused (%d)\n", st);
    dq_close(c);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

/*
 * A worker killed (kill -9) in the middle of a job of a partition on a
 * master still up, while another master is down: the supervisor's
 * settlement records the run as failed at once and the job runs again
 * within a second or two, rather than at its lease's end (10 s), as it
 * would if the settlement waited for every master.  Its log says what was
 * settled and which partitions wait, then, when the master is back, the
 * whole settlement.
 */
START_TEST(a_killed_workers_job_is_settled_while_a_master_is_down)
{
    bool live[NPARTS];
    int victim = cluster_fx_master_of_slot(&C, partition_slot(0));
    ck_assert_int_ge(victim, 0);
    split_by_master(victim, live, NULL);
    struct cl_conf cc = { .workers = 2, .batch = 4 };
    start_daemon(&cc);
    dq_client *c = cluster_client(DQ_DURABILITY_LOCAL);
    char warm[32], id[32];
    int next = 0;
    id_where(warm, sizeof warm, "warm", live, &next);
    enqueue_one(c, warm, "ok", 0);      /* the count read while all masters are up */
    ck_assert_int_eq(h_wait_record(&H, warm, 1, 1, 10000), 1);
    cluster_fx_kill(&C, victim);
    tu_sleep_ms(1500);                  /* past the node timeout: it is failed */
    id_where(id, sizeof id, "slow", live, &next);
    enqueue_one(c, id, "sleep:800", 0);
    ck_assert_msg(h_wait_record(&H, id, 0, 1, 10000) == 1, "the job did not start; log:\n%s",
                  h_log_tail(&H));
    struct h_run *runs, first;
    size_t n = h_records(&H, &runs);
    ck_assert_int_eq(h_count(runs, n, id, 0, &first), 1);
    free(runs);
    ck_assert_int_eq(kill(first.pid, SIGKILL), 0);
    int64_t t_kill = tu_mono_ms();
    int starts = h_wait_record(&H, id, 0, 2, 8000);
    int64_t again_ms = tu_mono_ms() - t_kill;
    printf("cluster master down, a worker killed mid-job on another master: the job ran "
           "again %lld ms after the kill (lease 10 s)\n", (long long)again_ms);
    ck_assert_msg(starts >= 2, "the killed worker's job did not run again within 8 s; "
                  "log:\n%s", h_log_tail(&H));
    ck_assert_msg(h_log_count(&H, "error=worker died: signal 9 -> retry") == 1, "log:\n%s",
                  h_log_tail(&H));
    /* The settlement says what it did on the partitions in reach, and which
     * wait for the master, while it is down (not when the leases end). */
    ck_assert_msg(h_wait_log(&H, "settled what it held on the partitions in reach: 0 acked, "
                             "1 failed", 1, 5000) >= 1, "log:\n%s", h_log_tail(&H));
    ck_assert_int_eq(h_log_count(&H, "could not be settled in time"), 0);
    char err[400];
    ck_assert_msg(cluster_fx_restart_master(&C, victim, err, sizeof err) == 0, "%s", err);
    /* Its master back, the rest is settled and said. */
    ck_assert_msg(h_wait_log(&H, "settled the 1 job it held: 0 acked, 1 failed", 1, 10000) >= 1,
                  "log:\n%s", h_log_tail(&H));
    dq_close(c);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

/* The owner name worker runs claim under, from the mark its claims leave
 * in the meta of partition `p` (on node `idx`): "claim:<owner>". */
static void owner_of_claims(int idx, int p, char *owner, size_t len)
{
    redisReply *r = cluster_fx_cmd(&C, idx, "HKEYS dq:{" H_QUEUE ":%d}:meta", p);
    ck_assert_ptr_nonnull(r);
    *owner = '\0';
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++)
        if (strncmp(r->element[i]->str, "claim:", 6) == 0)
            snprintf(owner, len, "%s", r->element[i]->str + 6);
    freeReplyObject(r);
    ck_assert_msg(*owner, "no claim mark on partition %d", p);
}

/*
 * A worker killed while a master is down, holding a running job of that
 * master's partition and, on a live partition, a claim whose reply it never
 * read (a claim on its way): the live partition's claim is given back at
 * once and its job runs, rather than after the running job's settlement
 * (which waits for the master) or the claim's lease (60 s).
 */
START_TEST(a_dead_workers_claim_on_its_way_comes_back_while_a_master_is_down)
{
    bool live[NPARTS], down[NPARTS];
    int victim = cluster_fx_master_of_slot(&C, partition_slot(0));
    ck_assert_int_ge(victim, 0);
    split_by_master(victim, live, down);
    struct cl_conf cc = { .workers = 1, .batch = 1 };
    start_daemon(&cc);
    dq_client *c = cluster_client(DQ_DURABILITY_LOCAL);
    char slow[32], forged[32];
    int next = 0;
    id_where(slow, sizeof slow, "slow", down, &next);
    id_where(forged, sizeof forged, "forged", live, &next);
    enqueue_one(c, slow, "sleep:800", 0);
    ck_assert_msg(h_wait_record(&H, slow, 0, 1, 10000) == 1, "log:\n%s", h_log_tail(&H));
    char owner[200];
    owner_of_claims(victim, (int)keys_partition_of(slow, NPARTS), owner, sizeof owner);
    cluster_fx_kill(&C, victim);
    /* The claim on its way: forged's partition claimed under the worker's
     * owner, as its claim script would have, with a lease of a minute. */
    enqueue_one(c, forged, "ok", 0);
    int fp = (int)keys_partition_of(forged, NPARTS);
    int node = cluster_fx_master_of_slot(&C, partition_slot(fp));
    char path[300];
    snprintf(path, sizeof path, "%s", fixture_build_path("scripts/claim.lua"));
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s", path);
    static char text[200000];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    redisReply *r = cluster_fx_cmd(&C, node, "EVAL %s 6 dq:{" H_QUEUE ":%d}:jobs "
                                   "dq:{" H_QUEUE ":%d}:delayed dq:{" H_QUEUE ":%d}:processing "
                                   "dq:{" H_QUEUE ":%d}:dead dq:{" H_QUEUE ":%d}:meta "
                                   "dq:{" H_QUEUE ":%d}:lease 1 60000 %s", text, fp, fp, fp, fp,
                                   fp, fp, owner);
    ck_assert_msg(r && r->type == REDIS_REPLY_ARRAY && r->elements == 7
                  && strcmp(r->element[3]->str, forged) == 0, "the forged claim: %s",
                  r && r->type == REDIS_REPLY_ERROR ? r->str : "not the job");
    freeReplyObject(r);
    struct h_run *runs, first;
    size_t nr = h_records(&H, &runs);
    ck_assert_int_eq(h_count(runs, nr, slow, 0, &first), 1);
    free(runs);
    ck_assert_int_eq(kill(first.pid, SIGKILL), 0);
    int64_t t_kill = tu_mono_ms();
    int started = h_wait_record(&H, forged, 0, 1, 8000);
    printf("a claim on its way on a live partition, its worker killed with a master down: "
           "the job ran %lld ms after the kill (its claim's lease 60 s)\n",
           (long long)(tu_mono_ms() - t_kill));
    ck_assert_msg(started == 1, "the claim on its way was not given back; log:\n%s",
                  h_log_tail(&H));
    char err[400];
    ck_assert_msg(cluster_fx_restart_master(&C, victim, err, sizeof err) == 0, "%s", err);
    dq_close(c);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

/*
 * dq_enqueue_many on a cluster with a master down: the jobs bound for the
 * masters that answer are scheduled and say so (they are there after the
 * master is back); only those of the partitions out of reach fail
 * (DQ_ERR_CONNECT).  And a call that fails before it sends anything (here
 * registering a queue with the registry's master down) reports every job
 * failed: none is taken for scheduled.
 */
START_TEST(enqueue_many_with_a_master_down_fails_only_its_partitions_jobs)
{
    int victim = cluster_fx_master_of_slot(&C, partition_slot(0));
    ck_assert_int_ge(victim, 0);
    dq_client *c = cluster_client(DQ_DURABILITY_LOCAL);
    enum { N = 60 };
    dq_enqueue_req reqs[N];
    dq_status sts[N];
    char ids[N][32];
    for (int i = 0; i < N; i++) {
        snprintf(ids[i], sizeof ids[i], "many-%d", i);
        reqs[i] = (dq_enqueue_req){ .queue = H_QUEUE, .type = "t", .id = ids[i],
                                    .payload = "ok", .payload_len = 2,
                                    .delay_ms = 3600000 };
    }
    /* The client knows the map and the count before the master goes. */
    ck_assert_int_eq(dq_queue_set_partitions(c, H_QUEUE, NPARTS), DQ_OK);
    ck_assert_int_eq(dq_enqueue_many(c, reqs, 1, NULL, sts), DQ_OK);
    cluster_fx_kill(&C, victim);
    int64_t t0 = tu_mono_ms();
    dq_status first = dq_enqueue_many(c, reqs + 1, N - 1, NULL, sts + 1);
    int64_t took = tu_mono_ms() - t0;
    ck_assert_int_eq(first, DQ_ERR_CONNECT);
    int up = 0, out = 0;
    for (int i = 1; i < N; i++) {
        bool down = cluster_fx_master_of_slot(&C, partition_slot(
                        (int)keys_partition_of(ids[i], NPARTS))) == victim;
        ck_assert_msg(sts[i] == (down ? DQ_ERR_CONNECT : DQ_OK), "job %s (partition %u, "
                      "master %s): status %d", ids[i], keys_partition_of(ids[i], NPARTS),
                      down ? "down" : "up", (int)sts[i]);
        up += !down;
        out += down;
    }
    ck_assert(up > 0 && out > 0);
    printf("enqueue_many with a master down: %d jobs scheduled, %d of its partitions' jobs "
           "refused, in %lld ms\n", up, out, (long long)took);
    char err[400];
    ck_assert_msg(cluster_fx_restart_master(&C, victim, err, sizeof err) == 0, "%s", err);
    for (int i = 1; i < N; i++) {
        dq_job_info info;
        dq_status st = dq_show(c, H_QUEUE, ids[i], &info);
        ck_assert_msg(st == (sts[i] == DQ_OK ? DQ_OK : DQ_ERR_NOTFOUND), "job %s: show %d",
                      ids[i], (int)st);
        if (st == DQ_OK)
            dq_job_info_free(&info);
    }
    dq_close(c);

    /* Two queues in one call: each chunk registers its queue (the client
     * remembers the last one), with both counts known.  The registry's
     * master down: nothing is sent, and every job says so. */
    c = cluster_client(DQ_DURABILITY_LOCAL);
    dq_enqueue_req two[4];
    char two_ids[4][16];
    for (int i = 0; i < 4; i++) {
        snprintf(two_ids[i], sizeof two_ids[i], "reg-%d", i);
        two[i] = reqs[i];
        two[i].id = two_ids[i];
        two[i].queue = i % 2 ? "other" : H_QUEUE;
    }
    ck_assert_int_eq(dq_enqueue_many(c, two, 2, NULL, sts), DQ_OK);
    int registry = cluster_fx_master_of_slot(&C, (int)cluster_fx_int(&C, 0, "CLUSTER KEYSLOT "
                                                                     "dq:queues"));
    ck_assert_int_ge(registry, 0);
    cluster_fx_kill(&C, registry);
    for (int i = 0; i < 4; i++)
        sts[i] = DQ_OK;
    ck_assert_int_eq(dq_enqueue_many(c, two + 2, 2, NULL, sts), DQ_ERR_CONNECT);
    for (int i = 0; i < 2; i++)
        ck_assert_msg(sts[i] == DQ_ERR_CONNECT, "job %s of %s: status %d with the registry's "
                      "master down", two[2 + i].id, two[2 + i].queue, (int)sts[i]);
    ck_assert_msg(cluster_fx_restart_master(&C, registry, err, sizeof err) == 0, "%s", err);
    dq_close(c);
}
END_TEST

#ifdef HAVE_LIBPQ
/* Rows of `table` in the test's PostgreSQL. */
static long long pg_rows(struct pg_server *pg, const char *table)
{
    char sql[128], out[32];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", table);
    ck_assert_msg(pg_query_value(pg, sql, out, sizeof out) == 0, "%s", pg->why);
    return atoll(out);
}

struct pg_left {
    struct pg_server *pg;
    long long rows;             /* rows the outbox is to hold */
};

/* h_wait condition: /metrics on port *arg says the relay holds `held`
 * rows (arg[1]). */
static int metrics_held(void *arg)
{
    const int *a = arg;
    static char body[65536];
    char want[80];
    snprintf(want, sizeof want, "delayq_outbox_held_rows{source=\"delayq_outbox\"} %d\n",
             a[1]);
    return fixture_http_get(a[0], "/metrics", body, sizeof body) == 200
           && strstr(body, want) != NULL;
}

static int outbox_holds(void *arg)
{
    struct pg_left *l = arg;
    return pg_rows(l->pg, "delayq_outbox") == l->rows;
}

/*
 * The outbox relay over a cluster with a master down, or hung: the rows
 * of the partitions still up are applied (their jobs run) while the rows
 * of the partitions out of reach wait in the table, in order, and are
 * applied when the master is back.  The rows are written in one transaction, in
 * this order: an add due in an hour on a partition out of reach, ten adds
 * on partitions up, the cancel of that first add, an add due now out of
 * reach, ten adds up; a relay that let the cancel pass before its add
 * would leave the first job waiting.
 */
START_TEST(the_outbox_relay_holds_only_the_rows_of_a_partition_out_of_reach)
{
    /* _i 0: the master is killed, and started again; 1: it hangs (stopped
     * with SIGSTOP: connections stay open, nothing answers past the
     * command timeout), and goes on (SIGCONT). */
    const bool hung = _i == 1;
    const char *how = hung ? "hung" : "down";
    static struct pg_server pg;
    int rc = pg_start(&pg, H.fx.dir);
    if (rc == 1) {
        printf("SKIP: the outbox relay over a cluster: %s\n", pg.why);
        return;
    }
    ck_assert_msg(rc == 0, "%s", pg.why);
    char *sql = outbox_sql_string(OUTBOX_DEFAULT_SCHEMA, OUTBOX_DEFAULT_TABLE);
    ck_assert(sql != NULL);
    ck_assert_msg(pg_exec(&pg, sql) == 0, "the outbox's SQL: %s", pg.why);
    free(sql);

    /* A master with partitions of the queue but neither the queue's own
     * keys ({orders}: its partition count) nor the registry (dq:queues),
     * which every producer needs (docs/outbox.md). */
    int home = cluster_fx_master_of_slot(&C, (int)cluster_fx_int(&C, 0, "CLUSTER KEYSLOT "
                                                                 "{" H_QUEUE "}"));
    int registry = cluster_fx_master_of_slot(&C, (int)cluster_fx_int(&C, 0, "CLUSTER KEYSLOT "
                                                                     "dq:queues"));
    int victim = -1;
    for (int p = 0; p < NPARTS && victim < 0; p++) {
        int m = cluster_fx_master_of_slot(&C, partition_slot(p));
        if (m != home && m != registry)
            victim = m;
    }
    ck_assert_msg(victim >= 0, "every master holding partitions holds {orders} or dq:queues");
    bool live[NPARTS], down[NPARTS];
    split_by_master(victim, live, down);
    char extra[1000];
    int port = fixture_free_port();
    snprintf(extra, sizeof extra, "sources = ( { type = \"postgres\"; conninfo = \"%s\"; "
             "poll_interval = \"200ms\"; } );\n"
             "metrics = { listen = \"127.0.0.1:%d\"; };\n", pg.conninfo, port);
    struct cl_conf cc = { .workers = 2, .batch = 4, .extra = extra };
    start_daemon(&cc);

    enum { LIVE = 20 };
    char first[32], later[32], ups[LIVE][32];
    int next = 0;
    id_where(first, sizeof first, "out-first", down, &next);
    id_where(later, sizeof later, "out-later", down, &next);
    for (int i = 0; i < LIVE; i++)
        id_where(ups[i], sizeof ups[i], "up", live, &next);
    pid_t victim_pid = C.pid[victim];
    if (hung)
        ck_assert_int_eq(kill(victim_pid, SIGSTOP), 0);
    else
        cluster_fx_kill(&C, victim);

    char text[8000];
    size_t at = (size_t)snprintf(text, sizeof text,
                                 "BEGIN; SELECT delayq_enqueue('" H_QUEUE "', 't', 'ok', "
                                 "now() + interval '1 hour', '%s');", first);
    for (int i = 0; i < LIVE; i++) {
        if (i == LIVE / 2)
            at += (size_t)snprintf(text + at, sizeof text - at,
                                   "SELECT delayq_cancel('" H_QUEUE "', '%s');"
                                   "SELECT delayq_enqueue('" H_QUEUE "', 't', 'ok', "
                                   "interval '0', '%s');", first, later);
        at += (size_t)snprintf(text + at, sizeof text - at,
                               "SELECT delayq_enqueue('" H_QUEUE "', 't', 'ok', interval '0', "
                               "'%s');", ups[i]);
    }
    snprintf(text + at, sizeof text - at, "COMMIT;");
    ck_assert_msg(pg_exec(&pg, text) == 0, "%s", pg.why);
    int64_t t0 = tu_mono_ms();

    for (int i = 0; i < LIVE; i++)
        ck_assert_msg(h_wait_record(&H, ups[i], 1, 1, 15000) == 1,
                      "job %s of a partition up did not run with a master %s; log:\n%s",
                      ups[i], how, h_log_tail(&H));
    printf("outbox relay, a master %s: the %d rows of the partitions up ran within "
           "%lld ms\n", how, LIVE, (long long)(tu_mono_ms() - t0));
    struct pg_left three = { &pg, 3 };
    ck_assert_msg(h_wait(5000, outbox_holds, &three) == 1,
                  "the outbox holds %lld rows, not the 3 of the partition out of reach; "
                  "log:\n%s", pg_rows(&pg, "delayq_outbox"), h_log_tail(&H));
    ck_assert_int_eq(pg_rows(&pg, "delayq_outbox_dead"), 0);
    ck_assert_msg(h_log_count(&H, "of queue " H_QUEUE " is out of reach (") >= 1, "log:\n%s",
                  h_log_tail(&H));
    int held3[2] = { port, 3 };
    ck_assert_msg(h_wait(3000, metrics_held, held3) == 1, "/metrics: not 3 rows held");
    struct h_run *runs;
    size_t nr = h_records(&H, &runs);
    ck_assert_int_eq(h_count(runs, nr, later, 0, NULL), 0);
    free(runs);

    char err[400];
    if (hung)
        ck_assert_int_eq(kill(victim_pid, SIGCONT), 0);
    else
        ck_assert_msg(cluster_fx_restart_master(&C, victim, err, sizeof err) == 0, "%s", err);
    t0 = tu_mono_ms();
    struct pg_left none = { &pg, 0 };
    ck_assert_msg(h_wait(30000, outbox_holds, &none) == 1,
                  "%lld rows still in the outbox after the master came back; log:\n%s",
                  pg_rows(&pg, "delayq_outbox"), h_log_tail(&H));
    ck_assert_msg(h_wait_record(&H, later, 1, 1, 15000) == 1, "log:\n%s", h_log_tail(&H));
    printf("outbox relay, the master %s back: its rows applied and its job run within "
           "%lld ms\n", how, (long long)(tu_mono_ms() - t0));
    ck_assert_int_eq(pg_rows(&pg, "delayq_outbox_dead"), 0);
    ck_assert_msg(h_wait_log(&H, "answers again: its rows go on", 1, 5000) >= 1, "log:\n%s",
                  h_log_tail(&H));
    int held0[2] = { port, 0 };
    ck_assert_msg(h_wait(3000, metrics_held, held0) == 1, "/metrics: rows still held");

    /* The cancel came after its add: the first job is gone, and every job
     * ran once. */
    dq_client *c = cluster_client(DQ_DURABILITY_LOCAL);
    dq_job_info info;
    dq_status st = dq_show(c, H_QUEUE, first, &info);
    ck_assert_msg(st == DQ_ERR_NOTFOUND || (st == DQ_OK && dq_state_is_finished(info.state)),
                  "job %s, cancelled after its add, is still there (status %d, state %d)",
                  first, (int)st, st == DQ_OK ? (int)info.state : -1);
    if (st == DQ_OK)
        dq_job_info_free(&info);
    dq_close(c);
    nr = h_records(&H, &runs);
    for (int i = 0; i < LIVE; i++)
        ck_assert_int_eq(h_count(runs, nr, ups[i], 0, NULL), 1);
    ck_assert_int_eq(h_count(runs, nr, later, 0, NULL), 1);
    ck_assert_int_eq(h_count(runs, nr, first, 0, NULL), 0);
    free(runs);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
    pg_stop(&pg);
}
END_TEST
#endif

/* The start order of the runs of the jobs in partition `p` whose id
 * begins with `prefix`: the first and last record line index. */
static void span_in_partition(const struct h_run *runs, size_t n, int p, const char *prefix,
                              size_t *first, size_t *last)
{
    *first = (size_t)-1;
    *last = 0;
    for (size_t i = 0; i < n; i++) {
        if (runs[i].end != 0 || strncmp(runs[i].id, prefix, strlen(prefix)) != 0
            || keys_partition_of(runs[i].id, NPARTS) != (unsigned)p)
            continue;
        if (*first == (size_t)-1)
            *first = i;
        *last = i;
    }
}

static int ticks_seen(void *arg)
{
    struct h_run *runs;
    size_t n = h_records(&H, &runs);
    int ticks = 0;
    for (size_t i = 0; i < n; i++)
        ticks += runs[i].end == 1 && strncmp(runs[i].id, "tick@", 5) == 0;
    free(runs);
    return ticks >= *(int *)arg;
}

START_TEST(priority_pause_and_schedules_on_a_partitioned_queue)
{
    /* One worker, small claims: the order of claims is the order of
     * runs. */
    struct cl_conf cc = { .workers = 1, .batch = 1 };
    start_daemon(&cc);
    dq_client *c = cluster_client(DQ_DURABILITY_LOCAL);

    /* Paused: due jobs wait, on every partition. */
    ck_assert_int_eq(dq_pause(c, H_QUEUE, NULL), DQ_OK);
    int64_t since;
    ck_assert_int_eq(dq_paused(c, H_QUEUE, &since), DQ_OK);
    ck_assert_int_gt(since, 0);
    enum { PER = 60 };
    for (int i = 0; i < 2 * PER; i++) {
        char id[32];
        snprintf(id, sizeof id, "%s%d", i % 2 ? "hi" : "lo", i / 2);
        dq_enqueue_req r = { .queue = H_QUEUE, .type = "t", .id = id, .payload = "ok",
                             .payload_len = 2,
                             .priority = i % 2 ? DQ_PRIORITY_HIGH : DQ_PRIORITY_LOW };
        ck_assert_msg(dq_enqueue(c, &r, NULL) == DQ_OK, "%s: %s", id, dq_errmsg(c));
    }
    tu_sleep_ms(1500);
    struct h_run *runs;
    size_t n = h_records(&H, &runs);
    free(runs);
    ck_assert_msg(n == 0, "%zu runs while paused", n);
    dq_stats st;
    ck_assert_int_eq(dq_stats_get(c, H_QUEUE, &st), DQ_OK);
    ck_assert_int_eq(st.due, 2 * PER);

    /* Resumed: all run, and within each partition the urgent first. */
    ck_assert_int_eq(dq_resume(c, H_QUEUE, NULL), DQ_OK);
    wait_drained(c, 30000, "resume");
    n = h_records(&H, &runs);
    int parts_with_both = 0;
    for (int p = 0; p < NPARTS; p++) {
        size_t hi_first, hi_last, lo_first, lo_last;
        span_in_partition(runs, n, p, "hi", &hi_first, &hi_last);
        span_in_partition(runs, n, p, "lo", &lo_first, &lo_last);
        if (hi_first == (size_t)-1 || lo_first == (size_t)-1)
            continue;
        parts_with_both++;
        ck_assert_msg(hi_last < lo_first, "partition %d: a low job ran (line %zu) before a "
                      "high one (line %zu)", p, lo_first, hi_last);
    }
    free(runs);
    ck_assert_int_ge(parts_with_both, NPARTS / 2);

    /* A recurring schedule: it lives on partition 0's tag, and fires. */
    dq_schedule_req r = { .queue = H_QUEUE, .name = "tick", .type = "t",
                          .expr = "@every 1s", .payload = "ok", .payload_len = 2 };
    ck_assert_msg(dq_schedule_add(c, &r, NULL) == DQ_OK, "%s", dq_errmsg(c));
    int m0 = cluster_fx_master_of_slot(&C, partition_slot(0));
    ck_assert_int_eq(cluster_fx_keys_on(&C, m0, "dq:{" H_QUEUE ":0}:schedules"), 1);
    int want = 2;
    ck_assert_msg(h_wait(10000, ticks_seen, &want) == 1, "the schedule did not fire twice; "
                  "log:\n%s", h_log_tail(&H));
    ck_assert_int_eq(dq_schedule_remove(c, H_QUEUE, "tick"), DQ_OK);
    dq_close(c);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

/* ---- over TLS, with client certificates and an ACL user ---------------------- */

#define OPENSSL "/usr/bin/openssl"
#define TLS_USER "jobs"
#define TLS_PASSWORD "tls-jobs-s3cret"
#define TLS_JOBS 1500
#define TLS_CHUNK 100           /* jobs per enqueue, each chunk due 200 ms after the last */
#define TLS_PARTS 6

static char certs[200];         /* tests/tls-certs.sh's files, in the test's directory */

/* A cluster that speaks only TLS, wants a certificate of every client and
 * knows one ACL user (the default user off). */
static void tls_setup(void)
{
    h_setup(&H);
    char cmd[PATH_MAX + 400], err[400];
    snprintf(certs, sizeof certs, "%s/certs", H.fx.dir);
    ck_assert_msg(mkdir(certs, 0700) == 0, "%s: %s", certs, strerror(errno));
    snprintf(cmd, sizeof cmd, "sh '%s' '%s' %s", TLS_CERTS_SCRIPT, certs, OPENSSL);
    ck_assert_msg(system(cmd) == 0, "making the test certificates failed: %s", cmd);
    struct cluster_fx_opts o = { .tls_dir = certs, .client_certs = 1, .user = TLS_USER,
                                 .password = TLS_PASSWORD };
    ck_assert_msg(cluster_fx_start(&C, NMASTERS, 1, &o, err, sizeof err) == 0, "%s", err);
}

/* certs/NAME, in one of four buffers. */
static const char *cert(const char *name)
{
    static char path[4][PATH_MAX];
    static int next;
    char *p = path[next++ % 4];
    snprintf(p, PATH_MAX, "%s/%s", certs, name);
    return p;
}

/* The library's options for the cluster: the CA, the user and password,
 * and client certificate `name` (its NAME.crt and NAME.key; NULL: none). */
static void tls_options(dq_options *o, const char *name)
{
    static char ca[PATH_MAX], crt[PATH_MAX], key[PATH_MAX];
    dq_options_init(o);
    o->user = TLS_USER;
    o->password = TLS_PASSWORD;
    o->tls.enable = 1;
    snprintf(ca, sizeof ca, "%s/ca.crt", certs);
    o->tls.ca_file = ca;
    if (name) {
        snprintf(crt, sizeof crt, "%s/%s.crt", certs, name);
        snprintf(key, sizeof key, "%s/%s.key", certs, name);
        o->tls.cert_file = crt;
        o->tls.key_file = key;
    }
}

/* A library client with the right CA, user and password but certificate
 * `name` (NULL: none) is refused, and says it is the certificate. */
static void assert_refused(const char *name)
{
    dq_options o;
    tls_options(&o, name);
    o.cluster = 1;
    o.nodes = C.seeds;
    o.nnodes = (size_t)C.nnodes;
    o.connect_timeout_ms = o.command_timeout_ms = 3000;
    char err[512] = "";
    dq_client *c = dq_connect(&o, err, sizeof err, NULL);
    if (c)
        dq_close(c);
    ck_assert_msg(c == NULL, "a client with %s connected", name ? name : "no certificate");
    ck_assert_msg(strstr(err, "client certificate") != NULL, "%s: %s",
                  name ? name : "no certificate", err);
}

/* delayq (the command line) with `args` (NULL-ended) to its end, 20 s at
 * most: its exit status, and its stderr in `out`. */
static int run_cli(const char *const *args, char *out, size_t len)
{
    char log[PATH_MAX], err[300];
    snprintf(log, sizeof log, "%s/cli.log", H.fx.dir);
    unlink(log);
    char *argv[32];
    size_t n = 0;
    argv[n++] = (char *)fixture_build_path("delayq");
    for (size_t i = 0; args[i] && n < 31; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    pid_t pid = tu_spawn(argv, log, 0, err, sizeof err);
    ck_assert_msg(pid > 0, "%s", err);
    int status = 0;
    pid_t got = 0;
    for (int64_t until = tu_mono_ms() + 20000; got == 0 && tu_mono_ms() < until;)
        if ((got = waitpid(pid, &status, WNOHANG)) == 0)
            tu_sleep_ms(20);
    if (got != pid) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        ck_abort_msg("delayq %s did not end in 20 s", args[0]);
    }
    out[0] = '\0';
    FILE *f = fopen(log, "r");
    if (f) {
        out[fread(out, 1, len - 1, f)] = '\0';
        fclose(f);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* How many runs the record holds (start lines). */
static int starts_now(void)
{
    return h_starts(&H);
}

static int started_enough(void *arg)
{
    return starts_now() >= *(int *)arg;
}

/*
 * Redis reached over TLS only, where every client must present a
 * certificate the cluster's CA signed and log in as an ACL user: the
 * daemon, given its certificate and key, the CA, the user and a
 * password_file, drains 1,500 jobs of a queue in 6 partitions, due over
 * three seconds, while a master is killed (kill -9) once a third of them
 * ran, and its replica takes over.  With durability "replicated" the
 * promise is the one a_replicated_failover_loses_and_repeats_nothing
 * checks: no job whose enqueue returned OK is lost, none enqueued by one
 * call runs twice.  A client with the right CA, user and password but no
 * certificate (or one another CA signed) is refused, the library and
 * the command line saying it is the certificate.
 */
START_TEST(a_tls_cluster_with_client_certificates_loses_and_repeats_nothing)
{
    /* Refused without the certificate, the rest the same. */
    assert_refused(NULL);
    assert_refused("rogue");
    char port[16], out[2048];
    snprintf(port, sizeof port, "%d", C.port[0]);
    char pwfile[PATH_MAX];
    snprintf(pwfile, sizeof pwfile, "%s/redis.pass", H.fx.dir);
    h_write_file(pwfile, TLS_PASSWORD "\n");
    ck_assert_int_eq(chmod(pwfile, 0600), 0);
    const char *without[] = { "--cluster", "-p", port, "--tls", "--cacert", cert("ca.crt"),
                              "--user", TLS_USER, "--password-file", pwfile,
                              "stats", "-q", H_QUEUE, NULL };
    int rc = run_cli(without, out, sizeof out);
    ck_assert_msg(rc != 0 && strstr(out, "client certificate") != NULL,
                  "delayq without --cert: exit %d: %s", rc, out);
    const char *with[] = { "--cluster", "-p", port, "--tls", "--cacert", cert("ca.crt"),
                           "--cert", cert("client.crt"), "--key", cert("client.key"),
                           "--user", TLS_USER, "--password-file", pwfile,
                           "stats", "-q", H_QUEUE, NULL };
    rc = run_cli(with, out, sizeof out);
    ck_assert_msg(rc == 0, "delayq with --cert: exit %d: %s", rc, out);

    /* The daemon with all of it; "replicated" writes need a replica. */
    for (int i = 0; i < C.nnodes; i++)
        ck_assert_int_eq(cluster_fx_int(&C, i, "CONFIG SET min-replicas-to-write 1"), 0);
    char extra[4 * PATH_MAX];
    snprintf(extra, sizeof extra,
             "tls = { ca_file = \"%s\"; cert_file = \"%s\"; key_file = \"%s\"; };\n"
             "          user = \"" TLS_USER "\"; password_file = \"redis.pass\";",
             cert("ca.crt"), cert("client.crt"), cert("client.key"));
    struct cl_conf cc = { .workers = 4, .batch = 16, .lease = "10s",
                          .durability = "replicated", .redis_extra = extra,
                          .partitions = TLS_PARTS };
    start_daemon(&cc);
    dq_options o;
    tls_options(&o, "client");
    dq_client *c = cluster_client_with(&o, DQ_DURABILITY_REPLICATED);
    struct jobs j;
    jobs_init(&j, TLS_JOBS, "s");
    int victim = cluster_fx_master_of_slot(&C, partition_slot(0)), on_victim = 0;
    ck_assert_int_ge(victim, 0);
    for (int p = 0; p < TLS_PARTS; p++)
        on_victim += cluster_fx_master_of_slot(&C, partition_slot(p)) == victim;
    /* Due over about three seconds, from 1.5 s on. */
    for (int first = 0; first < TLS_JOBS; first += TLS_CHUNK)
        ck_assert_msg(enqueue_range(c, &j, first, TLS_CHUNK, 1500 + first / TLS_CHUNK * 200, 0,
                                    10000) == 0, "enqueue: %s", dq_errmsg(c));

    /* A master killed once a third of the jobs started. */
    int third = TLS_JOBS / 3;
    ck_assert_msg(h_wait(20000, started_enough, &third) == 1, "fewer than %d jobs started in "
                  "20 s; log:\n%s", third, h_log_tail(&H));
    int started = starts_now();
    int64_t t_kill = tu_mono_ms(), t_promoted = 0;
    cluster_fx_kill(&C, victim);
    int promoted = -1;
    for (int64_t until = tu_mono_ms() + 20000; promoted < 0 && tu_mono_ms() < until;
         tu_sleep_ms(50))
        follow_failover(victim, &promoted, &t_promoted);
    ck_assert_msg(promoted >= 0, "no replica took over from node %d", victim);
    ck_assert_msg(started < TLS_JOBS, "every job had started before the kill");
    wait_drained(c, 40000, "failover over TLS");
    int64_t drained_ms = tu_mono_ms() - t_kill;
    struct tally t = tally_runs(&j);
    dq_stats st;
    ck_assert_int_eq(dq_stats_get(c, H_QUEUE, &st), DQ_OK);
    printf("cluster TLS failover: lost=%d dup=%d (durability replicated, client certificates, "
           "ACL user; %d jobs, %d accepted, %d of them lost; %d of the dups enqueued by one "
           "call; %d started when node %d, master of %d of the %d partitions, was killed, "
           "node %d promoted %lld ms later, drained %lld ms after the kill; dead %lld)\n",
           t.lost, t.dup, TLS_JOBS, t.accepted, t.lost_accepted, t.dup_sent_once, started,
           victim, on_victim, TLS_PARTS, promoted, (long long)(t_promoted - t_kill),
           (long long)drained_ms, (long long)st.dead);
    keep_log(getenv("DELAYQ_CLUSTER_LOG"));
    ck_assert_int_eq(t.accepted, TLS_JOBS);
    ck_assert_msg(t.overlaps == 0, "%d runs overlapped a live run of the same job", t.overlaps);
    ck_assert_msg(tu_process_running(H.pid), "delayqd exited; log:\n%s", h_log_tail(&H));
    ck_assert_int_eq(st.dead, 0);
    ck_assert_msg(t.lost_accepted == 0, "%d jobs whose enqueue returned OK never ran",
                  t.lost_accepted);
    ck_assert_msg(t.dup_sent_once == 0, "%d jobs enqueued once ran twice (run twice in all:%s)",
                  t.dup_sent_once, t.some_dups);
    jobs_free(&j);
    dq_close(c);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

int main(void)
{
    char why[300];
    if (cluster_fx_available(why, sizeof why) < 0) {
        fprintf(stderr, "%s: skipping\n", why);
        return 77;
    }
    Suite *s = suite_create("cluster");
    TCase *tc = fixture_tcase(s, "cluster", 150, NULL, NULL, setup, teardown);
    tcase_add_test(tc, a_partitioned_queue_drains_once_over_three_masters);
    tcase_add_test(tc, resharding_during_a_run_loses_and_repeats_nothing);
    tcase_add_test(tc, a_master_failover_is_counted);
    tcase_add_test(tc, a_replicated_failover_loses_and_repeats_nothing);
    tcase_add_test(tc, priority_pause_and_schedules_on_a_partitioned_queue);
    tc = fixture_tcase(s, "isolated", 120, NULL, NULL, setup_no_replicas, teardown);
    tcase_add_test(tc, a_master_down_stalls_only_its_own_partitions);
    tcase_add_test(tc, a_single_worker_goes_on_past_its_batchs_leases);
    tcase_add_test(tc, a_single_worker_goes_on_past_its_batchs_leases_while_renewing);
    tcase_add_test(tc, a_killed_workers_job_is_settled_while_a_master_is_down);
    tcase_add_test(tc, a_dead_workers_claim_on_its_way_comes_back_while_a_master_is_down);
    tcase_add_test(tc, the_dashboard_acts_on_the_partitions_still_up);
    tcase_add_test(tc, enqueue_many_with_a_master_down_fails_only_its_partitions_jobs);
#ifdef HAVE_LIBPQ
    tcase_add_loop_test(tc, the_outbox_relay_holds_only_the_rows_of_a_partition_out_of_reach,
                        0, 2);
#else
    printf("SKIP: the outbox relay over a cluster: built without libpq\n");
#endif
    if (access(OPENSSL, X_OK) == 0 && access(TLS_CERTS_SCRIPT, R_OK) == 0) {
        tc = fixture_tcase(s, "tls", 120, NULL, NULL, tls_setup, teardown);
        tcase_add_test(tc, a_tls_cluster_with_client_certificates_loses_and_repeats_nothing);
    } else {
        printf("SKIP: the TLS cluster test: %s or %s is missing\n", OPENSSL, TLS_CERTS_SCRIPT);
    }
    return fixture_run_suite(s);
}
