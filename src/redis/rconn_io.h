/*
 * rconn_io: the bytes of one daemon Redis connection, plain TCP, unix
 * socket or TLS, on a libevent loop.  hiredis 0.14's async API reads the
 * socket itself and knows no TLS, so this module owns the I/O: a
 * bufferevent (bufferevent_openssl for TLS), commands formatted by
 * hiredis (redisFormatCommandArgv), replies parsed by hiredis's
 * redisReader, and a FIFO of callbacks matched to replies in order.
 *
 * It keeps the contract of the hiredis async context it replaces, so that
 * rconn.c (its only user) reads as before:
 * - on_connect reports the end of the connect (and TLS handshake); after a
 *   failed one the connection frees itself when the callback returns;
 * - on_disconnect reports a connection lost once up: first every pending
 *   callback gets a NULL reply, then on_disconnect, then it frees itself;
 * - rconn_io_free from inside one of its callbacks is deferred until the
 *   callback returns; pending callbacks get a NULL reply, on_disconnect is
 *   not called;
 * - a "persistent" callback (SUBSCRIBE's) stays at the head of the FIFO
 *   and takes every later reply: the subscription's messages.
 * A reply is freed when its callback returns.
 */
#ifndef DQ_RCONN_IO_H
#define DQ_RCONN_IO_H

#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <stddef.h>

#include "redis/redis_conn.h"

struct rconn_io;

/* A reply, or NULL when the connection failed or was freed first. */
typedef void (*rconn_io_reply_fn)(struct rconn_io *io, redisReply *reply, void *privdata);

struct rconn_io_events {
    /* ok 1: connected (and hand-shaken, for TLS); ok 0: failed, `why` */
    void (*on_connect)(struct rconn_io *io, int ok, const char *why, void *arg);
    /* the connection was lost after on_connect(ok 1) */
    void (*on_disconnect)(struct rconn_io *io, const char *why, void *arg);
    void *arg;
};

/*
 * Start connecting to `o` (borrowed: it must outlive the connection) on
 * `base`.  NULL with the reason in err when it cannot even start (out of
 * memory, an unknown host, a TLS file that cannot be read); otherwise
 * on_connect follows, from the loop.
 */
struct rconn_io *rconn_io_connect(struct event_base *base, const struct redis_conn_opts *o,
                                  const struct rconn_io_events *ev, char *err, size_t errlen);

/* Queue the formatted command buf[0..len) (copied) with its callback
 * (`fn` may be NULL: the reply is dropped).  -1 when the connection is
 * closing or memory ran out; `fn` is then never called. */
int rconn_io_send(struct rconn_io *io, const char *buf, size_t len, rconn_io_reply_fn fn,
                  void *privdata, int persistent);

/* The same for a command given as arguments (`lens` NULL: strings). */
int rconn_io_command(struct rconn_io *io, rconn_io_reply_fn fn, void *privdata,
                     int persistent, int argc, const char **argv, const size_t *lens);

/* TCP keepalive on the connection's socket (as hiredis's redisKeepAlive). */
void rconn_io_keepalive(struct rconn_io *io);

/* Whether a TLS handshake is under way on a connected socket and the
 * server has sent nothing: what a plain Redis does with a TLS hello (it
 * waits for the end of an inline command), so a connect timeout then
 * names that cause. */
int rconn_io_silent_tls(const struct rconn_io *io);

/* The socket, or -1. */
int rconn_io_fd(const struct rconn_io *io);

/* Close and free (see above).  NULL is ignored. */
void rconn_io_free(struct rconn_io *io);

#endif
