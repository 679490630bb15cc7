/* libdelayq calls for producers: enqueue and cancel. */
#include <stdlib.h>
#include <string.h>

#include "lib/client_internal.h"
#include "lib/proto.h"

/* Check a request before anything is sent: a refused job costs no round
 * trip and changes nothing. */
static dq_status check_request(dq_client *c, const dq_enqueue_req *req)
{
    const char *why = keys_check_queue(req->queue);
    if (!why)
        why = keys_check_type(req->type);
    if (!why && req->id && *req->id)
        why = keys_check_id(req->id);
    if (why)
        return client_fail(c, DQ_ERR_INVALID, "%s", why);
    if (req->payload_len > c->max_payload)
        return client_fail(c, DQ_ERR_TOO_LARGE,
                           "payload is %zu bytes, over the limit of %zu",
                           req->payload_len, c->max_payload);
    if (req->payload_len && !req->payload)
        return client_fail(c, DQ_ERR_INVALID, "payload is NULL but its length is not 0");
    if (req->max_attempts < 0)
        return client_fail(c, DQ_ERR_INVALID, "max attempts is negative");
    if (req->delay_ms < 0 || req->at_ms < 0)
        return client_fail(c, DQ_ERR_INVALID, "delay or time is negative");
    return DQ_OK;
}

/* Message for a job the enqueue script refused. */
static dq_status refused(dq_client *c, dq_status st, const dq_enqueue_req *req)
{
    if (st == DQ_ERR_EXISTS)
        return client_fail(c, st, "job %s already exists in queue %s (use replace)",
                           req->id, req->queue);
    if (st == DQ_ERR_RUNNING)
        return client_fail(c, st, "job %s in queue %s is running and cannot be replaced",
                           req->id, req->queue);
    return client_fail(c, st, "unexpected reply from the enqueue script");
}

dq_status dq_enqueue(dq_client *c, const dq_enqueue_req *req, dq_enqueued *out)
{
    return dq_enqueue_many(c, req, 1, out, NULL);
}

dq_status dq_enqueue_many(dq_client *c, const dq_enqueue_req *reqs, size_t n,
                          dq_enqueued *results, dq_status *statuses)
{
    dq_status first = DQ_OK;
    char firstmsg[sizeof c->err] = "";
    struct queue_keys *keys = calloc(n ? n : 1, sizeof *keys);
    struct cmd *cmds = calloc(n ? n : 1, sizeof *cmds);
    redisReply **replies = calloc(n ? n : 1, sizeof *replies);
    size_t *slot = calloc(n ? n : 1, sizeof *slot);
    if (!keys || !cmds || !replies || !slot) {
        first = client_fail(c, DQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    /* Jobs that fail the checks are reported; the others are sent. */
    size_t nsend = 0;
    for (size_t i = 0; i < n; i++) {
        dq_status st = check_request(c, &reqs[i]);
        if (statuses)
            statuses[i] = st;
        if (st != DQ_OK) {
            if (first == DQ_OK) {
                first = st;
                snprintf(firstmsg, sizeof firstmsg, "%s", c->err);
            }
            continue;
        }
        keys_build(&keys[nsend], c->prefix, reqs[i].queue);
        proto_enqueue_cmd(&cmds[nsend], &keys[nsend], &reqs[i]);
        slot[nsend++] = i;
    }
    for (size_t i = 0; i < nsend; i++) {
        dq_status st = client_register_queue(c, reqs[slot[i]].queue);
        if (st != DQ_OK) {
            first = st;
            goto done;
        }
    }
    if (nsend) {
        dq_status st = client_pipeline(c, cmds, nsend, DQ_SCRIPT_ENQUEUE, replies);
        if (st != DQ_OK) {
            first = st;
            goto done;
        }
    }
    for (size_t i = 0; i < nsend; i++) {
        const dq_enqueue_req *req = &reqs[slot[i]];
        dq_enqueued tmp, *out = results ? &results[slot[i]] : &tmp;
        dq_status st = replies[i]->type == REDIS_REPLY_ERROR
            ? client_fail(c, DQ_ERR_REDIS, "redis error in enqueue: %s", replies[i]->str)
            : proto_enqueue_reply(replies[i], out);
        if (st != DQ_OK && st != DQ_ERR_REDIS)
            refused(c, st, req);
        if (statuses)
            statuses[slot[i]] = st;
        if (st != DQ_OK && first == DQ_OK) {
            first = st;
            snprintf(firstmsg, sizeof firstmsg, "%s", c->err);
        }
    }
    /* The message belongs to the first failure, not the last. */
    if (first != DQ_OK)
        snprintf(c->err, sizeof c->err, "%s", firstmsg);
    else
        c->err[0] = '\0';
done:
    for (size_t i = 0; cmds && replies && i < n; i++) {
        if (replies[i])
            freeReplyObject(replies[i]);
        cmd_free(&cmds[i]);
    }
    free(keys);
    free(cmds);
    free(replies);
    free(slot);
    return first;
}

dq_status dq_cancel(dq_client *c, const char *queue, const char *id)
{
    struct queue_keys k;
    dq_status st = client_queue_keys(c, queue, &k);
    if (st != DQ_OK)
        return st;
    if (!id || !*id)
        return client_fail(c, DQ_ERR_INVALID, "job id is empty");
    struct cmd cmd;
    cmd_init(&cmd);
    cmd_eval(&cmd, DQ_SCRIPT_CANCEL, &k);
    cmd_push_str(&cmd, id);
    redisReply *r;
    st = client_run(c, &cmd, DQ_SCRIPT_CANCEL, &r);
    cmd_free(&cmd);
    if (st != DQ_OK)
        return st;
    st = proto_cancel_reply(r);
    freeReplyObject(r);
    switch (st) {
    case DQ_OK: return DQ_OK;
    case DQ_ERR_RUNNING:
        return client_fail(c, st, "job %s in queue %s is running; it can no longer be cancelled", id, queue);
    case DQ_ERR_DEAD:
        return client_fail(c, st, "job %s in queue %s is dead; purge it instead", id, queue);
    case DQ_ERR_NOTFOUND:
        return client_fail(c, st, "no job %s in queue %s", id, queue);
    default:
        return client_fail(c, st, "unexpected reply from the cancel script");
    }
}
