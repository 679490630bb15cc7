/*
 * http_conns: the admin listener's connections (http_admin.c), so that
 * hostile clients cannot hold it.
 *
 * - A deadline for the whole request: from the moment a connection is
 *   accepted, or its previous answer was sent, the next request (request
 *   line, headers and body) must be in within request_timeout, however
 *   steadily its bytes trickle; else the connection is closed.
 * - At most max_per_address connections from one client address and max
 *   in all.  A connection over either cap takes the place of the oldest
 *   connection still sending its request (or idle between requests) from
 *   that address, or from anyone for the global cap, once that one has
 *   waited HTTP_CONNS_GRACE_MS; a burst of connections younger than that
 *   may take up to twice the cap before the oldest of them goes all the
 *   same.  When every connection is being answered, the newcomer gets a
 *   503 and is closed.  A request arrives whole in a few milliseconds, so
 *   a probe always gets its place, and a trickling client only ever
 *   displaces its own kind.
 * - A reserved share: dashboard requests being answered (they may wait
 *   for Redis) hold at most three quarters of each cap; one more gets a
 *   503 at once.  /metrics and /healthz are answered as soon as they are
 *   read, and the places the dashboard cannot hold are always there to
 *   be taken, so they never wait for the dashboard's clients.
 *
 * The table holds no connection: evhttp owns them, and tells us of each
 * one's end through its close callback (http_admin.c forwards it).
 */
#ifndef DQ_HTTP_CONNS_H
#define DQ_HTTP_CONNS_H

#include <event2/event.h>
#include <event2/http.h>
#include <stdint.h>

#define HTTP_CONNS_HARD_MAX 2048    /* twice the largest admin.max_connections */
/* A connection still sending its request is displaced by a newer one
 * over a cap only once it has waited this long; younger ones (a burst of
 * clients that connected together) may take up to twice the cap. */
#define HTTP_CONNS_GRACE_MS 500

struct http_conns_limits {
    int64_t request_timeout_ms;     /* the whole request */
    int max;                        /* connections in all, <= HTTP_CONNS_HARD_MAX / 2 */
    int max_per_address;            /* from one address, below max */
};

struct http_conns;

/* An empty table on `base` with the default limits (10 s, 64, 16); NULL
 * when out of memory. */
struct http_conns *http_conns_new(struct event_base *base);

/* Free the table (call after evhttp_free: its connections are gone). */
void http_conns_free(struct http_conns *t);

/* New limits, for connections accepted from now on (and every deadline
 * armed from now on). */
void http_conns_set_limits(struct http_conns *t, const struct http_conns_limits *l);

/*
 * evcon was accepted: count it and arm its deadline, displacing an older
 * connection if a cap is reached.  With `may_refuse` (the connection has
 * sent nothing yet) and no connection to displace, it gets a 503 and is
 * freed: returns -1 (also when out of memory; without `may_refuse` the
 * connection is then left alone, uncounted).  0 when counted (or already).  The connections it
 * frees go through evhttp_connection_free, so their close callback (set
 * by the caller before adopting) runs.
 */
int http_conns_adopt(struct http_conns *t, struct evhttp_connection *evcon, int may_refuse);

/*
 * A whole request of req's connection is in and about to be answered: its
 * deadline stops until the answer is sent.  `dashboard`: the request
 * counts in the dashboard's share; returns -1 (answer 503, the request
 * is not counted) when that share is used up, else 0.
 */
int http_conns_answering(struct http_conns *t, struct evhttp_request *req, int dashboard);

/* evcon is closing (evhttp's close callback): forget it. */
void http_conns_closed(struct http_conns *t, struct evhttp_connection *evcon);

/* Connections counted now (tests, logs). */
int http_conns_count(const struct http_conns *t);

#endif
