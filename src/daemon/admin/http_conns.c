#include "daemon/admin/http_conns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/bufferevent.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "daemon/log.h"
#include "util/clock.h"

/* One connection evhttp accepted. */
struct conn {
    struct http_conns *t;
    struct evhttp_connection *evcon;
    struct bufferevent *bev;        /* referenced: a cleared read callback says
                                       evhttp freed it without telling us */
    struct event *deadline;
    char peer[INET6_ADDRSTRLEN];    /* the client's address, "local" for a Unix socket */
    int64_t since_ms;               /* its current request began */
    uint64_t order;                 /* ... in the order of all (oldest goes first) */
    int answering;                  /* a whole request is in, being answered */
    int dashboard;                  /* ... and it is the dashboard's */
};

struct http_conns {
    struct event_base *base;
    struct http_conns_limits lim;
    /* Connections closed by the deadline, displaced, refused, since the
     * last summary line (at most one a minute). */
    int64_t late, displaced, refused, logged_ms;
    uint64_t next_order;
    struct conn *conns[HTTP_CONNS_HARD_MAX + 1];     /* n <= twice the cap (make_room) */
    int n;
};

struct http_conns *http_conns_new(struct event_base *base)
{
    struct http_conns *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->base = base;
    t->lim = (struct http_conns_limits){ 10000, 64, 16 };
    return t;
}

static void conn_free(struct conn *c)
{
    event_free(c->deadline);
    bufferevent_decref(c->bev);
    free(c);
}

/* Take c off the table (not freeing it). */
static void unlist(struct http_conns *t, struct conn *c)
{
    for (int i = 0; i < t->n; i++)
        if (t->conns[i] == c) {
            t->conns[i] = t->conns[--t->n];
            return;
        }
}

void http_conns_free(struct http_conns *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->n; i++)
        conn_free(t->conns[i]);
    free(t);
}

void http_conns_set_limits(struct http_conns *t, const struct http_conns_limits *l)
{
    t->lim = *l;
    if (t->lim.max > HTTP_CONNS_HARD_MAX / 2)
        t->lim.max = HTTP_CONNS_HARD_MAX / 2;
}

int http_conns_count(const struct http_conns *t)
{
    return t->n;
}

/*
 * Whether evhttp freed c's connection: bufferevent_free clears every
 * callback.  Not the read callback alone: evhttp clears that one while it
 * writes an answer (evhttp_write_buffer), and a connection being answered
 * must stay listed, for its on_complete callback (on_answered) holds it.
 */
static int conn_gone(const struct conn *c)
{
    bufferevent_data_cb readcb = NULL, writecb = NULL;
    bufferevent_event_cb eventcb = NULL;
    bufferevent_getcb(c->bev, &readcb, &writecb, &eventcb, NULL);
    return !readcb && !writecb && !eventcb;
}

/* Forget the connections evhttp freed without calling its close callback. */
static void sweep(struct http_conns *t)
{
    for (int i = 0; i < t->n;) {
        if (!conn_gone(t->conns[i])) {
            i++;
            continue;
        }
        struct conn *c = t->conns[i];
        unlist(t, c);
        conn_free(c);
    }
}

static struct conn *find(struct http_conns *t, const struct evhttp_connection *evcon)
{
    for (int i = 0; i < t->n; i++)
        if (t->conns[i]->evcon == evcon)
            return t->conns[i];
    return NULL;
}

/* The client's address of socket fd, as text, into out. */
static void peer_of(int fd, char *out, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    snprintf(out, len, "local");
    if (fd < 0 || getpeername(fd, (struct sockaddr *)&ss, &sl) < 0)
        return;
    if (ss.ss_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, out, (socklen_t)len);
    else if (ss.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, out, (socklen_t)len);
}

/* Count a connection closed for `kind` (0 late, 1 displaced, 2 refused)
 * and log a summary at most once a minute: clients this listener holds
 * off are worth an operator's look, not a line each. */
static void count_closed(struct http_conns *t, int kind, const char *peer)
{
    int64_t *n[] = { &t->late, &t->displaced, &t->refused };
    (*n[kind])++;
    int64_t now = clock_mono_ms();
    if (t->logged_ms && now - t->logged_ms < 60000)
        return;
    log_warn("admin: connections closed since the last line: %lld past "
             "admin.request_timeout, %lld displaced by newer ones over a cap, %lld refused "
             "(every place answering); the last from %s", (long long)t->late,
             (long long)t->displaced, (long long)t->refused, peer);
    t->late = t->displaced = t->refused = 0;
    t->logged_ms = now;
}

/* Close c's connection (evhttp's close callback then forgets it). */
static void drop(struct conn *c, int kind, const char *why)
{
    log_debug("admin: closing a connection from %s: %s", c->peer, why);
    count_closed(c->t, kind, c->peer);
    evhttp_connection_free(c->evcon);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct conn *c = arg;
    if (!c->answering)
        drop(c, 0, "its request did not arrive within admin.request_timeout");
}

/* c waits for a request from now: arm its deadline. */
static void await_request(struct conn *c)
{
    int64_t ms = c->t->lim.request_timeout_ms;
    struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
    c->answering = 0;
    c->dashboard = 0;
    c->since_ms = clock_mono_ms();
    c->order = c->t->next_order++;
    if (evtimer_add(c->deadline, &tv) < 0)
        log_warn("admin: cannot arm a request deadline: %s", strerror(errno));
}

/* The oldest connection not being answered, of address `peer` (NULL:
 * any), other than `self`; NULL when every one is answering. */
static struct conn *oldest_waiting(struct http_conns *t, const char *peer,
                                   const struct conn *self)
{
    struct conn *best = NULL;
    for (int i = 0; i < t->n; i++) {
        struct conn *c = t->conns[i];
        if (c == self || c->answering || (peer && strcmp(c->peer, peer) != 0))
            continue;
        if (!best || c->order < best->order)
            best = c;
    }
    return best;
}

static int count_of(const struct http_conns *t, const char *peer, int dashboard_only)
{
    int n = 0;
    for (int i = 0; i < t->n; i++)
        if ((!peer || strcmp(t->conns[i]->peer, peer) == 0)
            && (!dashboard_only || t->conns[i]->dashboard))
            n++;
    return n;
}

/*
 * Bring one scope (the connections of address `peer`, or all with NULL)
 * back under `cap` for newcomer `c`: displace the oldest waiting
 * connections that have waited HTTP_CONNS_GRACE_MS or more.  A burst of
 * younger ones (clients that connected together and have not written
 * yet) may go over the cap, up to twice it, before the oldest of them is
 * displaced all the same.  -1 when over twice the cap with no connection
 * waiting (every one being answered).
 */
static int room_in(struct http_conns *t, struct conn *c, const char *peer, int cap,
                   const char *why)
{
    int hard = 2 * cap < HTTP_CONNS_HARD_MAX ? 2 * cap : HTTP_CONNS_HARD_MAX;
    int64_t now = clock_mono_ms();
    for (int n = count_of(t, peer, 0); n > cap; n = count_of(t, peer, 0)) {
        struct conn *old = oldest_waiting(t, peer, c);
        if (old && now - old->since_ms >= HTTP_CONNS_GRACE_MS)
            drop(old, 1, why);
        else if (n <= hard)
            return 0;
        else if (old)
            drop(old, 1, why);
        else
            return -1;
    }
    return 0;
}

/* Make room for `c` under both caps (room_in); -1 when it cannot have
 * any. */
static int make_room(struct http_conns *t, struct conn *c)
{
    if (room_in(t, c, c->peer, t->lim.max_per_address,
                "displaced by a newer connection from the same address") < 0)
        return -1;
    return room_in(t, c, NULL, t->lim.max,
                   "displaced by a newer connection (admin.max_connections)");
}

/* Tell a client we cannot take that we are busy, without waiting: a
 * new socket's buffer has room for these few bytes. */
static void say_busy(int fd)
{
    static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n"
                               "Content-Type: text/plain; charset=utf-8\r\n"
                               "Content-Length: 34\r\nConnection: close\r\n\r\n"
                               "too many connections: try again\r\n";
    if (fd >= 0 && send(fd, busy, sizeof busy - 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
        log_debug("admin: cannot say busy: %s", strerror(errno));
}

int http_conns_adopt(struct http_conns *t, struct evhttp_connection *evcon, int may_refuse)
{
    sweep(t);
    if (find(t, evcon))
        return 0;
    struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
    int fd = bev ? (int)bufferevent_getfd(bev) : -1;
    struct conn *c = bev && t->n < HTTP_CONNS_HARD_MAX ? calloc(1, sizeof *c) : NULL;
    if (c && !(c->deadline = evtimer_new(t->base, on_deadline, c))) {
        free(c);
        c = NULL;
    }
    if (!c) {           /* out of memory, or the table full */
        if (may_refuse) {   /* never a connection whose request is being read */
            count_closed(t, 2, "?");
            say_busy(fd);
            evhttp_connection_free(evcon);
        }
        return -1;
    }
    c->t = t;
    c->evcon = evcon;
    c->bev = bev;
    bufferevent_incref(bev);
    peer_of(fd, c->peer, sizeof c->peer);
    t->conns[t->n++] = c;
    await_request(c);
    if (make_room(t, c) < 0 && may_refuse) {
        log_debug("admin: refusing a connection from %s: every connection is answering",
                  c->peer);
        count_closed(t, 2, c->peer);
        unlist(t, c);
        conn_free(c);
        say_busy(fd);
        evhttp_connection_free(evcon);
        return -1;
    }
    return 0;
}

static void on_answered(struct evhttp_request *req, void *arg)
{
    (void)req;
    await_request(arg);
}

int http_conns_answering(struct http_conns *t, struct evhttp_request *req, int dashboard)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    if (!evcon)
        return 0;
    struct conn *c = find(t, evcon);
    if (!c && http_conns_adopt(t, evcon, 0) == 0)
        c = find(t, evcon);
    if (!c)
        return 0;
    event_del(c->deadline);
    c->answering = 1;
    evhttp_request_set_on_complete_cb(req, on_answered, c);
    if (!dashboard)
        return 0;
    int per = t->lim.max_per_address, all = t->lim.max;
    int per_share = per - (per / 4 > 0 ? per / 4 : 1);
    int all_share = all - (all / 4 > 0 ? all / 4 : 1);
    if (count_of(t, c->peer, 1) >= per_share || count_of(t, NULL, 1) >= all_share)
        return -1;
    c->dashboard = 1;
    return 0;
}

void http_conns_closed(struct http_conns *t, struct evhttp_connection *evcon)
{
    struct conn *c = find(t, evcon);
    if (!c)
        return;
    unlist(t, c);
    conn_free(c);
}
