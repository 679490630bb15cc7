/*
 * ui_auth: who may use the dashboard.  The secrets come from files named
 * in the configuration (admin.token_file, admin.basic_auth_file), never
 * from the configuration itself; a request proves it knows one with
 * "Authorization: Bearer TOKEN", "Authorization: Basic base64(user:pass)",
 * or the cookie a login with the token set (a random session id, kept
 * here, HttpOnly, SameSite=Strict, Path=/ui/).  Every comparison of a
 * secret takes the same time whatever the input.
 */
#ifndef DQ_UI_AUTH_H
#define DQ_UI_AUTH_H

#include <event2/http.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/dconfig.h"

#define UI_SESSIONS_MAX 64          /* the oldest goes first */
#define UI_SESSION_IDLE_MS (12LL * 3600 * 1000)
/* A session also ends this long after its login, used or not
 * (admin.session_lifetime; this is its default). */
#define UI_SESSION_LIFETIME_MS (7LL * 24 * 3600 * 1000)

struct ui_auth;

/*
 * Where the sessions are kept: memory shared across fork, made by the
 * supervisor before it forks any admin process, so that the sessions
 * outlive a restart of the admin process and a reload that keeps the
 * credentials (a salted fingerprint of those the sessions were made with
 * is kept beside them; no secret).  NULL with errno set.
 */
struct ui_auth_store;
struct ui_auth_store *ui_auth_store_new(void);
void ui_auth_store_free(struct ui_auth_store *st);

/* The dashboard's authentication, its sessions in `store` (NULL: a store
 * of its own, freed with it).  NULL when out of memory. */
struct ui_auth *ui_auth_new(struct ui_auth_store *store);
void ui_auth_free(struct ui_auth *a);

/* Take dc's credentials and session lifetime; every session ends when
 * the credentials are not those the store's sessions were made with. */
void ui_auth_set_conf(struct ui_auth *a, const struct daemon_conf *dc);

/* Whether `req` is authenticated (bearer, basic or session cookie);
 * `now_ms` monotonic, for the session's idle and absolute limits. */
int ui_auth_check(struct ui_auth *a, struct evhttp_request *req, int64_t now_ms);

/* Whether `req` carries a session cookie of a session still open (its
 * use counts: the idle limit starts again). */
int ui_auth_session(struct ui_auth *a, struct evhttp_request *req, int64_t now_ms);

/* What req's Authorization header proves: UI_AUTH_NONE (no such header),
 * UI_AUTH_OK, or UI_AUTH_WRONG (a wrong or malformed secret). */
enum ui_auth_result { UI_AUTH_NONE, UI_AUTH_OK, UI_AUTH_WRONG };
enum ui_auth_result ui_auth_header(const struct ui_auth *a, struct evhttp_request *req);

/* A login with `token` (or "user:password" for basic credentials):
 * on success a new session, and its Set-Cookie value in cookie; 0 on
 * success, -1 when refused. */
int ui_auth_login(struct ui_auth *a, const char *secret, int64_t now_ms,
                  char *cookie, size_t cookielen);

/* End the request's session, if it has one; the Set-Cookie value that
 * clears the cookie in `cookie`. */
void ui_auth_logout(struct ui_auth *a, struct evhttp_request *req, char *cookie,
                    size_t cookielen);

/* The WWW-Authenticate value a 401 carries. */
const char *ui_auth_challenge(const struct ui_auth *a);

/* Whether a POST comes from the dashboard's own pages: Sec-Fetch-Site,
 * when sent, is "same-origin"; and Origin, when sent, names this server
 * (host_allow.h: the listen address, the connection's, localhost or a
 * name of admin.hosts in dc), never compared with the request's own Host;
 * one of the two must be there ("Origin: null", which browsers send with
 * the pages' no-referrer policy, counts as absent). */
int ui_auth_same_origin(struct evhttp_request *req, const struct daemon_conf *dc);

/* Constant-time equality of two byte strings (the time depends on the
 * lengths only). */
int ui_auth_equal(const void *a, size_t alen, const void *b, size_t blen);

#endif
