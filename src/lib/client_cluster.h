/*
 * libdelayq's blocking client in Redis Cluster mode (dq_options.cluster):
 * the slot map read from CLUSTER SLOTS, one blocking connection per
 * master (opened on first use with the client's settings: TLS, the ACL
 * user and password apply to every node), and the routing of commands by
 * the hash slot of their first key.
 *
 * What the cluster says is followed: MOVED updates the map, refreshes it
 * from CLUSTER SLOTS and sends again; ASK sends ASKING and the command to
 * the named node, once; TRYAGAIN and CLUSTERDOWN back off (100 ms,
 * doubled, for up to the connect timeout); a node that is gone (refused,
 * or closed while idle) makes the client refresh the map from any node it
 * can reach (the seeds, then the known masters) and send again, which is
 * how a failover is followed.  A command sent but unanswered (the
 * connection broke while the reply was awaited) is not sent again: it may
 * have run, and the call fails with DQ_ERR_CONNECT, as it does on one
 * server.  NOSCRIPT is per node: the script is loaded on that node.
 *
 * A pipeline is split per node; the replies go back in the caller's
 * order.  Under replicated durability each node's part is followed by its
 * own WAIT.
 *
 * Users: client.c only (one branch per call when cluster mode is on).
 */
#ifndef DQ_CLIENT_CLUSTER_H
#define DQ_CLIENT_CLUSTER_H

#include "lib/client_internal.h"

/*
 * Check opt's cluster settings (seeds, no Sentinel, no unix socket, db 0),
 * read the slot map from the first seed that answers and hang the cluster
 * state on c->cluster.  DQ_OK, or DQ_ERR_INVALID (a bad seed or setting),
 * DQ_ERR_CONNECT (no seed answered CLUSTER SLOTS), DQ_ERR_AUTH or
 * DQ_ERR_NOMEM, with one line in c->err.
 */
dq_status cluster_setup(dq_client *c, const dq_options *opt);

/* Close every node's connection and free the state.  NULL is ignored. */
void cluster_free(struct client_cluster *cl);

/*
 * client_pipeline_build for cluster mode (b may be NULL): every command is
 * built first, then sent to its slot's master.  `keep_unconfirmed` as
 * client_run_unconfirmed says.  Replies as client_pipeline says; with
 * `each`, as client_pipeline_each says.
 */
dq_status cluster_pipeline(dq_client *c, struct cmd *cmds, size_t n, int s,
                           redisReply **replies, const struct pipe_builder *b,
                           int keep_unconfirmed, dq_status *each);

/* client_run in cluster mode: an error reply becomes the status. */
dq_status cluster_run(dq_client *c, struct cmd *cmd, int s, redisReply **reply,
                      int keep_unconfirmed);

#endif
