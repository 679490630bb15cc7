/*
 * The worker process: its set-up and teardown, what its connections'
 * coming up means, and stopping (SIGTERM, or its supervisor gone).  The
 * rest of it is in worker_*.c (worker_int.h says which part is where).
 */
#include "daemon/worker/worker.h"

#include <stdlib.h>

#include "daemon/exitcodes.h"
#include "daemon/log.h"
#include "daemon/signals.h"
#include "daemon/worker/worker_int.h"

#define STOP_POLL_MS 100
/* An orphan (its supervisor died) leaves its loop when this little is left
 * of its bound (signals_orphan_ms_left): about two ticks, for the exit. */
#define ORPHAN_MARGIN_MS 250
/* Reports of a batch of `batch` jobs: one ack per renewal and at the end,
 * a fail per job, one release. */
#define MAX_REPORTS(batch) (2 * (size_t)(batch) + 4)

/* The connection is up, or (isolated masters) another master came back:
 * send what waits, and ask every partition again at the next sweep. */
static void on_cmd_up(struct rconn *rc, void *arg)
{
    (void)rc;
    struct worker *w = arg;
    w->slot->ready = 1;
    qparts_forget(&w->parts);
    if (w->state == W_REPORTING)
        worker_send_reports(w);
    else if (w->state == W_RENEWING) {
        worker_send_reports(w);
        worker_send_renewal(w);
    } else if (w->state == W_SLEEPING || w->state == W_IDLE) {
        evtimer_del(w->wake_timer);
        w->state = W_IDLE;
        worker_drive(w);
    }
}

/* The subscription is (re)made.  Wake messages published while it was down
 * are lost, so look again: a sleeping worker claims now (learning the head
 * it should sleep towards), a busy one after its batch. */
static void on_sub_up(struct rconn *rc, void *arg)
{
    (void)rc;
    struct worker *w = arg;
    qparts_forget(&w->parts);
    if (w->state == W_SLEEPING) {
        evtimer_del(w->wake_timer);
        w->state = W_IDLE;
        worker_drive(w);
    } else {
        w->woken_due = 0;
        w->pause_recheck = 1;
    }
}

/* The supervisor is gone: say so once; and when its bound is about to end
 * the process (signals.h) and Redis still has not taken the reports, leave
 * the loop so that the worker exits by itself.  What was not reported is
 * left to the leases: the jobs run again once they expire. */
static void check_orphaned(struct worker *w)
{
    if (!signals_parent_gone())
        return;
    if (!w->orphaned) {
        w->orphaned = 1;
        log_warn("the supervisor is gone: finishing the job in hand, reporting, and "
                 "exiting within %lld ms", (long long)signals_orphan_ms_left());
    }
    int64_t left = signals_orphan_ms_left();
    if (left < 0 || left > ORPHAN_MARGIN_MS)
        return;
    size_t unconfirmed = 0;
    for (size_t i = 0; i < w->nreports; i++)
        unconfirmed += !w->reports[i].done;
    log_warn("queue=%s: exiting with %zu report%s not confirmed by Redis; the leases give "
             "their jobs back", w->q->name, unconfirmed, unconfirmed == 1 ? "" : "s");
    event_base_loopbreak(w->base);
}

/* Signals only set a flag (signals.c); this timer acts on it, since a stop
 * must also be seen while the loop sleeps. */
static void on_stop_poll(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct worker *w = arg;
    check_orphaned(w);
    if (!signals_stop_requested() || w->stopping)
        return;
    w->stopping = 1;
    log_info("stopping");
    if (w->state == W_SLEEPING || w->state == W_IDLE)
        event_base_loopbreak(w->base);
}

/* Every partition's wake channel: a job due sooner in any partition may
 * be this worker's to steal. */
static int subscribe_wake(struct worker *w)
{
    const char **ch = calloc(w->parts.n, sizeof *ch);
    if (!ch)
        return -1;
    for (unsigned i = 0; i < w->parts.n; i++)
        ch[i] = qparts_keys(&w->parts, i)->wake;
    int rc = rconn_subscribe_many(w->sub, ch, w->parts.n, worker_on_wake_message, w);
    free(ch);
    return rc;
}

static int worker_setup(struct worker *w)
{
    char err[800];
    if (handlers_open(&w->handlers, w->dc, err, sizeof err) < 0) {
        log_err("%s", err);
        return DAEMON_EXIT_CONFIG;
    }
    /* Precise timers (timerfd) rather than epoll's whole milliseconds: a
     * worker's wake-up is what sets a job's lateness. */
    struct event_config *cfg = event_config_new();
    if (cfg)
        event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
    w->base = cfg ? event_base_new_with_config(cfg) : NULL;
    if (cfg)
        event_config_free(cfg);
    if (!w->base)
        return DAEMON_EXIT_SOFTWARE;
    if (qparts_init(&w->parts, &w->dc->redis, w->q->name, (unsigned)w->q->partitions,
                    w->rank, (unsigned)w->q->workers) < 0)
        return DAEMON_EXIT_SOFTWARE;
    struct rconn_events cmd_ev = { on_cmd_up, NULL, w, on_cmd_up };
    w->cmd = rconn_from_conf(w->base, &w->dc->redis, "cmd", &cmd_ev);
    /* Over a cluster, a master down stalls only its own partitions: the
     * claims skip them (worker_claim.c), and a batch's reports to it are
     * sent again until it answers. */
    if (w->cmd)
        rconn_isolate_masters(w->cmd);
    struct rconn_events sub_ev = { on_sub_up, NULL, w, NULL };
    w->sub = rconn_from_conf(w->base, &w->dc->redis, "sub", &sub_ev);
    w->wake_timer = evtimer_new(w->base, worker_on_wake_timer, w);
    w->run_ev = event_new(w->base, -1, 0, worker_on_run, w);
    w->stop_poll = event_new(w->base, -1, EV_PERSIST, on_stop_poll, w);
    /* Sized by the queue's batch, the most a claim returns (read_claim),
     * once: running a batch allocates none of them. */
    w->reports = calloc(MAX_REPORTS(w->q->batch), sizeof *w->reports);
    w->ok = calloc((size_t)w->q->batch, sizeof *w->ok);
    w->held = calloc((size_t)w->q->batch, sizeof *w->held);
    cmd_init(&w->renew);
    if (!w->cmd || !w->sub || !w->wake_timer || !w->run_ev || !w->stop_poll || !w->reports
        || !w->ok || !w->held)
        return DAEMON_EXIT_SOFTWARE;
    rconn_count_reconnects(w->cmd, &w->slot->redis_reconnects);
    rconn_count_reconnects(w->sub, &w->slot->redis_reconnects);
    if (subscribe_wake(w) < 0)
        return DAEMON_EXIT_SOFTWARE;
    struct timeval poll = { 0, STOP_POLL_MS * 1000 };
    if (evtimer_add(w->stop_poll, &poll) < 0) {
        log_err("cannot arm the stop poll");
        return DAEMON_EXIT_SOFTWARE;
    }
    return DAEMON_EXIT_OK;
}

static void worker_teardown(struct worker *w)
{
    rconn_free(w->cmd);
    rconn_free(w->sub);
    if (w->wake_timer)
        event_free(w->wake_timer);
    if (w->run_ev)
        event_free(w->run_ev);
    if (w->stop_poll)
        event_free(w->stop_poll);
    if (w->base)
        event_base_free(w->base);
    worker_free_reports(w);
    free(w->reports);
    free(w->ok);
    free(w->held);
    cmd_free(&w->renew);
    dq_claim_result_free(&w->batch);
    dq_claim_result_free(&w->next);
    handlers_close(&w->handlers);
    qparts_free(&w->parts);
}

int worker_main(const struct daemon_conf *dc, const struct queue_conf *q, unsigned rank,
                struct worker_slot *slot, const struct cancel_request *cancel,
                const char *owner)
{
    handlers_watch_cancels(cancel);
    struct worker w = { .dc = dc, .q = q, .rank = rank, .slot = slot, .owner = owner,
                        .next_due_server = -1, .woken_due = -1 };
    int rc = worker_setup(&w);
    if (rc == DAEMON_EXIT_OK) {
        log_debug("claiming from queue %s", q->name);
        rconn_start(w.sub);
        rconn_start(w.cmd);
        event_base_dispatch(w.base);
        rc = w.exit_code;
    }
    worker_teardown(&w);
    return rc;
}
