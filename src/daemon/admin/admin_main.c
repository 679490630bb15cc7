/*
 * The admin process's life (admin_main.h): its own event loop, the admin
 * server on the inherited socket, its Redis connections, and its end: on
 * SIGTERM (a stop, a reload, or the supervisor's death through
 * PR_SET_PDEATHSIG) it stops accepting at once and exits once the
 * requests in hand had ADMIN_STOP_GRACE_MS to be answered.
 */
#include "daemon/admin/admin_main.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "daemon/admin/admin_int.h"
#include "daemon/exitcodes.h"
#include "daemon/log.h"
#include "daemon/signals.h"

#define WATCH_MS 250            /* how often the supervisor's life is checked */
#define HISTORY_MS 1000
#define OPEN_POLL_MS 10
#define OPEN_WAIT_MS 500        /* longest wait for the first statistics */
#define STOP_POLL_MS 20
#define FLUSH_MS 200           /* a stopping admin writes its last answers */

struct admin_events {
    struct event *term, *intr, *watch, *history, *end, *open, *drained;
};

/* Stop accepting (the next admin process, or nobody at a stop, takes the
 * socket's new connections), and end once the open connections are gone
 * or after ADMIN_STOP_GRACE_MS. */
static void stop(struct admin *ad, struct admin_events *ev, const char *why)
{
    if (ad->stopping)
        return;
    ad->stopping = 1;
    log_debug("%s: no longer accepting; ending in %d ms", why, ADMIN_STOP_GRACE_MS);
    if (ad->open)
        http_admin_unlisten(ad->http);  /* closes our copy of the socket */
    else if (close(ad->a->listen_fd) < 0)
        log_warn("close of the admin socket: %s", strerror(errno));
    const struct timeval grace = { ADMIN_STOP_GRACE_MS / 1000,
                                   (ADMIN_STOP_GRACE_MS % 1000) * 1000 },
                         poll = { 0, STOP_POLL_MS * 1000 };
    if (event_add(ev->end, &grace) < 0 || event_add(ev->drained, &poll) < 0)
        event_base_loopbreak(ad->base);
}

struct admin_cb {
    struct admin *ad;
    struct admin_events *ev;
};

static void on_stop_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    struct admin_cb *cb = arg;
    stop(cb->ad, cb->ev, strsignal((int)sig));
}

/* PR_SET_PDEATHSIG covers the supervisor's death, but only from the
 * moment it was set: a death before that is seen here. */
static void on_watch(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct admin_cb *cb = arg;
    if (getppid() != cb->ad->a->parent)
        stop(cb->ad, cb->ev, "the supervisor is gone");
}

static void on_history(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    admin_view_sample_history(arg);
}

/*
 * Accept on the admin socket once the first statistics are in, or after
 * OPEN_WAIT_MS when Redis does not answer: a restarted admin process must
 * not tell a liveness probe "redis unreachable" only because it has not
 * asked yet.  Connections made meanwhile wait in the socket's backlog.
 */
static void on_open(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct admin_cb *cb = arg;
    struct admin *ad = cb->ad;
    struct qstats_view v;
    qstats_read(ad->stats, &v);
    if (ad->stopping || ad->open || (!v.fresh && slots_now_ms() < ad->open_by_ms))
        return;
    if (http_admin_adopt(ad->http, ad->a->listen_fd) < 0) {
        log_err("cannot accept on the admin socket: out of memory");
        ad->failed = 1;
        event_base_loopbreak(ad->base);
        return;
    }
    ad->open = 1;
    event_del(cb->ev->open);
}

/* Stopping: end as soon as no connection is left open. */
static void on_drained(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct admin *ad = arg;
    if (http_admin_open_connections(ad->http) == 0)
        event_base_loopbreak(ad->base);
}

/*
 * The grace is over.  First the dashboard's Redis calls still in flight
 * end (freeing its connection answers each: an action sent and not
 * answered says "sent; the outcome is unknown", never "failed", for it
 * may have run), then the loop gets FLUSH_MS to write those answers.
 */
static void on_end(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct admin_cb *cb = arg;
    struct admin *ad = cb->ad;
    if (!ad->data) {
        event_base_loopbreak(ad->base);
        return;
    }
    ui_data_free(ad->data);
    ad->data = NULL;
    const struct timeval flush = { 0, FLUSH_MS * 1000 };
    if (event_add(cb->ev->end, &flush) < 0)
        event_base_loopbreak(ad->base);
}

/* The signal events and the timers on ad's loop; -1 after logging. */
static int add_events(struct admin *ad, struct admin_events *ev, struct admin_cb *cb)
{
    ev->term = evsignal_new(ad->base, SIGTERM, on_stop_signal, cb);
    ev->intr = evsignal_new(ad->base, SIGINT, on_stop_signal, cb);
    ev->watch = event_new(ad->base, -1, EV_PERSIST, on_watch, cb);
    ev->history = event_new(ad->base, -1, EV_PERSIST, on_history, ad);
    ev->end = evtimer_new(ad->base, on_end, cb);
    ev->open = event_new(ad->base, -1, EV_PERSIST, on_open, cb);
    ev->drained = event_new(ad->base, -1, EV_PERSIST, on_drained, ad);
    const struct timeval watch = { 0, WATCH_MS * 1000 }, second = { HISTORY_MS / 1000, 0 },
                         poll = { 0, OPEN_POLL_MS * 1000 };
    ad->open_by_ms = slots_now_ms() + OPEN_WAIT_MS;
    if (!ev->term || !ev->intr || !ev->watch || !ev->history || !ev->end || !ev->open
        || !ev->drained
        || event_add(ev->term, NULL) < 0 || event_add(ev->intr, NULL) < 0
        || event_add(ev->watch, &watch) < 0 || event_add(ev->history, &second) < 0
        || event_add(ev->open, &poll) < 0) {
        log_err("cannot set up the event loop (signals and timers)");
        return -1;
    }
    return 0;
}

static void free_events(struct admin_events *ev)
{
    struct event *all[] = { ev->term, ev->intr, ev->watch, ev->history, ev->end, ev->open,
                            ev->drained };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i])
            event_free(all[i]);
}

/* The loop, the server (not yet accepting: on_open), the statistics and
 * the dashboard's connection; -1 after logging. */
static int set_up(struct admin *ad)
{
    const struct daemon_conf *dc = ad->a->dc;
    if (!(ad->base = event_base_new())) {
        log_err("cannot set up: event_base_new failed");
        return -1;
    }
    ad->http = http_admin_new(ad->base, admin_routes, 2, ad);
    ad->stats = qstats_new(ad->base, dc);
    if (dc->admin_ui)
        ad->data = ui_data_new(ad->base, dc);
    if (!ad->http || http_admin_set_conf(ad->http, dc) < 0 || !ad->stats
        || (dc->admin_ui && !ad->data) || admin_view_ui_setup(ad) < 0) {
        log_err("cannot set up: out of memory");
        return -1;
    }
    return 0;
}

static void tear_down(struct admin *ad)
{
    http_admin_free(ad->http);  /* first: it hands requests to the dashboard */
    ui_free(ad->ui);
    ui_data_free(ad->data);
    qstats_free(ad->stats);
    metrics_snap_free(ad->snap);
    if (ad->base)
        event_base_free(ad->base);
}

int admin_main(const struct admin_args *a)
{
    struct admin ad;
    memset(&ad, 0, sizeof ad);
    ad.a = a;
    struct admin_events ev = { 0 };
    struct admin_cb cb = { &ad, &ev };
    int rc = DAEMON_EXIT_OSERR;
    /* Its own name in ps and top, and for whoever looks for it in /proc. */
    if (prctl(PR_SET_NAME, "delayqd-admin", 0, 0, 0) < 0)
        log_warn("prctl(PR_SET_NAME): %s", strerror(errno));
    /* It only reads what the supervisor and the workers write. */
    if (slots_seal(a->slots, a->nslots) < 0 || metrics_seal(a->metrics) < 0)
        log_warn("mprotect (the shared memory read-only): %s", strerror(errno));
    if (set_up(&ad) == 0 && add_events(&ad, &ev, &cb) == 0) {
        /* A SIGTERM before its signal events were added only set the flag
         * of signals_child_setup's handler. */
        if (signals_stop_requested())
            stop(&ad, &ev, "stop requested");
        admin_view_sample_history(&ad);
        if (getppid() == a->parent)
            event_base_dispatch(ad.base);
        rc = ad.failed ? DAEMON_EXIT_OSERR : DAEMON_EXIT_OK;
    }
    free_events(&ev);
    tear_down(&ad);
    return rc;
}
