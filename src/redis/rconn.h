/*
 * rconn: one asynchronous Redis connection on a libevent loop that stays
 * up by itself, over plain TCP, a unix socket or TLS (the bytes move in
 * rconn_io.c, with hiredis as the RESP codec only).
 *
 * The connection has no timeouts of its own, so rconn arms its own
 * timers: one for the connect (and TLS and Redis handshake), one per
 * request.  A request that misses its deadline drops the connection,
 * which is then re-made on a timer with jittered exponential backoff
 * (never inside one of the connection's callbacks).  An outage is logged once when it starts and once when it
 * ends, not at every attempt.
 *
 * On every (re)connect rconn authenticates, selects the database, loads
 * every script (SCRIPT LOAD), then calls on_up.  A script command that
 * meets NOSCRIPT anyway (SCRIPT FLUSH) is loaded and re-sent once.
 *
 * A READONLY, MASTERDOWN or LOADING reply (the server was demoted by a
 * failover, or is loading) is handed to the caller as NULL, a lost
 * connection: nothing ran, so the caller sends again after on_up.  The
 * connection is dropped and re-made with the backoff, so that it follows
 * a moved address to the new master; the outage lasts, and is logged
 * once, until a server takes a command again.
 *
 * With the options' `cluster` set, the rconn routes every request to the
 * master of its key's slot over a connection per master, and follows
 * MOVED, ASK, TRYAGAIN and failovers: rconn_cluster.h says what "up" then
 * means.  Callers use it exactly as a single connection.
 */
#ifndef DQ_RCONN_H
#define DQ_RCONN_H

#include <delayq/client.h>
#include <event2/event.h>
#include <hiredis/hiredis.h>

#include "config/redis_conf.h"
#include "lib/cmd.h"
#include "redis/rconn_types.h"
#include "redis/rconn_wait.h"

/* Make a connection that will connect to `opt` (copied) once started.
 * `name` tags its log lines ("cmd", "sub").  NULL when out of memory (or
 * the options are refused: logged). */
struct rconn *rconn_new(struct event_base *base, const dq_options *opt,
                        const char *name, const struct rconn_events *ev);

/*
 * The daemon's way to make a connection: rconn_new for the Redis settings
 * of the configuration, `conf` (&daemon_conf.redis; copied, so it may be
 * freed or reloaded afterwards).  Start it with rconn_start; free it with
 * rconn_free.  NULL when out of memory.  The queue keys under the same
 * settings come from the configuration (dconfig_parts.h).
 */
struct rconn *rconn_from_conf(struct event_base *base, const struct redis_conf *conf,
                              const char *name, const struct rconn_events *ev);

/* Why the connection last failed ("READONLY You can't write...", "connect
 * timed out"): what a caller that got a NULL reply can report. */
const char *rconn_last_failure(const struct rconn *rc);

/* Start connecting (and keep reconnecting). */
void rconn_start(struct rconn *rc);

/* Ready for requests. */
int rconn_is_up(const struct rconn *rc);

/* Cluster mode: stay up while any master is, rather than only while
 * every master is (rconn_cluster.h, "isolated masters"); call it before
 * rconn_start, for a caller that checks rconn_key_is_up before each
 * request and takes a NULL reply while up as "that master, not now".
 * Nothing otherwise. */
void rconn_isolate_masters(struct rconn *rc);

/* Up, and (cluster mode) the master of `key`'s slot is up too. */
int rconn_key_is_up(const struct rconn *rc, const char *key);

/*
 * Send a command (copied at once, so `cmd` may be freed on return); `fn`
 * is called exactly once, unless this returns -1 (not up, or out of
 * memory), in which case it is never called.  `script` names the script an
 * EVALSHA runs, for NOSCRIPT handling, or is -1.
 */
int rconn_send(struct rconn *rc, const struct cmd *cmd, int script,
               rconn_reply_fn fn, void *arg);

/*
 * Subscribe to `channel` on every (re)connect; `fn` receives its messages.
 * Use a connection of its own: a subscribed connection takes no requests.
 */
void rconn_subscribe(struct rconn *rc, const char *channel,
                     rconn_message_fn fn, void *arg);

/* The same for `n` channels in one SUBSCRIBE (the partitions of a queue);
 * the connection is up once every one is confirmed.  -1 when out of
 * memory (nothing is then subscribed). */
int rconn_subscribe_many(struct rconn *rc, const char *const *channels, size_t n,
                         rconn_message_fn fn, void *arg)
    __attribute__((warn_unused_result));

/*
 * Durability "replicated" (the options' durability): rconn_send follows
 * a script that writes with "WAIT 1 <replication timeout>" on the same
 * connection and calls `fn` only once WAIT has answered: with the
 * script's reply when a replica has the write, with an error reply
 * starting with RCONN_NOT_REPLICATED when none confirmed it in time (the
 * write is on the master only), or NULL when the connection was lost.
 * Every request's deadline is then the command timeout plus the
 * replication timeout (it may queue behind a WAIT).  With "local" nothing
 * changes: no WAIT, no copy.
 * (RCONN_NOT_REPLICATED and rconn_is_not_replicated: rconn_wait.h.)
 */

/* Add 1 to *counter (a worker slot's, see slots.h) each time the
 * connection is made again after having been up; NULL stops counting. */
void rconn_count_reconnects(struct rconn *rc, uint64_t *counter);

/* In a child forked from the process that owns `rc`: close the child's
 * copy of the socket, leaving the parent's connection and event base
 * alone.  NULL is ignored. */
void rconn_close_in_child(struct rconn *rc);

/* Drop the connection and free everything; pending requests get NULL. */
void rconn_free(struct rconn *rc);

#endif
