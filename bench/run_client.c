/*
 * The runs through libdelayq alone, without the daemon:
 *
 * enqueue  first N PINGs one at a time (the round trip that bounds any
 *          one-call-at-a-time enqueue on one connection); then N jobs one
 *          call at a time (dq_enqueue), the same from 4 processes at once,
 *          and N in bulk (dq_enqueue_many, BENCH_CHUNK per call): jobs/s,
 *          and the CPU of redis-server and of the client per job.
 * scale    10k, 1M (and 10M with --scale-10m) delayed jobs due far ahead,
 *          plus 1000 due now: the median of 1000 dq_claim + dq_ack of one
 *          due job, and used_memory per delayed job (32-byte payloads).
 *          The bench and redis-server are pinned to one CPU meanwhile: a
 *          round trip between two CPUs costs several times one within a
 *          CPU on some virtual machines, and the scheduler's placement
 *          would otherwise decide the comparison.
 */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/measure.h"
#include "bench/redis_proc.h"
#include "bench/report.h"

#define HOUR_MS (3600 * 1000LL)
#define DAY_MS (24 * HOUR_MS)
#define SCALE_DUE_NOW 1000      /* due jobs, one per claim sample */

/* A server with a client and a raw connection, released together. */
struct client_ctx {
    struct redis_proc redis;
    dq_client *client;
    redisContext *rc;
};

static int ctx_open(struct client_ctx *x, const struct bench_env *env, char *err,
                    size_t errlen)
{
    memset(x, 0, sizeof *x);
    if (redis_proc_start(&x->redis, env->redis_server, err, errlen) < 0)
        return -1;
    if (!(x->client = bench_client(x->redis.sock, err, errlen)))
        return -1;
    if (!(x->rc = redis_proc_connect(&x->redis, err, errlen)))
        return -1;
    return 0;
}

static void ctx_close(struct client_ctx *x)
{
    if (x->rc)
        redisFree(x->rc);
    dq_close(x->client);
    redis_proc_stop(&x->redis);
    memset(x, 0, sizeof *x);
}

/* A script's line from the commandstats delta of calls of it alone. */
static void add_script(const char *script, const char *context, const struct info_snap *d,
                       double jobs)
{
    struct report_script s;
    memset(&s, 0, sizeof s);
    snprintf(s.script, sizeof s.script, "%s", script);
    snprintf(s.context, sizeof s.context, "%s", context);
    struct cmd_stat ev = info_cmd(d, "evalsha");
    s.calls = ev.calls;
    s.usec_per_call = ev.calls > 0 ? ev.usec / ev.calls : 0;
    s.usec_per_job = jobs > 0 ? ev.usec / jobs : 0;
    double inner = 0;
    for (size_t i = 0; i < d->ncmds; i++)
        if (strcmp(d->cmds[i].name, "evalsha") != 0 && strcmp(d->cmds[i].name, "info") != 0)
            inner += d->cmds[i].usec;
    s.inner_usec_per_job = jobs > 0 ? inner / jobs : 0;
    info_breakdown(d, jobs, "evalsha", 8, s.inner, sizeof s.inner);
    report_add_script(&s);
}

/* ---- enqueue ------------------------------------------------------------- */

static int enqueue_one_by_one(dq_client *c, long n, int64_t at0, char *err, size_t errlen)
{
    for (long i = 0; i < n; i++) {
        dq_enqueue_req req = {
            .queue = BENCH_QUEUE, .type = BENCH_TYPE, .payload = bench_payload,
            .payload_len = BENCH_PAYLOAD_LEN, .at_ms = at0 + i,
        };
        if (dq_enqueue(c, &req, NULL) != DQ_OK) {
            snprintf(err, errlen, "dq_enqueue: %s", dq_errmsg(c));
            return -1;
        }
    }
    return 0;
}

enum enqueue_mode {
    ENQ_ONE_AT_A_TIME,      /* dq_enqueue, one connection */
    ENQ_PRODUCERS,          /* dq_enqueue, PRODUCERS processes at once */
    ENQ_BULK                /* dq_enqueue_many, BENCH_CHUNK per call */
};

#define PRODUCERS 4

/* PRODUCERS processes, each with its own connection, enqueue n jobs in
 * all one call at a time: how web application processes enqueue.  They
 * start together when the parent closes the pipe they wait on. */
static int enqueue_by_producers(const char *sock, long n, int64_t at0, char *err,
                                size_t errlen)
{
    int gate[2];
    if (pipe(gate) < 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t pids[PRODUCERS];
    int started = 0;
    for (; started < PRODUCERS; started++) {
        pids[started] = fork();
        if (pids[started] < 0)
            break;
        if (pids[started] == 0) {
            close(gate[1]);
            char c, cerr[256];
            dq_client *cl = bench_client(sock, cerr, sizeof cerr);
            ssize_t got = read(gate[0], &c, 1);
            int ok = cl && got == 0
                     && enqueue_one_by_one(cl, n / PRODUCERS, at0, cerr, sizeof cerr) == 0;
            if (!ok)
                fprintf(stderr, "delayq-bench: producer: %s\n", cl ? cerr : "no client");
            dq_close(cl);
            _exit(ok ? 0 : 1);
        }
    }
    close(gate[0]);
    close(gate[1]);
    int failed = started < PRODUCERS;
    for (int i = 0; i < started; i++) {
        int status;
        if (waitpid(pids[i], &status, 0) < 0 || !WIFEXITED(status)
            || WEXITSTATUS(status) != 0)
            failed = 1;
    }
    if (failed)
        snprintf(err, errlen, "a producer process failed");
    return failed ? -1 : 0;
}

/* PING one at a time on the raw connection: the round trip alone, which
 * bounds any one-call-at-a-time enqueue on one connection. */
static int ping_row(struct client_ctx *x, long n, char *err, size_t errlen)
{
    struct report_row row;
    report_row_init(&row, "enqueue", "PING one at a time");
    struct cpu_sample c0, c1;
    measure_cpu(&c0, x->redis.pid, 0);
    for (long i = 0; i < n; i++) {
        redisReply *r = redisCommand(x->rc, "PING");
        if (!r) {
            snprintf(err, errlen, "PING: %s", x->rc->errstr);
            return -1;
        }
        freeReplyObject(r);
    }
    measure_cpu(&c1, x->redis.pid, 0);
    double secs = (double)(c1.wall_us - c0.wall_us) / 1e6;
    row.v[COL_JOBS] = (double)n;
    row.v[COL_JOBS_PER_S] = (double)n / secs;
    row.v[COL_REDIS_US_PER_JOB] = (double)(c1.redis_us - c0.redis_us) / (double)n;
    row.v[COL_SECONDS] = secs;
    snprintf(row.note, sizeof row.note,
             "round trips/s, not jobs: the bound on one connection, one call at a time");
    report_add(&row);
    return 0;
}

static int enqueue_row(const struct bench_env *env, enum enqueue_mode mode, char *err,
                       size_t errlen)
{
    long n = env->opt.n;
    static const char *const configs[] = { "one at a time", "one at a time x4", "bulk 10000/call" };
    const char *config = configs[mode];
    struct report_row row;
    report_row_init(&row, "enqueue", config);
    bench_progress("enqueue %s: %ld jobs", config, n);
    struct client_ctx x;
    int rc = -1;
    if (ctx_open(&x, env, err, errlen) < 0)
        goto done;
    if (mode == ENQ_ONE_AT_A_TIME && ping_row(&x, n, err, errlen) < 0)
        goto done;
    /* One job first, so that the script is loaded and the queue is
     * registered before the clock starts. */
    int64_t at0 = bench_real_ms() + HOUR_MS;
    if (enqueue_one_by_one(x.client, 1, at0 - 1, err, errlen) < 0)
        goto done;
    struct info_snap i0, i1, d;
    struct cpu_sample c0, c1;
    if (info_take(x.rc, &i0, err, errlen) < 0)
        goto done;
    measure_cpu(&c0, x.redis.pid, 0);
    int st = mode == ENQ_BULK ? bench_fill(x.client, n, at0, 1, err, errlen)
             : mode == ENQ_PRODUCERS ? enqueue_by_producers(x.redis.sock, n, at0, err, errlen)
             : enqueue_one_by_one(x.client, n, at0, err, errlen);
    measure_cpu(&c1, x.redis.pid, 0);
    if (st < 0 || info_take(x.rc, &i1, err, errlen) < 0)
        goto done;
    info_delta(&i1, &i0, &d);
    double secs = (double)(c1.wall_us - c0.wall_us) / 1e6;
    row.v[COL_JOBS] = (double)n;
    row.v[COL_JOBS_PER_S] = (double)n / secs;
    row.v[COL_REDIS_US_PER_JOB] = (double)(c1.redis_us - c0.redis_us) / (double)n;
    row.v[COL_SCRIPT_US_PER_JOB] = info_cmd(&d, "evalsha").usec / (double)n;
    row.v[COL_CALLS_PER_JOB] = info_cmd(&d, "evalsha").calls / (double)n;
    row.v[COL_SECONDS] = secs;
    if (mode == ENQ_PRODUCERS) {
        snprintf(row.note, sizeof row.note,
                 "%d processes, one connection each; scripts %.2f us/job; redis sys share %.0f%%",
                 PRODUCERS, row.v[COL_SCRIPT_US_PER_JOB], measure_sys_pct(&c0, &c1, 0));
    } else {
        row.v[COL_CLIENT_US_PER_JOB] = (double)(c1.self_us - c0.self_us) / (double)n;
        snprintf(row.note, sizeof row.note,
                 "client %.2f us/job; scripts %.2f us/job; redis sys share %.0f%%",
                 row.v[COL_CLIENT_US_PER_JOB], row.v[COL_SCRIPT_US_PER_JOB],
                 measure_sys_pct(&c0, &c1, 0));
    }
    report_add(&row);
    add_script("enqueue", config, &d, (double)n);
    rc = 0;
done:
    if (rc < 0)
        bench_err_prefix(err, errlen, config);
    ctx_close(&x);
    return rc;
}

int run_enqueue(const struct bench_env *env, char *err, size_t errlen)
{
    if (enqueue_row(env, ENQ_ONE_AT_A_TIME, err, errlen) < 0
        || enqueue_row(env, ENQ_PRODUCERS, err, errlen) < 0)
        return -1;
    return enqueue_row(env, ENQ_BULK, err, errlen);
}

/* ---- scale --------------------------------------------------------------- */

struct claim_times {
    double claim_us, ack_us, both_us;   /* medians */
};

/* Claim one due job and ack it, SCALE_DUE_NOW times. */
static int time_claims(dq_client *c, struct claim_times *t, char *err, size_t errlen)
{
    double claim[SCALE_DUE_NOW], ack[SCALE_DUE_NOW], both[SCALE_DUE_NOW];
    for (int i = 0; i < SCALE_DUE_NOW; i++) {
        dq_claim_result res;
        int64_t t0 = bench_mono_us();
        dq_status st = dq_claim(c, BENCH_QUEUE, 1, 60000, &res);
        int64_t t1 = bench_mono_us();
        if (st != DQ_OK || res.n != 1) {
            snprintf(err, errlen, "claim %d: %s", i,
                     st != DQ_OK ? dq_errmsg(c) : "no due job");
            dq_claim_result_free(&res);
            return -1;
        }
        st = dq_ack(c, BENCH_QUEUE, res.jobs[0].id, res.jobs[0].fence);
        int64_t t2 = bench_mono_us();
        dq_claim_result_free(&res);
        if (st != DQ_OK) {
            snprintf(err, errlen, "ack %d: %s", i, dq_errmsg(c));
            return -1;
        }
        claim[i] = (double)(t1 - t0);
        ack[i] = (double)(t2 - t1);
        both[i] = (double)(t2 - t0);
    }
    bench_sort(claim, SCALE_DUE_NOW);
    bench_sort(ack, SCALE_DUE_NOW);
    bench_sort(both, SCALE_DUE_NOW);
    t->claim_us = bench_percentile(claim, SCALE_DUE_NOW, 50);
    t->ack_us = bench_percentile(ack, SCALE_DUE_NOW, 50);
    t->both_us = bench_percentile(both, SCALE_DUE_NOW, 50);
    return 0;
}

/* Pin `pid` (0: this process) to CPU 0; the old mask in *old when not NULL. */
static void pin_cpu0(pid_t pid, cpu_set_t *old)
{
    if (old)
        sched_getaffinity(pid, sizeof *old, old);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    sched_setaffinity(pid, sizeof one, &one);
}

static int scale_point(const struct bench_env *env, long delayed, const char *config,
                       double *base_us, char *err, size_t errlen)
{
    struct report_row row;
    report_row_init(&row, "scale", config);
    bench_progress("scale %s: %ld delayed jobs + %d due", config, delayed, SCALE_DUE_NOW);
    struct client_ctx x;
    cpu_set_t mask;
    pin_cpu0(0, &mask);
    int rc = -1;
    if (ctx_open(&x, env, err, errlen) < 0)
        goto done;
    pin_cpu0(x.redis.pid, NULL);
    int64_t now = bench_real_ms();
    if (bench_fill(x.client, SCALE_DUE_NOW, now - 60000, 0, err, errlen) < 0)
        goto done;
    struct info_snap i0, i1;
    if (info_take(x.rc, &i0, err, errlen) < 0)
        goto done;
    /* Spread over the next day, from an hour ahead: distinct scores. */
    int64_t fill0 = bench_mono_us();
    if (bench_fill(x.client, delayed, now + HOUR_MS, (double)DAY_MS / (double)delayed, err,
                   errlen) < 0)
        goto done;
    double fill_s = (double)(bench_mono_us() - fill0) / 1e6;
    if (info_take(x.rc, &i1, err, errlen) < 0)
        goto done;
    struct claim_times t;
    struct info_snap i2, d;
    if (time_claims(x.client, &t, err, errlen) < 0 || info_take(x.rc, &i2, err, errlen) < 0)
        goto done;
    /* What Redis itself spent in the scripts, per claim + ack. */
    info_delta(&i2, &i1, &d);
    double server_us = info_cmd(&d, "evalsha").usec / SCALE_DUE_NOW;
    row.v[COL_JOBS] = (double)delayed;
    row.v[COL_BYTES_PER_JOB] = (i1.used_memory - i0.used_memory) / (double)delayed;
    row.v[COL_CLAIM_US] = t.claim_us;
    row.v[COL_ACK_US] = t.ack_us;
    row.v[COL_CLAIM_ACK_US] = t.both_us;
    row.v[COL_SECONDS] = fill_s;
    row.v[COL_SCRIPT_US_PER_JOB] = server_us;
    if (*base_us <= 0)
        *base_us = t.both_us;
    snprintf(row.note, sizeof row.note,
             "claim+ack %.1f us (claim %.1f, ack %.1f; in scripts %.1f) = %.2fx of 10k; "
             "%.0f B/job; filled at %.0f jobs/s",
             t.both_us, t.claim_us, t.ack_us, server_us, t.both_us / *base_us,
             row.v[COL_BYTES_PER_JOB], (double)delayed / fill_s);
    report_add(&row);
    rc = 0;
done:
    if (rc < 0)
        bench_err_prefix(err, errlen, config);
    ctx_close(&x);
    sched_setaffinity(0, sizeof mask, &mask);
    return rc;
}

/* Bytes of memory the system can still give, from /proc/meminfo. */
static long long mem_available(void)
{
    FILE *fp = fopen("/proc/meminfo", "r");
    if (!fp)
        return -1;
    char line[256];
    long long kb = -1;
    while (fgets(line, sizeof line, fp))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1)
            break;
    fclose(fp);
    return kb < 0 ? -1 : kb * 1024;
}

int run_scale(const struct bench_env *env, char *err, size_t errlen)
{
    double base_us = 0;
    if (scale_point(env, 10000, "10k delayed", &base_us, err, errlen) < 0)
        return -1;
    if (scale_point(env, 1000000, "1M delayed", &base_us, err, errlen) < 0)
        return -1;
    if (!env->opt.scale_10m)
        return 0;
    /* Some 200 bytes a job in Redis; ask for room for twice that, and a
     * GiB for the rest. */
    long long need = 10000000LL * 400 + (1LL << 30);
    long long avail = mem_available();
    if (avail >= 0 && avail < need) {
        report_note("scale 10M skipped: %lld MiB available, %lld MiB wanted", avail >> 20,
                    need >> 20);
        return 0;
    }
    return scale_point(env, 10000000, "10M delayed", &base_us, err, errlen);
}
