#include "daemon/reaper/reaper.h"

#include <stdlib.h>
#include <string.h>

#include "daemon/dconfig_parts.h"
#include "daemon/exitcodes.h"
#include "daemon/log.h"
#include "redis/rconn.h"
#include "daemon/reaper/reaper_cancel.h"
#include "daemon/reaper/reaper_fsck.h"
#include "daemon/reaper/reaper_sched.h"
#include "daemon/signals.h"
#include "lib/proto.h"

#define STOP_POLL_MS 100

struct reaper;

/* One partition of a queue (the queue itself when it has one). */
struct reaped_queue {
    struct reaper *r;
    const struct queue_conf *q;
    struct queue_keys keys;     /* its partition's */
    struct event *timer;
    int busy;           /* a reap is in flight */
};

struct reaper {
    const struct daemon_conf *dc;
    struct event_base *base;
    struct rconn *conn;
    struct event *stop_poll;
    struct reaped_queue *queues;    /* every partition of every queue */
    size_t nqueues;
    struct reaper_fsck *fsck;   /* the periodic fsck passes */
    struct reaper_sched *sched; /* the recurring schedules */
    struct reaper_cancel *cancels; /* jobs cancelled while they run */
};

static void schedule(struct reaped_queue *rq, int64_t ms)
{
    int64_t cap = rq->r->dc->reaper_interval_ms;
    if (ms < 0 || ms > cap)
        ms = cap;
    struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000) };
    if (evtimer_add(rq->timer, &tv) < 0)
        log_err("cannot arm the reap timer of a partition: it is reaped again on the "
                "next reconnect");
}

static void on_reap(struct rconn *rc, redisReply *reply, void *arg)
{
    (void)rc;
    struct reaped_queue *rq = arg;
    rq->busy = 0;
    dq_reap_result res;
    if (!reply || proto_reap_reply(reply, &res) != DQ_OK) {
        schedule(rq, -1);
        return;
    }
    if (res.retried || res.dead)
        log_warn("queue=%s: %zu expired lease%s: %zu back in the queue, %zu dead "
                 "(error \"lease expired\")", rq->q->name, res.retried + res.dead,
                 res.retried + res.dead == 1 ? "" : "s", res.retried, res.dead);
    if (res.expired)
        log_info("queue=%s: %zu job%s reached %s expiry unstarted", rq->q->name,
                 res.expired, res.expired == 1 ? "" : "s", res.expired == 1 ? "its" : "their");
    /* Nothing processing: a job claimed from now on holds a lease of the
     * queue's length, so no lease can expire sooner than that. */
    schedule(rq, res.next_in_ms >= 0 ? res.next_in_ms : rq->q->lease_ms);
}

/* Attempt limits go with the reap, since the script cannot ask the
 * configuration per job: the limit of every type with a handler entry of
 * its own, and (as the default) that of every other type, all by the one
 * rule (dconfig_max_attempts), so the reaper and the workers agree. */
static void push_type_limits(struct cmd *cmd, const struct daemon_conf *dc,
                             const struct queue_conf *q)
{
    for (size_t i = 0; i < dc->nhandlers; i++)
        if (strcmp(dc->handlers[i].type, DCONFIG_FALLBACK_TYPE) != 0) {
            cmd_push_str(cmd, dc->handlers[i].type);
            cmd_push_i64(cmd, dconfig_max_attempts(dc, q, dc->handlers[i].type));
        }
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct reaped_queue *rq = arg;
    const struct daemon_conf *dc = rq->r->dc;
    if (rq->busy)
        return;
    dq_retry_policy policy = dconfig_retry_for(dc, rq->q, NULL);
    struct cmd cmd;
    cmd_init(&cmd);
    proto_reap_cmd(&cmd, &rq->keys, dc->reaper_batch, &policy, (uint32_t)random());
    push_type_limits(&cmd, dc, rq->q);
    if (rconn_send(rq->r->conn, &cmd, DQ_SCRIPT_REAP, on_reap, rq) == 0)
        rq->busy = 1;
    else
        schedule(rq, -1);       /* down: on_up reaps at once */
    cmd_free(&cmd);
}

static void on_up(struct rconn *rc, void *arg)
{
    (void)rc;
    struct reaper *r = arg;
    for (size_t i = 0; i < r->nqueues; i++) {
        evtimer_del(r->queues[i].timer);
        r->queues[i].busy = 0;
        schedule(&r->queues[i], 0);
    }
    reaper_fsck_up(r->fsck);
    reaper_sched_up(r->sched);
    reaper_cancel_up(r->cancels);
}

/* Over a cluster, a master that was down is up again (the connection
 * stayed up for the others: rconn_isolate_masters): reap now what is not
 * in flight, rather than at the next interval. */
static void on_master_up(struct rconn *rc, void *arg)
{
    (void)rc;
    struct reaper *r = arg;
    for (size_t i = 0; i < r->nqueues; i++)
        if (!r->queues[i].busy)
            schedule(&r->queues[i], 0);
}

static void on_stop_poll(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct reaper *r = arg;
    if (signals_parent_gone())
        log_warn("the supervisor is gone: stopping");
    if (signals_stop_requested())
        event_base_loopbreak(r->base);
}

/* The entries of r->queues: each partition of each queue, with its keys. */
static int list_partitions(struct reaper *r)
{
    size_t n = dconfig_parts_count(r->dc);
    if (!(r->queues = calloc(n ? n : 1, sizeof *r->queues)))
        return -1;
    struct dconfig_part it;
    for (dconfig_parts_begin(&it, r->dc); dconfig_parts_next(&it);) {
        struct reaped_queue *rq = &r->queues[r->nqueues++];
        rq->r = r;
        rq->q = it.q;
        rq->keys = it.keys;
        if (!(rq->timer = evtimer_new(r->base, on_timer, rq)))
            return -1;
    }
    return 0;
}

int reaper_main(const struct reaper_args *a)
{
    const struct daemon_conf *dc = a->dc;
    struct worker_slot *slot = a->slot;
    struct reaper r = { .dc = dc };
    int rc = DAEMON_EXIT_SOFTWARE;
    r.base = event_base_new();
    if (!r.base || list_partitions(&r) < 0)
        goto done;
    struct rconn_events ev = { on_up, NULL, &r, on_master_up };
    r.conn = rconn_from_conf(r.base, &dc->redis, "reap", &ev);
    /* A master down stalls only its partitions' reaps, fsck steps and
     * schedules: each of them tries again on its timer after a NULL. */
    if (r.conn)
        rconn_isolate_masters(r.conn);
    r.stop_poll = event_new(r.base, -1, EV_PERSIST, on_stop_poll, &r);
    if (!r.conn || !r.stop_poll)
        goto done;
    if (!(r.fsck = reaper_fsck_new(r.base, r.conn, dc, &slot->fsck)))
        goto done;
    if (!(r.sched = reaper_sched_new(r.base, r.conn, dc)))
        goto done;
    if (!(r.cancels = reaper_cancel_new(r.base, a, r.conn)))
        goto done;
    rconn_count_reconnects(r.conn, &slot->redis_reconnects);
    struct timeval poll = { 0, STOP_POLL_MS * 1000 };
    if (evtimer_add(r.stop_poll, &poll) < 0) {
        log_err("cannot arm the stop poll");
        goto done;
    }
    rconn_start(r.conn);
    event_base_dispatch(r.base);
    rc = DAEMON_EXIT_OK;
done:
    rconn_free(r.conn);         /* first: pending fsck steps get their NULL */
    reaper_fsck_free(r.fsck);
    reaper_sched_free(r.sched);
    reaper_cancel_free(r.cancels);
    for (size_t i = 0; r.queues && i < r.nqueues; i++)
        if (r.queues[i].timer)
            event_free(r.queues[i].timer);
    free(r.queues);
    if (r.stop_poll)
        event_free(r.stop_poll);
    if (r.base)
        event_base_free(r.base);
    return rc;
}
