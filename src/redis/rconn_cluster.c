/*
 * An rconn in Redis Cluster mode (see rconn_cluster.h): requests routed by
 * slot and redirected, and the subscription, on the nodes and the slot map
 * of rconn_cluster_nodes.c.
 */
#include "redis/rconn_cluster.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/log.h"
#include "redis/cluster_policy.h"
#include "redis/rconn_cluster_nodes.h"

/* One request: a copy of the command, kept to be sent again. */
struct creq {
    struct rcluster *cl;
    rconn_reply_fn fn;
    void *arg;
    struct cmd cmd;
    int script;
    int keyless;                /* no route key: any master */
    unsigned slot;
    int redirects;              /* MOVED/ASK in a row (the policy's count) */
    char ask_host[CLUSTER_HOST_MAX]; /* ASK target when ask_port > 0 */
    int ask_port;
    int asked;                  /* the last send followed an ASKING */
    int pause_ms;               /* the policy's next pause step */
    int64_t started_ms;         /* monotonic: when the caller sent it */
    int64_t budget_ms;          /* how long it may wait for a master */
    char last_error[128];       /* the last TRYAGAIN or CLUSTERDOWN */
    struct cluster_node sent_to; /* where it went last */
    struct event *timer;        /* the pause; NULL until the first */
    struct creq *prev, *next;   /* in cl->parked during a pause */
};

/* ---- requests ------------------------------------------------------------- */

static void creq_free(struct creq *q)
{
    if (q->timer)
        event_free(q->timer);
    cmd_free(&q->cmd);
    free(q);
}

/* The caller's answer.  A NULL one (`why` it failed) takes the routing
 * connection down first, as a lost connection does, so that the caller's
 * sends fail until on_up, which comes once the map is read again.  An
 * isolated connection stays up for the other masters' slots: the map is
 * read again, and the caller tries this one's later. */
static void deliver(struct creq *q, redisReply *reply, const char *why)
{
    struct rcluster *cl = q->cl;
    if (!reply && cl->isolate && !cl->freeing) {
        rcluster_note_outage(cl, why ? why : "a request failed");
        rcluster_plan_refresh(cl, 0);
    } else if (!reply) {
        rcluster_drop(cl, why);
    }
    q->fn(cl->owner, reply, q->arg);
    creq_free(q);
}

/* NULL to the caller: the request's slot found no master that took it
 * within the command timeout. */
static void give_up(struct creq *q)
{
    char why[sizeof q->cl->last_failure];
    snprintf(why, sizeof why, "slot %u not served within the command timeout (%.300s)",
             q->slot, q->last_error[0] ? q->last_error : "its master is not up");
    deliver(q, NULL, why);
}

/* The master for a request: its ASK target, its slot's master, or (no
 * key) any master up; NULL when there is none. */
static struct rcluster_node *target(struct creq *q)
{
    struct rcluster *cl = q->cl;
    if (q->ask_port > 0)
        return rcluster_node_get(cl, q->ask_host, q->ask_port);
    if (!cl->bymap)
        return NULL;
    if (q->keyless) {
        for (size_t i = 0; i < cl->map.nnodes; i++)
            if (cl->bymap[i] && cl->ops.is_up(cl->bymap[i]->rc))
                return cl->bymap[i];
        return NULL;
    }
    unsigned i = cluster_map_lookup(&cl->map, q->slot);
    return i < cl->map.nnodes ? cl->bymap[i] : NULL;
}

static void on_node_reply(struct rconn *rc, redisReply *reply, void *arg);

static void on_asking_reply(struct rconn *rc, redisReply *reply, void *arg)
{
    (void)rc;
    (void)reply;
    (void)arg;
}

/* Send `q` to its master: 0, or -1 when that master is not up (or memory
 * ran out). */
static int dispatch(struct creq *q)
{
    struct rcluster *cl = q->cl;
    struct rcluster_node *n = target(q);
    if (!n || !cl->ops.is_up(n->rc))
        return -1;
    q->sent_to.port = n->port;
    snprintf(q->sent_to.host, sizeof q->sent_to.host, "%s", n->host);
    if (q->ask_port > 0) {
        struct cmd asking;
        cmd_init(&asking);
        cmd_push_str(&asking, "ASKING");
        int rv = cl->ops.send(n->rc, &asking, -1, on_asking_reply, NULL);
        cmd_free(&asking);
        if (rv < 0)
            return -1;
        q->ask_port = 0;    /* once */
        q->asked = 1;
    }
    return cl->ops.send(n->rc, &q->cmd, q->script, on_node_reply, q);
}

static void on_pause_end(evutil_socket_t fd, short what, void *arg);

static void unpark(struct creq *q)
{
    if (q->prev)
        q->prev->next = q->next;
    else
        q->cl->parked = q->next;
    if (q->next)
        q->next->prev = q->prev;
    q->prev = q->next = NULL;
}

/* The cluster policy's decision on `q`: its reply's error text `err`, or
 * no reply (`no_reply`; `sent` when the command had been written). */
static void decide(const struct creq *q, const char *err, int no_reply, int sent,
                   struct cluster_decision *d)
{
    int64_t now = rcluster_now_ms();
    const struct cluster_facts f = {
        .error = err, .no_reply = no_reply, .sent = sent, .asked = q->asked,
        .redirects = q->redirects, .pause_ms = q->pause_ms,
        .elapsed_ms = now - q->started_ms, .budget_ms = q->budget_ms,
        .rnd = (unsigned long)now ^ (unsigned long)(uintptr_t)q,
    };
    cluster_policy_decide(&f, d);
}

/* Send `q` again after the pause `d` chose (BACK_OFF, REFRESH: with the
 * map read again first): 0, or -1 when it cannot wait (the connection is
 * being freed, or the policy gave up). */
static int park(struct creq *q, const struct cluster_decision *d)
{
    struct rcluster *cl = q->cl;
    if (cl->freeing || d->verdict == CLUSTER_GIVE_UP)
        return -1;
    if (!q->timer && !(q->timer = evtimer_new(cl->base, on_pause_end, q)))
        return -1;
    if (d->refresh_map)
        rcluster_plan_refresh(cl, 0);
    rcluster_arm(q->timer, d->delay_ms);
    q->pause_ms = d->pause_ms;
    q->redirects = d->redirects;
    q->next = cl->parked;
    if (q->next)
        q->next->prev = q;
    cl->parked = q;
    return 0;
}

/* Send now, or, while the master is not up, after the pause the policy
 * chooses: 0, or -1 when it gives up (past the deadline). */
static int send_or_park(struct creq *q)
{
    struct cluster_decision d;
    if (dispatch(q) == 0)
        return 0;
    decide(q, NULL, 1, 0, &d);
    return park(q, &d);
}

/* Send now or after a pause; NULL to the caller past the deadline. */
static void resend(struct creq *q)
{
    if (send_or_park(q) < 0)
        give_up(q);
}

static void on_pause_end(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct creq *q = arg;
    unpark(q);
    resend(q);
}

/* MOVED: the slot is served by HOST:PORT now; read the whole map soon
 * (a reshard moves many slots at once). */
static void note_moved(struct rcluster *cl, unsigned slot, const char *host, int port)
{
    int i = cluster_map_node(&cl->map, host, port);
    if (i >= 0 && cl->map.slot[slot] != (uint16_t)i) {
        log_info("redis cluster (%s connection): slot %u moved to %s:%d", cl->name, slot,
                 host, port);
        cl->map.slot[slot] = (uint16_t)i;
        if (rcluster_link_map(cl) < 0)
            log_warn("redis cluster (%s connection): out of memory following a MOVED",
                     cl->name);
    }
    rcluster_plan_refresh(cl, 0);
    rcluster_check_state(cl);
}

static void on_node_reply(struct rconn *rc, redisReply *reply, void *arg)
{
    struct creq *q = arg;
    struct rcluster *cl = q->cl;
    struct cluster_decision d;
    if (!reply) {
        /* a lost master: the policy gives up (the command may have run);
         * deliver() takes the routing connection down, which reads the
         * map again */
        decide(q, NULL, 1, 1, &d);
        if (d.refresh_map && !cl->freeing)
            rcluster_plan_refresh(cl, 0);
        char why[sizeof cl->last_failure];
        snprintf(why, sizeof why, "master %.200s:%d lost (%.200s)", q->sent_to.host,
                 q->sent_to.port, cl->ops.last_failure(rc));
        deliver(q, NULL, why);
        return;
    }
    if (reply->type != REDIS_REPLY_ERROR || cl->freeing) {
        deliver(q, reply, NULL);
        return;
    }
    decide(q, reply->str, 0, 0, &d);
    q->asked = 0;
    switch (d.verdict) {
    case CLUSTER_RESEND_MOVED:
        q->redirects = d.redirects;
        note_moved(cl, d.slot, d.host, d.port);
        resend(q);
        return;
    case CLUSTER_RESEND_ASK:
        q->redirects = d.redirects;
        log_debug("redis cluster (%s connection): %s", cl->name, reply->str);
        snprintf(q->ask_host, sizeof q->ask_host, "%s", d.host);
        q->ask_port = d.port;
        resend(q);
        return;
    case CLUSTER_BACK_OFF:
    case CLUSTER_REFRESH:
    case CLUSTER_GIVE_UP:
        break;
    case CLUSTER_ANSWER:
        deliver(q, reply, NULL);
        return;
    }
    enum cluster_error_kind kind = cluster_error_kind(reply->str);
    if (kind == CLUSTER_ERR_MOVED || kind == CLUSTER_ERR_ASK) {
        log_warn("redis cluster (%s connection): %s", cl->name, d.why);
        deliver(q, reply, NULL);
        return;
    }
    log_debug("redis cluster (%s connection): %s", cl->name, reply->str);
    snprintf(q->last_error, sizeof q->last_error, "%s", reply->str);
    if (park(q, &d) < 0)
        give_up(q);
}

/* A copy of `cmd` to route and keep; NULL when memory ran out. */
static struct creq *creq_new(struct rcluster *cl, const struct cmd *cmd, int script,
                             rconn_reply_fn fn, void *arg)
{
    struct creq *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    q->cl = cl;
    q->fn = fn;
    q->arg = arg;
    q->script = script;
    cmd_init(&q->cmd);
    for (int i = 0; i < cmd->argc; i++)
        cmd_push_copy(&q->cmd, cmd->argv[i], cmd->lens[i]);
    size_t len;
    const char *key = cmd_route_key(&q->cmd, &len);
    q->keyless = key == NULL;
    q->slot = key ? cluster_keyslot(key, len) : 0;
    q->pause_ms = CLUSTER_PAUSE_MIN_MS;
    q->budget_ms = cl->opt.command_timeout_ms > 0 ? cl->opt.command_timeout_ms
                                                  : cl->opt.connect_timeout_ms;
    q->started_ms = rcluster_now_ms();
    if (q->cmd.oom || cmd->oom) {
        creq_free(q);
        return NULL;
    }
    return q;
}

int rcluster_send(struct rcluster *cl, const struct cmd *cmd, int script,
                  rconn_reply_fn fn, void *arg)
{
    if (!cl->up || cl->nchannels)
        return -1;
    struct creq *q = creq_new(cl, cmd, script, fn, arg);
    if (!q)
        return -1;
    /* Up, yet its master is not (a slot no master serves, or a MOVED to a
     * node still connecting): the caller would wait for an on_up that
     * does not come, so the request waits here, within its deadline. */
    if (send_or_park(q) < 0) {
        creq_free(q);
        return -1;
    }
    return 0;
}

/* ---- subscription mode -------------------------------------------------- */

static void sub_connect(struct rcluster *cl);

static void on_sub_up(struct rconn *rc, void *arg)
{
    (void)rc;
    struct rcluster *cl = arg;
    cl->up = 1;
    char what[CLUSTER_HOST_MAX + 32];
    snprintf(what, sizeof what, "subscribed on %s:%d", cl->sub_at.host, cl->sub_at.port);
    rcluster_note_recovery(cl, what);
    if (cl->ev.on_up)
        cl->ev.on_up(cl->owner, cl->ev.arg);
}

static void on_sub_down(struct rconn *rc, void *arg)
{
    struct rcluster *cl = arg;
    if (cl->freeing)
        return;
    char why[sizeof cl->last_failure];
    snprintf(why, sizeof why, "subscription on %.200s:%d lost (%.200s)", cl->sub_at.host,
             cl->sub_at.port, cl->ops.last_failure(rc));
    rcluster_note_outage(cl, why);
    cl->up = 0;
    if (cl->ev.on_down)
        cl->ev.on_down(cl->owner, cl->ev.arg);
    rcluster_arm(cl->sub_timer, 0);      /* the next node, from the loop */
}

static void on_sub_message(struct rconn *rc, const char *channel, const char *payload,
                           size_t len, void *arg)
{
    (void)rc;
    struct rcluster *cl = arg;
    if (cl->on_message)
        cl->on_message(cl->owner, channel, payload, len, cl->message_arg);
}

/* The subscription is not up (lost, or not made within the connect
 * timeout): make it on the next node. */
static void on_sub_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct rcluster *cl = arg;
    if (cl->sub && cl->ops.is_up(cl->sub))
        return;
    if (cl->sub) {
        char why[sizeof cl->last_failure];
        snprintf(why, sizeof why, "cannot subscribe on %.200s:%d (%.200s)", cl->sub_at.host,
                 cl->sub_at.port, cl->ops.last_failure(cl->sub));
        rcluster_note_outage(cl, why);
        cl->ops.free(cl->sub);
        cl->sub = NULL;
    }
    cl->sub_next++;
    sub_connect(cl);
}

/* Subscribe on the next of the seeds and the masters of the last map
 * read (read again once the list has been gone through). */
static void sub_connect(struct rcluster *cl)
{
    size_t n = cl->nseeds + cl->map.nnodes;
    if (cl->sub_next >= n) {
        char err[400];
        cl->sub_next = 0;
        if (rcluster_refresh_map(cl, err, sizeof err) < 0)
            snprintf(cl->last_failure, sizeof cl->last_failure, "%s", err);
    }
    const struct cluster_node *at = cl->sub_next < cl->nseeds
                                    ? &cl->seeds[cl->sub_next]
                                    : &cl->map.nodes[cl->sub_next - cl->nseeds];
    cl->sub_at = *at;
    dq_options o = rcluster_node_options(cl, cl->sub_at.host, cl->sub_at.port);
    const struct rconn_events ev = { on_sub_up, on_sub_down, cl, NULL };
    cl->sub = cl->ops.node_new(cl->base, &o, cl->name, &ev);
    if (cl->sub && cl->ops.subscribe(cl->sub, (const char *const *)cl->channels,
                                     cl->nchannels, on_sub_message, cl) < 0) {
        cl->ops.free(cl->sub);  /* out of memory: the timer tries again */
        cl->sub = NULL;
    }
    if (cl->sub) {
        cl->ops.count_reconnects(cl->sub, cl->reconnects);
        cl->ops.start(cl->sub);
    }
    rcluster_arm(cl->sub_timer, cl->opt.connect_timeout_ms + 500);
}

static void free_channels(struct rcluster *cl)
{
    for (size_t i = 0; i < cl->nchannels; i++)
        free(cl->channels[i]);
    free(cl->channels);
    cl->channels = NULL;
    cl->nchannels = 0;
}

int rcluster_subscribe(struct rcluster *cl, const char *const *channels, size_t n,
                       rconn_message_fn fn, void *arg)
{
    free_channels(cl);
    if (!(cl->channels = calloc(n ? n : 1, sizeof *cl->channels)))
        return -1;
    for (size_t i = 0; i < n; i++, cl->nchannels = i)
        if (!(cl->channels[i] = strdup(channels[i]))) {
            free_channels(cl);
            return -1;
        }
    cl->nchannels = n;
    cl->on_message = fn;
    cl->message_arg = arg;
    return 0;
}

struct rcluster *rcluster_new(struct event_base *base, const dq_options *opt,
                              const char *name, struct rconn *owner,
                              const struct rconn_events *ev,
                              const struct rcluster_node_ops *ops)
{
    struct rcluster *cl = calloc(1, sizeof *cl);
    if (!cl)
        return NULL;
    cl->owner = owner;
    cl->ops = *ops;
    if (ev)
        cl->ev = *ev;
    char err[400] = "out of memory";
    if (rcluster_nodes_init(cl, base, opt, name, err, sizeof err) < 0
        || !(cl->sub_timer = evtimer_new(base, on_sub_timer, cl))) {
        log_err("redis connection %s: %s", name, err);
        rcluster_free(cl);
        return NULL;
    }
    return cl;
}

void rcluster_start(struct rcluster *cl)
{
    cl->started_ms = rcluster_now_ms();
    if (cl->nchannels) {
        if (!cl->sub)
            sub_connect(cl);
    } else if (!cl->have_map) {
        rcluster_plan_refresh(cl, 0);
    }
}

int rcluster_is_up(const struct rcluster *cl)
{
    return cl->up;
}

void rcluster_isolate_masters(struct rcluster *cl)
{
    cl->isolate = 1;
}

int rcluster_key_is_up(const struct rcluster *cl, const char *key, size_t len)
{
    if (!cl->up || cl->nchannels || !cl->bymap)
        return 0;
    unsigned i = cluster_map_lookup(&cl->map, cluster_keyslot(key, len));
    return i < cl->map.nnodes && cl->bymap[i] && cl->ops.is_up(cl->bymap[i]->rc);
}

void rcluster_count_reconnects(struct rcluster *cl, uint64_t *counter)
{
    cl->reconnects = counter;
    for (size_t i = 0; i < cl->nnodes; i++)
        cl->ops.count_reconnects(cl->nodes[i]->rc, counter);
    if (cl->sub)
        cl->ops.count_reconnects(cl->sub, counter);
}

void rcluster_close_in_child(struct rcluster *cl)
{
    for (size_t i = 0; i < cl->nnodes; i++)
        cl->ops.close_in_child(cl->nodes[i]->rc);
    if (cl->sub)
        cl->ops.close_in_child(cl->sub);
}

const char *rcluster_last_failure(const struct rcluster *cl)
{
    return cl->last_failure[0] ? cl->last_failure : "connection to the Redis cluster lost";
}

void rcluster_free(struct rcluster *cl)
{
    if (!cl)
        return;
    cl->freeing = 1;
    cl->up = 0;
    while (cl->parked) {
        struct creq *q = cl->parked;
        unpark(q);
        deliver(q, NULL, NULL);
    }
    if (cl->sub)
        cl->ops.free(cl->sub);
    if (cl->sub_timer)
        event_free(cl->sub_timer);
    free_channels(cl);
    rcluster_nodes_free(cl);
    free(cl);
}
