/* libdelayq calls for consumers: claim, ack, fail, reap. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/client_internal.h"
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
    if (st == DQ_ERR_REDIS)
        return client_fail(c, st, "unexpected reply from the %s script "
                           "(is another delayq version using this Redis?)",
                           dq_scripts[s].name);
    if (st == DQ_ERR_NOMEM)
        return client_fail(c, st, "out of memory reading the %s reply",
                           dq_scripts[s].name);
    return st;
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
    struct cmd cmd;
    cmd_init(&cmd);
    proto_claim_cmd(&cmd, &k, max, lease_ms, NULL);
    if (c->durability == DQ_DURABILITY_REPLICATED)
        return claim_replicated(c, queue, &cmd, out);
    return run_and_read(c, &cmd, DQ_SCRIPT_CLAIM, read_claim, out);
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

dq_status dq_ack_many(dq_client *c, const char *queue, const dq_job *jobs,
                      size_t n, bool *acked)
{
    struct queue_keys k;
    dq_status st = client_queue_keys(c, queue, &k);
    if (st != DQ_OK || n == 0)
        return st;
    for (size_t i = 0; i < n; i++)
        if (!jobs[i].id || !*jobs[i].id)
            return client_fail(c, DQ_ERR_INVALID, "job %zu has no id", i);
    struct cmd cmd;
    cmd_init(&cmd);
    proto_ack_cmd(&cmd, &k, jobs, n);
    struct ack_out out = { n, acked };
    return run_and_read(c, &cmd, DQ_SCRIPT_ACK, read_ack, &out);
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

dq_status dq_release(dq_client *c, const char *queue, const dq_job *jobs,
                     size_t n, size_t *released)
{
    size_t tmp;
    struct queue_keys k;
    dq_status st = client_queue_keys(c, queue, &k);
    if (st != DQ_OK || n == 0)
        return st;
    struct cmd cmd;
    cmd_init(&cmd);
    proto_release_cmd(&cmd, &k, jobs, n);
    return run_and_read(c, &cmd, DQ_SCRIPT_RELEASE, read_count, released ? released : &tmp);
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
    dq_reap_result tmp;
    struct cmd cmd;
    cmd_init(&cmd);
    proto_reap_cmd(&cmd, &k, proto_claim_batch(batch), policy, jitter_seed());
    return run_and_read(c, &cmd, DQ_SCRIPT_REAP, read_reap, out ? out : &tmp);
}
