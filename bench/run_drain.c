/*
 * The runs through the real daemon with jobs to do:
 *
 * drain     N jobs all due at one instant; jobs/s from that instant to the
 *           last ack, and the CPU of redis-server and of every delayqd
 *           process during the drain, per job.  For 1, 2, 4 workers x
 *           claim batch 1, 16, 64; then 2 x 64 with due times scattered,
 *           and 2 x 64 with the jobs spread over three priorities.
 * lateness  jobs due evenly over a few seconds at 200/s, then 5,000/s;
 *           handler start - due time, from the no-op handler's record.
 *
 * Every job is enqueued in advance with an absolute due time (at_ms), far
 * enough ahead that the enqueueing is over before the first is due.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/daemon_proc.h"
#include "bench/measure.h"
#include "bench/redis_proc.h"
#include "bench/report.h"
#include "tests/testutil.h"

#define DELAYED_KEY "dq:{" BENCH_QUEUE "}:delayed"
/* The delayed sets of the high and low levels (normal's is DELAYED_KEY). */
#define DELAYED_HIGH_KEY DELAYED_KEY ":0"
#define DELAYED_LOW_KEY DELAYED_KEY ":9"
#define PROCESSING_KEY "dq:{" BENCH_QUEUE "}:processing"
#define DEAD_KEY "dq:{" BENCH_QUEUE "}:dead"

/* The last pipelined enqueue's cost, to plan how far ahead to set the due
 * time: twice the expected enqueue time, plus half a second. */
static double fill_us_per_job = 40;

static int64_t lead_ms(long jobs)
{
    return 500 + (int64_t)(2 * fill_us_per_job * (double)jobs / 1000);
}

/* The resources of one row, released together. */
struct row_ctx {
    struct redis_proc redis;
    struct daemon_proc daemon;
    dq_client *client;
    redisContext *rc;
};

static int row_open(struct row_ctx *x, const struct bench_env *env,
                    const struct daemon_spec *spec, char *err, size_t errlen)
{
    memset(x, 0, sizeof *x);
    if (redis_proc_start(&x->redis, env->redis_server, err, errlen) < 0)
        return -1;
    if (spec && daemon_proc_start(&x->daemon, env, &x->redis, spec, err, errlen) < 0)
        return -1;
    if (!(x->client = bench_client(x->redis.sock, err, errlen)))
        return -1;
    if (!(x->rc = redis_proc_connect(&x->redis, err, errlen)))
        return -1;
    return 0;
}

static void row_close(struct row_ctx *x)
{
    if (x->daemon.pid > 0)
        daemon_proc_stop(&x->daemon, 15000);
    if (x->rc)
        redisFree(x->rc);
    dq_close(x->client);
    redis_proc_stop(&x->redis);
    memset(x, 0, sizeof *x);
}

/* A row's return when its jobs came due before they were all enqueued:
 * its figures would measure the enqueueing.  It is run again (ROW_TRIES in
 * all), with a lead planned from the enqueue cost just seen. */
#define ROW_TOO_BUSY (-2)
#define ROW_TRIES 3

/* Enqueue `jobs` due from `at0` every `spacing_ms` (or, with scatter_ms,
 * scattered over the scatter_ms before at0; or, with `priorities`, a third
 * at each level, all at at0), and check that the enqueueing ended before
 * the first was due: ROW_TOO_BUSY if not. */
static int fill_ahead(struct row_ctx *x, long jobs, int64_t at0, double spacing_ms,
                      int scatter_ms, int priorities, char *err, size_t errlen)
{
    int64_t t0 = bench_mono_us();
    int st = priorities ? bench_fill_priorities(x->client, jobs, at0, err, errlen)
        : scatter_ms > 0 ? bench_fill_scattered(x->client, jobs, at0, scatter_ms, err, errlen)
        : bench_fill(x->client, jobs, at0, spacing_ms, err, errlen);
    if (st < 0)
        return -1;
    int64_t first_due = at0 - scatter_ms;
    fill_us_per_job = (double)(bench_mono_us() - t0) / (double)jobs;
    if (bench_real_ms() > first_due - 20) {
        snprintf(err, errlen, "enqueueing %ld jobs was not over before they were due "
                 "(%.0f us/job): the machine is too busy", jobs, fill_us_per_job);
        return ROW_TOO_BUSY;
    }
    return 0;
}

/* How a drain row's jobs are due. */
enum drain_kind {
    DRAIN_AT_ONCE,          /* all at one instant, all normal */
    DRAIN_SCATTERED,        /* over SCATTER_MS, ids out of due order */
    DRAIN_PRIORITIES        /* at one instant, a third each high, normal, low */
};

/* Jobs not finished yet: delayed (at every level the row uses), then in
 * processing (less the set's pin, scored 2^53 - 1).  Read in that order, a
 * job cannot slip between the reads, since nothing in a drain goes back
 * from processing.  Rows of normal jobs poll only the normal set, so that
 * the polling costs Redis what it did before priorities. */
static long long jobs_left(struct row_ctx *x, enum drain_kind kind)
{
    long long delayed = tu_redis_int(x->rc, "ZCARD %s", DELAYED_KEY);
    if (kind == DRAIN_PRIORITIES && delayed >= 0) {
        long long high = tu_redis_int(x->rc, "ZCARD %s", DELAYED_HIGH_KEY);
        long long low = tu_redis_int(x->rc, "ZCARD %s", DELAYED_LOW_KEY);
        delayed = high < 0 || low < 0 ? -1 : delayed + high + low;
    }
    long long processing = tu_redis_int(x->rc, "ZCOUNT %s -inf (9007199254740991",
                                        PROCESSING_KEY);
    return delayed < 0 || processing < 0 ? -1 : delayed + processing;
}

/* Poll until every job is acked; returns 0 and the realtime µs of the poll
 * that saw it, or -1 at the deadline. */
static int wait_drained(struct row_ctx *x, enum drain_kind kind, int64_t deadline_mono_us,
                        int poll_ms, int64_t *end_us, char *err, size_t errlen)
{
    for (;;) {
        long long left = jobs_left(x, kind);
        *end_us = bench_real_us();
        if (left == 0)
            return 0;
        if (left < 0) {
            snprintf(err, errlen, "ZCARD: %s", x->rc->err ? x->rc->errstr : "odd reply");
            return -1;
        }
        if (bench_mono_us() >= deadline_mono_us || bench_interrupted) {
            char why[600];
            daemon_proc_last_problem(&x->daemon, why, sizeof why);
            snprintf(err, errlen, "%s: %lld jobs not done (%lld dead)%s%s",
                     bench_interrupted ? "interrupted" : "deadline passed", left,
                     tu_redis_int(x->rc, "ZCARD %s", DEAD_KEY), why[0] ? "; daemon: " : "",
                     why);
            return -1;
        }
        bench_sleep_ms(poll_ms);
    }
}

/* Fill the CPU and script columns of a row from samples around a run. */
static void fill_costs(struct report_row *row, long jobs, const struct cpu_sample *c0,
                       const struct cpu_sample *c1, const struct info_snap *i0,
                       const struct info_snap *i1)
{
    struct info_snap d;
    info_delta(i1, i0, &d);
    struct cmd_stat ev = info_cmd(&d, "evalsha");
    row->v[COL_JOBS] = (double)jobs;
    row->v[COL_REDIS_US_PER_JOB] = (double)(c1->redis_us - c0->redis_us) / (double)jobs;
    row->v[COL_DAEMON_US_PER_JOB] = (double)(c1->daemon_us - c0->daemon_us) / (double)jobs;
    row->v[COL_SCRIPT_US_PER_JOB] = ev.usec / (double)jobs;
    row->v[COL_CALLS_PER_JOB] = ev.calls / (double)jobs;
}

/* ---- drain ------------------------------------------------------------------ */

/* The drain's worst case for the record buckets: SCATTER_MS due times in
 * an order unrelated to the ids, so that a claim of 64 reads about 64
 * buckets rather than 2 or 3. */
#define SCATTER_MS 100

static int drain_row(const struct bench_env *env, int workers, int batch,
                     enum drain_kind kind, char *err, size_t errlen)
{
    long n = env->opt.n;
    int scattered = kind == DRAIN_SCATTERED;
    struct report_row row;
    char config[48];
    snprintf(config, sizeof config, "w=%d b=%d%s", workers, batch,
             scattered ? " scattered" : kind == DRAIN_PRIORITIES ? " 3 priorities" : "");
    report_row_init(&row, "drain", config);
    bench_progress("drain %s: %ld jobs", config, n);
    struct daemon_spec spec = { .workers = workers, .batch = batch };
    struct row_ctx x;
    int rc = -1;
    if (row_open(&x, env, &spec, err, errlen) < 0)
        goto done;
    /* All are due at `due`; scattered, the first at `start`. */
    int64_t due = bench_real_ms() + lead_ms(n) + (scattered ? SCATTER_MS : 0);
    int64_t start = due - (scattered ? SCATTER_MS : 0);
    int filled = fill_ahead(&x, n, due, 0, scattered ? SCATTER_MS : 0,
                            kind == DRAIN_PRIORITIES, err, errlen);
    if (filled < 0) {
        rc = filled;
        goto done;
    }
    struct cpu_sample c0, c1;
    struct info_snap i0, i1;
    bench_sleep_until_real_ms(start - 20);
    if (info_take(x.rc, &i0, err, errlen) < 0)
        goto done;
    measure_cpu(&c0, x.redis.pid, x.daemon.pid);
    bench_sleep_until_real_ms(start);
    int64_t end_us;
    int64_t deadline = bench_mono_us() + (30 + n / 2000) * 1000000LL;
    if (wait_drained(&x, kind, deadline, 1, &end_us, err, errlen) < 0)
        goto done;
    measure_cpu(&c1, x.redis.pid, x.daemon.pid);
    if (info_take(x.rc, &i1, err, errlen) < 0)
        goto done;
    double secs = (double)(end_us - start * 1000) / 1e6;
    fill_costs(&row, n, &c0, &c1, &i0, &i1);
    row.v[COL_JOBS_PER_S] = (double)n / secs;
    row.v[COL_SECONDS] = secs;
    snprintf(row.note, sizeof row.note,
             "scripts %.2f us/job, %.3f evalsha/job; sys share: redis %.0f%%, delayqd %.0f%%",
             row.v[COL_SCRIPT_US_PER_JOB], row.v[COL_CALLS_PER_JOB],
             measure_sys_pct(&c0, &c1, 0), measure_sys_pct(&c0, &c1, 1));
    report_add(&row);
    rc = 0;
done:
    if (rc < 0)
        bench_err_prefix(err, errlen, config);
    row_close(&x);
    return rc;
}

/* Say that a row is run again, and why. */
static void row_again(const char *err)
{
    bench_progress("%s; again, with a longer lead", err);
}

/* drain_row, run again while the machine was too busy to enqueue ahead. */
static int drain_row_tried(const struct bench_env *env, int workers, int batch,
                           enum drain_kind kind, char *err, size_t errlen)
{
    int rc = drain_row(env, workers, batch, kind, err, errlen);
    for (int t = 1; rc == ROW_TOO_BUSY && t < ROW_TRIES; t++) {
        row_again(err);
        rc = drain_row(env, workers, batch, kind, err, errlen);
    }
    return rc < 0 ? -1 : 0;
}

int run_drain(const struct bench_env *env, char *err, size_t errlen)
{
    static const int workers[] = { 1, 2, 4 };
    static const int batches[] = { 1, 16, 64 };
    for (size_t w = 0; w < 3; w++)
        for (size_t b = 0; b < 3; b++)
            if (drain_row_tried(env, workers[w], batches[b], DRAIN_AT_ONCE, err, errlen) < 0)
                return -1;
    if (drain_row_tried(env, 2, 64, DRAIN_SCATTERED, err, errlen) < 0)
        return -1;
    return drain_row_tried(env, 2, 64, DRAIN_PRIORITIES, err, errlen);
}

/* ---- lateness --------------------------------------------------------------- */

/* Lateness in ms of every line "due_ms start_ms" of the file. */
static double *read_lateness(const char *path, size_t *n)
{
    *n = 0;
    FILE *fp = fopen(path, "r");
    if (!fp)
        return NULL;
    size_t cap = 4096;
    double *v = malloc(cap * sizeof *v);
    long long due;
    double start;
    while (v && fscanf(fp, "%lld %lf", &due, &start) == 2) {
        if (*n == cap) {
            double *more = realloc(v, 2 * cap * sizeof *v);
            if (!more)
                break;
            v = more;
            cap *= 2;
        }
        v[(*n)++] = start - (double)due;
    }
    fclose(fp);
    return v;
}

/* A lateness row: jobs due evenly at `rate` a second, on a queue of
 * `parts` partitions (0: not partitioned). */
static int lateness_row(const struct bench_env *env, int rate, int parts, char *err,
                        size_t errlen)
{
    long jobs = lround(rate * env->opt.lateness_s);
    double spacing = 1000.0 / rate;
    struct report_row row;
    char config[64], on[16] = "";
    if (parts > 1)
        snprintf(on, sizeof on, " p=%d", parts);
    snprintf(config, sizeof config, "w=%d b=%d %d/s %gs%s", env->opt.lateness_workers,
             env->opt.lateness_batch, rate, env->opt.lateness_s, on);
    report_row_init(&row, "lateness", config);
    bench_progress("lateness %s: %ld jobs", config, jobs);
    struct row_ctx x;
    memset(&x, 0, sizeof x);
    double *late = NULL;
    int rc = -1;
    /* The file lives in the server's directory, known once it exists. */
    if (redis_proc_start(&x.redis, env->redis_server, err, errlen) < 0)
        goto done;
    char file[PATH_MAX + 32];
    snprintf(file, sizeof file, "%s/lateness.txt", x.redis.dir);
    struct daemon_spec spec = { .workers = env->opt.lateness_workers,
                                .batch = env->opt.lateness_batch, .lateness_file = file,
                                .partitions = parts };
    if (daemon_proc_start(&x.daemon, env, &x.redis, &spec, err, errlen) < 0)
        goto done;
    if (!(x.client = bench_client(x.redis.sock, err, errlen))
        || !(x.rc = redis_proc_connect(&x.redis, err, errlen)))
        goto done;
    int64_t at0 = bench_real_ms() + lead_ms(jobs);
    int filled = fill_ahead(&x, jobs, at0, spacing, 0, 0, err, errlen);
    if (filled < 0) {
        rc = filled;
        goto done;
    }
    struct cpu_sample c0, c1;
    struct info_snap i0, i1;
    bench_sleep_until_real_ms(at0 - 20);
    if (info_take(x.rc, &i0, err, errlen) < 0)
        goto done;
    measure_cpu(&c0, x.redis.pid, x.daemon.pid);
    bench_sleep_until_real_ms(at0 + (int64_t)(env->opt.lateness_s * 1000));
    int64_t end_us;
    if (wait_drained(&x, DRAIN_AT_ONCE, bench_mono_us() + 30 * 1000000LL, 5, &end_us,
                     err, errlen) < 0)
        goto done;
    measure_cpu(&c1, x.redis.pid, x.daemon.pid);
    if (info_take(x.rc, &i1, err, errlen) < 0)
        goto done;
    /* The handler writes the rest of its record when its worker stops. */
    if (daemon_proc_stop(&x.daemon, 15000) < 0) {
        snprintf(err, errlen, "delayqd did not stop cleanly (log %s)", x.daemon.log);
        goto done;
    }
    size_t n;
    late = read_lateness(file, &n);
    if (!late || (long)n != jobs) {
        snprintf(err, errlen, "%zu of %ld job starts recorded in %s", n, jobs, file);
        goto done;
    }
    bench_sort(late, n);
    fill_costs(&row, jobs, &c0, &c1, &i0, &i1);
    row.v[COL_JOBS_PER_S] = rate;
    row.v[COL_P50_MS] = bench_percentile(late, n, 50);
    row.v[COL_P99_MS] = bench_percentile(late, n, 99);
    row.v[COL_P999_MS] = bench_percentile(late, n, 99.9);
    row.v[COL_MAX_MS] = late[n - 1];
    row.v[COL_SECONDS] = (double)(c1.wall_us - c0.wall_us) / 1e6;
    snprintf(row.note, sizeof row.note, "min %.2f ms; %.3f evalsha/job; CPU per job "
             "includes idle time", late[0], row.v[COL_CALLS_PER_JOB]);
    report_add(&row);
    rc = 0;
done:
    if (rc < 0)
        bench_err_prefix(err, errlen, config);
    free(late);
    row_close(&x);
    return rc;
}

/* At 200 and 5,000 jobs a second; and at 200 on a queue of 12
 * partitions, where each look a worker takes at the queue may ask every
 * partition (the evalsha/job column). */
/* lateness_row, run again while the machine was too busy to enqueue
 * ahead. */
static int lateness_row_tried(const struct bench_env *env, int rate, int parts, char *err,
                              size_t errlen)
{
    int rc = lateness_row(env, rate, parts, err, errlen);
    for (int t = 1; rc == ROW_TOO_BUSY && t < ROW_TRIES; t++) {
        row_again(err);
        rc = lateness_row(env, rate, parts, err, errlen);
    }
    return rc < 0 ? -1 : 0;
}

int run_lateness(const struct bench_env *env, char *err, size_t errlen)
{
    if (lateness_row_tried(env, 200, 0, err, errlen) < 0
        || lateness_row_tried(env, 5000, 0, err, errlen) < 0)
        return -1;
    return lateness_row_tried(env, 200, 12, err, errlen);
}
