/*
 * An rconn in Redis Cluster mode (see rconn_cluster.h): the slot map, one
 * node connection per master, requests routed by slot and redirected.
 */
#include "daemon/rconn_cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/log.h"
#include "lib/cluster_map.h"
#include "lib/redis_conn.h"
#include "lib/redis_io.h"
#include "lib/sentinel.h"

#define RCLUSTER_PAUSE_MIN_MS 100       /* TRYAGAIN, CLUSTERDOWN, a node not up */
#define RCLUSTER_REFRESH_MIN_MS 100     /* map reads while down: doubled ... */
#define RCLUSTER_REFRESH_MAX_MS 1000    /* ... up to this */

/* A master's connection, named by its address. */
struct cnode {
    struct rcluster *cl;
    char host[CLUSTER_HOST_MAX];
    int port;
    struct rconn *rc;
};

struct rcluster {
    struct event_base *base;
    struct rconn *owner;        /* the routing rconn the callers hold */
    char *name;
    struct rconn_events ev;
    struct rcluster_node_ops ops;
    dq_options opt;             /* a node's options but its address; the
                                   strings are copies, in owned[] */
    char **owned;
    size_t nowned;
    struct redis_conn_opts conn; /* the same, for the blocking map reads */
    struct cluster_node *seeds;
    size_t nseeds;
    struct cluster_map map;
    int have_map;
    struct cnode **nodes;       /* one per master of the map */
    size_t nnodes;
    struct cnode **bymap;       /* map.nodes[i]'s connection */
    struct event *refresh_timer;
    int refresh_ms;
    int up;
    int failing;                /* an outage was logged */
    int64_t down_since_ms;
    char last_failure[480];
    uint64_t *reconnects;
    struct creq *parked;        /* requests waiting for a pause to end */
    int freeing;
    /* subscription mode (rconn_subscribe) */
    char *channel;
    rconn_message_fn on_message;
    void *message_arg;
    struct rconn *sub;          /* the node subscribed on ... */
    struct cluster_node sub_at; /* ... at this address */
    size_t sub_next;            /* the next candidate to subscribe on */
    struct event *sub_timer;    /* not up in time, or lost: the next one */
};

/* One request: a copy of the command, kept to be sent again. */
struct creq {
    struct rcluster *cl;
    rconn_reply_fn fn;
    void *arg;
    struct cmd cmd;
    int script;
    int keyless;                /* no route key: any master */
    unsigned slot;
    int redirects;
    char ask_host[CLUSTER_HOST_MAX]; /* ASK target when ask_port > 0 */
    int ask_port;
    int pause_ms;
    int64_t give_up_ms;         /* monotonic */
    struct event *timer;        /* the pause; NULL until the first */
    struct creq *prev, *next;   /* in cl->parked during a pause */
};

static void check_state(struct rcluster *cl);
static void plan_refresh(struct rcluster *cl, int ms);

static int64_t monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void arm(struct event *ev, int ms)
{
    struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
    evtimer_add(ev, &tv);
}

/* ---- outages --------------------------------------------------------------- */

/* The routing connection cannot serve every slot: logged at the start of
 * the outage only. */
static void note_outage(struct rcluster *cl, const char *why)
{
    snprintf(cl->last_failure, sizeof cl->last_failure, "%s", why);
    if (cl->failing)
        return;
    cl->failing = 1;
    cl->down_since_ms = monotonic_ms();
    log_warn("redis cluster (%s connection): %s; following the cluster", cl->name, why);
}

/* The outage is over: `what` says how ("3 masters", "subscribed on
 * HOST:PORT"). */
static void note_recovery(struct rcluster *cl, const char *what)
{
    if (cl->failing)
        log_info("redis cluster (%s connection): up again, %s (outage %.1f s)", cl->name,
                 what, (double)(monotonic_ms() - cl->down_since_ms) / 1000.0);
    cl->failing = 0;
}

/* ---- the node connections ---------------------------------------------- */

static struct cnode *cnode_find(const struct rcluster *cl, const char *host, int port)
{
    for (size_t i = 0; i < cl->nnodes; i++)
        if (cl->nodes[i]->port == port && strcmp(cl->nodes[i]->host, host) == 0)
            return cl->nodes[i];
    return NULL;
}

static void on_node_up(struct rconn *rc, void *arg)
{
    (void)rc;
    check_state(((struct cnode *)arg)->cl);
}

/* A master lost: its requests got NULL already; read the map again (a
 * failover may have promoted a replica). */
static void on_node_down(struct rconn *rc, void *arg)
{
    struct cnode *n = arg;
    struct rcluster *cl = n->cl;
    if (cl->freeing)
        return;
    char why[400];
    snprintf(why, sizeof why, "master %s:%d lost (%s)", n->host, n->port,
             cl->ops.last_failure(rc));
    if (cl->up)
        note_outage(cl, why);
    check_state(cl);
    plan_refresh(cl, 0);
}

/* A node's options: the template with its address. */
static dq_options node_options(const struct rcluster *cl, const char *host, int port)
{
    dq_options o = cl->opt;
    o.host = host;
    o.port = port;
    return o;
}

/* The connection to HOST:PORT, made (and started) when new.  NULL when
 * memory ran out. */
static struct cnode *cnode_get(struct rcluster *cl, const char *host, int port)
{
    struct cnode *n = cnode_find(cl, host, port);
    if (n)
        return n;
    struct cnode **grown = realloc(cl->nodes, (cl->nnodes + 1) * sizeof *grown);
    if (!grown || !(n = calloc(1, sizeof *n))) {
        if (grown)
            cl->nodes = grown;
        return NULL;
    }
    cl->nodes = grown;
    n->cl = cl;
    snprintf(n->host, sizeof n->host, "%s", host);
    n->port = port;
    dq_options o = node_options(cl, n->host, port);
    const struct rconn_events ev = { on_node_up, on_node_down, n };
    if (!(n->rc = cl->ops.node_new(cl->base, &o, cl->name, &ev))) {
        free(n);
        return NULL;
    }
    cl->ops.count_reconnects(n->rc, cl->reconnects);
    cl->nodes[cl->nnodes++] = n;
    cl->ops.start(n->rc);
    return n;
}

/* map.nodes[i] -> its connection, made when new.  -1 when memory ran out
 * (the entries missing then count as masters down). */
static int link_map(struct rcluster *cl)
{
    struct cnode **by = realloc(cl->bymap, (cl->map.nnodes ? cl->map.nnodes : 1) * sizeof *by);
    if (!by)
        return -1;
    cl->bymap = by;
    int rv = 0;
    for (size_t i = 0; i < cl->map.nnodes; i++)
        if (!(by[i] = cnode_get(cl, cl->map.nodes[i].host, cl->map.nodes[i].port)))
            rv = -1;
    return rv;
}

static int in_map(const struct rcluster *cl, const struct cnode *n)
{
    for (size_t i = 0; i < cl->map.nnodes; i++)
        if (cl->map.nodes[i].port == n->port && strcmp(cl->map.nodes[i].host, n->host) == 0)
            return 1;
    return 0;
}

/* Free the connections of nodes the map no longer names (a master
 * replaced in a failover, or emptied by a reshard); their pending
 * requests get NULL.  Only from a timer: never inside a node's callback. */
static void retire_nodes(struct rcluster *cl)
{
    size_t kept = 0;
    struct cnode *gone[64];
    size_t ngone = 0;
    for (size_t i = 0; i < cl->nnodes; i++) {
        struct cnode *n = cl->nodes[i];
        if (in_map(cl, n) || ngone == sizeof gone / sizeof gone[0])
            cl->nodes[kept++] = n;
        else
            gone[ngone++] = n;
    }
    cl->nnodes = kept;
    for (size_t i = 0; i < ngone; i++) {
        log_info("redis cluster (%s connection): %s:%d is no longer a master",
                 cl->name, gone[i]->host, gone[i]->port);
        cl->ops.free(gone[i]->rc);
        free(gone[i]);
    }
}

/* ---- the slot map --------------------------------------------------------- */

/* Read CLUSTER SLOTS from HOST:PORT into `m` (blocking, under the connect
 * timeout).  0, or -1 with one line in err. */
static int read_map_from(struct rcluster *cl, const char *host, int port,
                         struct cluster_map *m, char *err, size_t errlen)
{
    struct redis_conn_opts o = cl->conn;
    o.host = (char *)host;
    o.port = port;
    dq_status st;
    char why[300];
    redisContext *c = redis_conn_open(&o, &st, why, sizeof why);
    if (!c) {
        snprintf(err, errlen, "%s", why);
        return -1;
    }
    const char *argv[2] = { "CLUSTER", "SLOTS" };
    redisReply *r = redis_io_command(c, 2, argv, NULL);
    int rv = -1;
    if (!r)
        snprintf(err, errlen, "%s:%d: CLUSTER SLOTS: %s", host, port, redis_io_errstr(c));
    else if (cluster_map_load(m, r, host, why, sizeof why) < 0)
        snprintf(err, errlen, "%s:%d: %s", host, port, why);
    else if (m->nnodes == 0)
        snprintf(err, errlen, "%s:%d: no master serves a slot yet", host, port);
    else
        rv = 0;
    if (r)
        freeReplyObject(r);
    redis_io_free(c);
    return rv;
}

/* Try HOST:PORT; on success `fresh` becomes the map. */
static int try_node(struct rcluster *cl, const char *host, int port, char *err,
                    size_t errlen)
{
    struct cluster_map fresh;
    cluster_map_init(&fresh);
    if (read_map_from(cl, host, port, &fresh, err, errlen) < 0) {
        cluster_map_free(&fresh);
        return -1;
    }
    cluster_map_free(&cl->map);
    cl->map = fresh;
    cl->have_map = 1;
    return 0;
}

/*
 * Read the map from any node: the masters whose connection is up first
 * (they answer at once), then the seeds, then the other masters of the
 * last map.  Blocking: a node refusing on a LAN costs little, one that
 * does not answer costs the connect timeout, which is why the live ones
 * come first.  0, or -1 with the last failure in err.
 */
static int refresh_map(struct rcluster *cl, char *err, size_t errlen)
{
    snprintf(err, errlen, "no node to ask");
    for (size_t i = 0; i < cl->nnodes; i++)
        if (cl->ops.is_up(cl->nodes[i]->rc)
            && try_node(cl, cl->nodes[i]->host, cl->nodes[i]->port, err, errlen) == 0)
            return 0;
    for (size_t i = 0; i < cl->nseeds; i++)
        if (try_node(cl, cl->seeds[i].host, cl->seeds[i].port, err, errlen) == 0)
            return 0;
    size_t n = cl->map.nnodes;
    struct cluster_node *known = n ? malloc(n * sizeof *known) : NULL;
    if (known)
        memcpy(known, cl->map.nodes, n * sizeof *known);
    int rv = -1;
    for (size_t i = 0; known && i < n && rv < 0; i++)
        rv = try_node(cl, known[i].host, known[i].port, err, errlen);
    free(known);
    return rv;
}

/* Every master of the map has its connection up. */
static int all_masters_up(const struct rcluster *cl)
{
    if (!cl->have_map || !cl->bymap)
        return 0;
    for (size_t i = 0; i < cl->map.nnodes; i++)
        if (!cl->bymap[i] || !cl->ops.is_up(cl->bymap[i]->rc))
            return 0;
    return 1;
}

/* Up or down (see rconn_cluster.h): tell the caller of a change. */
static void check_state(struct rcluster *cl)
{
    if (cl->channel || cl->freeing)
        return;
    int now = all_masters_up(cl);
    if (now == cl->up)
        return;
    cl->up = now;
    if (now) {
        cl->refresh_ms = RCLUSTER_REFRESH_MIN_MS;
        char what[64];
        snprintf(what, sizeof what, "%zu master%s", cl->map.nnodes,
                 cl->map.nnodes == 1 ? "" : "s");
        note_recovery(cl, what);
        if (cl->ev.on_up)
            cl->ev.on_up(cl->owner, cl->ev.arg);
    } else {
        plan_refresh(cl, 0);
        if (cl->ev.on_down)
            cl->ev.on_down(cl->owner, cl->ev.arg);
    }
}

static void plan_refresh(struct rcluster *cl, int ms)
{
    if (!evtimer_pending(cl->refresh_timer, NULL))
        arm(cl->refresh_timer, ms);
}

/* Read the map and follow it: new masters connected, old ones let go;
 * again after a pause while not every master is up. */
static void on_refresh_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct rcluster *cl = arg;
    char err[400];
    if (refresh_map(cl, err, sizeof err) < 0) {
        char why[450];
        snprintf(why, sizeof why, "cannot read the slot map (%s)", err);
        note_outage(cl, why);
    } else {
        if (link_map(cl) < 0)
            note_outage(cl, "out of memory following the slot map");
        retire_nodes(cl);
        check_state(cl);
    }
    if (cl->up)
        return;
    arm(cl->refresh_timer, cl->refresh_ms);
    cl->refresh_ms = cl->refresh_ms * 2 > RCLUSTER_REFRESH_MAX_MS ? RCLUSTER_REFRESH_MAX_MS
                                                                 : cl->refresh_ms * 2;
}

/* ---- requests ------------------------------------------------------------- */

static void creq_free(struct creq *q)
{
    if (q->timer)
        event_free(q->timer);
    cmd_free(&q->cmd);
    free(q);
}

static void deliver(struct creq *q, redisReply *reply)
{
    q->fn(q->cl->owner, reply, q->arg);
    creq_free(q);
}

/* The master for a request: its ASK target, its slot's master, or (no
 * key) any master up; NULL when there is none. */
static struct cnode *target(struct creq *q)
{
    struct rcluster *cl = q->cl;
    if (q->ask_port > 0)
        return cnode_get(cl, q->ask_host, q->ask_port);
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
    struct cnode *n = target(q);
    if (!n || !cl->ops.is_up(n->rc))
        return -1;
    if (q->ask_port > 0) {
        struct cmd asking;
        cmd_init(&asking);
        cmd_push_str(&asking, "ASKING");
        int rv = cl->ops.send(n->rc, &asking, -1, on_asking_reply, NULL);
        cmd_free(&asking);
        if (rv < 0)
            return -1;
        q->ask_port = 0;    /* once */
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

/* Send `q` again after a pause (100 ms, doubled each time): 0, or -1 when
 * the pause would end past its deadline. */
static int park(struct creq *q)
{
    struct rcluster *cl = q->cl;
    if (cl->freeing || monotonic_ms() + q->pause_ms > q->give_up_ms)
        return -1;
    if (!q->timer && !(q->timer = evtimer_new(cl->base, on_pause_end, q)))
        return -1;
    arm(q->timer, q->pause_ms);
    q->pause_ms *= 2;
    q->next = cl->parked;
    if (q->next)
        q->next->prev = q;
    cl->parked = q;
    return 0;
}

/* Send now, or after a pause while the master is not up; NULL to the
 * caller past the deadline. */
static void resend(struct creq *q)
{
    if (dispatch(q) < 0 && park(q) < 0)
        deliver(q, NULL);
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
        if (link_map(cl) < 0)
            log_warn("redis cluster (%s connection): out of memory following a MOVED",
                     cl->name);
    }
    plan_refresh(cl, 0);
    check_state(cl);
}

static void on_node_reply(struct rconn *rc, redisReply *reply, void *arg)
{
    (void)rc;
    struct creq *q = arg;
    struct rcluster *cl = q->cl;
    if (!reply || reply->type != REDIS_REPLY_ERROR || cl->freeing) {
        deliver(q, reply);
        return;
    }
    char host[CLUSTER_HOST_MAX];
    int port;
    unsigned slot;
    int kind = cluster_parse_redirect(reply->str, &slot, host, sizeof host, &port);
    if (kind && q->redirects++ < RCLUSTER_MAX_REDIRECTS) {
        if (kind == CLUSTER_MOVED) {
            note_moved(cl, slot, host, port);
        } else {
            log_debug("redis cluster (%s connection): %s", cl->name, reply->str);
            snprintf(q->ask_host, sizeof q->ask_host, "%s", host);
            q->ask_port = port;
        }
        resend(q);
        return;
    }
    if (!kind && cluster_is_retry_later(reply->str)) {
        log_debug("redis cluster (%s connection): %s", cl->name, reply->str);
        if (park(q) == 0)
            return;
        snprintf(cl->last_failure, sizeof cl->last_failure, "%s", reply->str);
        deliver(q, NULL);
        return;
    }
    if (kind)
        log_warn("redis cluster (%s connection): still redirected after %d redirections: %s",
                 cl->name, RCLUSTER_MAX_REDIRECTS, reply->str);
    deliver(q, reply);
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
    q->pause_ms = RCLUSTER_PAUSE_MIN_MS;
    int patience = cl->opt.command_timeout_ms > 0 ? cl->opt.command_timeout_ms
                                                   : cl->opt.connect_timeout_ms;
    q->give_up_ms = monotonic_ms() + patience;
    if (q->cmd.oom || cmd->oom) {
        creq_free(q);
        return NULL;
    }
    return q;
}

int rcluster_send(struct rcluster *cl, const struct cmd *cmd, int script,
                  rconn_reply_fn fn, void *arg)
{
    if (!cl->up || cl->channel)
        return -1;
    struct creq *q = creq_new(cl, cmd, script, fn, arg);
    if (!q)
        return -1;
    if (dispatch(q) < 0) {
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
    note_recovery(cl, what);
    if (cl->ev.on_up)
        cl->ev.on_up(cl->owner, cl->ev.arg);
}

static void on_sub_down(struct rconn *rc, void *arg)
{
    struct rcluster *cl = arg;
    if (cl->freeing)
        return;
    note_outage(cl, cl->ops.last_failure(rc));
    cl->up = 0;
    if (cl->ev.on_down)
        cl->ev.on_down(cl->owner, cl->ev.arg);
    arm(cl->sub_timer, 0);      /* the next node, from the loop */
}

static void on_sub_message(struct rconn *rc, const char *payload, size_t len, void *arg)
{
    (void)rc;
    struct rcluster *cl = arg;
    if (cl->on_message)
        cl->on_message(cl->owner, payload, len, cl->message_arg);
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
        note_outage(cl, cl->ops.last_failure(cl->sub));
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
        if (refresh_map(cl, err, sizeof err) < 0)
            snprintf(cl->last_failure, sizeof cl->last_failure, "%s", err);
    }
    const struct cluster_node *at = cl->sub_next < cl->nseeds
                                    ? &cl->seeds[cl->sub_next]
                                    : &cl->map.nodes[cl->sub_next - cl->nseeds];
    cl->sub_at = *at;
    dq_options o = node_options(cl, cl->sub_at.host, cl->sub_at.port);
    const struct rconn_events ev = { on_sub_up, on_sub_down, cl };
    cl->sub = cl->ops.node_new(cl->base, &o, cl->name, &ev);
    if (cl->sub) {
        cl->ops.subscribe(cl->sub, cl->channel, on_sub_message, cl);
        cl->ops.count_reconnects(cl->sub, cl->reconnects);
        cl->ops.start(cl->sub);
    }
    arm(cl->sub_timer, cl->opt.connect_timeout_ms + 500);
}

void rcluster_subscribe(struct rcluster *cl, const char *channel, rconn_message_fn fn,
                        void *arg)
{
    free(cl->channel);
    cl->channel = strdup(channel);
    cl->on_message = fn;
    cl->message_arg = arg;
}

/* ---- the routing connection --------------------------------------------- */

/* Keep a copy of the string *field points to, and point it there. */
static int keep(struct rcluster *cl, const char **field)
{
    if (!*field)
        return 0;
    char **grown = realloc(cl->owned, (cl->nowned + 1) * sizeof *grown);
    if (!grown)
        return -1;
    cl->owned = grown;
    char *copy = strdup(*field);
    if (!copy)
        return -1;
    cl->owned[cl->nowned++] = copy;
    *field = copy;
    return 0;
}

/* The node template from the caller's options: cluster, Sentinel and a
 * unix socket off, every string copied.  -1 when memory ran out. */
static int copy_options(struct rcluster *cl, const dq_options *opt)
{
    cl->opt = *opt;
    cl->opt.cluster = 0;
    cl->opt.nodes = NULL;
    cl->opt.nnodes = 0;
    cl->opt.unix_path = NULL;
    memset(&cl->opt.sentinel, 0, sizeof cl->opt.sentinel);
    dq_options *o = &cl->opt;
    if (keep(cl, &o->host) < 0 || keep(cl, &o->user) < 0 || keep(cl, &o->password) < 0
        || keep(cl, &o->prefix) < 0 || keep(cl, &o->tls.ca_file) < 0
        || keep(cl, &o->tls.ca_dir) < 0 || keep(cl, &o->tls.cert_file) < 0
        || keep(cl, &o->tls.key_file) < 0 || keep(cl, &o->tls.server_name) < 0)
        return -1;
    if (o->connect_timeout_ms <= 0)
        o->connect_timeout_ms = REDIS_CONN_DEFAULT_TIMEOUT_MS;
    return 0;
}

/* The seeds: opt->nodes, or host:port.  -1 with one line in err. */
static int read_seeds(struct rcluster *cl, const dq_options *opt, char *err, size_t errlen)
{
    size_t n = opt->nnodes ? opt->nnodes : 1;
    if (!(cl->seeds = calloc(n, sizeof *cl->seeds))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < opt->nnodes; i++) {
        const char *why;
        if (sentinel_parse_node(opt->nodes[i], cl->seeds[i].host, sizeof cl->seeds[i].host,
                                &cl->seeds[i].port, &why) < 0) {
            snprintf(err, errlen, "cluster node '%s': %s", opt->nodes[i], why);
            return -1;
        }
    }
    if (!opt->nnodes) {
        snprintf(cl->seeds[0].host, sizeof cl->seeds[0].host, "%s",
                 opt->host ? opt->host : REDIS_CONN_DEFAULT_HOST);
        cl->seeds[0].port = opt->port > 0 ? opt->port : REDIS_CONN_DEFAULT_PORT;
    }
    cl->nseeds = n;
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
    cl->base = base;
    cl->owner = owner;
    cl->ops = *ops;
    if (ev)
        cl->ev = *ev;
    cl->refresh_ms = RCLUSTER_REFRESH_MIN_MS;
    cluster_map_init(&cl->map);
    char err[400] = "out of memory";
    cl->name = strdup(name);
    cl->refresh_timer = evtimer_new(base, on_refresh_timer, cl);
    cl->sub_timer = evtimer_new(base, on_sub_timer, cl);
    if (!cl->name || !cl->refresh_timer || !cl->sub_timer || copy_options(cl, opt) < 0
        || read_seeds(cl, opt, err, sizeof err) < 0
        || redis_conn_opts_copy(&cl->conn, &cl->opt, err, sizeof err) < 0) {
        log_err("redis connection %s: %s", name, err);
        rcluster_free(cl);
        return NULL;
    }
    /* The blocking map reads wait no longer than a connect. */
    if (cl->conn.command_timeout_ms <= 0
        || cl->conn.command_timeout_ms > cl->conn.connect_timeout_ms)
        cl->conn.command_timeout_ms = cl->conn.connect_timeout_ms;
    return cl;
}

void rcluster_start(struct rcluster *cl)
{
    if (cl->channel) {
        if (!cl->sub)
            sub_connect(cl);
    } else if (!cl->have_map) {
        plan_refresh(cl, 0);
    }
}

int rcluster_is_up(const struct rcluster *cl)
{
    return cl->up;
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
        deliver(q, NULL);
    }
    for (size_t i = 0; i < cl->nnodes; i++) {
        cl->ops.free(cl->nodes[i]->rc);
        free(cl->nodes[i]);
    }
    free(cl->nodes);
    if (cl->sub)
        cl->ops.free(cl->sub);
    if (cl->refresh_timer)
        event_free(cl->refresh_timer);
    if (cl->sub_timer)
        event_free(cl->sub_timer);
    cluster_map_free(&cl->map);
    free(cl->bymap);
    free(cl->seeds);
    for (size_t i = 0; i < cl->nowned; i++)
        redis_conn_free_secret(cl->owned[i]);
    free(cl->owned);
    redis_conn_opts_free(&cl->conn);
    free(cl->channel);
    free(cl->name);
    free(cl);
}
