/*
 * ui: the web dashboard under /ui/, served by the admin process on the admin
 * listener (http_admin.h) beside /metrics and /healthz.
 *
 * ui.c is the front door: every request under /ui/ passes its gates in
 * this order, and only then reaches a page (ui_pages.h):
 *   0. (before, in http_admin.c, on every path) the Host names this
 *      server, else 421; the dashboard's share of connections, else 503;
 *   1. /ui/assets/...: the built-in CSS and JS (ui_assets.h), no login;
 *   2. /ui/login (GET form, POST token) and POST /ui/logout;
 *   3. authentication (ui_auth.h): a session cookie from /ui/login, or
 *      "Authorization: Bearer TOKEN" / "Basic ..."; else 401 with the login
 *      page; a client address with failed logins to wait out gets 429
 *      before its secret is checked (ui_throttle.h);
 *   4. methods: GET/HEAD for pages, POST for actions (else 405); a POST
 *      must come from the dashboard itself (Sec-Fetch-Site, when sent,
 *      same-origin; Origin, when sent, one of this server's names,
 *      host_allow.h), else 403; with read_only every POST but logout is
 *      403;
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
#include "daemon/admin/ui_env.h"

struct ui;

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

#endif
