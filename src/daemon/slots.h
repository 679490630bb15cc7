/*
 * Worker slots: what each child tells the supervisor, in memory shared
 * across fork (MAP_SHARED | MAP_ANONYMOUS, made before the first fork).
 *
 * A worker writes its slot; the supervisor only reads it.  The job in
 * flight is published under a sequence counter (odd while being written),
 * so the supervisor never acts on half an id.  Counters only grow; the
 * supervisor sums them for metrics.  One slot per cache line group, so
 * workers do not share lines.
 */
#ifndef DQ_SLOTS_H
#define DQ_SLOTS_H

#include <delayq/client.h>
#include <stdint.h>

struct slot_job {
    char id[DQ_ID_MAX + 1];
    char type[DQ_TYPE_MAX + 1];
    int64_t fence;
    int attempt;
    int64_t started_ms;     /* monotonic ms; 0 when no job is running */
    int64_t timeout_ms;     /* 0: none */
};

struct slot_counters {
    uint64_t claimed;
    uint64_t succeeded;
    uint64_t retried;
    uint64_t dead;
    uint64_t stale;         /* acks or fails refused: the lease had expired */
};

struct worker_slot {
    uint32_t seq;           /* even: job is stable; odd: being written */
    int ready;              /* connected to Redis and claiming */
    struct slot_job job;
    struct slot_counters counters;
} __attribute__((aligned(64)));

/* Map `n` zeroed slots; NULL on failure (errno set). */
struct worker_slot *slots_create(size_t n);
void slots_destroy(struct worker_slot *s, size_t n);

/* Worker side: publish the job it starts, or (job NULL) that it is idle. */
void slot_set_job(struct worker_slot *s, const struct slot_job *job);

/* Supervisor side: a consistent copy of the job in flight; returns 1 when a
 * job is running, 0 when idle. */
int slot_read_job(const struct worker_slot *s, struct slot_job *out);

/* Monotonic clock in ms. */
int64_t slots_now_ms(void);

#endif
