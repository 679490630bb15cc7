/*
 * rconn_cluster_nodes: what a cluster-mode rconn (rconn_cluster.h) knows
 * of the cluster: the seeds, the slot map, one node connection per master
 * (made when a master appears, let go when it leaves the map), the map
 * read again on a timer while not every master is up, and whether the
 * routing connection is up (every master of the map up), told to the
 * caller through on_up / on_down.  The requests and the subscription
 * (rconn_cluster.c) stand on this; this module knows nothing of them.
 */
#ifndef DQ_RCONN_CLUSTER_NODES_H
#define DQ_RCONN_CLUSTER_NODES_H

#include <stdint.h>

#include "redis/rconn_types.h"
#include "redis/cluster_map.h"
#include "redis/redis_conn.h"

#define RCLUSTER_REFRESH_MIN_MS 100     /* map reads while down: doubled ... */
#define RCLUSTER_REFRESH_MAX_MS 1000    /* ... up to this */

/* A master's connection, named by its address. */
struct rcluster_node {
    struct rcluster *cl;
    char host[CLUSTER_HOST_MAX];
    int port;
    struct rconn *rc;
};

/* A cluster-mode connection: the part of this module, then the requests'
 * and the subscription's (rconn_cluster.c). */
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
    struct rcluster_node **nodes;       /* one per master of the map */
    size_t nnodes;
    struct rcluster_node **bymap;       /* map.nodes[i]'s connection */
    struct event *refresh_timer;
    int refresh_ms;
    int up;
    int isolate;                /* up while any master is (rconn_cluster.h) */
    int ever_up;                /* isolated: was up once (so partly up will do) */
    int64_t started_ms;         /* monotonic: rcluster_start */
    size_t nup;                 /* masters of the map up, when last counted */
    int failing;                /* an outage was logged */
    int64_t down_since_ms;
    char last_failure[480];
    uint64_t *reconnects;
    struct creq *parked;        /* requests waiting for a pause to end */
    int freeing;
    /* subscription mode (rconn_subscribe) */
    char **channels;            /* none: requests */
    size_t nchannels;
    rconn_message_fn on_message;
    void *message_arg;
    struct rconn *sub;          /* the node subscribed on ... */
    struct cluster_node sub_at; /* ... at this address */
    size_t sub_next;            /* the next candidate to subscribe on */
    struct event *sub_timer;    /* not up in time, or lost: the next one */
};


/* Fill the part of `cl` (zeroed, with owner, ops and ev set) this module
 * owns from the caller's options (copied: cluster, Sentinel and a unix
 * socket off for the nodes).  0, or -1 with one line in err (out of
 * memory, a bad seed "HOST:PORT"). */
int rcluster_nodes_init(struct rcluster *cl, struct event_base *base, const dq_options *opt,
                        const char *name, char *err, size_t errlen);

/* Free that part: the node connections (their pending requests get
 * NULL), the map, the copies. */
void rcluster_nodes_free(struct rcluster *cl);

int64_t rcluster_now_ms(void);                  /* CLOCK_MONOTONIC */
void rcluster_arm(struct event *ev, int ms);    /* a timer, `ms` from now */

/* The routing connection cannot serve every slot (`why`): logged at the
 * start of an outage only.  Its end, logged once, says `what` ("3
 * masters", "subscribed on HOST:PORT"). */
void rcluster_note_outage(struct rcluster *cl, const char *why);
void rcluster_note_recovery(struct rcluster *cl, const char *what);

/* A node's options: the caller's, with HOST:PORT (borrowed). */
dq_options rcluster_node_options(const struct rcluster *cl, const char *host, int port);

/* The connection to HOST:PORT, made and started when new; NULL when
 * memory ran out. */
struct rcluster_node *rcluster_node_get(struct rcluster *cl, const char *host, int port);

/* Match map.nodes[] to their connections (bymap), making the new ones.
 * -1 when memory ran out (those masters then count as down). */
int rcluster_link_map(struct rcluster *cl);

/* Read the map again (blocking): from the masters up, the seeds, then the
 * other masters known.  0, or -1 with the last failure in err. */
int rcluster_refresh_map(struct rcluster *cl, char *err, size_t errlen);

/* Up when every master of the map is (isolated: when any is): tell the
 * caller of a change (on_up, on_down), and, isolated, of another master up
 * again (on_master_up). */
void rcluster_check_state(struct rcluster *cl);

/* A request failed (`why`) while the routing connection was up: take it
 * down (on_down) and read the map; it comes up again (on_up) once every
 * master of the map is up, so that callers send again, as after a lost
 * connection. */
void rcluster_drop(struct rcluster *cl, const char *why);

/* Read the map in `ms` (unless a read is planned already). */
void rcluster_plan_refresh(struct rcluster *cl, int ms);

#endif
