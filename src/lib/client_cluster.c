/*
 * The blocking client in Redis Cluster mode (see client_cluster.h): the
 * slot map, a connection per master, and the routing of one call's
 * commands, round after round, until each has its answer.
 */
#include "lib/client_cluster.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "redis/cluster_map.h"
#include "redis/cluster_policy.h"
#include "redis/redis_io.h"
#include "lib/scripts.h"
#include "util/clock.h"

/* A master's connection: the client's settings with this node's address
 * (a shallow copy: only host is ours).  On the heap, because the TLS state
 * keeps a pointer to o.tls for the connection's life. */
struct cluster_link {
    struct redis_conn_opts o;
    char host[CLUSTER_HOST_MAX];
    redisContext *rc;           /* NULL: opened on first use */
};

struct client_cluster {
    struct cluster_map map;
    struct cluster_link **links; /* links[i] serves map.nodes[i], or NULL */
    size_t nlinks;
    struct cluster_node *seeds;
    size_t nseeds;
};

/* ---- connections ---------------------------------------------------------- */

static void link_close(struct cluster_link *l)
{
    if (l && l->rc) {
        redis_io_free(l->rc);
        l->rc = NULL;
    }
}

static void link_free(struct cluster_link *l)
{
    link_close(l);
    free(l);
}

/* Grow links[] to the map's node count (new entries NULL): 0 or -1. */
static int links_fit(struct client_cluster *cl)
{
    if (cl->nlinks >= cl->map.nnodes)
        return 0;
    struct cluster_link **l = realloc(cl->links, cl->map.nnodes * sizeof *l);
    if (!l)
        return -1;
    for (size_t i = cl->nlinks; i < cl->map.nnodes; i++)
        l[i] = NULL;
    cl->links = l;
    cl->nlinks = cl->map.nnodes;
    return 0;
}

/* Whether an idle connection was closed by its server (a node killed or
 * restarted since the last call): a command written to it would be lost
 * unanswered, and could not be told apart from one that ran. */
static int peer_closed(const redisContext *rc)
{
    char b;
    ssize_t n = recv(rc->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* The open connection to map node `node`, made now when there is none (or
 * the last one broke).  NULL with *st and one line in c->err. */
static struct cluster_link *link_get(dq_client *c, unsigned node, dq_status *st)
{
    struct client_cluster *cl = c->cluster;
    if (links_fit(cl) < 0) {
        *st = client_fail(c, DQ_ERR_NOMEM, "out of memory");
        return NULL;
    }
    struct cluster_link *l = cl->links[node];
    if (!l) {
        if (!(l = calloc(1, sizeof *l))) {
            *st = client_fail(c, DQ_ERR_NOMEM, "out of memory");
            return NULL;
        }
        l->o = c->conn;
        snprintf(l->host, sizeof l->host, "%s", cl->map.nodes[node].host);
        l->o.host = l->host;
        l->o.port = cl->map.nodes[node].port;
        cl->links[node] = l;
    }
    if (l->rc && (l->rc->err || peer_closed(l->rc)))
        link_close(l);
    if (!l->rc) {
        if (!(l->rc = redis_conn_open(&l->o, st, c->err, sizeof c->err)))
            return NULL;
        c->conn_gen++;  /* a new server may hold other partition counts */
    }
    return l;
}

/* ---- the slot map ----------------------------------------------------------- */

/* Make `fresh` the map, keeping the connections to the nodes it still
 * names and closing the others. */
static int map_install(struct client_cluster *cl, struct cluster_map *fresh)
{
    struct cluster_link **links = calloc(fresh->nnodes ? fresh->nnodes : 1, sizeof *links);
    if (!links)
        return -1;
    for (size_t i = 0; i < fresh->nnodes; i++)
        for (size_t j = 0; j < cl->nlinks && j < cl->map.nnodes; j++) {
            struct cluster_link *l = cl->links[j];
            if (l && l->o.port == fresh->nodes[i].port
                && strcmp(l->host, fresh->nodes[i].host) == 0) {
                links[i] = l;
                cl->links[j] = NULL;
                break;
            }
        }
    for (size_t j = 0; j < cl->nlinks; j++)
        link_free(cl->links[j]);
    free(cl->links);
    cl->links = links;
    cl->nlinks = fresh->nnodes;
    cluster_map_free(&cl->map);
    cl->map = *fresh;
    return 0;
}

/* Ask map node `node` for CLUSTER SLOTS and install what it says.
 * DQ_OK, or a status with one line in c->err. */
static dq_status map_read_from(dq_client *c, unsigned node)
{
    dq_status st;
    struct cluster_link *l = link_get(c, node, &st);
    if (!l)
        return st;
    const char *argv[2] = { "CLUSTER", "SLOTS" };
    redisReply *r = redis_io_command(l->rc, 2, argv, NULL);
    if (!r) {
        st = redis_conn_context_error(&l->o, l->rc, "CLUSTER SLOTS", c->err, sizeof c->err);
        link_close(l);
        return st;
    }
    char addr[300], why[256];
    redis_conn_describe(&l->o, addr, sizeof addr);
    struct cluster_map fresh;
    cluster_map_init(&fresh);
    st = DQ_OK;
    if (r->type == REDIS_REPLY_ERROR)
        st = client_fail(c, strncmp(r->str, "NOAUTH", 6) == 0 ? DQ_ERR_AUTH : DQ_ERR_INVALID,
                         "redis %s is not a cluster node: %s", addr, r->str);
    else if (cluster_map_load(&fresh, r, l->host, why, sizeof why) < 0)
        st = client_fail(c, DQ_ERR_REDIS, "redis %s: %s", addr, why);
    else if (map_install(c->cluster, &fresh) < 0)
        st = client_fail(c, DQ_ERR_NOMEM, "out of memory");
    if (st != DQ_OK)
        cluster_map_free(&fresh);
    freeReplyObject(r);
    return st;
}

/*
 * Read the map again from any node that answers: first the nodes with an
 * open connection, then the seeds, then the other masters known.  The
 * registry's cache is forgotten, as on a reconnect.  DQ_OK, or the last
 * node's failure in c->err (DQ_ERR_AUTH and DQ_ERR_NOMEM end the search).
 */
static dq_status map_refresh(dq_client *c)
{
    struct client_cluster *cl = c->cluster;
    c->registered[0] = '\0';
    dq_status st = DQ_ERR_CONNECT;
    client_fail(c, st, "no redis cluster node is known");
    for (int pass = 0; pass < 3; pass++) {
        size_t count = pass == 1 ? cl->nseeds : cl->map.nnodes;
        for (size_t i = 0; i < count; i++) {
            int node;
            if (pass == 1)
                node = cluster_map_node(&cl->map, cl->seeds[i].host, cl->seeds[i].port);
            else if ((pass == 0) != (i < cl->nlinks && cl->links[i] && cl->links[i]->rc))
                continue;
            else
                node = (int)i;
            if (node < 0)
                return client_fail(c, DQ_ERR_NOMEM, "out of memory");
            st = map_read_from(c, (unsigned)node);
            if (st == DQ_OK || st == DQ_ERR_AUTH || st == DQ_ERR_NOMEM)
                return st;
        }
    }
    return st;
}

/* ---- set-up ------------------------------------------------------------------ */

/* The seeds: opt->nodes, or host:port when there are none. */
static dq_status seeds_parse(dq_client *c, const dq_options *opt)
{
    struct client_cluster *cl = c->cluster;
    size_t n = opt->nnodes ? opt->nnodes : 1;
    if (!(cl->seeds = calloc(n, sizeof *cl->seeds)))
        return client_fail(c, DQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < opt->nnodes; i++) {
        const char *why;
        if (!opt->nodes || !opt->nodes[i])
            return client_fail(c, DQ_ERR_INVALID, "cluster node %zu is missing", i + 1);
        if (sentinel_parse_node(opt->nodes[i], cl->seeds[i].host, sizeof cl->seeds[i].host,
                                &cl->seeds[i].port, &why) < 0)
            return client_fail(c, DQ_ERR_INVALID, "cluster node \"%s\": %s", opt->nodes[i],
                               why);
    }
    if (!opt->nnodes) {
        snprintf(cl->seeds[0].host, sizeof cl->seeds[0].host, "%s", c->conn.host);
        cl->seeds[0].port = c->conn.port;
    }
    cl->nseeds = n;
    return DQ_OK;
}

dq_status cluster_setup(dq_client *c, const dq_options *opt)
{
    if (opt->sentinel.master)
        return client_fail(c, DQ_ERR_INVALID, "cluster and sentinel cannot be used together");
    if (opt->db != 0)
        return client_fail(c, DQ_ERR_INVALID, "a redis cluster has only database 0 (db is %d)",
                           opt->db);
    if (opt->unix_path && !opt->nnodes)
        return client_fail(c, DQ_ERR_INVALID,
                           "a redis cluster is reached over TCP: give seed nodes, not a socket");
    if (!(c->cluster = calloc(1, sizeof *c->cluster)))
        return client_fail(c, DQ_ERR_NOMEM, "out of memory");
    cluster_map_init(&c->cluster->map);
    free(c->conn.unix_path);
    c->conn.unix_path = NULL;
    dq_status st = seeds_parse(c, opt);
    if (st != DQ_OK)
        return st;
    st = map_refresh(c);
    if (st == DQ_OK)
        c->err[0] = '\0';
    return st;
}

void cluster_free(struct client_cluster *cl)
{
    if (!cl)
        return;
    for (size_t i = 0; i < cl->nlinks; i++)
        link_free(cl->links[i]);
    free(cl->links);
    cluster_map_free(&cl->map);
    free(cl->seeds);
    free(cl);
}

/* ---- one call's commands ----------------------------------------------------- */

/* A call in flight: its commands, their replies so far, and what the
 * rounds found. */
struct route {
    dq_client *c;
    struct cmd *cmds;
    size_t n;
    int s;                      /* the script EVALSHA runs, or -1 */
    redisReply **replies;       /* NULL: still to be sent */
    int *ask;                   /* per command: the node an ASK named, or -1 */
    int *redirects;             /* per command: MOVED/ASK followed in a row */
    int *target;                /* per command: its node this round, or -1 */
    dq_status *each;            /* NULL: one failure ends the call; else
                                   per command: DQ_OK, or why it has no
                                   reply (its master out of reach) */
    int wait;                   /* replicated: a WAIT after each node's part */
    redisReply *unconfirmed;    /* the first WAIT that said 0 */
    int refresh;                /* this round: read the map again */
    int pause;                  /* this round: wait before the next */
    int give_up;                /* this round: the policy ended the call */
    int delay_ms;               /* the pause the policy chose (0: none yet) */
    int next_backoff_ms;        /* and the pause step after it */
    dq_status pause_st;         /* the status when waiting runs out */
    char pause_why[900];        /* and its message */
    int loads;                  /* SCRIPT LOADs this call made */
    int backoff_ms, waited_ms;
};

/* Note a reason to wait before the next round. */
static void route_pause(struct route *rt, dq_status st, const char *addr, const char *why)
{
    rt->pause = 1;
    rt->pause_st = st;
    snprintf(rt->pause_why, sizeof rt->pause_why, "redis %s: %s", addr, why);
}

/* The cluster policy's decision on a reply (error text `err`; none when
 * no_reply: the command was not sent) to a command `asked` or not,
 * redirected `redirects` times in a row, at this point of the call. */
static void route_decide(struct route *rt, const char *err, int no_reply, int asked,
                         int redirects, struct cluster_decision *d)
{
    const struct cluster_facts f = {
        .error = err, .no_reply = no_reply, .sent = 0, .asked = asked,
        .redirects = redirects, .pause_ms = rt->backoff_ms, .elapsed_ms = rt->waited_ms,
        .budget_ms = rt->c->conn.connect_timeout_ms,
        .rnd = (unsigned long)rand_r(&rt->c->jitter_seed),
    };
    cluster_policy_decide(&f, d);
}

/* Note for this round what `d` (BACK_OFF, REFRESH or GIVE_UP) asks:
 * a pause and perhaps a map refresh, or the end of the call.  `why` is
 * what `addr` said. */
static void route_follow(struct route *rt, const struct cluster_decision *d, const char *addr,
                         const char *why)
{
    dq_status st = d->outage ? DQ_ERR_CONNECT : DQ_ERR_REDIS;
    if (d->verdict == CLUSTER_GIVE_UP) {
        char line[700];
        if (d->outage)
            snprintf(line, sizeof line, "%.500s (still after %d ms)", why, rt->waited_ms);
        else
            snprintf(line, sizeof line, "%s", d->why);
        route_pause(rt, st, addr, line);
        rt->give_up = 1;
        return;
    }
    route_pause(rt, st, addr, why);
    rt->delay_ms = d->delay_ms;
    rt->next_backoff_ms = d->pause_ms;
    rt->refresh |= d->refresh_map;
}

/* Any node for a command without a key: one already connected, else the
 * first the map names. */
static unsigned any_node(const struct client_cluster *cl)
{
    for (size_t i = 0; i < cl->nlinks; i++)
        if (cl->links[i] && cl->links[i]->rc)
            return (unsigned)i;
    return cl->map.nnodes ? 0 : CLUSTER_NO_NODE;
}

/* Where command i goes this round (CLUSTER_NO_NODE: nowhere known). */
static unsigned route_node(struct route *rt, size_t i)
{
    if (rt->ask[i] >= 0)
        return (unsigned)rt->ask[i];
    size_t len;
    const char *key = cmd_route_key(&rt->cmds[i], &len);
    unsigned slot = key ? cluster_keyslot(key, len) : CLUSTER_SLOTS;
    unsigned node = key ? cluster_map_lookup(&rt->c->cluster->map, slot)
                        : any_node(rt->c->cluster);
    if (node == CLUSTER_NO_NODE) {
        char what[64];
        struct cluster_decision d;
        snprintf(what, sizeof what, "slot %u", slot);
        route_decide(rt, NULL, 1, 0, rt->redirects[i], &d);
        route_follow(rt, &d, what, "no master serves it");
    }
    return node;
}

/*
 * Judge command i's reply from `l` by the cluster policy: kept (an
 * answer, or an error for the caller), or freed and left to be sent again
 * (a redirection, a pause, a node that is not a master, a missing
 * script).  Returns 1 when the script is to be loaded on this node first.
 */
static int route_judge(struct route *rt, struct cluster_link *l, size_t i, redisReply *r)
{
    struct client_cluster *cl = rt->c->cluster;
    char addr[300];
    int node = -1, noscript = 0;
    struct cluster_decision d;
    route_decide(rt, r->type == REDIS_REPLY_ERROR ? r->str : NULL, 0, rt->ask[i] >= 0,
                 rt->redirects[i], &d);
    if (d.verdict == CLUSTER_RESEND_MOVED || d.verdict == CLUSTER_RESEND_ASK)
        node = cluster_map_node(&cl->map, d.host, d.port);
    redis_conn_describe(&l->o, addr, sizeof addr);
    rt->redirects[i] = d.redirects;
    if (d.verdict == CLUSTER_RESEND_MOVED && node >= 0) {
        cl->map.slot[d.slot] = (uint16_t)node;
        rt->refresh = 1;
        rt->ask[i] = -1;
    } else if (d.verdict == CLUSTER_RESEND_ASK && node >= 0) {
        rt->ask[i] = node;
    } else if (d.verdict == CLUSTER_BACK_OFF || d.verdict == CLUSTER_REFRESH
               || d.verdict == CLUSTER_GIVE_UP) {
        route_follow(rt, &d, addr, r->str);
        rt->ask[i] = -1;
    } else if (rt->s >= 0 && redis_conn_is_noscript(r)) {
        noscript = 1;
    } else {
        rt->replies[i] = r;
        return 0;
    }
    freeReplyObject(r);
    return noscript;
}

/* Write the commands bound for `l` (ASKING before each asked one, WAIT
 * last when replicated); the number of commands written, or -1 when the
 * connection failed before all were (nothing of them is then read). */
static int route_write(struct route *rt, struct cluster_link *l, unsigned node)
{
    static const char *asking[1] = { "ASKING" };
    int count = 0;
    for (size_t i = 0; i < rt->n; i++) {
        if (rt->target[i] != (int)node)
            continue;
        struct cmd *cmd = &rt->cmds[i];
        if ((rt->ask[i] >= 0 && redisAppendCommandArgv(l->rc, 1, asking, NULL) != REDIS_OK)
            || redisAppendCommandArgv(l->rc, cmd->argc, cmd->argv, cmd->lens) != REDIS_OK)
            return -1;
        count++;
    }
    if (rt->wait) {
        struct cmd w;
        redis_conn_wait_cmd(&w, rt->c->replication_timeout_ms);
        int ok = !w.oom && redisAppendCommandArgv(l->rc, w.argc, w.argv, w.lens) == REDIS_OK;
        cmd_free(&w);
        if (!ok)
            return -1;
    }
    return redis_io_flush(l->rc) == REDIS_OK ? count : -1;
}

/* Read the replies of what route_write sent to `l`; DQ_OK, or the
 * connection's failure (the call then ends: what was sent may have run). */
static dq_status route_read(struct route *rt, struct cluster_link *l, unsigned node)
{
    dq_client *c = rt->c;
    int load = 0, kept = 0;
    void *r;
    for (size_t i = 0; i < rt->n; i++) {
        if (rt->target[i] != (int)node)
            continue;
        int asked = rt->ask[i] >= 0;
        if (asked && redis_io_get_reply(l->rc, &r) == REDIS_OK)
            freeReplyObject(r);
        if (l->rc->err || redis_io_get_reply(l->rc, &r) != REDIS_OK)
            goto broke;
        load |= route_judge(rt, l, i, r);
        kept += rt->replies[i] != NULL;
        if (asked && rt->replies[i])
            rt->ask[i] = -1;
    }
    if (rt->wait) {
        if (redis_io_get_reply(l->rc, &r) != REDIS_OK)
            goto broke;
        if (kept && !rt->unconfirmed && client_check_wait(c, r) != DQ_OK)
            rt->unconfirmed = r;
        else
            freeReplyObject(r);
    }
    if (!load)
        return DQ_OK;
    if (++rt->loads > 2 * (int)c->cluster->map.nnodes + 2)
        return client_fail(c, DQ_ERR_REDIS, "redis keeps losing the %s script",
                           dq_scripts[rt->s].name);
    dq_status st = client_script_load(c, l->rc, (enum dq_script_id)rt->s);
    if (st != DQ_ERR_CONNECT)
        return st;

broke:;
    dq_status bst = redis_conn_context_error(&l->o, l->rc, rt->s >= 0 ? dq_scripts[rt->s].name
                                                                   : rt->cmds[0].argv[0],
                                             c->err, sizeof c->err);
    link_close(l);
    return bst;
}

/* Per command (rt->each): the commands sent to `node` this round end
 * with `st`, its connection having failed while their replies were read
 * (what was sent may have run); the other nodes' go on.  Replicated, the
 * replies read are dropped too: the WAIT that confirms them is lost. */
static void route_fail_node(struct route *rt, int node, dq_status st)
{
    for (size_t i = 0; i < rt->n; i++) {
        if (rt->target[i] != node)
            continue;
        if (rt->wait && rt->replies[i]) {
            freeReplyObject(rt->replies[i]);
            rt->replies[i] = NULL;
        }
        if (!rt->replies[i])
            rt->each[i] = st;
    }
}

/* Send every command still unanswered to its node, one node after the
 * other, and judge the replies. */
static dq_status route_round(struct route *rt)
{
    dq_client *c = rt->c;
    for (size_t i = 0; i < rt->n; i++)
        rt->target[i] = rt->replies[i] || (rt->each && rt->each[i] != DQ_OK)
                        ? -1 : (int)route_node(rt, i);
    for (size_t first = 0; first < rt->n; first++) {
        int node = rt->target[first];
        if (node < 0 || node == CLUSTER_NO_NODE)
            continue;
        dq_status st;
        int64_t t0 = clock_mono_ms();
        struct cluster_link *l = link_get(c, (unsigned)node, &st);
        if (!l && (st == DQ_ERR_AUTH || st == DQ_ERR_NOMEM))
            return st;
        /* A master that takes the connection and then says nothing (hung,
         * or cut off) cost the handshake's timeout: it counts against the
         * connect timeout as the pauses do, so that the call gives up
         * after about one such try rather than after every pause's. */
        if (!l)
            rt->waited_ms += (int)(clock_mono_ms() - t0);
        if (l && route_write(rt, l, (unsigned)node) >= 0)
            st = route_read(rt, l, (unsigned)node);
        else if (l) {
            /* refused while writing: the node is gone, nothing ran */
            st = redis_conn_context_error(&l->o, l->rc, "write", c->err, sizeof c->err);
            link_close(l);
            l = NULL;
        }
        if (!l) {
            char addr[CLUSTER_HOST_MAX + 8];
            struct cluster_decision d;
            snprintf(addr, sizeof addr, "%s:%d", c->cluster->map.nodes[node].host,
                     c->cluster->map.nodes[node].port);
            const char *why = strstr(c->err, ": ") ? strstr(c->err, ": ") + 2 : c->err;
            route_decide(rt, NULL, 1, 0, 0, &d);
            route_follow(rt, &d, addr, why);
        } else if (st != DQ_OK) {
            if (!rt->each || st == DQ_ERR_NOMEM || st == DQ_ERR_AUTH)
                return st;
            route_fail_node(rt, node, st);
        }
        for (size_t i = first; i < rt->n; i++)
            if (rt->target[i] == node)
                rt->target[i] = -1;
    }
    return DQ_OK;
}

/* Sleep the pause the policy chose this round (one for a map that could
 * not be read, as for a master not reachable); DQ_OK, or the reason for
 * the pause once the connect timeout is spent. */
static dq_status route_sleep(struct route *rt)
{
    dq_client *c = rt->c;
    if (rt->delay_ms <= 0) {
        struct cluster_decision d;
        route_decide(rt, NULL, 1, 0, 0, &d);
        if (d.verdict == CLUSTER_GIVE_UP)
            return client_fail(c, rt->pause_st, "%s (still after %d ms)", rt->pause_why,
                               rt->waited_ms);
        rt->delay_ms = d.delay_ms;
        rt->next_backoff_ms = d.pause_ms;
    }
    int ms = rt->delay_ms;
    rt->backoff_ms = rt->next_backoff_ms;
    rt->delay_ms = 0;
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
    rt->waited_ms += ms;
    return DQ_OK;
}

static int route_pending(const struct route *rt)
{
    for (size_t i = 0; i < rt->n; i++)
        if (!rt->replies[i] && (!rt->each || rt->each[i] == DQ_OK))
            return 1;
    return 0;
}

/* The call ends with `st` for the commands still unanswered: per command
 * (rt->each) they get it and the others keep their replies; DQ_OK then,
 * when each has one. */
static dq_status route_end(struct route *rt, dq_status st)
{
    if (!rt->each)
        return st;
    for (size_t i = 0; i < rt->n; i++)
        if (!rt->replies[i] && rt->each[i] == DQ_OK)
            rt->each[i] = st;
    return DQ_OK;
}

/* The rounds: send, judge, refresh the map and wait as the replies said,
 * until every command has its reply. */
static dq_status route_run(struct route *rt)
{
    while (route_pending(rt)) {
        rt->refresh = rt->pause = rt->give_up = rt->delay_ms = 0;
        dq_status st = route_round(rt);
        if (st != DQ_OK)
            return st;
        if (rt->give_up)
            return route_end(rt, client_fail(rt->c, rt->pause_st, "%s", rt->pause_why));
        if (!route_pending(rt))
            break;
        if (rt->refresh) {
            st = map_refresh(rt->c);
            if (st == DQ_ERR_AUTH || st == DQ_ERR_NOMEM)
                return st;
            if (st != DQ_OK && !rt->pause)
                route_pause(rt, st, "cluster", rt->c->err);
        }
        if (rt->pause && (st = route_sleep(rt)) != DQ_OK)
            return route_end(rt, st);
    }
    return DQ_OK;
}

dq_status cluster_pipeline(dq_client *c, struct cmd *cmds, size_t n, int s,
                           redisReply **replies, const struct pipe_builder *b,
                           int keep_unconfirmed, dq_status *each)
{
    for (size_t i = 0; i < n; i++) {
        replies[i] = NULL;
        if (each)
            each[i] = DQ_OK;
    }
    for (size_t i = 0; i < n; i++) {
        if (b && cmds[i].argc == 0 && !cmds[i].oom)
            b->build(b->ctx, i, &cmds[i]);
        if (cmds[i].oom) {
            for (size_t j = 0; each && j < n; j++)
                each[j] = DQ_ERR_NOMEM;
            return client_fail(c, DQ_ERR_NOMEM, "out of memory building a command");
        }
    }
    struct route rt = { .c = c, .cmds = cmds, .n = n, .s = s, .replies = replies,
                        .wait = client_wants_wait(c, s), .each = each,
                        .backoff_ms = CLUSTER_PAUSE_MIN_MS };
    rt.ask = malloc((n ? n : 1) * sizeof *rt.ask);
    rt.target = malloc((n ? n : 1) * sizeof *rt.target);
    rt.redirects = calloc(n ? n : 1, sizeof *rt.redirects);
    dq_status st = DQ_ERR_NOMEM;
    if (!rt.ask || !rt.target || !rt.redirects)
        client_fail(c, st, "out of memory");
    else {
        for (size_t i = 0; i < n; i++)
            rt.ask[i] = -1;
        st = route_run(&rt);
    }
    if (st == DQ_OK && rt.unconfirmed)
        st = client_check_wait(c, rt.unconfirmed);
    if (rt.unconfirmed)
        freeReplyObject(rt.unconfirmed);
    int keep = st == DQ_OK || (keep_unconfirmed && st == DQ_ERR_TIMEOUT);
    for (size_t i = 0; each && i < n; i++)
        if (!keep || (each[i] == DQ_OK && !replies[i]))
            each[i] = st != DQ_OK ? st : DQ_ERR_REDIS;
    /* Per command, the call's status is its first failure. */
    for (size_t i = 0; each && st == DQ_OK && i < n; i++)
        if (each[i] != DQ_OK)
            st = each[i];
    for (size_t i = 0; !keep && i < n; i++) {
        if (replies[i])
            freeReplyObject(replies[i]);
        replies[i] = NULL;
    }
    if (st == DQ_OK)
        c->err[0] = '\0';
    free(rt.ask);
    free(rt.target);
    free(rt.redirects);
    return st;
}

dq_status cluster_run(dq_client *c, struct cmd *cmd, int s, redisReply **reply,
                      int keep_unconfirmed)
{
    *reply = NULL;
    if (cmd->oom)
        return client_fail(c, DQ_ERR_NOMEM, "out of memory building a command");
    redisReply *r = NULL;
    dq_status st = cluster_pipeline(c, cmd, 1, s, &r, NULL, keep_unconfirmed, NULL);
    if (!r)
        return st;
    dq_status rst = client_check_reply(c, r, s >= 0 ? dq_scripts[s].name : cmd->argv[0]);
    if (rst != DQ_OK) {
        freeReplyObject(r);
        return rst;
    }
    *reply = r;
    return st;
}
