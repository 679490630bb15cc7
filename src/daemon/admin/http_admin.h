/*
 * http_admin: a small HTTP server (libevent's evhttp) on the admin
 * process's event loop (admin_main.c), for /metrics and /healthz.  No
 * thread: a request is answered inside the loop, so a route's function
 * must be quick (it never waits on Redis, whose figures the admin process
 * keeps cached).  The listening socket is the supervisor's, bound before
 * the fork and handed down (http_admin_adopt).
 *
 * The routes take GET and HEAD (else 405); any other path is 404.  They
 * are not authenticated: dconfig refuses a non-loopback address unless
 * allow_remote is set.  One prefix ("/ui/") may be handed whole, any
 * method, to another module, which authenticates its requests itself
 * (http_admin_set_prefix).
 *
 * Every request's Host must name this server (host_allow.h), else 421,
 * on every path, before anything else.
 *
 * Limits, so that a slow or hostile client cannot hold the admin process:
 * headers 8 KiB, a body 16 KiB (413), 10 s without a byte either way, and
 * the deadline for a whole request, the caps of connections per client
 * address and in all, and the dashboard's share, of http_conns.h.
 */
#ifndef DQ_HTTP_ADMIN_H
#define DQ_HTTP_ADMIN_H

#include <event2/event.h>
#include <stdio.h>
#include <sys/socket.h>

#include "daemon/dconfig.h"

/* One header a route may add to its answer (name "" for none). */
struct http_admin_header {
    char name[48];
    char value[80];
};

/* One route: writes the body to `out`, may fill `extra`, and returns the
 * HTTP status. */
struct http_admin_route {
    const char *path;           /* exact: "/metrics" */
    const char *content_type;
    int (*fn)(FILE *out, struct http_admin_header *extra, void *arg);
};

struct http_admin;
struct evhttp_request;
struct evhttp_connection;

/* A request under the prefix, answered by the callee (now or later). */
typedef void (*http_admin_prefix_fn)(struct evhttp_request *req, void *arg);
/* A connection closes: its requests not yet answered are freed with it
 * (unless evhttp detached them: then evhttp_request_get_connection is
 * NULL and sending the reply frees them). */
typedef void (*http_admin_close_fn)(struct evhttp_connection *evcon, void *arg);

/* A server for `routes` (n entries; the array and `arg` must outlive it)
 * on `base`, not listening yet.  NULL when out of memory. */
struct http_admin *http_admin_new(struct event_base *base,
                                  const struct http_admin_route *routes, size_t n,
                                  void *arg);

/* Accept connections on `fd`, a listening socket bound by the
 * supervisor (admin_socket.h) and inherited across fork; it becomes h's.
 * 0, or -1 when libevent cannot take it (out of memory). */
int http_admin_adopt(struct http_admin *h, int fd) __attribute__((warn_unused_result));

/* Stop listening (connections already accepted are kept). */
void http_admin_unlisten(struct http_admin *h);

/* The listening socket, or -1 when not listening. */
int http_admin_fd(const struct http_admin *h);

/* The connections open now (a stopping server waits for them). */
size_t http_admin_open_connections(struct http_admin *h);

/* Hand every request whose path starts with `prefix` ("/ui/"), or is
 * the prefix without its last slash, to on_request(req, arg); on_close
 * (may be NULL) hears of every connection that closes. */
void http_admin_set_prefix(struct http_admin *h, const char *prefix,
                           http_admin_prefix_fn on_request, http_admin_close_fn on_close,
                           void *arg);

/* Take the admin group's limits and names (admin.request_timeout,
 * max_connections, max_connections_per_address, hosts) for the requests
 * from now on; -1 when out of memory (the names in use stay). */
int http_admin_set_conf(struct http_admin *h, const struct daemon_conf *dc);

/* Close everything and free; NULL is ignored. */
void http_admin_free(struct http_admin *h);

#endif
