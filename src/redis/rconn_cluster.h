/*
 * rconn_cluster: an rconn in Redis Cluster mode (the options' `cluster`).
 * The caller still holds one `struct rconn *` and calls rconn_send; behind
 * it this module keeps the slot map (lib/cluster_map.h) and one ordinary
 * rconn per master (the same options, cluster off, that master's
 * HOST:PORT: TLS, ACL and durability "replicated" apply per node), and
 * sends every request to the master of its route key's slot
 * (cmd_route_key).
 *
 * Replies are judged by the cluster policy (redis/cluster_policy.h), the
 * same as the library's blocking client:
 * - MOVED: the slot goes to the node named (added when new) and a full
 *   CLUSTER SLOTS refresh is planned; the command is sent again there.
 * - ASK: "ASKING" then the command on the node named, pipelined on its
 *   connection; the map is not changed.
 * - TRYAGAIN, CLUSTERDOWN, a master not up: sent again after a pause
 *   (100 ms, doubled each time up to 1 s); after the command timeout (the
 *   connect timeout when there is none) the caller gets NULL.
 * A request is redirected at most CLUSTER_REDIRECTS_MAX times in a row;
 * past that the caller gets the last redirection as an error reply.
 *
 * Up and down: the routing connection is up when it has a slot map and
 * every master that serves a slot is up.  A master lost (its connection
 * closed, a deadline missed) gives its pending requests NULL, as a lost
 * connection does, and takes the routing connection down: its on_down is
 * called, the map is read again (CLUSTER SLOTS from the masters still up,
 * then the seeds, then the other masters; blocking, a few ms on a LAN)
 * every 100 ms doubling up to 1 s until its masters are all up, and then
 * on_up is called: that is how a failover (a replica promoted) is
 * followed.  While it is down rconn_send fails (-1), as it does for a
 * single server, so callers re-send after on_up.  The outage is logged
 * once when it starts and once when it ends.
 *
 * Isolated masters (rcluster_isolate_masters, for a caller that can do
 * without some slots for a while): the routing connection is up while
 * any master of the map is (the first time: once every master is, or one
 * is and the connect timeout has passed since rcluster_start).  A master
 * lost gives its pending requests NULL and leaves the connection up;
 * requests for its slots wait for it within their deadline, as above,
 * then get NULL; the map is read again on the timer until every master
 * is up.  Each master that comes up again calls on_master_up, so that the
 * caller asks its slots again, and
 * rcluster_key_is_up says which slots to leave alone meanwhile.  Redis
 * itself answers CLUSTERDOWN on every master once one is marked failed,
 * unless the cluster runs with cluster-require-full-coverage no.
 *
 * Subscriptions (rconn_subscribe) in cluster mode: a classic PUBLISH
 * reaches the subscribers of every node, so the subscription is made on
 * one node: the first seed that answers; when it is lost (or not up
 * within the connect timeout) the next of the seeds and the known
 * masters.
 *
 * rconn.c owns the node connections' code and hands this module the
 * functions it needs (struct rcluster_node_ops), so that the two do not
 * call each other.
 */
#ifndef DQ_RCONN_CLUSTER_H
#define DQ_RCONN_CLUSTER_H

#include "redis/rconn_types.h"

struct rcluster;

/*
 * The routing part of `owner`, an rconn made by rconn_new for options with
 * `cluster` set (copied).  Callbacks and replies name `owner`.  NULL after
 * logging (out of memory, a bad seed node).
 */
struct rcluster *rcluster_new(struct event_base *base, const dq_options *opt,
                              const char *name, struct rconn *owner,
                              const struct rconn_events *ev,
                              const struct rcluster_node_ops *ops);

/* What rconn's functions of the same names do, for the routing
 * connection (see above for what "up" means). */
void rcluster_start(struct rcluster *cl);
int rcluster_is_up(const struct rcluster *cl);
/* Up while any master is (see above); call before rcluster_start. */
void rcluster_isolate_masters(struct rcluster *cl);
/* Up, and the master of `key`'s slot (KEY[0..len)) is up. */
int rcluster_key_is_up(const struct rcluster *cl, const char *key, size_t len);
int rcluster_send(struct rcluster *cl, const struct cmd *cmd, int script,
                  rconn_reply_fn fn, void *arg);
/* Subscription mode, on channels[0..n) (copied): 0, or -1 when memory ran
 * out (then nothing is subscribed). */
int rcluster_subscribe(struct rcluster *cl, const char *const *channels, size_t n,
                       rconn_message_fn fn, void *arg);
void rcluster_count_reconnects(struct rcluster *cl, uint64_t *counter);
void rcluster_close_in_child(struct rcluster *cl);
const char *rcluster_last_failure(const struct rcluster *cl);

/* Free the nodes' connections (their pending requests get NULL), the
 * requests waiting for a pause (NULL too) and the map. */
void rcluster_free(struct rcluster *cl);

#endif
