/*
 * rconn_wait: durability "replicated" for rconn.  A script that writes is
 * sent with "WAIT 1 <timeout>" right behind it on the same connection
 * (pipelined: Redis runs one, then the other), and its caller hears of it
 * only once WAIT has answered: the write's reply when a replica has it, a
 * NOTREPLICATED error reply (rconn_is_not_replicated) when none confirmed
 * it in time (the write is on the master only, and a failover now would
 * lose it), NULL when the connection was lost before both replies came.
 * Callers already treat an error reply as "not done, try again later",
 * which is what it is.
 *
 * rconn.c owns the connection; it hands this module its plain send as a
 * function, so that the two do not call each other.
 */
#ifndef DQ_RCONN_WAIT_H
#define DQ_RCONN_WAIT_H

#include "redis/rconn_types.h"
#include "redis/redis_conn.h"

/* The error reply a write not replicated in time gets (see rconn.h). */
#define RCONN_NOT_REPLICATED "NOTREPLICATED"

/* Whether `reply` is the error a write not replicated in time gets. */
int rconn_is_not_replicated(const redisReply *reply);

/* What a connection's replicated writes need: kept in each rconn. */
struct rconn_replication {
    int timeout_ms;             /* WAIT's timeout */
    int unreplicated;           /* the last WAIT timed out (logged once) */
    const char *name;           /* the connection's, for the log */
    const struct redis_conn_opts *opt; /* its address, for the log */
    /* rconn's send without WAIT: 0, or -1 (then `fn` is never called) */
    int (*send)(struct rconn *rc, const struct cmd *cmd, int script, rconn_reply_fn fn,
                void *arg);
};

/* rconn_send of a writing script under "replicated": the write, then
 * WAIT; `fn` is called once with the verdict above.  0, or -1 when the
 * write could not be sent (`fn` is then never called). */
int rconn_wait_send(struct rconn *rc, struct rconn_replication *repl, const struct cmd *cmd,
                    int script, rconn_reply_fn fn, void *arg);

#endif
