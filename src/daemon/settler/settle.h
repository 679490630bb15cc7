/*
 * settle: the settler process's side of the per-job guarantee.  When a
 * worker dies (a crashing handler, kill -9, a timeout kill), its slot's
 * tables (slots.h), posted by the supervisor on the settle board
 * (settle_board.h), say what became of every job it had claimed; the
 * settler applies that at once, on its own asynchronous Redis connection:
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
 * One settler per configuration generation (its Redis address), in that
 * generation's settler process (settler.h).
 */
#ifndef DQ_SETTLE_H
#define DQ_SETTLE_H

#include <event2/event.h>
#include <stdint.h>

#include "daemon/dconfig.h"
#include "daemon/slots.h"

struct settler;

/* A settler connecting to dc's Redis on `base`; NULL when out of memory.
 * `reconnects` (may be NULL) counts its connection's reconnects. */
struct settler *settler_new(struct event_base *base, const struct daemon_conf *dc,
                            uint64_t *reconnects);

void settler_free(struct settler *st);

/* Nothing left to send or to hear back. */
int settler_idle(const struct settler *st);

/* The end of a settlement: whether the running job's fail was applied
 * (not refused as already settled) and sent it to the dead set.  Not
 * called when the settler is freed first. */
typedef void (*settle_done_fn)(void *arg, int running_failed, int running_dead);

/* What a dead worker leaves: its queue (of the settler's configuration),
 * its tables (read now, copied) and the type of the job it was running,
 * the owner name its claims carried, why the running job failed ("worker
 * died: signal 9", "timeout after 1000 ms"), its name for the log ("w3"),
 * and when it died (monotonic ms: the leases expire lease_ms later). */
struct settle_req {
    const struct daemon_conf *dc;
    const struct queue_conf *q;
    const struct slot_table *tables;    /* SLOT_TABLES of them */
    const char *running_type;
    const char *owner;
    const char *cause;
    const char *who;
    int64_t died_ms;
    settle_done_fn done;
    void *done_arg;
};

/* Queue the settlement of one dead worker's jobs; they are sent at once
 * when the connection is up.  Logs one line when it is done, then calls
 * req->done.  -1 when out of memory (logged; req->done is not called). */
int settler_settle(struct settler *st, const struct settle_req *req);

#endif
