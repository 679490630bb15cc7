/*
 * ui_ctx: one dashboard request from the router (ui.c) to its answer
 * (ui.h's ui_ctx_* for the pages), and the dashboard state it reads.  A
 * module of its own so that the pages depend on it, and the router on
 * the pages, without a loop back to the router.
 */
#ifndef DQ_UI_CTX_H
#define DQ_UI_CTX_H

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stddef.h>

#include "daemon/admin/ui_env.h"

#define UI_SEGMENTS_MAX 8

struct ui_auth;

struct ui {
    struct ui_host host;
    struct ui_auth *auth;
    struct ui_joblog *joblog;   /* what its pages did to jobs */
    struct ui_throttle *throttle;   /* failed logins per address */
    int enabled;                /* admin.ui */
    int read_only;
    struct ui_ctx *pending;     /* contexts not yet answered */
};

struct ui_ctx {
    struct ui *u;
    struct evhttp_request *req;     /* NULL: freed with its connection */
    struct evhttp_connection *evcon;
    int detached;                   /* the connection closed; req is ours */
    struct ui_env env;
    char *segs[UI_SEGMENTS_MAX];
    size_t nsegs;
    struct evkeyvalq query;
    struct evkeyvalq form;
    struct ui_ctx *next;
};

/* A context for `req`, on u's pending list; NULL when out of memory. */
struct ui_ctx *ui_ctx_new(struct ui *u, struct evhttp_request *req);

/* Off the pending list, and freed (not its request). */
void ui_ctx_free(struct ui_ctx *x);

/* The headers every /ui/ answer carries (`cacheable`: an asset). */
void ui_ctx_security_headers(struct evkeyvalq *out, int cacheable);

/* evhttp_send_reply, then free x (the caller checked it can answer). */
void ui_ctx_send(struct ui_ctx *x, int code, const char *reason, struct evbuffer *body);

#endif
