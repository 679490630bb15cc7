/*
 * The nodes and the slot map of a cluster-mode connection (see
 * rconn_cluster_nodes.h).
 */
#include "redis/rconn_cluster_nodes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/log.h"
#include "redis/redis_io.h"
#include "redis/sentinel.h"
#include "util/clock.h"

int64_t rcluster_now_ms(void)
{
    return clock_mono_ms();
}

void rcluster_arm(struct event *ev, int ms)
{
    struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
    if (evtimer_add(ev, &tv) == 0)
        return;
    log_err("redis cluster: cannot arm a timer of %d ms; running it now", ms);
    event_active(ev, EV_TIMEOUT, 0);    /* allocates nothing */
}

/* ---- outages --------------------------------------------------------------- */

/* The routing connection cannot serve every slot: logged at the start of
 * the outage only. */
void rcluster_note_outage(struct rcluster *cl, const char *why)
{
    snprintf(cl->last_failure, sizeof cl->last_failure, "%s", why);
    if (cl->failing)
        return;
    cl->failing = 1;
    cl->down_since_ms = rcluster_now_ms();
    log_warn("redis cluster (%s connection): %s; following the cluster", cl->name, why);
}

/* The outage is over: `what` says how ("3 masters", "subscribed on
 * HOST:PORT"). */
void rcluster_note_recovery(struct rcluster *cl, const char *what)
{
    if (cl->failing)
        log_info("redis cluster (%s connection): up again, %s (outage %.1f s)", cl->name,
                 what, (double)(rcluster_now_ms() - cl->down_since_ms) / 1000.0);
    cl->failing = 0;
}

/* ---- the node connections ---------------------------------------------- */

static struct rcluster_node *node_find(const struct rcluster *cl, const char *host, int port)
{
    for (size_t i = 0; i < cl->nnodes; i++)
        if (cl->nodes[i]->port == port && strcmp(cl->nodes[i]->host, host) == 0)
            return cl->nodes[i];
    return NULL;
}

static void on_node_up(struct rconn *rc, void *arg)
{
    (void)rc;
    rcluster_check_state(((struct rcluster_node *)arg)->cl);
}

/* A master lost: its requests got NULL already; read the map again (a
 * failover may have promoted a replica). */
static void on_node_down(struct rconn *rc, void *arg)
{
    struct rcluster_node *n = arg;
    struct rcluster *cl = n->cl;
    if (cl->freeing)
        return;
    char why[400];
    snprintf(why, sizeof why, "master %s:%d lost (%s)", n->host, n->port,
             cl->ops.last_failure(rc));
    if (cl->up)
        rcluster_note_outage(cl, why);
    rcluster_check_state(cl);
    rcluster_plan_refresh(cl, 0);
}

/* A node's options: the template with its address. */
dq_options rcluster_node_options(const struct rcluster *cl, const char *host, int port)
{
    dq_options o = cl->opt;
    o.host = host;
    o.port = port;
    return o;
}

/* The connection to HOST:PORT, made (and started) when new.  NULL when
 * memory ran out. */
struct rcluster_node *rcluster_node_get(struct rcluster *cl, const char *host, int port)
{
    struct rcluster_node *n = node_find(cl, host, port);
    if (n)
        return n;
    struct rcluster_node **grown = realloc(cl->nodes, (cl->nnodes + 1) * sizeof *grown);
    if (!grown || !(n = calloc(1, sizeof *n))) {
        if (grown)
            cl->nodes = grown;
        return NULL;
    }
    cl->nodes = grown;
    n->cl = cl;
    snprintf(n->host, sizeof n->host, "%s", host);
    n->port = port;
    dq_options o = rcluster_node_options(cl, n->host, port);
    const struct rconn_events ev = { on_node_up, on_node_down, n, NULL };
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
int rcluster_link_map(struct rcluster *cl)
{
    size_t n = cl->map.nnodes ? cl->map.nnodes : 1;
    struct rcluster_node **by = realloc(cl->bymap, n * sizeof *by);
    if (!by) {
        free(cl->bymap);    /* stale and too short for the map: none */
        cl->bymap = NULL;
        return -1;
    }
    cl->bymap = by;
    int rv = 0;
    for (size_t i = 0; i < cl->map.nnodes; i++)
        if (!(by[i] = rcluster_node_get(cl, cl->map.nodes[i].host, cl->map.nodes[i].port)))
            rv = -1;
    return rv;
}

static int in_map(const struct rcluster *cl, const struct rcluster_node *n)
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
    struct rcluster_node *gone[64];
    size_t ngone = 0;
    for (size_t i = 0; i < cl->nnodes; i++) {
        struct rcluster_node *n = cl->nodes[i];
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
int rcluster_refresh_map(struct rcluster *cl, char *err, size_t errlen)
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

/* How many masters of the map have their connection up. */
static size_t masters_up(const struct rcluster *cl)
{
    size_t n = 0;
    if (!cl->have_map || !cl->bymap)
        return 0;
    for (size_t i = 0; i < cl->map.nnodes; i++)
        n += cl->bymap[i] && cl->ops.is_up(cl->bymap[i]->rc);
    return n;
}

/* Whether every master of the map has its connection up. */
static int all_masters_up(const struct rcluster *cl)
{
    size_t n = masters_up(cl);
    return n > 0 && n == cl->map.nnodes;
}

/* Every master of the map is up: an outage ends (logged once), and the
 * map reads start again from the shortest pause at the next one. */
static void note_all_up(struct rcluster *cl)
{
    char what[64];
    snprintf(what, sizeof what, "%zu master%s", cl->map.nnodes, cl->map.nnodes == 1 ? "" : "s");
    rcluster_note_recovery(cl, what);
    cl->refresh_ms = RCLUSTER_REFRESH_MIN_MS;
}

/* An isolated connection is up while any master is, once it has been up:
 * the first time, when every master is (so that a start does not find
 * the masters still connecting out of reach), or when one is and the
 * others have had the connect timeout to come up. */
static int isolated_up(const struct rcluster *cl, size_t nup, int all)
{
    return nup > 0 && (all || cl->ever_up
                       || rcluster_now_ms() - cl->started_ms >= cl->opt.connect_timeout_ms);
}

/* Up or down (see rconn_cluster.h): tell the caller of a change.  An
 * isolated connection stays up while any master is; a master that comes
 * back calls on_master_up, so that the caller asks its slots again. */
void rcluster_check_state(struct rcluster *cl)
{
    if (cl->nchannels || cl->freeing)
        return;
    size_t nup = masters_up(cl), before = cl->nup;
    int all = nup > 0 && nup == cl->map.nnodes;
    int now = cl->isolate ? isolated_up(cl, nup, all) : all;
    cl->nup = nup;
    cl->ever_up |= now;
    if (now && all)
        note_all_up(cl);
    if (now == cl->up) {
        if (now && cl->isolate && nup > before && cl->ev.on_master_up)
            cl->ev.on_master_up(cl->owner, cl->ev.arg);
        return;
    }
    cl->up = now;
    if (now) {
        if (cl->ev.on_up)
            cl->ev.on_up(cl->owner, cl->ev.arg);
    } else {
        rcluster_plan_refresh(cl, 0);
        if (cl->ev.on_down)
            cl->ev.on_down(cl->owner, cl->ev.arg);
    }
}

void rcluster_drop(struct rcluster *cl, const char *why)
{
    if (!cl->up || cl->freeing || cl->nchannels)
        return;
    rcluster_note_outage(cl, why ? why : "a request failed");
    cl->up = 0;
    rcluster_plan_refresh(cl, 0);
    if (cl->ev.on_down)
        cl->ev.on_down(cl->owner, cl->ev.arg);
}

void rcluster_plan_refresh(struct rcluster *cl, int ms)
{
    if (!evtimer_pending(cl->refresh_timer, NULL))
        rcluster_arm(cl->refresh_timer, ms);
}

/* Down for a while though the map was read (a master that never came up,
 * at start say): name the first master that is not up, once. */
static void note_master_down(struct rcluster *cl)
{
    for (size_t i = 0; i < cl->map.nnodes; i++) {
        struct rcluster_node *n = cl->bymap ? cl->bymap[i] : NULL;
        if (n && cl->ops.is_up(n->rc))
            continue;
        char why[sizeof cl->last_failure];
        snprintf(why, sizeof why, "master %.200s:%d not up (%.200s)", cl->map.nodes[i].host,
                 cl->map.nodes[i].port, n ? cl->ops.last_failure(n->rc) : "out of memory");
        rcluster_note_outage(cl, why);
        return;
    }
}

/* Read the map and follow it: new masters connected, old ones let go;
 * again after a pause while not every master is up. */
static void on_refresh_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct rcluster *cl = arg;
    char err[400];
    if (rcluster_refresh_map(cl, err, sizeof err) < 0) {
        char why[450];
        snprintf(why, sizeof why, "cannot read the slot map (%s)", err);
        rcluster_note_outage(cl, why);
    } else {
        if (rcluster_link_map(cl) < 0)
            rcluster_note_outage(cl, "out of memory following the slot map");
        retire_nodes(cl);
        rcluster_check_state(cl);
        if (!all_masters_up(cl) && cl->refresh_ms == RCLUSTER_REFRESH_MAX_MS)
            note_master_down(cl);
    }
    if (all_masters_up(cl))
        return;
    rcluster_arm(cl->refresh_timer, cl->refresh_ms);
    cl->refresh_ms = cl->refresh_ms * 2 > RCLUSTER_REFRESH_MAX_MS ? RCLUSTER_REFRESH_MAX_MS
                                                                 : cl->refresh_ms * 2;
}


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


int rcluster_nodes_init(struct rcluster *cl, struct event_base *base, const dq_options *opt,
                        const char *name, char *err, size_t errlen)
{
    cl->base = base;
    cl->refresh_ms = RCLUSTER_REFRESH_MIN_MS;
    cluster_map_init(&cl->map);
    snprintf(err, errlen, "out of memory");
    if (!(cl->name = strdup(name))
        || !(cl->refresh_timer = evtimer_new(base, on_refresh_timer, cl))
        || copy_options(cl, opt) < 0 || read_seeds(cl, opt, err, errlen) < 0
        || redis_conn_opts_copy(&cl->conn, &cl->opt, err, errlen) < 0)
        return -1;
    /* The blocking map reads wait no longer than a connect. */
    if (cl->conn.command_timeout_ms <= 0
        || cl->conn.command_timeout_ms > cl->conn.connect_timeout_ms)
        cl->conn.command_timeout_ms = cl->conn.connect_timeout_ms;
    return 0;
}

void rcluster_nodes_free(struct rcluster *cl)
{
    for (size_t i = 0; i < cl->nnodes; i++) {
        cl->ops.free(cl->nodes[i]->rc);
        free(cl->nodes[i]);
    }
    free(cl->nodes);
    cl->nodes = NULL;
    cl->nnodes = 0;
    if (cl->refresh_timer)
        event_free(cl->refresh_timer);
    cluster_map_free(&cl->map);
    free(cl->bymap);
    free(cl->seeds);
    for (size_t i = 0; i < cl->nowned; i++)
        redis_conn_free_secret(cl->owned[i]);
    free(cl->owned);
    redis_conn_opts_free(&cl->conn);
    free(cl->name);
}
