/* libdelayq calls for consumers: claim, ack, fail, reap. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/client_internal.h"
#include "lib/partitions.h"
#include "lib/proto.h"

void dq_retry_policy_init(dq_retry_policy *p)
{
    p->base_ms = 1000;
    p->cap_ms = 3600 * 1000;
    p->jitter = 0.2;
    p->default_max_attempts = 5;
}

/* A seed for the scripts' jitter; it need not be strong, only differ
 * between callers and calls. */
static uint32_t jitter_seed(void)
{
    static uint32_t counter;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint32_t)ts.tv_nsec ^ ((uint32_t)getpid() << 16) ^ ++counter;
}

/* What reading a reply of script `s` gave (`st`), with the message for
 * a reply that is not one, or memory that ran out. */
static dq_status read_status(dq_client *c, enum dq_script_id s, dq_status st)
{
    if (st == DQ_ERR_REDIS)
        return client_fail(c, st, "unexpected reply from the %s script "
                           "(is another delayq version using this Redis?)",
                           dq_scripts[s].name);
    if (st == DQ_ERR_NOMEM)
        return client_fail(c, st, "out of memory reading the %s reply",
                           dq_scripts[s].name);
    return st;
}

/* Run a script command and hand its reply to `read`, which fills `out`. */
static dq_status run_and_read(dq_client *c, struct cmd *cmd, enum dq_script_id s,
                              dq_status (*read)(const redisReply *, void *),
                              void *out)
{
    redisReply *r;
    dq_status st = client_run(c, cmd, s, &r);
    cmd_free(cmd);
    if (st != DQ_OK)
        return st;
    st = read(r, out);
    freeReplyObject(r);
    return read_status(c, s, st);
}

static dq_status read_claim(const redisReply *r, void *out)
{
    return proto_claim_reply(r, out);
}

/*
 * A claim under durability REPLICATED that no replica confirmed: its jobs
 * are leased on the master only, and a failover now would make them due
 * on the promoted replica, where another consumer would run them.  So the
 * caller gets none of them, and they are given back at once (release: no
 * attempt counted, due time kept) rather than left to expire, which would
 * count an attempt each time and, with a replica down for long, send them
 * to the dead letters.  The release may not be confirmed either: then
 * whichever server ends up the master has the jobs due, or leased until
 * the reaper returns them.
 */
static dq_status claim_replicated(dq_client *c, const char *queue, struct cmd *cmd,
                                  dq_claim_result *out)
{
    redisReply *r = NULL;
    dq_status st = client_run_unconfirmed(c, cmd, DQ_SCRIPT_CLAIM, &r);
    cmd_free(cmd);
    if (!r)
        return st;
    dq_status rst = proto_claim_reply(r, out);
    freeReplyObject(r);
    if (rst != DQ_OK)
        return client_fail(c, rst, "unexpected reply from the claim script "
                           "(is another delayq version using this Redis?)");
    if (st == DQ_OK)
        return DQ_OK;
    size_t held = out->n, back = 0;
    dq_status bst = held ? dq_release(c, queue, out->jobs, held, &back) : DQ_OK;
    dq_claim_result_free(out);
    const char *fate = bst == DQ_OK ? "given back"
                       : bst == DQ_ERR_TIMEOUT ? "given back on the master only"
                                               : "left leased until the reaper returns them";
    return client_fail(c, st, "not replicated within %d ms: the claim's %zu job%s %s %s",
                       c->replication_timeout_ms, held, held == 1 ? "" : "s",
                       held == 1 ? "was" : "were", fate);
}

/* One claim of up to `max` jobs from the keys `k`. */
static dq_status claim_from(dq_client *c, const char *queue, const struct queue_keys *k,
                            int max, int64_t lease_ms, dq_claim_result *out)
{
    struct cmd cmd;
    cmd_init(&cmd);
    proto_claim_cmd(&cmd, k, max, lease_ms, NULL);
    if (c->durability == DQ_DURABILITY_REPLICATED)
        return claim_replicated(c, queue, &cmd, out);
    return run_and_read(c, &cmd, DQ_SCRIPT_CLAIM, read_claim, out);
}

/* Move the jobs of `part` to the end of `acc` (part is left empty) and
 * merge its times: the soonest next due time of the two (0: more due). */
static dq_status claim_merge(dq_client *c, dq_claim_result *acc, dq_claim_result *part)
{
    if (part->n) {
        dq_job *jobs = realloc(acc->jobs, (acc->n + part->n) * sizeof *jobs);
        if (!jobs)
            return client_fail(c, DQ_ERR_NOMEM, "out of memory");
        memcpy(jobs + acc->n, part->jobs, part->n * sizeof *jobs);
        acc->jobs = jobs;
        acc->n += part->n;
        free(part->jobs);
        part->jobs = NULL;
        part->n = 0;
    }
    acc->now_ms = part->now_ms;
    if (part->next_due_in_ms >= 0
        && (acc->next_due_in_ms < 0 || part->next_due_in_ms < acc->next_due_in_ms))
        acc->next_due_in_ms = part->next_due_in_ms;
    return DQ_OK;
}

/*
 * dq_claim of a queue of `n` > 1 partitions: from each in turn, starting
 * one further at every call (so that every partition is drained while
 * others have due jobs too), until `max` jobs are held or every partition
 * was asked.  On a failure the jobs held are given back.
 */
static dq_status claim_partitions(dq_client *c, const char *queue, unsigned n,
                                  unsigned start, int max, int64_t lease_ms,
                                  dq_claim_result *out)
{
    out->next_due_in_ms = -1;
    dq_status st = DQ_OK;
    for (unsigned i = 0; i < n && out->n < (size_t)max; i++) {
        struct queue_keys k;
        part_keys(c, queue, (start + i) % n, n, &k);
        dq_claim_result one = { 0 };
        st = claim_from(c, queue, &k, max - (int)out->n, lease_ms, &one);
        if (st == DQ_OK)
            st = claim_merge(c, out, &one);
        dq_claim_result_free(&one);
        if (st != DQ_OK)
            break;
    }
    if (st != DQ_OK && out->n) {
        char msg[sizeof c->err];
        snprintf(msg, sizeof msg, "%s", c->err);
        (void)dq_release(c, queue, out->jobs, out->n, NULL);
        snprintf(c->err, sizeof c->err, "%s", msg);
        dq_claim_result_free(out);
    }
    if (st == DQ_OK && out->n == (size_t)max)
        out->next_due_in_ms = 0;   /* more may be due: claim again */
    return st;
}

dq_status dq_claim(dq_client *c, const char *queue, int max, int64_t lease_ms,
                   dq_claim_result *out)
{
    memset(out, 0, sizeof *out);
    struct queue_keys k;
    dq_status st = client_queue_keys(c, queue, &k);
    if (st != DQ_OK)
        return st;
    if (max < 1 || max > DQ_CLAIM_MAX)
        return client_fail(c, DQ_ERR_INVALID, "claim batch %d is not in 1..%d",
                           max, DQ_CLAIM_MAX);
    if (lease_ms < 1)
        return client_fail(c, DQ_ERR_INVALID, "lease must be at least 1 ms");
    struct part_entry *e = part_lookup(c, queue, &st);
    if (!e)
        return st;
    if (e->n > 1)
        return claim_partitions(c, queue, e->n, e->next_claim++ % e->n, max, lease_ms, out);
    return claim_from(c, queue, &k, max, lease_ms, out);
}

void dq_claim_result_free(dq_claim_result *r)
{
    if (!r)
        return;
    for (size_t i = 0; r->jobs && i < r->n; i++)
        proto_job_free(&r->jobs[i]);
    free(r->jobs);
    memset(r, 0, sizeof *r);
}

struct ack_out {
    size_t n;
    bool *acked;
};

static dq_status read_ack(const redisReply *r, void *out)
{
    struct ack_out *a = out;
    return proto_ack_reply(r, a->n, a->acked);
}

/*
 * The jobs of a partitioned queue grouped by partition: sub[] holds
 * copies of the caller's jobs (their strings borrowed) in partition order,
 * at[j] the index of sub[j] in the caller's array, and partition p's are
 * sub[start[p]] .. sub[start[p + 1] - 1].
 */
struct job_groups {
    dq_job *sub;
    size_t *at;
    size_t start[KEYS_PARTITIONS_MAX + 1];
};

static dq_status group_jobs(dq_client *c, const dq_job *jobs, size_t n, unsigned nparts,
                            struct job_groups *g)
{
    memset(g->start, 0, sizeof g->start);
    g->sub = calloc(n, sizeof *g->sub);
    g->at = calloc(n, sizeof *g->at);
    unsigned *part = calloc(n, sizeof *part);
    if (!g->sub || !g->at || !part) {
        free(part);
        return client_fail(c, DQ_ERR_NOMEM, "out of memory");
    }
    size_t next[KEYS_PARTITIONS_MAX + 1] = { 0 };
    for (size_t i = 0; i < n; i++) {
        part[i] = keys_partition_of(jobs[i].id, nparts);
        next[part[i] + 1]++;
    }
    for (unsigned p = 1; p <= nparts; p++)
        next[p] += next[p - 1];
    memcpy(g->start, next, sizeof next);
    for (size_t i = 0; i < n; i++) {
        size_t j = next[part[i]]++;
        g->sub[j] = jobs[i];
        g->at[j] = i;
    }
    free(part);
    return DQ_OK;
}

static void job_groups_free(struct job_groups *g)
{
    free(g->sub);
    free(g->at);
}

/* The partitions (of `nparts`) that hold some of the grouped jobs, in
 * order, into which[]; how many. */
static unsigned groups_held(const struct job_groups *g, unsigned nparts, unsigned *which)
{
    unsigned held = 0;
    for (unsigned p = 0; p < nparts; p++)
        if (g->start[p + 1] > g->start[p])
            which[held++] = p;
    return held;
}

static void make_ack(void *ctx, unsigned part, const struct queue_keys *k, struct cmd *cmd)
{
    const struct job_groups *g = ctx;
    proto_ack_cmd(cmd, k, &g->sub[g->start[part]], g->start[part + 1] - g->start[part]);
}

/* ack of jobs[0..n) whose keys are `k` (one partition's, or the queue's). */
static dq_status ack_in(dq_client *c, const struct queue_keys *k, const dq_job *jobs,
                        size_t n, bool *acked)
{
    struct cmd cmd;
    cmd_init(&cmd);
    proto_ack_cmd(&cmd, k, jobs, n);
    struct ack_out out = { n, acked };
    return run_and_read(c, &cmd, DQ_SCRIPT_ACK, read_ack, &out);
}

/* dq_ack_many of a queue of `nparts` > 1: one ack per partition held,
 * in one pipeline. */
static dq_status ack_partitions(dq_client *c, const char *queue, unsigned nparts,
                                const dq_job *jobs, size_t n, bool *acked)
{
    struct job_groups g;
    bool *sub_acked = calloc(n, sizeof *sub_acked);
    dq_status st = sub_acked ? group_jobs(c, jobs, n, nparts, &g)
                             : client_fail(c, DQ_ERR_NOMEM, "out of memory");
    if (st != DQ_OK) {
        free(sub_acked);
        return st;
    }
    unsigned which[KEYS_PARTITIONS_MAX], held = groups_held(&g, nparts, which);
    redisReply **replies;
    st = part_pipeline(c, queue, nparts, held, which, DQ_SCRIPT_ACK, make_ack, &g, &replies);
    for (unsigned i = 0; st == DQ_OK && i < held; i++) {
        size_t from = g.start[which[i]];
        struct ack_out out = { g.start[which[i] + 1] - from, &sub_acked[from] };
        st = read_status(c, DQ_SCRIPT_ACK, read_ack(replies[i], &out));
    }
    part_replies_free(replies, held);
    for (size_t j = 0; st == DQ_OK && acked && j < n; j++)
        acked[g.at[j]] = sub_acked[j];
    job_groups_free(&g);
    free(sub_acked);
    return st;
}

/* Whether every job has an id: DQ_ERR_INVALID naming the first without. */
static dq_status check_ids(dq_client *c, const dq_job *jobs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!jobs[i].id || !*jobs[i].id)
            return client_fail(c, DQ_ERR_INVALID, "job %zu has no id", i);
    return DQ_OK;
}

dq_status dq_ack_many(dq_client *c, const char *queue, const dq_job *jobs,
                      size_t n, bool *acked)
{
    struct queue_keys k;
    dq_status st = client_queue_keys(c, queue, &k);
    if (st != DQ_OK || n == 0)
        return st;
    if ((st = check_ids(c, jobs, n)) != DQ_OK)
        return st;
    unsigned nparts;
    if ((st = part_count(c, queue, &nparts)) != DQ_OK)
        return st;
    if (nparts > 1)
        return ack_partitions(c, queue, nparts, jobs, n, acked);
    return ack_in(c, &k, jobs, n, acked);
}

dq_status dq_ack(dq_client *c, const char *queue, const char *id, int64_t fence)
{
    dq_job job = { .id = (char *)id, .fence = fence };
    bool acked = false;
    dq_status st = dq_ack_many(c, queue, &job, 1, &acked);
    if (st == DQ_OK && !acked)
        return client_fail(c, DQ_ERR_STALE,
                           "job %s in queue %s is not held under fence %lld",
                           id, queue, (long long)fence);
    return st;
}

static dq_status read_count(const redisReply *r, void *out)
{
    if (!r || r->type != REDIS_REPLY_INTEGER)
        return DQ_ERR_REDIS;
    *(size_t *)out = (size_t)r->integer;
    return DQ_OK;
}

static void make_release(void *ctx, unsigned part, const struct queue_keys *k,
                         struct cmd *cmd)
{
    const struct job_groups *g = ctx;
    proto_release_cmd(cmd, k, &g->sub[g->start[part]], g->start[part + 1] - g->start[part]);
}

/* release of jobs[0..n) whose keys are `k`; *released counts them. */
static dq_status release_in(dq_client *c, const struct queue_keys *k, const dq_job *jobs,
                            size_t n, size_t *released)
{
    struct cmd cmd;
    cmd_init(&cmd);
    proto_release_cmd(&cmd, k, jobs, n);
    return run_and_read(c, &cmd, DQ_SCRIPT_RELEASE, read_count, released);
}

dq_status dq_release(dq_client *c, const char *queue, const dq_job *jobs,
                     size_t n, size_t *released)
{
    size_t total = 0;
    struct queue_keys k;
    dq_status st = client_queue_keys(c, queue, &k);
    if (st != DQ_OK || n == 0)
        goto done;
    unsigned nparts;
    if ((st = part_count(c, queue, &nparts)) != DQ_OK)
        return st;
    if (nparts <= 1) {
        st = release_in(c, &k, jobs, n, &total);
        goto done;
    }
    if ((st = check_ids(c, jobs, n)) != DQ_OK)
        return st;
    struct job_groups g;
    if ((st = group_jobs(c, jobs, n, nparts, &g)) != DQ_OK)
        return st;
    /* One release per partition held, in one pipeline. */
    unsigned which[KEYS_PARTITIONS_MAX], held = groups_held(&g, nparts, which);
    redisReply **replies;
    st = part_pipeline(c, queue, nparts, held, which, DQ_SCRIPT_RELEASE, make_release, &g,
                       &replies);
    for (unsigned i = 0; st == DQ_OK && i < held; i++) {
        size_t one = 0;
        st = read_status(c, DQ_SCRIPT_RELEASE, read_count(replies[i], &one));
        total += one;
    }
    part_replies_free(replies, held);
    job_groups_free(&g);
done:
    if (st == DQ_OK && released)
        *released = total;
    return st;
}

static dq_status read_fail(const redisReply *r, void *out)
{
    return proto_fail_reply(r, out);
}

dq_status dq_fail(dq_client *c, const char *queue, const char *id,
                  int64_t fence, const char *error, dq_fail_mode mode,
                  int64_t retry_delay_ms, const dq_retry_policy *policy,
                  dq_fail_result *out)
{
    struct queue_keys k;
    dq_status st = client_queue_keys(c, queue, &k);
    if (st != DQ_OK)
        return st;
    if (!id || !*id)
        return client_fail(c, DQ_ERR_INVALID, "job id is empty");
    if ((st = part_keys_of_id(c, queue, id, &k, NULL)) != DQ_OK)
        return st;
    dq_retry_policy defaults;
    if (!policy) {
        dq_retry_policy_init(&defaults);
        policy = &defaults;
    }
    dq_fail_result tmp;
    struct cmd cmd;
    cmd_init(&cmd);
    proto_fail_cmd(&cmd, &k, id, fence, error, mode, retry_delay_ms, policy,
                   jitter_seed());
    st = run_and_read(c, &cmd, DQ_SCRIPT_FAIL, read_fail, out ? out : &tmp);
    if (st == DQ_ERR_STALE)
        return client_fail(c, st, "job %s in queue %s is not held under fence %lld",
                           id, queue, (long long)fence);
    return st;
}

static dq_status read_reap(const redisReply *r, void *out)
{
    return proto_reap_reply(r, out);
}

/* Add one partition's reap to the sum: counts add up, the next expiry is
 * the soonest (0: more have expired). */
static void reap_merge(dq_reap_result *acc, const dq_reap_result *one)
{
    acc->retried += one->retried;
    acc->dead += one->dead;
    acc->expired += one->expired;
    if (one->next_in_ms >= 0 && (acc->next_in_ms < 0 || one->next_in_ms < acc->next_in_ms))
        acc->next_in_ms = one->next_in_ms;
}

struct reap_args {
    int batch;
    const dq_retry_policy *policy;
};

static void make_reap(void *ctx, unsigned part, const struct queue_keys *k, struct cmd *cmd)
{
    (void)part;
    const struct reap_args *a = ctx;
    proto_reap_cmd(cmd, k, proto_claim_batch(a->batch), a->policy, jitter_seed());
}

/* A reap of every partition, in one pipeline: the counts summed, the
 * soonest next expiry. */
dq_status dq_reap(dq_client *c, const char *queue, int batch,
                  const dq_retry_policy *policy, dq_reap_result *out)
{
    struct queue_keys k;
    dq_status st = client_queue_keys(c, queue, &k);
    if (st != DQ_OK)
        return st;
    dq_retry_policy defaults;
    if (!policy) {
        dq_retry_policy_init(&defaults);
        policy = &defaults;
    }
    unsigned nparts;
    if ((st = part_count(c, queue, &nparts)) != DQ_OK)
        return st;
    dq_reap_result sum = { .next_in_ms = -1 };
    struct reap_args args = { batch, policy };
    redisReply **replies;
    st = part_pipeline(c, queue, nparts, nparts, NULL, DQ_SCRIPT_REAP, make_reap, &args,
                       &replies);
    for (unsigned p = 0; st == DQ_OK && p < nparts; p++) {
        dq_reap_result one;
        if ((st = read_status(c, DQ_SCRIPT_REAP, read_reap(replies[p], &one))) == DQ_OK)
            reap_merge(&sum, &one);
    }
    part_replies_free(replies, nparts);
    if (st == DQ_OK && out)
        *out = sum;
    return st;
}
