/*
 * Metrics and health: what /metrics and /healthz say (http_admin.c serves
 * them from the supervisor's loop).
 *
 * The workers count in their shared-memory slots (slots.h) with plain
 * increments: no lock and no Redis round trip on the job path.  The
 * supervisor keeps `struct metrics`: the totals of children that have
 * exited (their slot is folded in before its row is reused, so counters
 * never go back) and what only it sees (timeouts, jobs of dead workers,
 * restarts).  A scrape adds the live slots to those totals, takes the
 * queue gauges from the supervisor's cache (qstats.h: no request waits on
 * Redis) and writes the Prometheus text format 0.0.4.
 */
#ifndef DQ_METRICS_H
#define DQ_METRICS_H

#include <delayq/client.h>
#include <stdio.h>

#include "daemon/dconfig.h"
#include "daemon/admin/qstats.h"
#include "daemon/slots.h"
#include "daemon/admin/ui_history.h"

struct metrics;

/* Empty totals; NULL when out of memory. */
struct metrics *metrics_new(void);
void metrics_free(struct metrics *m);

/* Add the counters of an exited child's slot to the totals (`queue`: the
 * worker's queue; NULL for the reaper).  The caller then zeroes the slot. */
void metrics_fold_slot(struct metrics *m, const char *queue,
                       const struct worker_slot *slot);

/* The supervisor's own counts: a handler stopped at its timeout; the job
 * of a dead worker failed by the supervisor (retried, or dead); a child
 * restarted. */
void metrics_count_timeout(struct metrics *m, const char *queue, const char *type);
void metrics_count_orphan(struct metrics *m, const char *queue, const char *type,
                          int dead);
void metrics_count_restart(struct metrics *m);
/* The sentinels moved the master (sentinel_watch.h). */
void metrics_count_failover(struct metrics *m);

/* One row of the supervisor's child table, as a scrape sees it. */
struct metrics_child {
    const char *queue;              /* the worker's queue; NULL: the reaper */
    const struct worker_slot *slot;
    int running;                    /* has a process */
    int in_force;                   /* a worker the configuration in force wants */
};

/* The supervisor's state for one request (borrowed for the call). */
struct metrics_view {
    const struct metrics_child *children;
    size_t nchildren;
    const struct daemon_conf *conf; /* in force */
    const struct qstats_view *stats; /* the queue gauges of conf, cached */
    int stopping;
};

/* `queue`'s running totals now, as /metrics adds them: the exited
 * children's folded rows plus the live slots of v->children (only
 * children and nchildren are read).  They never go back: a child's slot
 * is folded into the rows before it is zeroed. */
void metrics_queue_totals(const struct metrics *m, const struct metrics_view *v,
                          const char *queue, struct ui_totals *out);

/* Write the /metrics page to `out`: the counters, and the cached queue
 * gauges with their age.  Returns the HTTP status: 200. */
int metrics_write(const struct metrics *m, const struct metrics_view *v, FILE *out);

/* Write the /healthz answer: "ok" when Redis answered the last refresh
 * of the statistics, every worker of the configuration in force is
 * connected and claiming, none of them has seen its claims fail for
 * longer than the configuration's claim_failure_grace, and the reaper's
 * fsck knows of no key of the wrong type, else the reason ("redis
 * unreachable: ...", "2 of 4 workers down", "queue orders: claims failing
 * for 12.0 s: READONLY ...", "queue orders: key dq:{orders}:jobs:12 has
 * type string, expected hash").  Returns 200 or 503. */
int metrics_health(const struct metrics_view *v, FILE *out);

#endif
