/*
 * settle: the supervisor's side of the per-job guarantee.  When a worker
 * dies (a crashing handler, kill -9, a timeout kill), its slot's tables
 * (slots.h) say what became of every job it had claimed; a settler applies
 * that at once, on its own asynchronous Redis connection, so the
 * supervisor never waits on Redis:
 *   - a job that succeeded is acked, one that failed gets its failure
 *     (retry or dead): no finished job runs again;
 *   - the job that was running is failed with the cause of the death;
 *   - jobs not started go back to the queue without counting an attempt;
 *   - then, if a claim was on its way, the jobs it leased are given back
 *     by the claim's owner name (the recover script).
 * Each action is fenced in Redis: one the worker had already reported is
 * refused there and changes nothing.  Commands are kept until Redis
 * confirms them and re-sent after a reconnect; after `give_up_ms` the
 * leases have expired and the reaper has taken over, so they are dropped.
 *
 * One settler per configuration generation (its Redis address); it copies
 * what it needs, so it may outlive the configuration it was made from.
 */
#ifndef DQ_SETTLE_H
#define DQ_SETTLE_H

#include <event2/event.h>

#include "daemon/dconfig.h"
#include "daemon/admin/metrics.h"
#include "daemon/slots.h"

struct settler;

/* A settler connecting to dc's Redis on `base`; NULL when out of memory.
 * `metrics` (may be NULL) counts the failed running jobs. */
struct settler *settler_new(struct event_base *base, const struct daemon_conf *dc,
                            struct metrics *metrics);

void settler_free(struct settler *st);

/* Nothing left to send or to hear back. */
int settler_idle(const struct settler *st);

/* In a forked child: close the child's copy of the connection. */
void settler_close_in_child(struct settler *st);

/* What a dead worker leaves: its queue (of the settler's configuration),
 * its slot (read now, copied), the owner name its claims carried, why the
 * running job failed ("worker died: signal 9", "timeout after 1000 ms"),
 * and its name for the log ("w3"). */
struct settle_req {
    const struct daemon_conf *dc;
    const struct queue_conf *q;
    const struct worker_slot *slot;
    const char *owner;
    const char *cause;
    const char *who;
};

/* Queue the settlement of one dead worker's jobs; they are sent at once
 * when the connection is up.  Logs one line when it is done. */
void settler_settle(struct settler *st, const struct settle_req *req);

#endif
