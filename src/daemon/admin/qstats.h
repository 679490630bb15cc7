/*
 * qstats: the admin process's cached queue statistics, for /metrics,
 * /healthz and the dashboard.
 *
 * No HTTP request waits on Redis (a stall there must not hold a liveness
 * probe, nor the other requests on the same loop), so no request asks
 * Redis anything: a timer on the admin process's loop runs the stats
 * script for
 * every queue of one configuration, over an asynchronous connection
 * (rconn.h), every QSTATS_REFRESH_MS, and a request reads the last
 * complete set of figures and how old they are.
 */
#ifndef DQ_QSTATS_H
#define DQ_QSTATS_H

#include <delayq/client.h>
#include <event2/event.h>
#include <stdint.h>

#include "daemon/dconfig.h"

#define QSTATS_REFRESH_MS 800   /* figures are this old, plus a round trip */
#define QSTATS_STALE_MS 2000    /* older than this: Redis counts as unreachable */

struct qstats;

/* Start refreshing the statistics of dc's queues on `base` (dc must
 * outlive the qstats).  NULL when out of memory. */
struct qstats *qstats_new(struct event_base *base, const struct daemon_conf *dc);

/* Stop, drop the connection, free; NULL is ignored. */
void qstats_free(struct qstats *q);

/* What a request sees (borrowed until the next turn of the loop). */
/* How a partition answered the last refresh of the statistics. */
enum part_state {
    PART_OUT_OF_REACH = 0,      /* no reply: its master down (a cluster's) */
    PART_UP = 1,
    PART_FAILING = 2            /* an error reply (a key of the wrong type) */
};

struct qstats_view {
    const dq_stats *stats;      /* one per queue, in dc's order; NULL: none yet */
    const dq_stats *parts;      /* with stats: one per partition of every
                                   queue, in dconfig_parts order */
    const int64_t *paused_since; /* with stats: per queue, when it was paused
                                   (server ms), -1 when it is not */
    const int64_t *oldest_due_ms; /* with stats: per queue, the due time
                                   (server ms) of the job due longest, over
                                   its partitions; -1 when none is due */
    const unsigned char *parts_state; /* with stats: per partition, enum
                                   part_state in the last refresh; one not
                                   PART_UP has the last figures it gave */
    size_t out_of_reach;        /* how many were PART_OUT_OF_REACH */
    size_t failing;             /* how many were PART_FAILING */
    char why_reach[160];        /* why (the last of) the first did not answer */
    char why_fail[160];         /* the error (the last of) the second gave */
    int64_t age_ms;             /* since the figures were asked for; -1: none */
    int fresh;                  /* the last refresh answered and age <= QSTATS_STALE_MS */
    char why[200];              /* when not fresh: "no answer for 2.4 s", the error */
};

void qstats_read(const struct qstats *q, struct qstats_view *v);

#endif
