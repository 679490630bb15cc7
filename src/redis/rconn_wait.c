/*
 * Writes that wait for a replica (see rconn_wait.h).
 */
#include "redis/rconn_wait.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/log.h"

/* One write in flight under "replicated": its reply waits for WAIT's. */
struct replicated_req {
    struct rconn *rc;
    struct rconn_replication *repl;
    rconn_reply_fn fn;
    void *arg;
    redisReply *reply;          /* the write's, copied, until WAIT answers */
    int write_done;             /* the write's reply (or NULL) came */
    int lost;                   /* ... and it was NULL */
    int wait_unsent;            /* no WAIT could be queued behind it */
};

/* A deep copy of `r`: hiredis frees a reply when its callback returns,
 * and the write's must wait for WAIT's.  NULL when out of memory. */
static redisReply *reply_copy(const redisReply *r)
{
    redisReply *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->type = r->type;
    c->integer = r->integer;
    if (r->str) {
        c->str = malloc(r->len + 1);
        if (!c->str)
            goto fail;
        memcpy(c->str, r->str, r->len + 1);
        c->len = r->len;
    }
    if (r->element) {
        c->element = calloc(r->elements ? r->elements : 1, sizeof *c->element);
        if (!c->element)
            goto fail;
        for (size_t i = 0; i < r->elements; i++, c->elements = i)
            if (r->element[i] && !(c->element[i] = reply_copy(r->element[i])))
                goto fail;
    }
    return c;
fail:
    freeReplyObject(c);
    return NULL;
}

/* The error reply a write not replicated in time is answered with. */
static redisReply *unreplicated_reply(const struct rconn_replication *repl)
{
    redisReply *r = calloc(1, sizeof *r);
    char text[160];
    int len = snprintf(text, sizeof text, "%s not replicated within %d ms (the write is "
                       "on the master only)", RCONN_NOT_REPLICATED, repl->timeout_ms);
    if (r && (r->str = strdup(text)) != NULL) {
        r->type = REDIS_REPLY_ERROR;
        r->len = (size_t)len;
        return r;
    }
    free(r);
    return NULL;
}

/* Log the start and the end of a spell of writes not replicated, once. */
static void note_replication(struct rconn_replication *repl, int replicated)
{
    char addr[300];
    if (replicated == !repl->unreplicated)
        return;
    repl->unreplicated = !replicated;
    redis_conn_describe(repl->opt, addr, sizeof addr);
    if (replicated)
        log_info("redis %s (%s connection): writes reach a replica again", addr, repl->name);
    else
        log_warn("redis %s (%s connection): a write was not replicated within %d ms; "
                 "it is not taken as done", addr, repl->name, repl->timeout_ms);
}

/* Hand the caller its answer: `verdict` is WAIT's count of replicas, or
 * -1 when the connection was lost. */
static void replicated_finish(struct replicated_req *d, long long verdict)
{
    redisReply *answer = NULL;
    if (verdict >= 1 && !d->lost && d->reply) {
        note_replication(d->repl, 1);
        answer = d->reply;
        d->reply = NULL;
    } else if (verdict >= 0 && !d->lost) {
        note_replication(d->repl, 0);
        answer = unreplicated_reply(d->repl);
    }
    d->fn(d->rc, answer, d->arg);
    if (answer)
        freeReplyObject(answer);
    if (d->reply)
        freeReplyObject(d->reply);
    free(d);
}

static void on_replicated_write(struct rconn *rc, redisReply *reply, void *arg)
{
    (void)rc;
    struct replicated_req *d = arg;
    d->write_done = 1;
    d->lost = !reply;
    if (reply && !(d->reply = reply_copy(reply)))
        d->lost = 1;            /* out of memory: as good as lost */
    if (d->wait_unsent)
        replicated_finish(d, 0);
}

static int send_wait(struct replicated_req *d);

static void on_replicated_wait(struct rconn *rc, redisReply *reply, void *arg)
{
    (void)rc;
    struct replicated_req *d = arg;
    /* WAIT answered before the write: the write was sent again after it
     * (NOSCRIPT), so this WAIT does not cover it; one more does. */
    if (reply && !d->write_done) {
        if (send_wait(d) < 0)
            d->wait_unsent = 1;     /* on_replicated_write finishes */
        return;
    }
    if (!reply)
        replicated_finish(d, -1);
    else
        replicated_finish(d, reply->type == REDIS_REPLY_INTEGER ? reply->integer : 0);
}

static int send_wait(struct replicated_req *d)
{
    struct cmd w;
    redis_conn_wait_cmd(&w, d->repl->timeout_ms);
    int rv = d->repl->send(d->rc, &w, -1, on_replicated_wait, d);
    cmd_free(&w);
    return rv;
}

int rconn_wait_send(struct rconn *rc, struct rconn_replication *repl, const struct cmd *cmd,
                    int script, rconn_reply_fn fn, void *arg)
{
    struct replicated_req *d = calloc(1, sizeof *d);
    if (!d)
        return -1;
    d->rc = rc;
    d->repl = repl;
    d->fn = fn;
    d->arg = arg;
    if (repl->send(rc, cmd, script, on_replicated_write, d) < 0) {
        free(d);
        return -1;
    }
    if (send_wait(d) < 0)
        d->wait_unsent = 1;     /* answered as not replicated */
    return 0;
}

int rconn_is_not_replicated(const redisReply *r)
{
    size_t n = strlen(RCONN_NOT_REPLICATED);
    return r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, RCONN_NOT_REPLICATED, n) == 0;
}
