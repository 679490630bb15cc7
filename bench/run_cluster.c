/*
 * The cluster run: one queue over Redis Cluster against one plain master,
 * side by side in one run (tests/cluster_fixture.c starts the clusters,
 * masters without replicas, on loopback TCP).
 *
 * drain    N jobs all due at one instant, drained by delayqd (2 workers,
 *          claim batch 64, as drain's "w=2 b=64"): on a plain redis-server
 *          over loopback TCP (the queue unpartitioned, then in 12
 *          partitions), then on clusters of 1, 2 and 3 masters with the
 *          queue in 12 partitions.  jobs/s from that instant to the last
 *          ack (the bench polls dq_stats_get every 10 ms), and the CPU
 *          time (exact: the scheduler's count) of each redis-server per
 *          job: its own figure in the note, their sum in the column;
 *          also the time per job of the bulk enqueue (dq_enqueue_many)
 *          that filled the queue.
 * latency  the median of CLUSTER_SAMPLES dq_enqueue calls of one job, and
 *          of as many dq_claim of one due job followed by its dq_ack,
 *          through a direct connection to the plain server, and through
 *          the cluster router: 1 master with the queue unpartitioned (the
 *          router's own cost), 3 masters with 12 partitions.
 *
 * The 2-core machine the figures come from cannot show a cluster's
 * throughput; what scales is read off the per-master CPU (docs/benchmarks.md).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "bench/bench.h"
#include "bench/daemon_proc.h"
#include "bench/measure.h"
#include "bench/report.h"
#include "lib/keys.h"
#include "tests/cluster_fixture.h"
#include "tests/testutil.h"

#define CLUSTER_PARTS 12
#define CLUSTER_WORKERS 2
#define CLUSTER_BATCH 64
#define CLUSTER_SAMPLES 2000
#define READY_TIMEOUT_MS 20000
#define FILL_LEAD_US_PER_JOB 200    /* lead before the jobs are due */

/* Where a row's queue lives: a plain server, or a cluster. */
struct target {
    int masters;                /* 0: the plain server */
    int partitions;
    struct cluster_fx fx;       /* masters > 0 */
    char dir[200];              /* masters 0: the server's directory */
    char sock[PATH_MAX];
    int port;
    pid_t pid;
    struct daemon_proc daemon;
    dq_client *client;
};

static const char *target_dir(const struct target *t)
{
    return t->masters ? t->fx.dir : t->dir;
}

/* The plain server, on a loopback port (the router speaks TCP: so does
 * the direct connection it is compared with). */
static int plain_start(struct target *t, const struct bench_env *env, char *err,
                       size_t errlen)
{
    if (tu_make_temp_dir("dqbench", t->dir, sizeof t->dir, err, errlen) < 0)
        return -1;
    snprintf(t->sock, sizeof t->sock, "%s/redis.sock", t->dir);
    char port[16];
    if ((t->port = tu_free_port()) < 0) {
        snprintf(err, errlen, "no free port: %s", strerror(errno));
        return -1;
    }
    snprintf(port, sizeof port, "%d", t->port);
    char *extra[] = { "--port", port, NULL };
    return tu_redis_spawn_with(env->redis_server, t->dir, t->sock, extra, TU_DIE_WITH_PARENT,
                               &t->pid, err, errlen);
}

/* The redis group of delayqd.conf for `t`. */
static void redis_group(const struct target *t, char *out, size_t len)
{
    if (!t->masters) {
        snprintf(out, len, "host = \"127.0.0.1\"; port = %d;", t->port);
        return;
    }
    size_t n = (size_t)snprintf(out, len, "cluster = true; nodes = [ ");
    for (int i = 0; i < t->fx.nnodes && n < len; i++)
        n += (size_t)snprintf(out + n, len - n, "%s\"%s\"", i ? ", " : "", t->fx.seeds[i]);
    if (n < len)
        snprintf(out + n, len - n, " ];");
}

static dq_client *target_client(const struct target *t, char *err, size_t errlen)
{
    dq_options opt;
    dq_options_init(&opt);
    opt.command_timeout_ms = 60000;
    opt.host = "127.0.0.1";
    if (t->masters) {
        opt.cluster = 1;
        opt.nodes = t->fx.seeds;
        opt.nnodes = (size_t)t->fx.nnodes;
    } else {
        opt.port = t->port;
    }
    return dq_connect(&opt, err, errlen, NULL);
}

/* Sum a CLIENT LIST count over the target's servers. */
static int clients_with(const struct target *t, const char *needle)
{
    int sum = 0;
    for (int i = 0; i < (t->masters ? t->fx.nnodes : 1); i++) {
        char err[300];
        redisContext *rc = t->masters ? cluster_fx_connect(&t->fx, i, 2000, err, sizeof err)
                                      : tu_redis_connect(t->sock, 2000, err, sizeof err);
        if (!rc)
            continue;
        int n = tu_redis_clients_with(rc, needle);
        sum += n > 0 ? n : 0;
        redisFree(rc);
    }
    return sum;
}

/* Start delayqd on `t` and wait until its workers subscribed and claimed
 * and the reaper reaped (tu_delayqd_ready's counts, over every node). */
static int daemon_start(struct target *t, const struct bench_env *env, char *err,
                        size_t errlen)
{
    char redis[CLUSTER_FX_MAX_NODES * 40 + 64];
    redis_group(t, redis, sizeof redis);
    struct daemon_spec spec = { .workers = CLUSTER_WORKERS, .batch = CLUSTER_BATCH,
                                .redis_group = redis, .partitions = t->partitions };
    if (daemon_proc_spawn(&t->daemon, env, target_dir(t), &spec, err, errlen) < 0)
        return -1;
    int64_t deadline = tu_mono_ms() + READY_TIMEOUT_MS;
    while (tu_mono_ms() < deadline && !bench_interrupted) {
        if (waitpid(t->daemon.pid, NULL, WNOHANG) == t->daemon.pid) {
            t->daemon.pid = 0;
            char why[600];
            daemon_proc_last_problem(&t->daemon, why, sizeof why);
            snprintf(err, errlen, "delayqd exited at start: %s", why);
            return -1;
        }
        if (clients_with(t, "cmd=subscribe") >= CLUSTER_WORKERS
            && clients_with(t, "cmd=evalsha") >= CLUSTER_WORKERS + 1)
            return 0;
        bench_sleep_ms(20);
    }
    snprintf(err, errlen, "delayqd did not get ready within %d s (log %s)",
             READY_TIMEOUT_MS / 1000, t->daemon.log);
    return -1;
}

/* Start the servers (and the daemon when `daemon`), and a client. */
static int target_open(struct target *t, const struct bench_env *env, int masters,
                       int partitions, int daemon, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    t->masters = masters;
    t->partitions = partitions;
    int rc = masters ? cluster_fx_start(&t->fx, masters, 0, NULL, err, errlen)
                     : plain_start(t, env, err, errlen);
    if (rc < 0)
        return -1;
    /* The daemon records the partitions before the client reads them. */
    if (daemon && daemon_start(t, env, err, errlen) < 0)
        return -1;
    if (!(t->client = target_client(t, err, errlen)))
        return -1;
    return 0;
}

static void target_close(struct target *t)
{
    if (t->daemon.pid > 0)
        daemon_proc_stop(&t->daemon, 15000);
    dq_close(t->client);
    t->client = NULL;
    if (t->masters) {
        cluster_fx_stop(&t->fx);
    } else {
        if (t->pid > 0)
            tu_stop_process(t->pid, 5000);
        t->pid = 0;
        if (t->dir[0] && !bench_keep)
            tu_remove_tree(t->dir);
    }
}

static pid_t server_pid(const struct target *t, int i)
{
    return t->masters ? t->fx.pid[i] : t->pid;
}

/* Whether the kernel counts `t`'s servers' CPU time exactly (a drain of
 * 100,000 jobs takes each master a tenth of a second, where /proc's ticks
 * are 10 ms): chosen once a row, so that both samples are of one kind. */
static int servers_cpu_exact(const struct target *t)
{
    return measure_proc_runtime_us(server_pid(t, 0)) >= 0;
}

/* The CPU time of every server of `t` in µs, into cpu[], exact or in
 * ticks; -1 when one is gone. */
static int servers_cpu(const struct target *t, int exact, int64_t *cpu)
{
    for (int i = 0; i < (t->masters ? t->masters : 1); i++) {
        pid_t pid = server_pid(t, i);
        cpu[i] = exact ? measure_proc_runtime_us(pid) : measure_proc_cpu_us(pid, NULL);
        if (cpu[i] < 0)
            return -1;
    }
    return 0;
}

/* The INFO counters of every master of `t`, summed into *sum; -1 when
 * one does not answer. */
static int servers_info(const struct target *t, struct info_snap *sum)
{
    memset(sum, 0, sizeof *sum);
    for (int i = 0; i < (t->masters ? t->masters : 1); i++) {
        char err[300];
        redisContext *rc = t->masters ? cluster_fx_connect(&t->fx, i, 2000, err, sizeof err)
                                      : tu_redis_connect(t->sock, 2000, err, sizeof err);
        struct info_snap one;
        int ok = rc && info_take(rc, &one, err, sizeof err) == 0;
        if (rc)
            redisFree(rc);
        if (!ok)
            return -1;
        info_accumulate(sum, &one);
    }
    return 0;
}

static int queue_empty(dq_client *c, int *empty)
{
    dq_stats st;
    if (dq_stats_get(c, BENCH_QUEUE, &st) != DQ_OK)
        return -1;
    *empty = st.delayed + st.due + st.processing == 0;
    return 0;
}

static void target_name(const struct target *t, char *out, size_t len)
{
    if (t->masters)
        snprintf(out, len, "%d master%s p=%d", t->masters, t->masters > 1 ? "s" : "",
                 t->partitions);
    else
        snprintf(out, len, "plain p=%d", t->partitions ? t->partitions : 1);
}

/* ---- drain --------------------------------------------------------------------- */

static int drain_row(const struct bench_env *env, int masters, int partitions, char *err,
                     size_t errlen)
{
    long n = env->opt.n;
    struct target t;
    struct report_row row;
    char config[48], name[32];
    int rc = -1;
    report_row_init(&row, "cluster", "drain");
    if (target_open(&t, env, masters, partitions, 1, err, errlen) < 0)
        goto done;
    target_name(&t, name, sizeof name);
    snprintf(config, sizeof config, "drain %s", name);
    snprintf(row.config, sizeof row.config, "%s", config);
    bench_progress("cluster %s: %ld jobs", config, n);
    /* Due well after the enqueueing: a plain server takes about 6 µs a
     * job, the cluster router up to 100 here. */
    int64_t due = bench_real_ms() + 1000 + n * FILL_LEAD_US_PER_JOB / 1000;
    int64_t f0 = bench_mono_us();
    if (bench_fill(t.client, n, due, 0, err, errlen) < 0)
        goto done;
    double fill_us = (double)(bench_mono_us() - f0) / (double)n;
    if (bench_real_ms() > due - 20) {
        snprintf(err, errlen, "enqueueing %ld jobs was not over before they were due", n);
        goto done;
    }
    int64_t cpu0[CLUSTER_FX_MAX_NODES], cpu1[CLUSTER_FX_MAX_NODES];
    bench_sleep_until_real_ms(due - 20);
    struct info_snap i0, i1, di;
    int exact = servers_cpu_exact(&t);
    int64_t d0 = measure_tree_cpu_us(t.daemon.pid, NULL);
    if (servers_info(&t, &i0) < 0 || servers_cpu(&t, exact, cpu0) < 0)
        goto gone;
    bench_sleep_until_real_ms(due);
    int64_t deadline = tu_mono_ms() + 30000 + n / 2;
    int empty = 0;
    long polls = 0;             /* each runs the stats script on every partition */
    while (!empty) {
        polls++;
        if (queue_empty(t.client, &empty) < 0) {
            snprintf(err, errlen, "stats: %s", dq_errmsg(t.client));
            goto done;
        }
        if (!empty && (tu_mono_ms() > deadline || bench_interrupted)) {
            snprintf(err, errlen, "the jobs were not done by the deadline (log %s)",
                     t.daemon.log);
            goto done;
        }
        if (!empty)
            bench_sleep_ms(10);
    }
    double secs = (double)(bench_real_us() - due * 1000) / 1e6;
    int64_t d1 = measure_tree_cpu_us(t.daemon.pid, NULL);
    if (servers_cpu(&t, exact, cpu1) < 0 || servers_info(&t, &i1) < 0)
        goto gone;
    info_delta(&i1, &i0, &di);
    struct cmd_stat ev = info_cmd(&di, "evalsha");
    double daemon_scripts = ev.calls - (double)(polls * (partitions ? partitions : 1));
    double sum = 0;
    /* The daemon's scripts a job (the bench's own stats polls left out),
     * and all scripts' own time (Redis's count, the polls' included)
     * against the CPU: what is not in it is reading, writing and waiting
     * for commands. */
    size_t len = (size_t)snprintf(row.note, sizeof row.note, "enqueue_many %.1f us/job; "
                                  "daemon's evalsha %.4f/job; %.2f us/job inside scripts; "
                                  "commands %.4f/job; redis us/job per master:", fill_us,
                                  daemon_scripts / (double)n, ev.usec / (double)n,
                                  di.total_commands / (double)n);
    for (int i = 0; i < (masters ? masters : 1); i++) {
        double us = (double)(cpu1[i] - cpu0[i]) / (double)n;
        sum += us;
        if (len < sizeof row.note)
            len += (size_t)snprintf(row.note + len, sizeof row.note - len, " %.2f", us);
    }
    row.v[COL_JOBS] = (double)n;
    row.v[COL_JOBS_PER_S] = (double)n / secs;
    row.v[COL_SECONDS] = secs;
    row.v[COL_REDIS_US_PER_JOB] = sum;
    row.v[COL_DAEMON_US_PER_JOB] = (double)(d1 - d0) / (double)n;
    report_add(&row);
    rc = 0;
    goto done;
gone:
    snprintf(err, errlen, "a redis-server exited");
done:
    if (rc < 0)
        bench_err_prefix(err, errlen, masters ? "cluster drain" : "plain drain");
    target_close(&t);
    return rc;
}

/* ---- latency ------------------------------------------------------------------- */

/* Median µs of CLUSTER_SAMPLES one-job enqueues, due in an hour. */
static int time_enqueues(dq_client *c, double *median, char *err, size_t errlen)
{
    static double us[CLUSTER_SAMPLES];
    for (int i = 0; i < CLUSTER_SAMPLES; i++) {
        dq_enqueue_req r = { .queue = BENCH_QUEUE, .type = BENCH_TYPE, .payload = bench_payload,
                             .payload_len = BENCH_PAYLOAD_LEN, .delay_ms = 3600 * 1000 };
        int64_t t0 = bench_mono_us();
        if (dq_enqueue(c, &r, NULL) != DQ_OK) {
            snprintf(err, errlen, "enqueue: %s", dq_errmsg(c));
            return -1;
        }
        us[i] = (double)(bench_mono_us() - t0);
    }
    bench_sort(us, CLUSTER_SAMPLES);
    *median = bench_percentile(us, CLUSTER_SAMPLES, 50);
    return 0;
}

/* Medians of CLUSTER_SAMPLES claims of one due job, and of claim + ack. */
static int time_claim_acks(dq_client *c, double *claim, double *both, char *err, size_t errlen)
{
    static double cl[CLUSTER_SAMPLES], all[CLUSTER_SAMPLES];
    if (bench_fill(c, CLUSTER_SAMPLES, bench_real_ms() - 1000, 0, err, errlen) < 0)
        return -1;
    for (int i = 0; i < CLUSTER_SAMPLES; i++) {
        dq_claim_result res;
        int64_t t0 = bench_mono_us();
        dq_status st = dq_claim(c, BENCH_QUEUE, 1, 60000, &res);
        int64_t t1 = bench_mono_us();
        if (st != DQ_OK || res.n != 1) {
            snprintf(err, errlen, "claim %d: %s", i, st != DQ_OK ? dq_errmsg(c) : "none due");
            dq_claim_result_free(&res);
            return -1;
        }
        st = dq_ack(c, BENCH_QUEUE, res.jobs[0].id, res.jobs[0].fence);
        all[i] = (double)(bench_mono_us() - t0);
        cl[i] = (double)(t1 - t0);
        dq_claim_result_free(&res);
        if (st != DQ_OK) {
            snprintf(err, errlen, "ack: %s", dq_errmsg(c));
            return -1;
        }
    }
    bench_sort(cl, CLUSTER_SAMPLES);
    bench_sort(all, CLUSTER_SAMPLES);
    *claim = bench_percentile(cl, CLUSTER_SAMPLES, 50);
    *both = bench_percentile(all, CLUSTER_SAMPLES, 50);
    return 0;
}

/* The queue's meta hash (its own {Q} slot) holds the partition count,
 * KEYS_PARTITIONS_FIELD. */
static int record_partitions(const struct target *t, int partitions, char *err, size_t errlen)
{
    long long slot = cluster_fx_int(&t->fx, 0, "CLUSTER KEYSLOT {" BENCH_QUEUE "}");
    int m = slot < 0 ? -1 : cluster_fx_master_of_slot(&t->fx, (int)slot);
    if (m < 0 || cluster_fx_int(&t->fx, m, "HSET dq:{" BENCH_QUEUE "}:meta %s %d",
                                KEYS_PARTITIONS_FIELD, partitions) < 0) {
        snprintf(err, errlen, "cannot record %d partitions", partitions);
        return -1;
    }
    return 0;
}

static int latency_row(const struct bench_env *env, int masters, int partitions, char *err,
                       size_t errlen)
{
    struct target t;
    struct report_row row;
    char config[48], name[32];
    int rc = -1;
    /* No daemon (it would take the due jobs): the partition count is
     * written where the daemon records it, before the client reads it. */
    if (target_open(&t, env, masters, partitions, 0, err, errlen) < 0
        || (partitions > 1 && record_partitions(&t, partitions, err, errlen) < 0))
        goto done;
    target_name(&t, name, sizeof name);
    snprintf(config, sizeof config, "latency %s", name);
    report_row_init(&row, "cluster", config);
    bench_progress("cluster %s: %d calls each", config, CLUSTER_SAMPLES);
    double enq, claim, both;
    if (time_enqueues(t.client, &enq, err, errlen) < 0
        || time_claim_acks(t.client, &claim, &both, err, errlen) < 0)
        goto done;
    row.v[COL_ENQUEUE_US] = enq;
    row.v[COL_CLAIM_US] = claim;
    row.v[COL_CLAIM_ACK_US] = both;
    snprintf(row.note, sizeof row.note, "%s: enqueue %.0f us, claim %.0f us, claim+ack %.0f us "
             "(medians)", masters ? "router" : "direct", enq, claim, both);
    report_add(&row);
    rc = 0;
done:
    if (rc < 0)
        bench_err_prefix(err, errlen, "cluster latency");
    target_close(&t);
    return rc;
}

int run_cluster(const struct bench_env *env, char *err, size_t errlen)
{
    char why[300];
    if (cluster_fx_available(why, sizeof why) < 0) {
        report_note("cluster run skipped: %s", why);
        return 0;
    }
    if (drain_row(env, 0, 0, err, errlen) < 0 || drain_row(env, 0, CLUSTER_PARTS, err, errlen) < 0)
        return -1;
    for (int m = 1; m <= 3; m++)
        if (drain_row(env, m, CLUSTER_PARTS, err, errlen) < 0)
            return -1;
    if (latency_row(env, 0, 1, err, errlen) < 0 || latency_row(env, 1, 1, err, errlen) < 0)
        return -1;
    return latency_row(env, 3, CLUSTER_PARTS, err, errlen);
}
