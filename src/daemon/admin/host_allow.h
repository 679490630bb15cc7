/*
 * host_allow: which names the admin listener answers to.  A request's
 * Host header must name this server: the listen address, the address the
 * connection came in on, `localhost`, or a name of admin.hosts; anything
 * else is a request meant for another site (a page of that site whose DNS
 * name was rebound to this address), answered 421 before anything else
 * (http_admin.c); a request without Host (HTTP/1.0) is let through, as
 * a browser always sends one.  A POST's Origin is compared with the same set, never
 * with the request's own Host (ui_auth.c).  The port is not compared: a
 * page of another site cannot make a browser send a Host or an Origin
 * that names one of these.
 */
#ifndef DQ_HOST_ALLOW_H
#define DQ_HOST_ALLOW_H

#include <event2/http.h>
#include <stddef.h>
#include <sys/socket.h>

/* The set, borrowed: `names` (admin.hosts, lower case, IPv6 without
 * brackets) and the listen address (NULL or AF_UNSPEC: none). */
struct host_allow {
    char *const *names;
    size_t nnames;
    const struct sockaddr_storage *listen;
};

/* Whether `hostport` ("name", "name:port", "[v6]:port"), from a request
 * on the connection of socket `fd` (-1: unknown), names this server. */
int host_allow_host(const struct host_allow *set, int fd, const char *hostport);

/* Whether `origin` ("http://name[:port]" or https) names this server. */
int host_allow_origin(const struct host_allow *set, int fd, const char *origin);

/* The socket of `req`'s connection, or -1 (detached). */
int host_allow_fd(struct evhttp_request *req);

#endif
