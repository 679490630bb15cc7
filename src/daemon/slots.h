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
    int64_t cancel_grace_ms; /* cancelled while running: how long its
                               handler has to return (cancel_board.h) */
    char queue[DQ_QUEUE_MAX + 1];
    unsigned part;          /* the queue partition it was claimed from */
};

struct slot_counters {
    uint64_t claimed;
    uint64_t succeeded;
    uint64_t retried;
    uint64_t dead;
    uint64_t stale;         /* acks and fails refused: the lease had expired */
};

/* A histogram with fixed buckets (upper bounds in SLOT_HIST_BOUNDS_US, in
 * microseconds); counts[i] is the observations in bucket i alone (the
 * renderer makes them cumulative); the last count is above every bound. */
#define SLOT_HIST_BOUNDS_US { 1000, 5000, 10000, 25000, 50000, 100000, 250000, \
                              500000, 1000000, 2500000, 5000000, 10000000,     \
                              30000000, 60000000 }
#define SLOT_HIST_BOUNDS 14
struct slot_hist {
    uint64_t counts[SLOT_HIST_BOUNDS + 1];
    uint64_t sum_us;
};

/* Figures of one job type in one worker.  `type` is written once, before
 * `used` is set (release), and never changes while the worker lives. */
#define SLOT_TYPES 16           /* per worker; the last entry takes the rest */
#define SLOT_OTHER_TYPE "*"     /* its type: no job has it (keys_check_type) */
struct slot_type {
    int used;
    char type[DQ_TYPE_MAX + 1];
    struct slot_counters counters;  /* stale is counted per slot only */
    struct slot_hist duration;      /* handler run time */
    struct slot_hist lateness;      /* handler start - due time, >= 0 */
};

/* ---- the claimed jobs: what the supervisor settles when a worker dies --
 *
 * A worker publishes every job it has claimed, with the job's fence, and
 * moves each entry on as the job runs; a dead worker's table tells the
 * supervisor, without asking the dead process anything, what became of
 * each job: ack what finished, apply the failures, fail the one that was
 * running, give back what never started.  Every action is fenced in
 * Redis, so settling an entry the worker had already reported is refused
 * there and changes nothing.
 *
 * Only the worker writes; the supervisor reads the table after the worker
 * is dead, so no lock is needed: an entry's fields are written before its
 * state (release), and a table's n only after its entries. */
enum slot_entry_state {
    SE_PENDING = 0,     /* claimed, not started: give back, no attempt counted */
    SE_RUNNING,         /* its handler was running */
    SE_OK,              /* succeeded: ack */
    SE_RETRY,           /* failed: retry (or dead when out of attempts) */
    SE_DEAD,            /* failed for good */
    SE_DONE             /* nothing left to do (settled, or no longer ours) */
};

#define SLOT_ERROR_MAX 240      /* bytes of a failure's error kept here */
struct slot_entry {
    int state;                  /* enum slot_entry_state; stored last */
    int64_t fence;
    int64_t retry_delay_ms;     /* SE_RETRY: -1 for the queue's backoff */
    char id[DQ_ID_MAX + 1];
    char type[DQ_TYPE_MAX + 1]; /* SE_RETRY, SE_DEAD: for its attempt limit */
    char error[SLOT_ERROR_MAX]; /* SE_RETRY, SE_DEAD: cut to fit */
};

/* Two tables: the batch being run, and the claim sent ahead of its end. */
#define SLOT_TABLES 2
struct slot_table {
    uint32_t n;                 /* entries in use; 0: nothing held */
    uint32_t part;              /* the queue partition they were claimed
                                   from (written before n) */
    struct slot_entry e[DQ_CLAIM_MAX];
};

/* The reaper's periodic fsck (reaper_fsck.c), per queue: its repairs
 * counted (slot_add), and for /healthz the wrong-type keys it knows of,
 * in one line published under `seq` (odd while being written) so that
 * the supervisor never reads half of it. */
#define SLOT_FSCK_QUEUES 64     /* DCONFIG_MAX_QUEUES (checked in reaper_fsck.c) */
#define SLOT_FSCK_REASON 320
struct slot_fsck_queue {
    int used;                   /* set (release) after `queue` is written */
    char queue[DQ_QUEUE_MAX + 1];
    uint64_t repaired;          /* records to dead, members and fields removed */
    uint64_t claim_dropped;     /* ids claims dropped, seen since the start */
};
struct slot_fsck {
    uint32_t seq;               /* even: reason stable; odd: being written */
    char reason[SLOT_FSCK_REASON]; /* "" while no key has the wrong type */
    struct slot_fsck_queue queues[SLOT_FSCK_QUEUES];
};

/* Whether a worker's claims succeed, for /healthz: a demoted Redis
 * answers every claim with READONLY while it still answers reads.  The
 * worker writes on each claim's outcome; `seq` is odd while it does. */
#define SLOT_CLAIM_ERROR 200
struct slot_claims {
    uint32_t seq;
    int64_t ok_ms;              /* monotonic: the last claim that succeeded; 0 none */
    int64_t failing_since_ms;   /* monotonic: the first failure since; 0 not failing */
    char error[SLOT_CLAIM_ERROR]; /* that first failure */
};

struct worker_slot {
    uint32_t seq;           /* even: job is stable; odd: being written */
    int ready;              /* connected to Redis and claiming */
    struct slot_job job;
    uint64_t stale;             /* acks and fails refused: the lease had
                                   expired (the job's other figures are
                                   counted by type, in types) */
    uint64_t redis_reconnects;  /* connections re-made after being up */
    uint64_t jobs_done;         /* handler runs that ended: the worker made
                                   progress (its respawn needs no backoff) */
    /* A claim is on its way: its jobs are leased in Redis before the
     * worker can list them here.  The claim names the worker (the owner,
     * see worker_main), so the supervisor can give them back by that name
     * (the recover script). */
    int claim_in_flight;
    struct slot_type types[SLOT_TYPES];
    struct slot_claims claims;  /* a relay's: whether its source works */
    struct slot_fsck fsck;      /* the reaper's; zero in workers */
    /* A relay's (src/daemon/relay): rows of its outbox applied to Redis
     * and moved to the dead table, whether it is the daemon's relay that
     * applies the table's rows (1) or one waiting to take over, and the
     * rows it holds now for partitions out of reach (relay_defer.h). */
    uint64_t relay_applied;
    uint64_t relay_dead;
    int relay_leader;
    int relay_held;
    /* Handler start - due time by the job's priority level (0..9): the
     * worker's queue is the slot's, so the level is the only key. */
    struct slot_hist lateness_by_priority[DQ_PRIORITY_LEVELS];
    /* Last: the tables are large and only their used entries are touched. */
    struct slot_table tables[SLOT_TABLES];
} __attribute__((aligned(64)));

/* Map `n` zeroed slots; NULL on failure (errno set).  The mapping is
 * reserved lazily (MAP_NORESERVE): only the pages of the entries workers
 * actually use are ever backed by memory. */
struct worker_slot *slots_create(size_t n);
void slots_destroy(struct worker_slot *s, size_t n);

/* In a process that only reads the slots (the admin process): make this
 * process's view of them read-only, so that no bug of its can write to
 * them.  0, or -1 with errno set. */
int slots_seal(struct worker_slot *s, size_t n);

/* Reset a slot for a new child, without touching its tables' entries. */
void slot_reset(struct worker_slot *s);

/* ---- the tables: worker side -------------------------------------------- */

/* Publish `n` claimed jobs (ids and fences) of partition `part` as table
 * `t`, all pending. */
void slot_table_publish(struct worker_slot *s, int t, unsigned part, const dq_job *jobs,
                        size_t n);
/* Move entry `i` of table `t` to `state`. */
void slot_entry_set(struct worker_slot *s, int t, size_t i, enum slot_entry_state state);
/* Record a failure of entry `i` (SE_RETRY or SE_DEAD) with its details. */
void slot_entry_fail(struct worker_slot *s, int t, size_t i, enum slot_entry_state state,
                     const char *type, int64_t retry_delay_ms, const char *error);
/* Everything in table `t` is settled in Redis. */
void slot_table_clear(struct worker_slot *s, int t);

/* Worker side: publish the job it starts, or (job NULL) that it is idle. */
void slot_set_job(struct worker_slot *s, const struct slot_job *job);

/* Supervisor side: a consistent copy of the job in flight; returns 1 when a
 * job is running, 0 when idle. */
int slot_read_job(const struct worker_slot *s, struct slot_job *out);

/* Worker side: a claim succeeded; or failed (`why`: the error reply, or
 * what kept it from Redis).  Only the first failure of a run is kept. */
void slot_claims_ok(struct worker_slot *s);
void slot_claims_failed(struct worker_slot *s, const char *why);

/* Supervisor side: a consistent copy; returns 1 when claims are failing. */
int slot_claims_read(const struct worker_slot *s, struct slot_claims *out);

/* Monotonic clock in ms. */
int64_t slots_now_ms(void);

/* Monotonic clock in microseconds (handler durations). */
int64_t slots_now_us(void);

/* ---- counters: the worker writes, the supervisor reads ----------------- */

/* Add to a counter.  One writer per slot, so a plain load and store (no
 * lock, no atomic read-modify-write); relaxed atomics only keep the
 * supervisor's concurrent read whole. */
static inline void slot_add(uint64_t *counter, uint64_t n)
{
    __atomic_store_n(counter, __atomic_load_n(counter, __ATOMIC_RELAXED) + n,
                     __ATOMIC_RELAXED);
}

static inline uint64_t slot_get(const uint64_t *counter)
{
    return __atomic_load_n(counter, __ATOMIC_RELAXED);
}

/* Worker side: the entry of `type`, made on first use; the overflow entry
 * (type SLOT_OTHER_TYPE) once SLOT_TYPES - 1 types are taken.  Never NULL. */
struct slot_type *slot_type_entry(struct worker_slot *s, const char *type);

/* Worker side: count one observation of `us` microseconds (negative: 0). */
void slot_hist_observe(struct slot_hist *h, int64_t us);

/* Supervisor side: the entry's type when it is in use, else NULL. */
const char *slot_type_name(const struct slot_type *t);

/* Reaper side: the fsck entry of `queue`, made on first use; NULL when
 * all SLOT_FSCK_QUEUES are taken. */
struct slot_fsck_queue *slot_fsck_entry(struct slot_fsck *f, const char *queue);

/* Reaper side: publish the wrong-type keys' line ("" for none). */
void slot_fsck_set_reason(struct slot_fsck *f, const char *reason);

/* Supervisor side: a consistent copy of that line; returns 1 when it is
 * not empty. */
int slot_fsck_reason(const struct slot_fsck *f, char *out, size_t len);

/* Supervisor side: the entry's queue when it is in use, else NULL. */
const char *slot_fsck_queue_name(const struct slot_fsck_queue *q);

#endif
