/*
 * ui_env: what a dashboard page sees (ui.h is the router that hands it
 * requests): the supervisor's state for one request, the host that fills
 * it, and the calls a page makes on its request (struct ui_ctx, ui_ctx.c).
 * Apart from ui.h so that the request context and the pages need not
 * include the router's header, which includes theirs.
 */
#ifndef DQ_UI_ENV_H
#define DQ_UI_ENV_H

#include <stddef.h>
#include <sys/types.h>

#include "daemon/admin/qstats.h"

struct daemon_conf;
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

struct ui_ctx;

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
