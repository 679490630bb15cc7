/*
 * ui.c: the dashboard's front door (see ui.h for the gates and their
 * order).  A request becomes a struct ui_ctx holding what the pages read
 * (decoded path segments, query, form); the context lives until the page
 * answers, perhaps after a Redis round trip.  Pending contexts are kept
 * on a list so that a connection that closes first (http_admin tells us)
 * marks them: the reply is then dropped without touching a request
 * libevent has freed.
 */
#include "daemon/admin/ui.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <time.h>

#include "daemon/admin/ui_assets.h"
#include "daemon/admin/ui_auth.h"
#include "daemon/admin/ui_ctx.h"
#include "daemon/admin/ui_joblog.h"
#include "daemon/admin/ui_layout.h"
#include "daemon/admin/ui_pages.h"
#include "daemon/admin/ui_throttle.h"
#include "daemon/log.h"
#include "util/clock.h"

#define UI_SEGMENT_LEN 1024

struct ui *ui_new(const struct ui_host *host)
{
    struct ui *u = calloc(1, sizeof *u);
    if (!u)
        return NULL;
    u->host = *host;
    if (!(u->auth = ui_auth_new(host->auth_store)) || !(u->joblog = ui_joblog_new())
        || !(u->throttle = ui_throttle_new())) {
        ui_auth_free(u->auth);
        ui_joblog_free(u->joblog);
        free(u);
        return NULL;
    }
    return u;
}

void ui_free(struct ui *u)
{
    if (!u)
        return;
    /* Called after the admin server is freed (its requests with it):
     * still-pending contexts stay valid for their pages, whose replies
     * are then dropped. */
    for (struct ui_ctx *x = u->pending; x; x = x->next)
        x->u = NULL;
    ui_auth_free(u->auth);
    ui_joblog_free(u->joblog);
    ui_throttle_free(u->throttle);
    free(u);
}

void ui_set_conf(struct ui *u, const struct daemon_conf *dc)
{
    ui_auth_set_conf(u->auth, dc);
    u->read_only = dc->admin_read_only;
    u->enabled = dc->admin_ui;
}

void ui_connection_closed(struct ui *u, struct evhttp_connection *evcon)
{
    for (struct ui_ctx *x = u->pending; x; x = x->next) {
        if (x->evcon != evcon || !x->req)
            continue;
        /* Still on the connection: libevent frees it with it.  Detached
         * (the client went away first): ours to free. */
        if (evhttp_request_get_connection(x->req) == evcon)
            x->req = NULL;
        else
            x->detached = 1;
        x->evcon = NULL;
    }
}

/* A short plain-text answer (errors the router gives itself). */
static void reply_plain(struct ui_ctx *x, int code, const char *text)
{
    ui_ctx_reply(x, code, "text/plain; charset=utf-8", text, strlen(text));
}

/* ---- parsing the request ---- */

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Percent-decode one path segment of `len` bytes; NULL when an escape is
 * bad, decodes to NUL, or the segment is too long.  A '/' may be decoded:
 * the path is split before, and job ids may hold one. */
static char *decode_segment(const char *p, size_t len)
{
    if (len > UI_SEGMENT_LEN)
        return NULL;
    char *out = malloc(len + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = p[i];
        if (c == '%') {
            if (i + 2 >= len) {
                free(out);
                return NULL;
            }
            int a = hexval(p[i + 1]), b = hexval(p[i + 2]);
            if (a < 0 || b < 0) {
                free(out);
                return NULL;
            }
            c = (char)(a * 16 + b);
            i += 2;
            if (c == '\0') {
                free(out);
                return NULL;
            }
        }
        out[o++] = c;
    }
    out[o] = '\0';
    return out;
}

/* Split the path after "/ui/" into decoded segments (an empty last
 * segment, from a trailing '/', is dropped).  -1: a bad path (400). */
static int split_path(struct ui_ctx *x, const char *path)
{
    const char *p = path + 4;   /* after "/ui/" */
    while (*p) {
        size_t len = strcspn(p, "/");
        if (len == 0 && p[0] == '/')
            return -1;          /* "//" */
        if (x->nsegs == UI_SEGMENTS_MAX)
            return -1;
        char *seg = decode_segment(p, len);
        if (!seg)
            return -1;
        x->segs[x->nsegs++] = seg;
        p += len;
        if (*p == '/')
            p++;
    }
    return 0;
}

/* The urlencoded body of a POST into x->form; -1 when it is not one. */
static int parse_form(struct ui_ctx *x)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(x->req);
    size_t len = evbuffer_get_length(in);
    if (len == 0)
        return 0;
    const char *type = evhttp_find_header(evhttp_request_get_input_headers(x->req),
                                          "Content-Type");
    if (!type || strncmp(type, "application/x-www-form-urlencoded", 33) != 0)
        return -1;
    char *body = malloc(len + 1);
    if (!body)
        return -1;
    if (evbuffer_copyout(in, body, len) != (ev_ssize_t)len || memchr(body, '\0', len)) {
        free(body);
        return -1;
    }
    body[len] = '\0';
    int rc = evhttp_parse_query_str(body, &x->form);
    /* The body may hold a login's token or password: overwrite our copy,
     * and libevent's where it lies (no copy made: in place). */
    explicit_bzero(body, len);
    free(body);
    struct evbuffer_iovec v[16];
    int n = evbuffer_peek(in, -1, NULL, v, 16);
    for (int i = 0; i < n && i < 16; i++)
        explicit_bzero(v[i].iov_base, v[i].iov_len);
    return rc;
}

/* ---- gates and routes ---- */

static int is_post(const struct ui_ctx *x)
{
    return evhttp_request_get_command(x->req) == EVHTTP_REQ_POST;
}

static int is_get(const struct ui_ctx *x)
{
    enum evhttp_cmd_type c = evhttp_request_get_command(x->req);
    return c == EVHTTP_REQ_GET || c == EVHTTP_REQ_HEAD;
}

static void method_not_allowed(struct ui_ctx *x, const char *allow)
{
    evhttp_add_header(evhttp_request_get_output_headers(x->req), "Allow", allow);
    reply_plain(x, 405, "method not allowed\n");
}

static void serve_asset(struct ui_ctx *x, const char *name)
{
    const struct ui_asset *a = name && x->nsegs == 2 ? ui_asset_find(name) : NULL;
    if (!a) {
        ui_page_not_found(x, "asset");
        return;
    }
    if (!is_get(x)) {
        method_not_allowed(x, "GET, HEAD");
        return;
    }
    struct evkeyvalq *out = evhttp_request_get_output_headers(x->req);
    ui_ctx_security_headers(out, 1);
    evhttp_add_header(out, "Cache-Control", "private, max-age=300");
    evhttp_add_header(out, "ETag", a->etag);
    evhttp_add_header(out, "Content-Type", a->type);
    const char *inm = evhttp_find_header(evhttp_request_get_input_headers(x->req),
                                         "If-None-Match");
    if (inm && strcmp(inm, a->etag) == 0) {
        ui_ctx_send(x, 304, "Not Modified", NULL);
        return;
    }
    struct evbuffer *buf = evbuffer_new();
    if (buf)
        evbuffer_add_reference(buf, a->data, a->len, NULL, NULL);
    ui_ctx_send(x, buf ? 200 : 500, NULL, buf);
    if (buf)
        evbuffer_free(buf);
}

/* The client's address of x's request, into out ("" when gone). */
static void client_addr(const struct ui_ctx *x, char *out, size_t len)
{
    char *addr = NULL;
    ev_uint16_t port = 0;
    out[0] = '\0';
    if (x->evcon)
        evhttp_connection_get_peer(x->evcon, &addr, &port);
    snprintf(out, len, "%s", addr ? addr : "");
}

/* A failed login attempt of x's client (`how`: "form", "bearer",
 * "basic"; `refused`: not checked, during its wait): count it, and log
 * it, at most a line a second per address. */
static void login_failed(struct ui_ctx *x, const char *how, int refused)
{
    char addr[64];
    client_addr(x, addr, sizeof addr);
    struct ui_throttle_report rep;
    ui_throttle_failed(x->u->throttle, addr, refused, clock_mono_ms(), &rep);
    if (!rep.log)
        return;
    log_warn("dashboard: %lld failed login%s from %s (last by %s; %lld refused unchecked "
             "while it waited); %lld on record, next attempt checked in %.1f s",
             (long long)rep.failures, rep.failures == 1 ? "" : "s", addr, how,
             (long long)rep.refused, (long long)rep.total, (double)rep.wait_ms / 1000.0);
}

/* Whether x's client must wait before its credentials are checked: then
 * it is answered 429 with Retry-After (counted, perhaps logged). */
static int throttled(struct ui_ctx *x, const char *how)
{
    char addr[64];
    client_addr(x, addr, sizeof addr);
    int64_t wait = ui_throttle_wait(x->u->throttle, addr, clock_mono_ms());
    if (wait <= 0)
        return 0;
    login_failed(x, how, 1);
    char secs[24];
    snprintf(secs, sizeof secs, "%lld", (long long)(wait + 999) / 1000);
    evhttp_add_header(evhttp_request_get_output_headers(x->req), "Retry-After", secs);
    reply_plain(x, 429, "too many failed logins from your address: try again later\n");
    return 1;
}

static void login_passed(struct ui_ctx *x)
{
    char addr[64];
    client_addr(x, addr, sizeof addr);
    ui_throttle_passed(x->u->throttle, addr);
}

/* POST /ui/login: the token, or user and password. */
static void do_login(struct ui_ctx *x)
{
    if (throttled(x, "form"))
        return;
    const char *token = ui_ctx_form(x, "token");
    const char *user = ui_ctx_form(x, "user");
    const char *pass = ui_ctx_form(x, "password");
    char secret[1024] = "";
    if (token && token[0])
        snprintf(secret, sizeof secret, "%s", token);
    else if (user && pass)
        snprintf(secret, sizeof secret, "%s:%s", user, pass);
    char cookie[160];
    int given = secret[0] != '\0';
    int ok = given && ui_auth_login(x->u->auth, secret, clock_mono_ms(), cookie,
                                    sizeof cookie) == 0;
    explicit_bzero(secret, sizeof secret);
    if (ok)
        login_passed(x);
    else if (given)             /* an empty form guesses nothing */
        login_failed(x, "form", 0);
    if (!ok) {
        evhttp_add_header(evhttp_request_get_output_headers(x->req), "WWW-Authenticate",
                          ui_auth_challenge(x->u->auth));
        ui_page_login(x, 401, "Wrong token or password.");
        return;
    }
    evhttp_add_header(evhttp_request_get_output_headers(x->req), "Set-Cookie", cookie);
    ui_ctx_redirect(x, "/ui/");
}

static void do_logout(struct ui_ctx *x)
{
    char cookie[160];
    ui_auth_logout(x->u->auth, x->req, cookie, sizeof cookie);
    evhttp_add_header(evhttp_request_get_output_headers(x->req), "Set-Cookie", cookie);
    ui_ctx_redirect(x, "/ui/login");
}

/* Gate 2: /ui/login and /ui/logout, before authentication. */
static int route_login(struct ui_ctx *x)
{
    const char *s0 = ui_ctx_segment(x, 0);
    if (!s0 || x->nsegs != 1)
        return 0;
    if (strcmp(s0, "login") == 0) {
        if (is_get(x))
            ui_page_login(x, 200, NULL);
        else if (!is_post(x))
            method_not_allowed(x, "GET, HEAD, POST");
        else if (!ui_auth_same_origin(x->req, ui_ctx_env(x)->conf))
            reply_plain(x, 403, "cross-site request refused\n");
        else
            do_login(x);
        return 1;
    }
    if (strcmp(s0, "logout") == 0) {
        if (!is_post(x))
            method_not_allowed(x, "POST");
        else if (!ui_auth_same_origin(x->req, ui_ctx_env(x)->conf))
            reply_plain(x, 403, "cross-site request refused\n");
        else
            do_logout(x);
        return 1;
    }
    return 0;
}

/* The queue of the configuration in force named `name`, or NULL. */
static const char *known_queue(struct ui_ctx *x, const char *name)
{
    const struct ui_env *env = ui_ctx_env(x);
    if (!env->conf || !name)
        return NULL;
    for (size_t i = 0; i < env->conf->nqueues; i++)
        if (strcmp(env->conf->queues[i].name, name) == 0)
            return name;
    return NULL;
}

static int is_queue_action(const char *a)
{
    return strcmp(a, "pause") == 0 || strcmp(a, "resume") == 0;
}

static int is_job_action(const char *a)
{
    return strcmp(a, "requeue") == 0 || strcmp(a, "delete") == 0
           || strcmp(a, "cancel") == 0 || strcmp(a, "run-now") == 0;
}

/* Gate 5: pages and actions under /ui/queues/Q. */
static void route_queue(struct ui_ctx *x)
{
    const char *q = known_queue(x, ui_ctx_segment(x, 1));
    const char *s2 = ui_ctx_segment(x, 2), *s3 = ui_ctx_segment(x, 3);
    const char *s4 = ui_ctx_segment(x, 4);
    if (!q) {
        ui_page_not_found(x, "queue");
    } else if (x->nsegs == 2 && is_get(x)) {
        ui_page_queue(x, q);
    } else if (x->nsegs == 3 && strcmp(s2, "find") == 0 && is_get(x)) {
        ui_page_find(x, q);
    } else if (x->nsegs == 3 && is_queue_action(s2) && is_post(x)) {
        ui_action_queue(x, q, s2);
    } else if (x->nsegs == 4 && strcmp(s2, "dead") == 0 && is_post(x)
               && (strcmp(s3, "requeue-all") == 0 || strcmp(s3, "purge-all") == 0)) {
        ui_action_queue(x, q, s3);
    } else if (x->nsegs == 4 && strcmp(s2, "jobs") == 0 && is_get(x)) {
        ui_page_job(x, q, s3);
    } else if (x->nsegs == 5 && strcmp(s2, "jobs") == 0 && is_job_action(s4)
               && is_post(x)) {
        ui_action_job(x, q, s3, s4);
    } else {
        ui_page_not_found(x, "page");
    }
}

static void route(struct ui_ctx *x)
{
    const char *s0 = ui_ctx_segment(x, 0);
    if (!s0) {
        if (is_get(x))
            ui_page_overview(x);
        else
            ui_page_not_found(x, "page");
    } else if (strcmp(s0, "queues") == 0 && x->nsegs >= 2) {
        route_queue(x);
    } else if (strcmp(s0, "api") == 0 && x->nsegs == 2
               && strcmp(x->segs[1], "history") == 0 && is_get(x)) {
        ui_api_history(x);
    } else {
        ui_page_not_found(x, "page");
    }
}

/* Gate 3: whether the request is authenticated: a session open, or an
 * Authorization header with the right secret, checked only when the
 * address has no failed logins to wait out (else 429, answered here).  A
 * wrong one counts as a failed login. */
static int authenticated(struct ui_ctx *x)
{
    if (ui_auth_session(x->u->auth, x->req, clock_mono_ms()))
        return 1;
    const char *h = evhttp_find_header(evhttp_request_get_input_headers(x->req),
                                       "Authorization");
    const char *how = h && strncasecmp(h, "Basic ", 6) == 0 ? "basic" : "bearer";
    if (!h)
        return 0;
    if (throttled(x, how))
        return -1;
    if (ui_auth_header(x->u->auth, x->req) == UI_AUTH_OK) {
        login_passed(x);
        return 1;
    }
    login_failed(x, how, 0);
    return 0;
}

/* Gates 3 and 4: authentication, methods, origin, read_only. */
static void gate_and_route(struct ui_ctx *x)
{
    int auth = authenticated(x);
    if (auth < 0)
        return;
    if (!auth) {
        evhttp_add_header(evhttp_request_get_output_headers(x->req), "WWW-Authenticate",
                          ui_auth_challenge(x->u->auth));
        if (is_get(x))
            ui_page_login(x, 401, NULL);
        else
            reply_plain(x, 401, "authentication required\n");
        return;
    }
    if (!is_get(x) && !is_post(x)) {
        method_not_allowed(x, "GET, HEAD, POST");
        return;
    }
    if (is_post(x)) {
        if (!ui_auth_same_origin(x->req, ui_ctx_env(x)->conf)) {
            reply_plain(x, 403, "cross-site request refused\n");
            return;
        }
        if (x->u->read_only) {
            ui_ctx_reply(x, 403, NULL, "<!DOCTYPE html><title>403</title>"
                         "<p>read-only dashboard</p>\n", 56);
            return;
        }
    }
    route(x);
}

void ui_handle(struct ui *u, struct evhttp_request *req)
{
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    if (!u->enabled) {
        struct evbuffer *buf = evbuffer_new();
        if (buf)
            evbuffer_add_printf(buf, "not found: the dashboard is off (admin.ui)\n");
        evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                          "text/plain; charset=utf-8");
        evhttp_send_reply(req, 404, "Not Found", buf);
        if (buf)
            evbuffer_free(buf);
        return;
    }
    if (path && strcmp(path, "/ui") == 0) {
        struct evkeyvalq *out = evhttp_request_get_output_headers(req);
        evhttp_add_header(out, "Location", "/ui/");
        ui_ctx_security_headers(out, 0);
        evhttp_send_reply(req, 301, "Moved Permanently", NULL);
        return;
    }
    struct ui_ctx *x = ui_ctx_new(u, req);
    if (!x) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    const char *q = uri ? evhttp_uri_get_query(uri) : NULL;
    if (!path || strncmp(path, "/ui/", 4) != 0 || split_path(x, path) < 0
        || (q && evhttp_parse_query_str(q, &x->query) < 0)) {
        reply_plain(x, 400, "bad request\n");
        return;
    }
    if (is_post(x) && parse_form(x) < 0) {
        reply_plain(x, 400, "bad form\n");
        return;
    }
    const char *s0 = ui_ctx_segment(x, 0);
    if (s0 && strcmp(s0, "assets") == 0) {
        serve_asset(x, ui_ctx_segment(x, 1));
        return;
    }
    if (route_login(x))
        return;
    gate_and_route(x);
}
