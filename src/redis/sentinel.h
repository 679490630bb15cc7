/*
 * Finding the master through Redis Sentinel, as the Sentinel client guide
 * describes it (https://redis.io/docs/reference/sentinel-clients/):
 *
 *   1. ask each sentinel in turn SENTINEL get-master-addr-by-name NAME,
 *      each with a short timeout; the first that answers moves to the
 *      front of the list, so that the next lookup asks it first;
 *   2. connect to the address it gives and check that ROLE says master
 *      (a sentinel may still name the old master for a moment after a
 *      failover); if not, wait a little and ask again;
 *   3. refresh the list with SENTINEL sentinels NAME, adding the ones it
 *      names that the list lacks.
 *
 * Every query is blocking, on connections made with redis_conn_open() from
 * the caller's settings (timeouts, and TLS where those settings have it)
 * with the sentinels' own user and password.  Each sentinel gets at most
 * SENTINEL_TIMEOUT_MS to connect and to answer, so a lookup costs at most
 * that much per listed sentinel: short enough for the daemon's event
 * loops to afford, between connection attempts.
 *
 * Users: the library's client (client.c) on every connect and reconnect,
 * the daemon's connections (rconn.c) before each connection attempt, and
 * the configuration readers (sentinel_parse_node).
 */
#ifndef DQ_SENTINEL_H
#define DQ_SENTINEL_H

#include <delayq/client.h>
#include <hiredis/hiredis.h>
#include <stddef.h>

#include "redis/redis_conn.h"

#define SENTINEL_TIMEOUT_MS 1000    /* a sentinel's connect, and its reply */
#define SENTINEL_MAX_NODES 16       /* configured plus discovered */
#define SENTINEL_HOST_MAX 256

struct sentinel_node {
    char *host;
    int port;
};

struct sentinel {
    char *master;                   /* the name the sentinels monitor */
    struct sentinel_node nodes[SENTINEL_MAX_NODES];
    size_t nnodes;                  /* the first answered last time */
    struct redis_conn_opts via;     /* how a sentinel is reached: the user,
                                       password and timeouts (host unused) */
};

/*
 * Parse "HOST:PORT" (an IPv6 host in brackets: "[::1]:26379") into host
 * (NUL-terminated, at most hostlen - 1 bytes) and *port.  Returns 0, or -1
 * with the reason in *why (a static string).
 */
int sentinel_parse_node(const char *node, char *host, size_t hostlen, int *port,
                        const char **why);

/*
 * The sentinels of opt->sentinel (which must name a master and at least
 * one node), reached with opt's timeouts (capped at SENTINEL_TIMEOUT_MS)
 * and the sentinels' credentials.  NULL with one line in err on a bad
 * node or out of memory.  Free with sentinel_free.
 */
struct sentinel *sentinel_new(const dq_options *opt, char *err, size_t errlen);

void sentinel_free(struct sentinel *s);

/*
 * Ask the sentinels where the master is (steps 1 and 3 above) and point
 * conn's host and port there (conn->unix_path is cleared).  Returns 1 when
 * the address changed, 0 when it is the same, -1 with one line in err
 * when no sentinel answered with an address.
 */
int sentinel_resolve(struct sentinel *s, struct redis_conn_opts *conn, char *err,
                     size_t errlen);

/*
 * Whether the server on `rc` says ROLE master: 1, 0 (with "HOST:PORT is a
 * replica" or the like in err), or -1 when the connection failed.
 */
int sentinel_is_master(redisContext *rc, const struct redis_conn_opts *conn, char *err,
                       size_t errlen);

/*
 * Resolve and check once, for a caller that connects by itself (the
 * daemon's async connections): conn then names a master that said so a
 * moment ago.  Returns like sentinel_resolve; a server that is not a
 * master (or cannot be reached) is -1 with the reason in err.
 */
int sentinel_locate(struct sentinel *s, struct redis_conn_opts *conn, char *err,
                    size_t errlen);

/*
 * The blocking client's connect: resolve, connect with redis_conn_open,
 * check ROLE; while no sentinel answers, the master named cannot be
 * reached or is not a master, wait (100 ms, doubled) and start again, for
 * up to conn->connect_timeout_ms.  Returns the context (conn names its
 * address), or NULL with *st (DQ_ERR_CONNECT, DQ_ERR_AUTH, DQ_ERR_NOMEM)
 * and one line in err.
 */
redisContext *sentinel_connect(struct sentinel *s, struct redis_conn_opts *conn,
                               dq_status *st, char *err, size_t errlen);

#endif
