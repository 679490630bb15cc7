#include "lib/proto.h"

#include "lib/msgpack.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int proto_claim_batch(int max)
{
    if (max < 1)
        return 1;
    return max > DQ_CLAIM_MAX ? DQ_CLAIM_MAX : max;
}

/* ---- reading replies ---------------------------------------------------- */

static int is_array(const redisReply *r, size_t min)
{
    return r && r->type == REDIS_REPLY_ARRAY && r->elements >= min;
}

static int64_t elem_int(const redisReply *r, size_t i)
{
    const redisReply *e = r->element[i];
    if (e->type == REDIS_REPLY_INTEGER)
        return e->integer;
    if (e->type == REDIS_REPLY_STRING)
        return strtoll(e->str, NULL, 10);
    return 0;
}

static int elem_is(const redisReply *r, size_t i, const char *s)
{
    const redisReply *e = r->element[i];
    return (e->type == REDIS_REPLY_STRING || e->type == REDIS_REPLY_STATUS)
           && strcmp(e->str, s) == 0;
}

/* A NUL-terminated copy of a string element (binary-safe: the length is
 * stored in *len when len is not NULL).  NULL when out of memory. */
static char *elem_dup(const redisReply *r, size_t i, size_t *len)
{
    const redisReply *e = r->element[i];
    size_t n = (e->type == REDIS_REPLY_STRING) ? e->len : 0;
    char *s = malloc(n + 1);
    if (!s)
        return NULL;
    if (n)
        memcpy(s, e->str, n);
    s[n] = '\0';
    if (len)
        *len = n;
    return s;
}

void proto_job_free(dq_job *j)
{
    free(j->id);
    free(j->type);
    free(j->payload);
    free(j->last_error);
    memset(j, 0, sizeof *j);
}

/* Fill a job from nine consecutive elements: id, type, payload, attempts,
 * max_attempts, due, created, fence, last_error.  Only show's reply is read
 * this way (a claim's has its own layout: proto_claim_reply). */
static dq_status read_job(const redisReply *r, size_t at, dq_job *j)
{
    j->id = elem_dup(r, at, NULL);
    j->type = elem_dup(r, at + 1, NULL);
    j->payload = elem_dup(r, at + 2, &j->payload_len);
    j->attempt = (int)elem_int(r, at + 3);
    j->max_attempts = (int)elem_int(r, at + 4);
    j->due_ms = elem_int(r, at + 5);
    j->created_ms = elem_int(r, at + 6);
    j->fence = elem_int(r, at + 7);
    j->last_error = elem_dup(r, at + 8, NULL);
    if (!j->id || !j->type || !j->payload || !j->last_error)
        return DQ_ERR_NOMEM;
    return DQ_OK;
}

/* ---- enqueue ------------------------------------------------------------ */

/* A job's arguments after the wake channel, as enqueue takes them; the
 * partition pair after them when the queue is partitioned. */
static void push_enqueue_args(struct cmd *c, const dq_enqueue_req *req,
                              unsigned nparts, unsigned part)
{
    cmd_push_str(c, req->id ? req->id : "");
    cmd_push_str(c, req->type);
    cmd_push(c, req->payload, req->payload_len);
    cmd_push_str(c, req->at_ms > 0 ? "at" : "delay");
    cmd_push_i64(c, req->at_ms > 0 ? req->at_ms
                                   : (req->delay_ms > 0 ? req->delay_ms : 0));
    cmd_push_i64(c, req->max_attempts > 0 ? req->max_attempts : 0);
    cmd_push_str(c, req->replace ? "1" : "0");
    /* Normal is the script's default: such a call is as before priorities. */
    if (req->priority && req->priority != DQ_PRIORITY_NORMAL)
        cmd_push_i64(c, req->priority - 1);
    else if (nparts > 1)
        cmd_push_i64(c, DQ_PRIORITY_NORMAL_LEVEL);
    if (nparts > 1) {
        cmd_push_i64(c, nparts);
        cmd_push_i64(c, part);
    }
}

void proto_enqueue_cmd(struct cmd *c, const struct queue_keys *k,
                       const dq_enqueue_req *req, unsigned nparts, unsigned part)
{
    cmd_eval(c, DQ_SCRIPT_ENQUEUE, k);
    cmd_push_str(c, k->wake);
    push_enqueue_args(c, req, nparts, part);
}

/* enqueue_many's "when": the delay, or "@" and the time, "r" first to
 * replace, "/" and the level after it when it is not normal. */
static void push_when(struct cmd *c, const dq_enqueue_req *req)
{
    char buf[48], prio[16] = "";
    int64_t ms = req->at_ms > 0 ? req->at_ms : (req->delay_ms > 0 ? req->delay_ms : 0);
    if (req->priority && req->priority != DQ_PRIORITY_NORMAL)
        snprintf(prio, sizeof prio, "/%d", req->priority - 1);
    int n = snprintf(buf, sizeof buf, "%s%s%lld%s", req->replace ? "r" : "",
                     req->at_ms > 0 ? "@" : "", (long long)ms, prio);
    cmd_push_copy(c, buf, (size_t)n);
}

/* The record body as far as the client knows it: the MessagePack array
 * header and type, payload, max_attempts (the script adds the times). */
static void push_body_head(struct cmd *c, const dq_enqueue_req *req)
{
    size_t tlen = strlen(req->type);
    size_t cap = 3 * MP_HEAD_MAX + tlen + req->payload_len;
    unsigned char *p = (unsigned char *)cmd_push_space(c, cap);
    if (!p)
        return;
    size_t n = mp_write_array_head(p, 6);
    n += mp_write_str_head(p + n, tlen);
    memcpy(p + n, req->type, tlen);
    n += tlen;
    n += mp_write_str_head(p + n, req->payload_len);
    if (req->payload_len)
        memcpy(p + n, req->payload, req->payload_len);
    n += req->payload_len;
    n += mp_write_uint(p + n, req->max_attempts > 0 ? (uint64_t)req->max_attempts : 0);
    c->lens[c->argc - 1] = n;
}

void proto_enqueue_many_cmd(struct cmd *c, const struct queue_keys *k,
                            const dq_enqueue_req *reqs, const size_t *idx, size_t n,
                            unsigned nparts, unsigned part)
{
    cmd_eval(c, DQ_SCRIPT_ENQUEUE_MANY, k);
    cmd_push_str(c, k->wake);
    for (size_t i = 0; i < n; i++) {
        const dq_enqueue_req *req = &reqs[idx[i]];
        cmd_push_str(c, req->id ? req->id : "");
        push_when(c, req);
        push_body_head(c, req);
    }
    if (nparts > 1) {
        cmd_push_i64(c, nparts);
        cmd_push_i64(c, part);
    }
}

/* A job id into `out`, cut at DQ_ID_MAX. */
static void set_id(dq_enqueued *out, const char *id, size_t n)
{
    if (n > DQ_ID_MAX)
        n = DQ_ID_MAX;
    memcpy(out->id, id, n);
    out->id[n] = '\0';
}

/* One job's result from three elements: status, id, due_ms. */
static dq_status read_enqueued(const redisReply *r, size_t at, dq_enqueued *out)
{
    if (r->element[at + 1]->type != REDIS_REPLY_STRING)
        return DQ_ERR_REDIS;
    if (out) {
        set_id(out, r->element[at + 1]->str, r->element[at + 1]->len);
        out->due_ms = elem_int(r, at + 2);
        out->replaced = elem_is(r, at, "replaced");
    }
    if (elem_is(r, at, "ok") || elem_is(r, at, "replaced"))
        return DQ_OK;
    if (elem_is(r, at, "exists"))
        return DQ_ERR_EXISTS;
    if (elem_is(r, at, "running"))
        return DQ_ERR_RUNNING;
    return DQ_ERR_REDIS;
}

dq_status proto_enqueue_reply(const redisReply *r, dq_enqueued *out)
{
    if (!is_array(r, 4))
        return DQ_ERR_REDIS;
    return read_enqueued(r, 0, out);
}

/* enqueue_many replies only what the client cannot know (see the script):
 * fill in every job as sent, then apply the exceptions. */
dq_status proto_enqueue_many_reply(const redisReply *r, const dq_enqueue_req *reqs,
                                   const size_t *idx, size_t n, unsigned nparts,
                                   unsigned part, dq_enqueued *out, dq_status *st)
{
    if (nparts < 1)
        nparts = 1;
    if (!is_array(r, 2) || (r->elements - 2) % 3 != 0)
        return DQ_ERR_REDIS;
    int64_t now = elem_int(r, 0), seq = elem_int(r, 1);
    for (size_t i = 0; i < n; i++) {
        const dq_enqueue_req *req = &reqs[idx[i]];
        if (req->id && *req->id) {
            set_id(&out[i], req->id, strlen(req->id));
        } else {
            char buf[24];
            ++seq;
            set_id(&out[i], buf, (size_t)snprintf(buf, sizeof buf, "%lld",
                                                  (long long)(seq * nparts + part)));
        }
        out[i].due_ms = req->at_ms > 0 ? req->at_ms
                                       : now + (req->delay_ms > 0 ? req->delay_ms : 0);
        out[i].replaced = false;
        st[i] = DQ_OK;
    }
    for (size_t e = 2; e < r->elements; e += 3) {
        int64_t i = elem_int(r, e) - 1;
        if (i < 0 || (size_t)i >= n || r->element[e + 2]->type != REDIS_REPLY_STRING)
            return DQ_ERR_REDIS;
        set_id(&out[i], r->element[e + 2]->str, r->element[e + 2]->len);
        out[i].replaced = elem_is(r, e + 1, "replaced");
        if (elem_is(r, e + 1, "exists"))
            st[i] = DQ_ERR_EXISTS;
        else if (elem_is(r, e + 1, "running"))
            st[i] = DQ_ERR_RUNNING;
        else if (!elem_is(r, e + 1, "ok") && !out[i].replaced)
            st[i] = DQ_ERR_REDIS;
    }
    return DQ_OK;
}

/* ---- claim, ack, fail, reap --------------------------------------------- */

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
    return DQ_OK;
}

/* ---- operating ---------------------------------------------------------- */

void proto_cancel_cmd(struct cmd *c, const struct queue_keys *k, const char *id)
{
    cmd_eval(c, DQ_SCRIPT_CANCEL, k);
    cmd_push_str(c, id);
}

/* cancel's and run_now's replies: `done` (the script's word for success)
 * or why not. */
static dq_status one_job_reply(const redisReply *r, const char *done)
{
    if (!r || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS))
        return DQ_ERR_REDIS;
    if (strcmp(r->str, done) == 0)
        return DQ_OK;
    if (strcmp(r->str, "running") == 0)
        return DQ_ERR_RUNNING;
    if (strcmp(r->str, "dead") == 0)
        return DQ_ERR_DEAD;
    if (strcmp(r->str, "notfound") == 0)
        return DQ_ERR_NOTFOUND;
    return DQ_ERR_REDIS;
}

dq_status proto_cancel_reply(const redisReply *r)
{
    return one_job_reply(r, "cancelled");
}

void proto_run_now_cmd(struct cmd *c, const struct queue_keys *k, const char *id)
{
    cmd_eval(c, DQ_SCRIPT_RUN_NOW, k);
    cmd_push_str(c, k->wake);
    cmd_push_str(c, id);
}

dq_status proto_run_now_reply(const redisReply *r)
{
    return one_job_reply(r, "ran");
}

dq_status proto_stats_reply(const redisReply *r, dq_stats *out)
{
    if (!is_array(r, 7))
        return DQ_ERR_REDIS;
    out->now_ms = elem_int(r, 0);
    out->delayed = elem_int(r, 1);
    out->due = elem_int(r, 2);
    out->processing = elem_int(r, 3);
    out->dead = elem_int(r, 4);
    out->next_due_in_ms = elem_int(r, 5);
    out->expired = elem_int(r, 6);
    /* Then when the queue was paused (proto_stats_paused), and the due
     * jobs per priority level (a script older than priorities has none:
     * all due jobs are normal then). */
    memset(out->due_by_priority, 0, sizeof out->due_by_priority);
    if (is_array(r, 8 + DQ_PRIORITY_LEVELS))
        for (int p = 0; p < DQ_PRIORITY_LEVELS; p++)
            out->due_by_priority[p] = elem_int(r, 8 + (size_t)p);
    else
        out->due_by_priority[DQ_PRIORITY_NORMAL_LEVEL] = out->due;
    return DQ_OK;
}

int64_t proto_stats_paused(const redisReply *r)
{
    return is_array(r, 8) ? elem_int(r, 7) : -1;
}

int64_t proto_stats_oldest_due(const redisReply *r)
{
    return is_array(r, 9 + DQ_PRIORITY_LEVELS) ? elem_int(r, 8 + DQ_PRIORITY_LEVELS) : -1;
}

/* ---- pause, resume, pause_state ----------------------------------------- */

void proto_pause_cmd(struct cmd *c, const struct queue_keys *k, enum dq_script_id s)
{
    cmd_eval(c, s, k);
    if (s != DQ_SCRIPT_PAUSE_STATE)
        cmd_push_str(c, k->wake);
}

dq_status proto_pause_reply(const redisReply *r, int64_t *now_ms, int64_t *since_ms)
{
    if (!is_array(r, 2))
        return DQ_ERR_REDIS;
    *now_ms = elem_int(r, 0);
    *since_ms = elem_int(r, 1);
    return DQ_OK;
}

static dq_state state_from(const redisReply *r)
{
    if (elem_is(r, 0, "delayed"))
        return DQ_STATE_DELAYED;
    if (elem_is(r, 0, "processing"))
        return DQ_STATE_PROCESSING;
    if (elem_is(r, 0, "dead"))
        return DQ_STATE_DEAD;
    if (elem_is(r, 0, "orphan"))
        return DQ_STATE_ORPHAN;
    return DQ_STATE_UNREADABLE;
}

/* An unreadable record's last error: what is wrong with it and which set
 * holds it ("unreadable record: type is not a string (in dead)"), from
 * show's elements 11 and 12.  dq_job_info has no field for either: callers
 * allocate it, so a new field would change its size under programs built
 * against the old header; the state DQ_STATE_UNREADABLE is the flag. */
static dq_status describe_unreadable(const redisReply *r, dq_job *j)
{
    const char *why = is_array(r, 12) && r->element[11]->type == REDIS_REPLY_STRING
                      ? r->element[11]->str : "unknown";
    const char *where = is_array(r, 13) && r->element[12]->type == REDIS_REPLY_STRING
                        ? r->element[12]->str : "unknown";
    size_t n = strlen(why) + strlen(where) + 40;
    char *e = malloc(n);
    if (!e)
        return DQ_ERR_NOMEM;
    snprintf(e, n, "unreadable record: %s (in %s)", why, where);
    free(j->last_error);
    j->last_error = e;
    return DQ_OK;
}

void proto_show_cmd(struct cmd *c, const struct queue_keys *k, const char *id)
{
    cmd_eval(c, DQ_SCRIPT_SHOW, k);
    cmd_push_str(c, id);
}

dq_status proto_show_reply(const redisReply *r, dq_job_info *out)
{
    memset(out, 0, sizeof *out);
    if (is_array(r, 1) && elem_is(r, 0, "notfound"))
        return DQ_ERR_NOTFOUND;
    if (!is_array(r, 11))
        return DQ_ERR_REDIS;
    out->state = state_from(r);
    out->state_ms = elem_int(r, 9);
    out->now_ms = elem_int(r, 10);
    /* read_job's nine elements, with the state where it reads an id ... */
    dq_status st = read_job(r, 0, &out->job);
    free(out->job.id);
    out->job.id = NULL;
    /* ... and created_ms before due_ms, where it reads due first (show.lua,
     * protocol.md). */
    int64_t created = out->job.due_ms;
    out->job.due_ms = out->job.created_ms;
    out->job.created_ms = created;
    out->job.priority = is_array(r, 14) ? (int)elem_int(r, 13) : DQ_PRIORITY_NORMAL_LEVEL;
    if (st == DQ_OK && out->state == DQ_STATE_UNREADABLE)
        st = describe_unreadable(r, &out->job);
    return st;
}

void dq_job_info_free(dq_job_info *info)
{
    if (info)
        proto_job_free(&info->job);
}

#define DEAD_ENTRY_ELEMS 7  /* per job in dead_list's reply */

/*
 * The flags saying which entries are unreadable live in the same block as
 * the entries, after the last one: the block is the library's (callers
 * read it and free it with dq_dead_page_free), so this adds nothing to
 * dq_dead_entry, whose size programs built against the old header index
 * the array with.
 */
static bool *dead_flags(const dq_dead_page *p)
{
    return (bool *)(p->entries + p->n);
}

bool dq_dead_page_unreadable(const dq_dead_page *p, size_t i)
{
    return p && p->entries && i < p->n && dead_flags(p)[i];
}

/* One dead entry from its seven elements; an unreadable record's last
 * error says why it does not read. */
static dq_status read_dead_entry(const redisReply *r, size_t at, dq_dead_entry *e,
                                 bool *unreadable)
{
    e->id = elem_dup(r, at, NULL);
    e->died_ms = elem_int(r, at + 1);
    e->type = elem_dup(r, at + 2, NULL);
    e->attempts = (int)elem_int(r, at + 3);
    e->payload_len = (size_t)elem_int(r, at + 5);
    const redisReply *why = r->element[at + 6];
    *unreadable = why->type == REDIS_REPLY_STRING && why->len > 0;
    if (*unreadable) {
        size_t n = why->len + 24;
        e->last_error = malloc(n);
        if (e->last_error)
            snprintf(e->last_error, n, "unreadable record: %s", why->str);
    } else {
        e->last_error = elem_dup(r, at + 4, NULL);
    }
    if (!e->id || !e->type || !e->last_error)
        return DQ_ERR_NOMEM;
    return DQ_OK;
}

void proto_dead_list_cmd(struct cmd *c, const struct queue_keys *k, int64_t offset,
                         int count)
{
    cmd_eval(c, DQ_SCRIPT_DEAD_LIST, k);
    cmd_push_i64(c, offset);
    cmd_push_i64(c, count);
}

dq_status proto_dead_list_reply(const redisReply *r, dq_dead_page *out)
{
    memset(out, 0, sizeof *out);
    if (!is_array(r, 1) || (r->elements - 1) % DEAD_ENTRY_ELEMS != 0)
        return DQ_ERR_REDIS;
    out->total = elem_int(r, 0);
    size_t n = (r->elements - 1) / DEAD_ENTRY_ELEMS;
    if (n == 0)
        return DQ_OK;
    out->entries = calloc(1, n * (sizeof *out->entries + sizeof(bool)));
    if (!out->entries)
        return DQ_ERR_NOMEM;
    out->n = n;
    for (size_t i = 0; i < n; i++)
        if (read_dead_entry(r, 1 + DEAD_ENTRY_ELEMS * i, &out->entries[i],
                            &dead_flags(out)[i]) != DQ_OK)
            return DQ_ERR_NOMEM;
    return DQ_OK;
}

dq_status proto_dead_page_alloc(dq_dead_page *p, size_t cap)
{
    memset(p, 0, sizeof *p);
    if (cap == 0)
        return DQ_OK;
    p->entries = calloc(1, cap * (sizeof *p->entries + sizeof(bool)));
    return p->entries ? DQ_OK : DQ_ERR_NOMEM;
}

void proto_dead_entry_move(dq_dead_page *to, size_t cap, dq_dead_page *from, size_t i)
{
    /* The flags follow the entries: those of `to` sit after its `cap`. */
    bool *to_flags = (bool *)(to->entries + cap);
    to->entries[to->n] = from->entries[i];
    to_flags[to->n] = dead_flags(from)[i];
    to->n++;
    memset(&from->entries[i], 0, sizeof from->entries[i]);
}

void proto_dead_page_seal(dq_dead_page *p, size_t cap)
{
    if (p->entries && p->n < cap)
        memmove(p->entries + p->n, p->entries + cap, p->n * sizeof(bool));
}

void dq_dead_page_free(dq_dead_page *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++) {
        free(p->entries[i].id);
        free(p->entries[i].type);
        free(p->entries[i].last_error);
    }
    free(p->entries);
    memset(p, 0, sizeof *p);
}

void proto_dead_cmd(struct cmd *c, const struct queue_keys *k, enum dq_script_id s,
                    const char *id, int batch)
{
    cmd_eval(c, s, k);
    if (s == DQ_SCRIPT_REQUEUE)
        cmd_push_str(c, k->wake);
    cmd_push_str(c, id ? id : "");
    cmd_push_i64(c, batch);
}

dq_status proto_count_reply(const redisReply *r, int64_t *moved,
                            int64_t *remaining)
{
    if (!is_array(r, 2))
        return DQ_ERR_REDIS;
    *moved = elem_int(r, 0);
    *remaining = elem_int(r, 1);
    return DQ_OK;
}

/* ---- fsck --------------------------------------------------------------- */

void proto_fsck_cmd(struct cmd *c, const struct queue_keys *k, const char *cursor,
                    int count, bool repair)
{
    cmd_eval(c, DQ_SCRIPT_FSCK, k);
    cmd_push_str(c, cursor);
    cmd_push_i64(c, count < 1 ? DQ_FSCK_COUNT : (count > 1000 ? 1000 : count));
    cmd_push_str(c, repair ? "repair" : "check");
}

const char *dq_fsck_kind_str(dq_fsck_kind k)
{
    switch (k) {
    case DQ_FSCK_RECORD: return "record";
    case DQ_FSCK_MEMBER: return "member";
    case DQ_FSCK_LEASE: return "lease";
    case DQ_FSCK_WRONG_TYPE: return "type";
    }
    return "unknown";
}

static int fsck_kind_from(const redisReply *r, size_t i, dq_fsck_kind *k)
{
    static const dq_fsck_kind kinds[] = { DQ_FSCK_RECORD, DQ_FSCK_MEMBER, DQ_FSCK_LEASE,
                                          DQ_FSCK_WRONG_TYPE };
    for (size_t j = 0; j < sizeof kinds / sizeof kinds[0]; j++)
        if (elem_is(r, i, dq_fsck_kind_str(kinds[j]))) {
            *k = kinds[j];
            return 0;
        }
    return -1;
}

/* Is the wrong-type key of element i among acc's findings already? */
static int fsck_seen_key(const dq_fsck_result *acc, const redisReply *r, size_t i)
{
    const redisReply *e = r->element[i];
    for (size_t j = 0; j < acc->n; j++)
        if (acc->findings[j].kind == DQ_FSCK_WRONG_TYPE
            && strlen(acc->findings[j].key) == e->len
            && memcmp(acc->findings[j].key, e->str, e->len) == 0)
            return 1;
    return 0;
}

/* Append the finding of the four elements at `at` (room is there). */
static dq_status fsck_add(dq_fsck_result *acc, const redisReply *r, size_t at,
                          dq_fsck_kind kind, bool repair)
{
    dq_fsck_finding *f = &acc->findings[acc->n];
    f->kind = kind;
    f->repaired = repair && kind != DQ_FSCK_WRONG_TYPE;
    f->key = elem_dup(r, at + 1, NULL);
    f->id = elem_dup(r, at + 2, NULL);
    f->expected = elem_dup(r, at + 3, NULL);
    acc->n++;
    return f->key && f->id && f->expected ? DQ_OK : DQ_ERR_NOMEM;
}

dq_status proto_fsck_reply(const redisReply *r, bool repair, dq_fsck_result *acc,
                           char *cursor, size_t cursorlen)
{
    if (!is_array(r, 8) || (r->elements - 8) % 4 != 0
        || r->element[0]->type != REDIS_REPLY_STRING)
        return DQ_ERR_REDIS;
    for (size_t i = 8; i < r->elements; i++)
        if (r->element[i]->type != REDIS_REPLY_STRING)
            return DQ_ERR_REDIS;
    snprintf(cursor, cursorlen, "%s", r->element[0]->str);
    acc->calls++;
    acc->scanned += elem_int(r, 1);
    acc->records += elem_int(r, 2);
    acc->members += elem_int(r, 3);
    acc->leases += elem_int(r, 4);
    acc->repaired += elem_int(r, 6);
    acc->claim_dropped = elem_int(r, 7);
    for (size_t at = 8; at < r->elements; at += 4) {
        dq_fsck_kind kind;
        if (fsck_kind_from(r, at, &kind) < 0)
            return DQ_ERR_REDIS;
        if (kind == DQ_FSCK_WRONG_TYPE) {
            /* SCAN may return a key twice in one pass: count it once. */
            if (fsck_seen_key(acc, r, at + 1))
                continue;
            acc->wrong_types++;
        } else if (acc->n >= DQ_FSCK_FINDINGS_MAX) {
            continue;
        }
        /* The capacity is the next power of two: grow when n reaches it. */
        if ((acc->n & (acc->n - 1)) == 0) {
            size_t cap = acc->n ? 2 * acc->n : 1;
            dq_fsck_finding *f = realloc(acc->findings, cap * sizeof *f);
            if (!f)
                return DQ_ERR_NOMEM;
            acc->findings = f;
        }
        dq_status st = fsck_add(acc, r, at, kind, repair);
        if (st != DQ_OK)
            return st;
    }
    return DQ_OK;
}

void dq_fsck_result_free(dq_fsck_result *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++) {
        free(r->findings[i].key);
        free(r->findings[i].id);
        free(r->findings[i].expected);
    }
    free(r->findings);
    memset(r, 0, sizeof *r);
}

/* ---- element readers for the other protocol modules (lib/sched.c) ---- */

int64_t proto_elem_int(const redisReply *r, size_t i)
{
    return elem_int(r, i);
}

int proto_elem_is(const redisReply *r, size_t i, const char *s)
{
    return elem_is(r, i, s);
}

char *proto_elem_dup(const redisReply *r, size_t i, size_t *len)
{
    return elem_dup(r, i, len);
}
