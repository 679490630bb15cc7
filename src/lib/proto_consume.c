/*
 * The consumer's scripts: claim (and the record bodies its reply carries),
 * ack, release, renew, recover, fail and reap, their arguments and their
 * replies (proto.h).
 */
#include "lib/proto.h"
#include "lib/proto_int.h"
#include "lib/msgpack.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

void proto_claim_cmd(struct cmd *c, const struct queue_keys *k, int max,
                     int64_t lease_ms, const char *owner)
{
    cmd_eval(c, DQ_SCRIPT_CLAIM, k);
    cmd_push_i64(c, proto_claim_batch(max));
    cmd_push_i64(c, lease_ms > 0 ? lease_ms : 1);
    if (owner)
        cmd_push_str(c, owner);
}

static char *dup_bytes(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* A claimed job's record body: the MessagePack array {type, payload,
 * max_attempts, created_ms, due_ms - created_ms, last_error} the claim
 * script returns without decoding.  -1 when it is not exactly that (a
 * corrupt record): the same rules as read_record in src/scripts/lib.lua,
 * so that the library and the scripts agree on what is unreadable. */
static int read_body(const char *buf, size_t len, dq_job *j)
{
    struct mp_reader mp;
    size_t n, tlen, plen, elen = 0;
    const char *type, *payload, *err = "";
    int64_t max, due_offset, prio = DQ_PRIORITY_NORMAL_LEVEL;
    mp_init(&mp, buf, len);
    /* Seven elements: the seventh is the priority (only when not normal). */
    if (mp_read_array(&mp, &n) < 0 || (n != 6 && n != 7)
        || mp_read_bytes(&mp, &type, &tlen) < 0
        || mp_read_bytes(&mp, &payload, &plen) < 0 || mp_read_int(&mp, &max) < 0
        || max < 0 || max > INT_MAX
        || mp_read_int(&mp, &j->created_ms) < 0 || mp_read_int(&mp, &due_offset) < 0
        || (mp_read_nil(&mp) < 0 && mp_read_bytes(&mp, &err, &elen) < 0)
        || (n == 7 && (mp_read_int(&mp, &prio) < 0 || prio < 0 || prio > 9))
        || !mp_at_end(&mp)
        || __builtin_add_overflow(j->created_ms, due_offset, &j->due_ms))
        return -1;
    j->max_attempts = (int)max;
    j->priority = (int)prio;
    j->type = dup_bytes(type, tlen);
    j->payload = dup_bytes(payload, plen);
    j->payload_len = plen;
    j->last_error = dup_bytes(err, elen);
    return 0;
}

/* One claimed job from four elements: id, attempt, fence, body.  A body
 * that does not decode gives a job of type "" with the error "unreadable
 * record", for the consumer to bury. */
static dq_status read_claimed(const redisReply *r, size_t at, dq_job *j)
{
    const redisReply *body = r->element[at + 3];
    j->id = elem_dup(r, at, NULL);
    j->attempt = (int)elem_int(r, at + 1);
    j->fence = elem_int(r, at + 2);
    if (body->type != REDIS_REPLY_STRING || read_body(body->str, body->len, j) < 0) {
        free(j->type);
        free(j->payload);
        free(j->last_error);
        j->type = strdup("");
        j->payload = strdup("");
        j->payload_len = 0;
        j->last_error = strdup("unreadable record");
        j->priority = DQ_PRIORITY_NORMAL_LEVEL;
    }
    if (!j->id || !j->type || !j->payload || !j->last_error)
        return DQ_ERR_NOMEM;
    return DQ_OK;
}

bool proto_claim_paused(const redisReply *r)
{
    return is_array(r, 4) && r->elements == 4 && elem_int(r, 2) == 0
           && elem_is(r, 3, "paused");
}

dq_status proto_claim_reply(const redisReply *r, dq_claim_result *out)
{
    memset(out, 0, sizeof *out);
    if (!is_array(r, 3))
        return DQ_ERR_REDIS;
    /* The count is compared with the elements there are before it is
     * multiplied: 4 * 2^62 wraps to 0, and a reply of three elements
     * claiming 2^62 jobs asked calloc for 2^62 of them. */
    int64_t count = elem_int(r, 2);
    if (count < 0 || (uint64_t)count > (r->elements - 3) / 4)
        return DQ_ERR_REDIS;
    size_t n = (size_t)count;
    if (r->elements != 3 + 4 * n && !proto_claim_paused(r))
        return DQ_ERR_REDIS;
    out->now_ms = elem_int(r, 0);
    out->next_due_in_ms = elem_int(r, 1);
    if (n == 0)
        return DQ_OK;
    out->jobs = calloc(n, sizeof *out->jobs);
    if (!out->jobs)
        return DQ_ERR_NOMEM;
    out->n = n;
    for (size_t i = 0; i < n; i++)
        if (read_claimed(r, 3 + 4 * i, &out->jobs[i]) != DQ_OK)
            return DQ_ERR_NOMEM;
    return DQ_OK;
}

void proto_ack_cmd(struct cmd *c, const struct queue_keys *k,
                   const dq_job *jobs, size_t n)
{
    cmd_eval(c, DQ_SCRIPT_ACK, k);
    for (size_t i = 0; i < n; i++) {
        cmd_push_str(c, jobs[i].id);
        cmd_push_i64(c, jobs[i].fence);
    }
}

void proto_release_cmd(struct cmd *c, const struct queue_keys *k,
                       const dq_job *jobs, size_t n)
{
    cmd_eval(c, DQ_SCRIPT_RELEASE, k);
    cmd_push_str(c, k->wake);
    for (size_t i = 0; i < n; i++) {
        cmd_push_str(c, jobs[i].id);
        cmd_push_i64(c, jobs[i].fence);
    }
}

void proto_renew_cmd(struct cmd *c, const struct queue_keys *k, int64_t lease_ms,
                     const dq_job *jobs, size_t n)
{
    cmd_eval(c, DQ_SCRIPT_RENEW, k);
    cmd_push_i64(c, lease_ms > 0 ? lease_ms : 1);
    for (size_t i = 0; i < n; i++) {
        cmd_push_str(c, jobs[i].id);
        cmd_push_i64(c, jobs[i].fence);
    }
}

dq_status proto_renew_reply(const redisReply *r, size_t n, int64_t *now_ms, bool *held)
{
    if (!is_array(r, n + 1) || r->elements != n + 1)
        return DQ_ERR_REDIS;
    *now_ms = elem_int(r, 0);
    for (size_t i = 0; i < n; i++)
        held[i] = elem_int(r, i + 1) == 1;
    return DQ_OK;
}

void proto_recover_cmd(struct cmd *c, const struct queue_keys *k, const char *owner)
{
    cmd_eval(c, DQ_SCRIPT_RECOVER, k);
    cmd_push_str(c, k->wake);
    cmd_push_str(c, owner);
}

dq_status proto_ack_reply(const redisReply *r, size_t n, bool *acked)
{
    if (!is_array(r, n) || r->elements != n)
        return DQ_ERR_REDIS;
    if (acked)
        for (size_t i = 0; i < n; i++)
            acked[i] = elem_int(r, i) == 1;
    return DQ_OK;
}

/* A duration into 0..DQ_MAX_AHEAD_MS, the range the scripts take. */
static int64_t clamp_ms(int64_t ms)
{
    return ms < 0 ? 0 : (ms > DQ_MAX_AHEAD_MS ? DQ_MAX_AHEAD_MS : ms);
}

static void push_policy(struct cmd *c, const dq_retry_policy *p)
{
    cmd_push_i64(c, clamp_ms(p->base_ms));
    cmd_push_i64(c, clamp_ms(p->cap_ms));
    cmd_push_double(c, !(p->jitter >= 0) ? 0 : (p->jitter > 1 ? 1 : p->jitter));
}

void proto_fail_cmd(struct cmd *c, const struct queue_keys *k, const char *id,
                    int64_t fence, const char *error, dq_fail_mode mode,
                    int64_t retry_delay_ms, const dq_retry_policy *p,
                    uint32_t seed)
{
    cmd_eval(c, DQ_SCRIPT_FAIL, k);
    cmd_push_str(c, k->wake);
    cmd_push_str(c, id);
    cmd_push_i64(c, fence);
    cmd_push_str(c, error ? error : "");
    cmd_push_str(c, mode == DQ_FAIL_DEAD ? "dead" : "retry");
    /* The script caps the delay at cap_ms (one place for the rule). */
    cmd_push_i64(c, retry_delay_ms < 0 ? -1 : clamp_ms(retry_delay_ms));
    push_policy(c, p);
    cmd_push_i64(c, seed);
    cmd_push_i64(c, p->default_max_attempts > 0 ? p->default_max_attempts : 0);
}

dq_status proto_fail_reply(const redisReply *r, dq_fail_result *out)
{
    if (!is_array(r, 2))
        return DQ_ERR_REDIS;
    if (elem_is(r, 0, "stale"))
        return DQ_ERR_STALE;
    if (!elem_is(r, 0, "dead") && !elem_is(r, 0, "retry"))
        return DQ_ERR_REDIS;
    if (out) {
        out->dead = elem_is(r, 0, "dead");
        out->at_ms = elem_int(r, 1);
    }
    return DQ_OK;
}

void proto_reap_cmd(struct cmd *c, const struct queue_keys *k, int batch,
                    const dq_retry_policy *p, uint32_t seed)
{
    cmd_eval(c, DQ_SCRIPT_REAP, k);
    cmd_push_str(c, k->wake);
    cmd_push_i64(c, batch > 0 ? batch : 1);
    push_policy(c, p);
    cmd_push_i64(c, seed);
    cmd_push_i64(c, p->default_max_attempts > 0 ? p->default_max_attempts : 0);
}

dq_status proto_reap_reply(const redisReply *r, dq_reap_result *out)
{
    if (!is_array(r, 3))
        return DQ_ERR_REDIS;
    out->retried = (size_t)elem_int(r, 0);
    out->dead = (size_t)elem_int(r, 1);
    out->next_in_ms = elem_int(r, 2);
    out->expired = is_array(r, 4) ? (size_t)elem_int(r, 3) : 0;
    return DQ_OK;
}
