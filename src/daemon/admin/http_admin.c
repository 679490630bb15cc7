#include "daemon/admin/http_admin.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon/admin/host_allow.h"
#include "daemon/admin/http_conns.h"
#include "daemon/log.h"

#define IDLE_TIMEOUT_S 10
#define MAX_HEADERS_SIZE 8192
#define MAX_BODY_SIZE 16384

struct route_call;

struct http_admin {
    struct evhttp *http;
    struct evhttp_bound_socket *bound;  /* NULL: not listening */
    int fd;                             /* bound's socket, or -1 */
    struct sockaddr_storage addr;       /* where bound listens */
    socklen_t addrlen;
    void *arg;
    struct route_call *calls;
    struct event_base *base;
    struct http_conns *conns;           /* deadlines, caps, shares */
    char **hosts;                       /* admin.hosts, owned */
    size_t nhosts;
    int64_t misdirected;                /* 421s since the last line about them */
    struct timespec misdirected_logged; /* that line (0: none yet) */
    /* The prefix handler (http_admin_set_prefix). */
    char prefix[32];
    http_admin_prefix_fn on_prefix;
    http_admin_close_fn on_close;
    void *prefix_arg;
};

/* The argument of one route's callback. */
struct route_call {
    struct http_admin *h;
    const struct http_admin_route *route;
};

static void reply_text(struct evhttp_request *req, int code, const char *reason,
                       const char *type, const char *body, size_t len)
{
    struct evbuffer *buf = evbuffer_new();
    struct evkeyvalq *hdr = evhttp_request_get_output_headers(req);
    evhttp_add_header(hdr, "Content-Type", type);
    evhttp_add_header(hdr, "Cache-Control", "no-store");
    if (buf)
        evbuffer_add(buf, body, len);
    evhttp_send_reply(req, code, reason, buf);
    if (buf)
        evbuffer_free(buf);
}

static void on_conn_close(struct evhttp_connection *evcon, void *arg);

/* A request for another Host was refused: say so at most once a minute,
 * with the name (printable bytes only, cut), since a name of this server
 * missing from admin.hosts looks the same. */
static void log_misdirected(struct http_admin *h, const char *host)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    h->misdirected++;
    if (h->misdirected_logged.tv_sec && now.tv_sec - h->misdirected_logged.tv_sec < 60)
        return;
    char name[64];
    size_t i = 0;
    for (; host[i] && i < sizeof name - 1; i++)
        name[i] = host[i] > 0x20 && host[i] < 0x7f ? host[i] : '?';
    name[i] = '\0';
    log_warn("admin: %lld request%s for another server answered 421, the last for Host "
             "'%s': if that names this server, list it in admin.hosts",
             (long long)h->misdirected, h->misdirected == 1 ? "" : "s", name);
    h->misdirected = 0;
    h->misdirected_logged = now;
}

/*
 * Every request passes here first, once whole: its Host must name this
 * server (host_allow.h), else 421 before anything else; and the
 * connection's deadline stops while it is answered (http_conns.h), unless
 * it is a dashboard request over the dashboard's share (503).  Returns 0
 * when the request may go on; else it is answered.
 */
static int admit(struct http_admin *h, struct evhttp_request *req, int dashboard)
{
    /* Read before on_conn_ready looked at its connection: hear of its
     * close from now on all the same (the dashboard must). */
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    if (evcon)
        evhttp_connection_set_closecb(evcon, on_conn_close, h);
    int busy = http_conns_answering(h->conns, req, dashboard) < 0;
    const char *host = evhttp_find_header(evhttp_request_get_input_headers(req), "Host");
    struct host_allow set = { h->hosts, h->nhosts, h->bound && h->addrlen ? &h->addr : NULL };
    if (host && !host_allow_host(&set, host_allow_fd(req), host)) {
        log_misdirected(h, host);
        static const char msg[] = "misdirected request: the Host header does not name "
                                  "this server (admin.hosts)\n";
        reply_text(req, 421, "Misdirected Request", "text/plain; charset=utf-8", msg,
                   sizeof msg - 1);
        return -1;
    }
    if (busy) {
        static const char msg[] = "too many dashboard requests in progress: try again\n";
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "1");
        reply_text(req, 503, "Service Unavailable", "text/plain; charset=utf-8", msg,
                   sizeof msg - 1);
        return -1;
    }
    return 0;
}

static void on_route(struct evhttp_request *req, void *arg)
{
    const struct route_call *call = arg;
    if (admit(call->h, req, 0) < 0)
        return;
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, HEAD");
        reply_text(req, 405, "Method Not Allowed", "text/plain; charset=utf-8",
                   "method not allowed\n", 19);
        return;
    }
    char *body = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&body, &len);
    if (!out) {
        evhttp_send_error(req, HTTP_INTERNAL, NULL);
        return;
    }
    struct http_admin_header extra = { "", "" };
    int code = call->route->fn(out, &extra, call->h->arg);
    if (fclose(out) != 0) {
        free(body);
        evhttp_send_error(req, HTTP_INTERNAL, NULL);
        return;
    }
    if (extra.name[0])
        evhttp_add_header(evhttp_request_get_output_headers(req), extra.name, extra.value);
    reply_text(req, code, NULL, call->route->content_type, body ? body : "", len);
    free(body);
}

/* Whether `path` is h's prefix ("/ui/...") or the prefix without its
 * last slash ("/ui"). */
static int under_prefix(const struct http_admin *h, const char *path)
{
    size_t n = strlen(h->prefix);
    if (!h->on_prefix || !path || n == 0)
        return 0;
    return strncmp(path, h->prefix, n) == 0
           || (strncmp(path, h->prefix, n - 1) == 0 && path[n - 1] == '\0');
}

static void on_other(struct evhttp_request *req, void *arg)
{
    struct http_admin *h = arg;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    int dashboard = uri && under_prefix(h, evhttp_uri_get_path(uri));
    if (admit(h, req, dashboard) < 0)
        return;
    if (dashboard) {
        h->on_prefix(req, h->prefix_arg);
        return;
    }
    reply_text(req, 404, "Not Found", "text/plain; charset=utf-8",
               "not found: try /metrics or /healthz\n", 36);
}

static void on_conn_close(struct evhttp_connection *evcon, void *arg)
{
    struct http_admin *h = arg;
    http_conns_closed(h->conns, evcon);
    if (h->on_close)
        h->on_close(evcon, h->prefix_arg);
}

/* A connection evhttp accepted, looked at on the next turn of the loop. */
struct new_conn {
    struct http_admin *h;
    struct bufferevent *bev;    /* referenced */
};

/* A connection evhttp has set up (see on_new_bev): watch its close and
 * hand it to the table (http_conns.h), which counts it and arms its
 * deadline, or refuses it. */
static void on_conn_ready(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct new_conn *nc = arg;
    struct http_admin *h = nc->h;
    bufferevent_data_cb readcb = NULL;
    void *cbarg = NULL;
    bufferevent_getcb(nc->bev, &readcb, NULL, NULL, &cbarg);
    if (readcb && cbarg) {              /* not already gone */
        evhttp_connection_set_closecb(cbarg, on_conn_close, h);
        (void)http_conns_adopt(h->conns, cbarg, 1);
    }
    bufferevent_decref(nc->bev);
    free(nc);
}

/*
 * evhttp asks for a bufferevent for each connection it accepts (libevent
 * 2.1 has no connection limit, no deadline and no new-request hook of its
 * own): make it, and look at the connection once evhttp has set it up, on
 * the next turn of the loop; a request read before then is counted when
 * it is answered (http_conns_answering).  NULL (evhttp then makes its
 * own) only when out of memory.
 */
static struct bufferevent *on_new_bev(struct event_base *base, void *arg)
{
    struct new_conn *nc = malloc(sizeof *nc);
    if (!nc)
        return NULL;
    nc->h = arg;
    nc->bev = bufferevent_socket_new(base, -1, 0);
    if (!nc->bev) {
        free(nc);
        return NULL;
    }
    bufferevent_incref(nc->bev);
    struct timeval now = { 0, 0 };
    if (event_base_once(base, -1, EV_TIMEOUT, on_conn_ready, nc, &now) < 0) {
        bufferevent_decref(nc->bev);
        struct bufferevent *bev = nc->bev;
        free(nc);
        return bev;
    }
    return nc->bev;
}

struct http_admin *http_admin_new(struct event_base *base,
                                  const struct http_admin_route *routes, size_t n,
                                  void *arg)
{
    struct http_admin *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->fd = -1;
    h->arg = arg;
    h->base = base;
    h->calls = calloc(n ? n : 1, sizeof *h->calls);
    if (!h->calls || !(h->http = evhttp_new(base)) || !(h->conns = http_conns_new(base))) {
        http_admin_free(h);
        return NULL;
    }
    evhttp_set_timeout(h->http, IDLE_TIMEOUT_S);
    evhttp_set_max_headers_size(h->http, MAX_HEADERS_SIZE);
    evhttp_set_max_body_size(h->http, MAX_BODY_SIZE);
    /* Other methods are let in to be answered 405 rather than 501. */
    evhttp_set_allowed_methods(h->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST
                                            | EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE);
    for (size_t i = 0; i < n; i++) {
        h->calls[i].h = h;
        h->calls[i].route = &routes[i];
        evhttp_set_cb(h->http, routes[i].path, on_route, &h->calls[i]);
    }
    evhttp_set_gencb(h->http, on_other, h);
    evhttp_set_bevcb(h->http, on_new_bev, h);
    return h;
}

int http_admin_adopt(struct http_admin *h, int fd)
{
    struct evhttp_bound_socket *b = evhttp_accept_socket_with_handle(h->http, fd);
    if (!b)
        return -1;
    h->bound = b;
    h->fd = fd;
    /* Where it listens, for the Host check (host_allow.h); an address
     * that cannot be read leaves the connection's own local address. */
    h->addrlen = sizeof h->addr;
    if (getsockname(fd, (struct sockaddr *)&h->addr, &h->addrlen) < 0)
        h->addrlen = 0;
    return 0;
}

void http_admin_unlisten(struct http_admin *h)
{
    if (!h || !h->bound)
        return;
    evhttp_del_accept_socket(h->http, h->bound);   /* closes the socket */
    h->bound = NULL;
    h->fd = -1;
}

int http_admin_fd(const struct http_admin *h)
{
    return h ? h->fd : -1;
}

size_t http_admin_open_connections(struct http_admin *h)
{
    int n = http_conns_count(h->conns);
    return n > 0 ? (size_t)n : 0;
}

void http_admin_set_prefix(struct http_admin *h, const char *prefix,
                           http_admin_prefix_fn on_request, http_admin_close_fn on_close,
                           void *arg)
{
    snprintf(h->prefix, sizeof h->prefix, "%s", prefix);
    h->on_prefix = on_request;
    h->on_close = on_close;
    h->prefix_arg = arg;
}

static void free_hosts(struct http_admin *h)
{
    for (size_t i = 0; i < h->nhosts; i++)
        free(h->hosts[i]);
    free(h->hosts);
    h->hosts = NULL;
    h->nhosts = 0;
}

int http_admin_set_conf(struct http_admin *h, const struct daemon_conf *dc)
{
    struct http_conns_limits l = { dc->admin_request_timeout_ms, dc->admin_max_conns,
                                   dc->admin_max_conns_per_address };
    http_conns_set_limits(h->conns, &l);
    char **hosts = calloc(dc->nadmin_hosts + 1, sizeof *hosts);
    for (size_t i = 0; hosts && i < dc->nadmin_hosts; i++)
        if (!(hosts[i] = strdup(dc->admin_hosts[i]))) {
            while (i > 0)
                free(hosts[--i]);
            free(hosts);
            hosts = NULL;
        }
    if (!hosts)
        return -1;      /* the names in use stay */
    free_hosts(h);
    h->hosts = hosts;
    h->nhosts = dc->nadmin_hosts;
    return 0;
}

void http_admin_free(struct http_admin *h)
{
    if (!h)
        return;
    if (h->http)
        evhttp_free(h->http);   /* closes the sockets; on_close hears of each */
    http_conns_free(h->conns);
    free_hosts(h);
    free(h->calls);
    free(h);
}
