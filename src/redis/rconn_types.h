/*
 * rconn_types: the callback types of an rconn (rconn.h) and the functions
 * rconn hands its cluster mode for a node's connection, apart so that the
 * parts rconn.c calls (rconn_cluster, rconn_cluster_nodes, rconn_wait)
 * need not include rconn.h back.
 */
#ifndef DQ_RCONN_TYPES_H
#define DQ_RCONN_TYPES_H

#include <delayq/client.h>
#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/cmd.h"

struct rconn;

/* A reply, or NULL when the request failed (connection lost, deadline
 * missed, rconn freed).  The reply is freed after the callback returns:
 * copy what must outlive it.  The callback may send new requests, but
 * after a NULL reply they fail until on_up. */
typedef void (*rconn_reply_fn)(struct rconn *rc, redisReply *reply, void *arg);

/* A message published on a subscribed channel (NUL-terminated, as is
 * the payload). */
typedef void (*rconn_message_fn)(struct rconn *rc, const char *channel,
                                 const char *payload, size_t len, void *arg);

struct rconn_events {
    void (*on_up)(struct rconn *rc, void *arg);   /* ready for requests */
    void (*on_down)(struct rconn *rc, void *arg); /* lost; pending failed */
    void *arg;
    /* Cluster mode with isolated masters (rconn_isolate_masters): while
     * up, a master that was down is up again; may be NULL. */
    void (*on_master_up)(struct rconn *rc, void *arg);
};

/* rconn's functions for one node's connection (cluster off). */
struct rcluster_node_ops {
    struct rconn *(*node_new)(struct event_base *base, const dq_options *opt,
                              const char *name, const struct rconn_events *ev);
    void (*start)(struct rconn *rc);
    int (*is_up)(const struct rconn *rc);
    int (*send)(struct rconn *rc, const struct cmd *cmd, int script, rconn_reply_fn fn,
                void *arg);
    /* subscribe to channels[0..n) on every (re)connect: 0, or -1 */
    int (*subscribe)(struct rconn *rc, const char *const *channels, size_t n,
                     rconn_message_fn fn, void *arg);
    void (*count_reconnects)(struct rconn *rc, uint64_t *counter);
    void (*close_in_child)(struct rconn *rc);
    const char *(*last_failure)(const struct rconn *rc);
    void (*free)(struct rconn *rc);
};

#endif
