/*
 * ui_history: the dashboard's last hour, per queue, one sample a second,
 * taken by the admin process from the counters the daemon already has
 * (the workers' slots and the totals of exited ones, metrics.h): no Redis
 * load.  It lives in shared memory that the supervisor maps before the
 * first fork, so that it outlives a restart of the admin process and a
 * reload.  A sample is the difference between two readings of the running
 * totals, so a worker's exit or restart changes nothing.  Queues are kept
 * by name, so a reload that keeps a queue keeps its history.
 */
#ifndef DQ_UI_HISTORY_H
#define DQ_UI_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/slots.h"

#define UI_HISTORY_SECONDS 3600

/* A queue's running totals at one instant (metrics_queue_totals). */
struct ui_totals {
    uint64_t succeeded;
    uint64_t retried;
    uint64_t dead;
    struct slot_hist lateness;  /* handler start - due time */
};

/* One second of one queue. */
struct ui_sample {
    uint32_t done;              /* handler runs that ended */
    uint32_t failed;            /* of them: retried or dead */
    int32_t p50_us;             /* lateness of the jobs started, -1: none */
    int32_t p99_us;
};

struct ui_history;

/* An empty history, in shared memory (MAP_SHARED: map it before the
 * fork of the processes that use it); NULL with errno set. */
struct ui_history *ui_history_new(void);
void ui_history_free(struct ui_history *h);

/* Forget every sample (admin.ui was turned off). */
void ui_history_clear(struct ui_history *h);

/* Record `queue`'s totals at `now_ms` (monotonic), once a second; the
 * first reading of a queue only sets its base. */
void ui_history_sample(struct ui_history *h, const char *queue, int64_t now_ms,
                       const struct ui_totals *t);

/* The last `n` (<= UI_HISTORY_SECONDS) seconds of `queue` (NULL: all
 * queues added up), oldest first, into out[0..n-1]; seconds before the
 * first reading are zero with p50/p99 -1.  Returns how many seconds of
 * real samples there are (<= n). */
size_t ui_history_series(const struct ui_history *h, const char *queue,
                         struct ui_sample *out, size_t n);

/* Over the last minute: jobs ended per second, and the lateness p50/p99
 * (us; -1 when no job started). */
void ui_history_minute(const struct ui_history *h, const char *queue,
                       double *jobs_per_s, int64_t *p50_us, int64_t *p99_us);

/* The quantile q (0..1) of a histogram's observations, interpolated
 * within its bucket (us); -1 when it has none. */
int64_t ui_hist_quantile(const struct slot_hist *hist, double q);

#endif
