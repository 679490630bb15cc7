/*
 * ui: the web dashboard under /ui/, served by the admin process on the admin
 * listener (http_admin.h) beside /metrics and /healthz.
 *
 * ui.c is the front door: every request under /ui/ passes its gates in
 * this order, and only then reaches a page (ui_pages.h):
 *   1. /ui/assets/...: the built-in CSS and JS (ui_assets.h), no login;
 *   2. /ui/login (GET form, POST token) and POST /ui/logout;
 *   3. authentication (ui_auth.h): a session cookie from /ui/login, or
 *      "Authorization: Bearer TOKEN" / "Basic ..."; else 401 with the login
 *      page;
 *   4. methods: GET/HEAD for pages, POST for actions (else 405); a POST
 *      must come from the dashboard itself (Sec-Fetch-Site: same-origin,
 *      or where a browser sends none, Origin equal to the Host), else 403;
 *      with read_only every POST but logout is 403;
 *   5. the route table: pages and actions (ui_pages.h), /ui/api/history.
 * Every answer carries the security headers (Content-Security-Policy
 * without inline script, X-Frame-Options DENY, nosniff, no-store, no
 * referrer).
 *
 * A page that must ask Redis (ui_data.h) answers later: it keeps its
 * struct ui_ctx across the round trip and calls ui_ctx_reply (or
 * ui_ctx_redirect) exactly once.  If the client went away meanwhile the
 * reply is dropped and the context freed: a page never checks.
 */
#ifndef DQ_UI_H
#define DQ_UI_H

#include <event2/http.h>
#include <stddef.h>
#include <sys/types.h>

#include "daemon/dconfig.h"
#include "daemon/admin/qstats.h"

struct ui_auth_store;
struct ui_data;
struct ui_history;
struct ui_joblog;

/* What the dashboard reads of a queue's workers on this host. */
struct ui_queue_live {
    int workers_alive;          /* with a process, connected and claiming */
    int workers_wanted;         /* the configuration's count */
};

/*
 * The daemon's state as one request sees it, filled afresh by the
 * host's fill() at each ui_ctx_env call: never keep these pointers across
 * a Redis round trip (a reload may free them); keep the queue's name.
 */
struct ui_env {
    const struct daemon_conf *conf;     /* in force */
    struct qstats_view stats;           /* cached counts, per queue of conf */
    const struct ui_queue_live *live;   /* per queue of conf */
    struct ui_data *data;               /* Redis queries; NULL: none yet */
    const struct ui_history *history;   /* per-second samples (ui_history.h) */
    int read_only;                      /* admin.read_only */
    struct ui_joblog *joblog;           /* this dashboard's actions on jobs
                                           (ui_joblog.h); set by ui.c, not fill() */
    /* The pid of the worker of this host holding job `id` of `queue`
     * (from the workers' claim tables), or 0 when none here does. */
    pid_t (*holder)(void *arg, const char *queue, const char *id);
    void *holder_arg;
};

/* What the admin process gives the dashboard (admin_view.c). */
struct ui_host {
    void (*fill)(void *arg, struct ui_env *env);
    void *arg;
    struct ui_auth_store *auth_store;   /* the sessions' (ui_auth.h); NULL:
                                           the dashboard's own */
};

struct ui;
struct ui_ctx;

/* A dashboard for `host` (copied).  NULL when out of memory. */
struct ui *ui_new(const struct ui_host *host);
/* Free the dashboard; after the admin server that hands it requests
 * (contexts still pending then answer nothing). */
void ui_free(struct ui *u);

/* Take the configuration in force (after start and each reload): its
 * credentials and read_only.  Sessions end when the credentials change. */
void ui_set_conf(struct ui *u, const struct daemon_conf *dc);

/* Answer `req` (any path under /ui/; the admin server calls this). */
void ui_handle(struct ui *u, struct evhttp_request *req);

/* `evcon` closes (the admin server's close callback): the requests on it
 * not yet answered are dropped when their page answers. */
void ui_connection_closed(struct ui *u, struct evhttp_connection *evcon);

/* ---- for the pages (ui_pages.c, ui_api.c) ---- */

/* The daemon's state now (see struct ui_env). */
const struct ui_env *ui_ctx_env(struct ui_ctx *x);

/* A query parameter (?name=value) or POST form field (urlencoded body),
 * decoded; NULL when absent.  Valid until the reply. */
const char *ui_ctx_query(struct ui_ctx *x, const char *name);
const char *ui_ctx_form(struct ui_ctx *x, const char *name);

/* The request's path, percent-decoded per segment by the router:
 * segment i of "/ui/queues/orders/jobs/42" is "queues", "orders", "jobs",
 * "42" (i from 0); NULL past the end. */
const char *ui_ctx_segment(struct ui_ctx *x, size_t i);

/* Send the answer and free the context (also when the client is gone).
 * `type` NULL: "text/html; charset=utf-8". */
void ui_ctx_reply(struct ui_ctx *x, int code, const char *type, const char *body,
                  size_t len);

/* 303 See Other to `location` (a path under /ui/), and free the context. */
void ui_ctx_redirect(struct ui_ctx *x, const char *location);

#endif
