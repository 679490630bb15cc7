/*
 * Renewing a long batch's leases: when the jobs not started would start
 * on leases too short for their handlers, what finished is reported and
 * the rest's leases renewed in one round trip, and the batch goes on.
 */
#include "daemon/log.h"
#include "daemon/worker/worker_int.h"

/* The rest of a long batch would start on leases too short for its
 * handlers: report what has finished (so no finished job's lease runs out
 * before its ack) and renew the leases of the jobs not started, in one
 * round trip; the batch goes on when both are settled. */
void worker_start_renewal(struct worker *w)
{
    worker_report_successes(w);
    cmd_free(&w->renew);
    cmd_init(&w->renew);
    proto_renew_cmd(&w->renew, batch_keys(w), w->q->lease_ms, &w->batch.jobs[w->run_i],
                    w->batch.n - w->run_i);
    w->renew_sent = w->renew_done = 0;
    w->state = W_RENEWING;
    log_debug("queue=%s: renewing the leases of %zu jobs not started", w->q->name,
              w->batch.n - w->run_i);
    worker_send_reports(w);
    worker_send_renewal(w);
}

static void on_renew_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    worker_send_renewal(arg);
}

static void on_renew_reply(struct rconn *rc, redisReply *reply, void *arg)
{
    (void)rc;
    struct worker *w = arg;
    w->renew_sent = 0;
    size_t n = w->batch.n - w->run_i;
    bool *held = w->held;       /* room for q->batch >= n (worker_setup) */
    int64_t now_ms;
    if (!reply && !rconn_is_up(w->cmd))
        return;                 /* connection lost: on_cmd_up sends it again */
    if (!reply || proto_renew_reply(reply, n, &now_ms, held) != DQ_OK) {
        /* an error, or the batch's master alone lost (isolated masters,
         * worker_setup): again after a pause, or given up once the
         * batch's leases are over with that master still down */
        if (reply && reply->type != REDIS_REPLY_ERROR)
            log_err("queue=%s: unexpected reply to renew", w->q->name);
        if (worker_abandon_unreachable(w))
            return;
        struct timeval tv = { RETRY_AFTER_ERROR_MS / 1000, 0 };
        event_base_once(w->base, -1, EV_TIMEOUT, on_renew_timer, w, &tv);
        return;
    }
    for (size_t k = 0; k < n; k++)
        if (!held[k]) {
            /* Reaped meanwhile (Redis was out of reach too long): another
             * worker may run it now, so this one must not. */
            slot_entry_set(w->slot, w->table, w->run_i + k, SE_DONE);
            log_warn("queue=%s: job %s not started: its lease was lost before its turn",
                     w->q->name, w->batch.jobs[w->run_i + k].id);
        }
    w->lease_end_us = w->renew_sent_us + w->q->lease_ms * 1000;
    w->renew_done = 1;
    worker_resume_after_renewal(w);
}

void worker_send_renewal(struct worker *w)
{
    if (w->state != W_RENEWING || w->renew_sent || w->renew_done)
        return;
    if (w->renew.oom) {
        worker_give_up(w, "a renewal");
        return;
    }
    w->renew_sent_us = slots_now_us();
    if (rconn_send(w->cmd, &w->renew, DQ_SCRIPT_RENEW, on_renew_reply, w) == 0) {
        w->renew_sent = 1;
    } else if (rconn_is_up(w->cmd)) {
        /* Out of memory queueing it: no reply will come to try again from. */
        struct timeval tv = { RETRY_AFTER_ERROR_MS / 1000, 0 };
        event_base_once(w->base, -1, EV_TIMEOUT, on_renew_timer, w, &tv);
    }
}

/* Both halves of a renewal are settled: run the rest of the batch. */
void worker_resume_after_renewal(struct worker *w)
{
    if (w->state != W_RENEWING || !w->renew_done || w->awaiting > 0)
        return;
    for (size_t i = 0; i < w->nreports; i++)
        if (!w->reports[i].done)
            return;
    w->state = W_RUNNING;
    event_active(w->run_ev, EV_TIMEOUT, 0);
}
