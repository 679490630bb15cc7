#include "daemon/admin/http_admin.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REQUEST_TIMEOUT_S 10
#define MAX_HEADERS_SIZE 8192
#define MAX_BODY_SIZE 16384

struct route_call;

struct http_admin {
    struct evhttp *http;
    struct evhttp_bound_socket *bound;  /* NULL: not listening */
    int fd;                             /* bound's socket, or -1 */
    void *arg;
    struct route_call *calls;
    struct event_base *base;
    /* The connections open, each by its bufferevent, of which we hold a
     * reference so that we can tell a freed one (callbacks cleared). */
    struct bufferevent *conns[HTTP_ADMIN_MAX_CONNS];
    size_t nconns;
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

static void on_route(struct evhttp_request *req, void *arg)
{
    const struct route_call *call = arg;
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
    if (uri && under_prefix(h, evhttp_uri_get_path(uri))) {
        h->on_prefix(req, h->prefix_arg);
        return;
    }
    reply_text(req, 404, "Not Found", "text/plain; charset=utf-8",
               "not found: try /metrics or /healthz\n", 36);
}

/* Forget the connections evhttp has freed (their callbacks cleared). */
static void sweep_conns(struct http_admin *h)
{
    size_t kept = 0;
    for (size_t i = 0; i < h->nconns; i++) {
        bufferevent_data_cb readcb = NULL;
        bufferevent_getcb(h->conns[i], &readcb, NULL, NULL, NULL);
        if (readcb)
            h->conns[kept++] = h->conns[i];
        else
            bufferevent_decref(h->conns[i]);
    }
    h->nconns = kept;
}

static void on_conn_close(struct evhttp_connection *evcon, void *arg)
{
    struct http_admin *h = arg;
    if (h->on_close)
        h->on_close(evcon, h->prefix_arg);
}

/* A connection evhttp accepted, looked at on the next turn of the loop. */
struct new_conn {
    struct http_admin *h;
    struct bufferevent *bev;    /* referenced */
};

/* A connection evhttp has set up (see on_new_bev): count it, or close it
 * at once when HTTP_ADMIN_MAX_CONNS are open already. */
static void on_conn_ready(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct new_conn *nc = arg;
    struct http_admin *h = nc->h;
    bufferevent_data_cb readcb = NULL;
    void *cbarg = NULL;
    bufferevent_getcb(nc->bev, &readcb, NULL, NULL, &cbarg);
    sweep_conns(h);
    if (!readcb || !cbarg) {                /* already gone */
        bufferevent_decref(nc->bev);
    } else if (h->nconns >= HTTP_ADMIN_MAX_CONNS) {
        evhttp_connection_free(cbarg);
        bufferevent_decref(nc->bev);
    } else {
        evhttp_connection_set_closecb(cbarg, on_conn_close, h);
        h->conns[h->nconns++] = nc->bev;    /* keeps the reference */
    }
    free(nc);
}

/*
 * evhttp asks for a bufferevent for each connection it accepts (libevent
 * 2.1 has no connection limit of its own): make it, keep a reference so
 * that its callbacks tell later whether evhttp still uses it, and look at
 * the connection once evhttp has set it up, on the next turn of the loop.
 * NULL (evhttp then makes its own, uncounted) only when out of memory.
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
    if (!h->calls || !(h->http = evhttp_new(base))) {
        http_admin_free(h);
        return NULL;
    }
    evhttp_set_timeout(h->http, REQUEST_TIMEOUT_S);
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
    sweep_conns(h);
    return h->nconns;
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

void http_admin_free(struct http_admin *h)
{
    if (!h)
        return;
    if (h->http)
        evhttp_free(h->http);   /* closes the sockets; on_close hears of each */
    for (size_t i = 0; i < h->nconns; i++)
        bufferevent_decref(h->conns[i]);
    free(h->calls);
    free(h);
}
