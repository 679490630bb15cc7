/*
 * The ceiling: how fast Redis itself can claim and ack, with no daemon and
 * no handler.  A tight loop on one raw hiredis connection keeps PIPELINE
 * claims in flight (redisAppendCommandArgv, redisGetReply); each claim's
 * reply at once queues the ack of its jobs and the next claim, so Redis
 * never waits for the loop, until N due jobs are done.  The commands are
 * the daemon's own (proto_claim_cmd, proto_ack_cmd), so the only
 * difference from a drain is the daemon.
 *
 * A second pass on fresh jobs claims them all, then acks them all, with
 * INFO commandstats around each half: the cost of each script alone.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/measure.h"
#include "bench/redis_proc.h"
#include "bench/report.h"
#include "lib/proto.h"

#define PIPELINE 16
#define LEASE_MS 60000
#define SPLIT_JOBS 20000        /* jobs of the per-script pass, at most */

struct ceiling_ctx {
    struct redis_proc redis;
    dq_client *client;
    redisContext *rc;
    struct queue_keys keys;
    struct cmd claim;           /* the same claim every time */
};

static int ctx_open(struct ceiling_ctx *x, const struct bench_env *env, int batch,
                    char *err, size_t errlen)
{
    memset(x, 0, sizeof *x);
    cmd_init(&x->claim);
    if (redis_proc_start(&x->redis, env->redis_server, err, errlen) < 0)
        return -1;
    if (!(x->client = bench_client(x->redis.sock, err, errlen)))
        return -1;
    if (!(x->rc = redis_proc_connect(&x->redis, err, errlen)))
        return -1;
    static const enum dq_script_id scripts[] = { DQ_SCRIPT_CLAIM, DQ_SCRIPT_ACK };
    for (size_t i = 0; i < 2; i++) {
        redisReply *r = redisCommand(x->rc, "SCRIPT LOAD %s", dq_scripts[scripts[i]].text);
        int ok = r && r->type == REDIS_REPLY_STRING;
        if (r)
            freeReplyObject(r);
        if (!ok) {
            snprintf(err, errlen, "SCRIPT LOAD %s failed", dq_scripts[scripts[i]].name);
            return -1;
        }
    }
    keys_build(&x->keys, DQ_DEFAULT_PREFIX, BENCH_QUEUE);
    proto_claim_cmd(&x->claim, &x->keys, batch, LEASE_MS, "bench:ceiling"); /* named, as the daemon's are */
    if (x->claim.oom) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

static void ctx_close(struct ceiling_ctx *x)
{
    cmd_free(&x->claim);
    if (x->rc)
        redisFree(x->rc);
    dq_close(x->client);
    redis_proc_stop(&x->redis);
}

static int get_reply(struct ceiling_ctx *x, redisReply **out, char *err, size_t errlen)
{
    void *r = NULL;
    if (redisGetReply(x->rc, &r) != REDIS_OK || !r) {
        snprintf(err, errlen, "redis: %s", x->rc->errstr);
        return -1;
    }
    *out = r;
    if ((*out)->type == REDIS_REPLY_ERROR) {
        snprintf(err, errlen, "redis: %s", (*out)->str);
        freeReplyObject(*out);
        return -1;
    }
    return 0;
}

static int append_claim(struct ceiling_ctx *x, char *err, size_t errlen)
{
    if (redisAppendCommandArgv(x->rc, x->claim.argc, x->claim.argv, x->claim.lens)
        == REDIS_OK)
        return 0;
    snprintf(err, errlen, "out of memory queueing a claim");
    return -1;
}

static int append_ack(struct ceiling_ctx *x, const dq_claim_result *res, char *err,
                      size_t errlen)
{
    struct cmd ack;
    cmd_init(&ack);
    proto_ack_cmd(&ack, &x->keys, res->jobs, res->n);
    int ok = !ack.oom
             && redisAppendCommandArgv(x->rc, ack.argc, ack.argv, ack.lens) == REDIS_OK;
    cmd_free(&ack);
    if (!ok)
        snprintf(err, errlen, "out of memory queueing an ack");
    return ok ? 0 : -1;
}

/* Read a claim's reply into *res (zeroed first). */
static int read_claim(struct ceiling_ctx *x, dq_claim_result *res, char *err,
                      size_t errlen)
{
    redisReply *r;
    memset(res, 0, sizeof *res);
    if (get_reply(x, &r, err, errlen) < 0)
        return -1;
    dq_status st = proto_claim_reply(r, res);
    freeReplyObject(r);
    if (st != DQ_OK) {
        snprintf(err, errlen, "unexpected claim reply");
        return -1;
    }
    return 0;
}

/* Read the reply to the ack of `res`: every job must have been acked. */
static int read_ack(struct ceiling_ctx *x, const dq_claim_result *res, char *err,
                    size_t errlen)
{
    redisReply *r;
    if (get_reply(x, &r, err, errlen) < 0)
        return -1;
    bool acked[DQ_CLAIM_MAX];
    dq_status st = proto_ack_reply(r, res->n, acked);
    freeReplyObject(r);
    for (size_t j = 0; st == DQ_OK && j < res->n; j++)
        if (!acked[j])
            st = DQ_ERR_STALE;
    if (st != DQ_OK) {
        snprintf(err, errlen, "ack refused or unreadable");
        return -1;
    }
    return 0;
}

/* Send `k` claims and read their replies into res[0..k). */
static int claim_round(struct ceiling_ctx *x, dq_claim_result *res, size_t k, char *err,
                       size_t errlen)
{
    memset(res, 0, k * sizeof *res);
    for (size_t i = 0; i < k; i++)
        if (append_claim(x, err, errlen) < 0)
            return -1;
    for (size_t i = 0; i < k; i++)
        if (read_claim(x, &res[i], err, errlen) < 0)
            return -1;
    return 0;
}

/* Ack every job of res[0..k) in one pipeline. */
static int ack_round(struct ceiling_ctx *x, dq_claim_result *res, size_t k, char *err,
                     size_t errlen)
{
    for (size_t i = 0; i < k; i++)
        if (res[i].n > 0 && append_ack(x, &res[i], err, errlen) < 0)
            return -1;
    for (size_t i = 0; i < k; i++)
        if (res[i].n > 0 && read_ack(x, &res[i], err, errlen) < 0)
            return -1;
    return 0;
}

static void free_results(dq_claim_result *res, size_t k)
{
    for (size_t i = 0; i < k; i++)
        dq_claim_result_free(&res[i]);
}

/* A command in flight in the tight loop: a claim, or the ack of the jobs
 * a claim returned (kept until its reply came). */
struct inflight {
    int is_ack;
    dq_claim_result res;
};

/*
 * Claim and ack until the queue is empty, keeping PIPELINE claims in
 * flight: each claim's reply at once queues the ack of its jobs and the
 * next claim.  hiredis sends what is queued whenever it runs out of
 * replies to hand out, so Redis always has work waiting while this loop
 * reads.  Returns 0 when exactly `n` jobs were claimed and acked.
 */
static int tight_loop(struct ceiling_ctx *x, long n, char *err, size_t errlen)
{
    enum { RING = 2 * PIPELINE + 4 };   /* at most 2 * PIPELINE + 1 in flight */
    struct inflight ring[RING];
    memset(ring, 0, sizeof ring);
    size_t head = 0, count = 0;
    long done = 0;
    int claiming = 1, rc = -1;
    for (; count < PIPELINE; count++)
        if (append_claim(x, err, errlen) < 0)
            goto out;
    while (count > 0) {
        struct inflight *f = &ring[head];
        head = (head + 1) % RING;
        count--;
        if (f->is_ack) {
            int st = read_ack(x, &f->res, err, errlen);
            dq_claim_result_free(&f->res);
            if (st < 0)
                goto out;
            continue;
        }
        if (read_claim(x, &f->res, err, errlen) < 0)
            goto out;
        if (f->res.n == 0) {
            claiming = 0;       /* empty: let the rest in flight come back */
            dq_claim_result_free(&f->res);
            continue;
        }
        done += (long)f->res.n;
        struct inflight *a = &ring[(head + count) % RING];
        a->is_ack = 1;
        a->res = f->res;        /* moved: the ack frees it */
        memset(&f->res, 0, sizeof f->res);
        count++;
        if (append_ack(x, &a->res, err, errlen) < 0)
            goto out;
        if (claiming) {
            struct inflight *c = &ring[(head + count) % RING];
            c->is_ack = 0;
            count++;
            if (append_claim(x, err, errlen) < 0)
                goto out;
        }
    }
    if (done != n)
        snprintf(err, errlen, "%ld jobs claimed and acked, %ld expected", done, n);
    else
        rc = 0;
out:
    for (size_t i = 0; i < RING; i++)
        dq_claim_result_free(&ring[i].res);
    return rc;
}

/* The per-script pass: all claims, then all acks, each between INFOs. */
static int split_pass(struct ceiling_ctx *x, long jobs, int batch, char *err, size_t errlen)
{
    if (bench_fill(x->client, jobs, bench_real_ms() - 60000, 0, err, errlen) < 0)
        return -1;
    size_t calls = (size_t)((jobs + batch - 1) / batch);
    dq_claim_result *res = calloc(calls + PIPELINE, sizeof *res);
    if (!res) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = -1;
    struct info_snap i0, i1, i2, d;
    if (info_take(x->rc, &i0, err, errlen) < 0)
        goto done;
    for (size_t at = 0; at < calls; at += PIPELINE) {
        size_t k = calls - at < PIPELINE ? calls - at : PIPELINE;
        if (claim_round(x, &res[at], k, err, errlen) < 0)
            goto done;
    }
    if (info_take(x->rc, &i1, err, errlen) < 0)
        goto done;
    for (size_t at = 0; at < calls; at += PIPELINE) {
        size_t k = calls - at < PIPELINE ? calls - at : PIPELINE;
        if (ack_round(x, &res[at], k, err, errlen) < 0)
            goto done;
    }
    if (info_take(x->rc, &i2, err, errlen) < 0)
        goto done;
    char context[32];
    snprintf(context, sizeof context, "b=%d", batch);
    struct report_script s;
    for (int half = 0; half < 2; half++) {
        info_delta(half ? &i2 : &i1, half ? &i1 : &i0, &d);
        memset(&s, 0, sizeof s);
        snprintf(s.script, sizeof s.script, "%s", half ? "ack" : "claim");
        snprintf(s.context, sizeof s.context, "%s", context);
        struct cmd_stat ev = info_cmd(&d, "evalsha");
        s.calls = ev.calls;
        s.usec_per_call = ev.calls > 0 ? ev.usec / ev.calls : 0;
        s.usec_per_job = ev.usec / (double)jobs;
        for (size_t i = 0; i < d.ncmds; i++)
            if (strcmp(d.cmds[i].name, "evalsha") && strcmp(d.cmds[i].name, "info"))
                s.inner_usec_per_job += d.cmds[i].usec / (double)jobs;
        info_breakdown(&d, (double)jobs, "evalsha", 8, s.inner, sizeof s.inner);
        report_add_script(&s);
    }
    rc = 0;
done:
    free_results(res, calls + PIPELINE);
    free(res);
    return rc;
}

static int ceiling_row(const struct bench_env *env, int batch, char *err, size_t errlen)
{
    long n = env->opt.n;
    struct report_row row;
    char config[48];
    snprintf(config, sizeof config, "b=%d pipeline=%d", batch, PIPELINE);
    report_row_init(&row, "ceiling", config);
    bench_progress("ceiling %s: %ld jobs", config, n);
    struct ceiling_ctx x;
    int rc = -1;
    if (ctx_open(&x, env, batch, err, errlen) < 0)
        goto done;
    if (bench_fill(x.client, n, bench_real_ms() - 60000, 0, err, errlen) < 0)
        goto done;
    struct info_snap i0, i1, d;
    struct cpu_sample c0, c1;
    if (info_take(x.rc, &i0, err, errlen) < 0)
        goto done;
    measure_cpu(&c0, x.redis.pid, 0);
    if (tight_loop(&x, n, err, errlen) < 0)
        goto done;
    measure_cpu(&c1, x.redis.pid, 0);
    if (info_take(x.rc, &i1, err, errlen) < 0)
        goto done;
    info_delta(&i1, &i0, &d);
    double secs = (double)(c1.wall_us - c0.wall_us) / 1e6;
    row.v[COL_JOBS] = (double)n;
    row.v[COL_JOBS_PER_S] = (double)n / secs;
    row.v[COL_REDIS_US_PER_JOB] = (double)(c1.redis_us - c0.redis_us) / (double)n;
    row.v[COL_CLIENT_US_PER_JOB] = (double)(c1.self_us - c0.self_us) / (double)n;
    row.v[COL_SCRIPT_US_PER_JOB] = info_cmd(&d, "evalsha").usec / (double)n;
    row.v[COL_CALLS_PER_JOB] = info_cmd(&d, "evalsha").calls / (double)n;
    row.v[COL_SECONDS] = secs;
    snprintf(row.note, sizeof row.note,
             "no daemon; client %.2f us/job; scripts %.2f us/job; redis sys share %.0f%%",
             row.v[COL_CLIENT_US_PER_JOB], row.v[COL_SCRIPT_US_PER_JOB],
             measure_sys_pct(&c0, &c1, 0));
    report_add(&row);
    rc = split_pass(&x, n < SPLIT_JOBS ? n : SPLIT_JOBS, batch, err, errlen);
done:
    if (rc < 0)
        bench_err_prefix(err, errlen, config);
    ctx_close(&x);
    return rc;
}

int run_ceiling(const struct bench_env *env, char *err, size_t errlen)
{
    static const int batches[] = { 1, 16, 64 };
    for (size_t i = 0; i < 3; i++)
        if (ceiling_row(env, batches[i], err, errlen) < 0)
            return -1;
    return 0;
}
