/*
 * The producer's scripts: enqueue and enqueue_many, their arguments and
 * their replies (proto.h).
 */
#include "lib/proto.h"
#include "lib/proto_int.h"
#include "lib/msgpack.h"

#include <stdio.h>
#include <string.h>

/* A job's arguments after the wake channel, as enqueue takes them; the
 * partition pair after them when the queue is partitioned. */
static void push_enqueue_args(struct cmd *c, const dq_enqueue_req *req,
                              unsigned nparts, unsigned part)
{
    cmd_push_str(c, req->id ? req->id : "");
    cmd_push_str(c, req->type);
    cmd_push(c, req->payload, req->payload_len);
    cmd_push_str(c, req->at_ms > 0 ? "at" : "delay");
    /* A debounced job is due debounce_ms from now, as the script checks. */
    cmd_push_i64(c, req->debounce_ms > 0 ? req->debounce_ms
                 : req->at_ms > 0 ? req->at_ms : (req->delay_ms > 0 ? req->delay_ms : 0));
    cmd_push_i64(c, req->max_attempts > 0 ? req->max_attempts : 0);
    cmd_push_str(c, req->replace ? "1" : "0");
    /* Normal is the script's default: such a call is as before priorities
     * (and before expiries). */
    bool expires = req->expire_at > 0 || req->ttl_ms > 0;
    bool unique = req->unique_for_ms > 0, debounce = req->debounce_ms > 0;
    expires = expires || unique || debounce;   /* the arguments before them */
    if (req->priority && req->priority != DQ_PRIORITY_NORMAL)
        cmd_push_i64(c, req->priority - 1);
    else if (nparts > 1 || expires)
        cmd_push_i64(c, DQ_PRIORITY_NORMAL_LEVEL);
    if (nparts > 1 || expires) {
        cmd_push_i64(c, nparts > 1 ? nparts : 1);
        cmd_push_i64(c, nparts > 1 ? part : 0);
    }
    if (expires && (req->expire_at > 0 || req->ttl_ms > 0)) {
        char buf[24];
        int n = snprintf(buf, sizeof buf, "%s%lld", req->expire_at > 0 ? "" : "+",
                         (long long)(req->expire_at > 0 ? req->expire_at : req->ttl_ms));
        cmd_push_copy(c, buf, (size_t)n);
        cmd_push_str(c, req->on_expire == DQ_EXPIRE_DROP ? "drop" : "dead");
    } else if (expires) {
        cmd_push_str(c, "");
        cmd_push_str(c, "dead");
    }
    if (unique || debounce) {
        if (unique)
            cmd_push_i64(c, req->unique_for_ms);
        else
            cmd_push_str(c, "");
        cmd_push_str(c, req->unique_ok ? "1" : "0");
    }
    if (debounce) {
        cmd_push_i64(c, req->debounce_ms);
        if (req->max_wait_ms > 0)
            cmd_push_i64(c, req->max_wait_ms);
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
 * replace, "/" and the level after it when it is not normal, ">" and the
 * expiry ("+" first for one after the due time, "!" after to drop), "~"
 * and the dedupe window ("?" after it for unique_ok). */
static void push_when(struct cmd *c, const dq_enqueue_req *req)
{
    char buf[128], prio[16] = "", expiry[40] = "", window[32] = "";
    int64_t ms = req->at_ms > 0 ? req->at_ms : (req->delay_ms > 0 ? req->delay_ms : 0);
    if (req->priority && req->priority != DQ_PRIORITY_NORMAL)
        snprintf(prio, sizeof prio, "/%d", req->priority - 1);
    if (req->expire_at > 0 || req->ttl_ms > 0)
        snprintf(expiry, sizeof expiry, ">%s%lld%s", req->expire_at > 0 ? "" : "+",
                 (long long)(req->expire_at > 0 ? req->expire_at : req->ttl_ms),
                 req->on_expire == DQ_EXPIRE_DROP ? "!" : "");
    if (req->unique_for_ms > 0)
        snprintf(window, sizeof window, "~%lld%s", (long long)req->unique_for_ms,
                 req->unique_ok ? "?" : "");
    int n = snprintf(buf, sizeof buf, "%s%s%lld%s%s%s", req->replace ? "r" : "",
                     req->at_ms > 0 ? "@" : "", (long long)ms, prio, expiry, window);
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
        out->debounced = elem_is(r, at, "debounced");
        out->next_run = elem_is(r, at, "queued");
    }
    if (elem_is(r, at, "ok") || elem_is(r, at, "replaced") || elem_is(r, at, "debounced")
        || elem_is(r, at, "queued"))
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
    if (elem_is(r, 0, "partitions"))
        return DQ_ERR_STALE;    /* the count changed: nothing was written */
    if (elem_is(r, 0, "unique") || elem_is(r, 0, "done")) {
        /* {status, id, finished_ms, now_ms, until_ms}: nothing was added. */
        if (!is_array(r, 5) || r->element[1]->type != REDIS_REPLY_STRING)
            return DQ_ERR_REDIS;
        set_id(out, r->element[1]->str, r->element[1]->len);
        out->due_ms = 0;
        out->replaced = false;
        out->finished = true;
        out->finished_ms = elem_int(r, 2);
        out->unique_until_ms = elem_int(r, 4);
        /* A sixth element says what kept the id (a script older than
         * cancelling a running job sends none: a window). */
        out->cancelled = is_array(r, 6) && elem_is(r, 5, "cancelled");
        return elem_is(r, 0, "done") ? DQ_OK : DQ_ERR_UNIQUE;
    }
    out->finished = out->cancelled = false;
    out->finished_ms = out->unique_until_ms = 0;
    out->debounced = out->next_run = false;
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
    if (elem_is(r, 0, "partitions")) {
        /* The count changed: nothing was written. */
        for (size_t i = 0; i < n; i++) {
            memset(&out[i], 0, sizeof out[i]);
            st[i] = DQ_ERR_STALE;
        }
        return DQ_OK;
    }
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
        out[i].finished = false;
        out[i].finished_ms = out[i].unique_until_ms = 0;
        out[i].debounced = out[i].next_run = false;
        st[i] = DQ_OK;
    }
    for (size_t e = 2; e < r->elements; e += 3) {
        int64_t i = elem_int(r, e) - 1;
        if (i < 0 || (size_t)i >= n || r->element[e + 2]->type != REDIS_REPLY_STRING)
            return DQ_ERR_REDIS;
        set_id(&out[i], r->element[e + 2]->str, r->element[e + 2]->len);
        out[i].replaced = elem_is(r, e + 1, "replaced");
        out[i].finished = elem_is(r, e + 1, "unique") || elem_is(r, e + 1, "done");
        if (out[i].finished)
            out[i].due_ms = 0;
        if (elem_is(r, e + 1, "unique"))
            st[i] = DQ_ERR_UNIQUE;
        else if (elem_is(r, e + 1, "exists"))
            st[i] = DQ_ERR_EXISTS;
        else if (elem_is(r, e + 1, "running"))
            st[i] = DQ_ERR_RUNNING;
        else if (!elem_is(r, e + 1, "ok") && !out[i].replaced && !out[i].finished)
            st[i] = DQ_ERR_REDIS;
    }
    return DQ_OK;
}
