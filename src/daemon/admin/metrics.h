/*
 * Metrics and health: what /metrics and /healthz say (the admin process
 * serves them, admin_main.c).
 *
 * The workers count in their shared-memory slots (slots.h) with plain
 * increments: no lock and no Redis round trip on the job path.  The
 * supervisor keeps `struct metrics`, itself in shared memory (made before
 * the first fork): the totals of children that have exited (their slot is
 * folded in before its row is reused), what only it sees (timeouts, jobs
 * of dead workers, restarts), and its child table as the admin process
 * must see it (struct metrics_post).  It writes them under a sequence
 * counter and never waits; the admin process takes a consistent copy
 * (metrics_snap_take) with the live slots added, so that no counter goes
 * back, even across a restart of the admin process.  A scrape then takes
 * the queue gauges from the admin's cache (qstats.h: no request waits on
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

/* Rows of the supervisor's child table that can be posted (its
 * MAX_CHILDREN is checked against this). */
/* (workers, reapers and admin processes of two generations, and a settler
 * for each of up to 9 generations alive.) */
/* (and a relay per source, of two generations.) */
#define METRICS_CHILDREN_MAX (2 * DCONFIG_MAX_WORKERS + 4 + 9 + 2 * DCONFIG_MAX_SOURCES)

/* The figures of one (queue, type); type "" holds the queue's own (stale,
 * orphans, lateness by priority). */
struct metrics_row {
    char queue[DQ_QUEUE_MAX + 1];
    char type[DQ_TYPE_MAX + 1];
    struct slot_counters c;
    uint64_t timed_out;
    uint64_t orphans;           /* type "" only: the reaper's fsck repairs */
    struct slot_hist duration;
    struct slot_hist lateness;
    struct slot_hist lateness_by_priority[DQ_PRIORITY_LEVELS]; /* type "" only */
};

/* A table of rows: in shared memory (fixed, cap rows) or private
 * (grown with realloc). */
struct metrics_table {
    struct metrics_row *rows;
    size_t n, cap;
    int fixed;
};

enum metrics_role { MR_NONE, MR_WORKER, MR_REAPER, MR_ADMIN, MR_SETTLER, MR_RELAY };

/* One row of the supervisor's child table, as the admin process sees it;
 * row i uses slot i. */
struct metrics_post {
    int role;                       /* enum metrics_role */
    int pid;                        /* 0: not running (waiting to respawn) */
    int in_force;                   /* a child the configuration in force wants */
    char queue[DQ_QUEUE_MAX + 1];   /* a worker's queue, a relay's source;
                                       "" otherwise */
};

/* A source's relay figures (rows applied, rows moved to its dead table),
 * by the source's name: at most DCONFIG_MAX_SOURCES names of the
 * configuration in force, plus those of older ones until the table is
 * full (then they are not kept). */
#define METRICS_SOURCES_MAX (4 * DCONFIG_MAX_SOURCES)
struct metrics_source {
    char name[64];
    uint64_t applied, dead;
};

struct metrics;

/* ---- the supervisor's side (the only writer) ---------------------------- */

/* Empty totals in shared memory (MAP_SHARED, made before any fork); NULL
 * with errno set. */
struct metrics *metrics_new(void);
void metrics_free(struct metrics *m);

/* A change the admin process must see whole: the calls between begin and
 * end (they nest) are published at once.  Never waits. */
void metrics_begin(struct metrics *m);
void metrics_end(struct metrics *m);

/* Add the counters of an exited child's slot to the totals (`queue`: the
 * worker's queue; NULL for the reaper).  The caller then zeroes the slot,
 * inside the same begin/end. */
void metrics_fold_slot(struct metrics *m, const char *queue,
                       const struct worker_slot *slot);

/* The same for an exited relay of source `source`. */
void metrics_fold_relay(struct metrics *m, const char *source, const struct worker_slot *slot);

/* The supervisor's own counts: a handler stopped at its timeout; the job
 * of a dead worker failed by the supervisor (retried, or dead); a child
 * restarted. */
void metrics_count_timeout(struct metrics *m, const char *queue, const char *type);
void metrics_count_orphan(struct metrics *m, const char *queue, const char *type,
                          int dead);
void metrics_count_restart(struct metrics *m);
/* The sentinels moved the master (sentinel_watch.h). */
void metrics_count_failover(struct metrics *m);

/* Post row `i` of the child table (only when it changed); `queue` NULL
 * for none. */
void metrics_post_child(struct metrics *m, size_t i, enum metrics_role role, int pid,
                        int in_force, const char *queue);

/* Post the supervisor's state: stopping, and the generation of the
 * configuration in force (1 at start, one more at each reload). */
void metrics_post_state(struct metrics *m, int stopping, uint64_t conf_gen);

/* ---- the admin process's side --------------------------------------------- */

/* Make this process's view of `m` read-only (the admin process only
 * reads it).  0, or -1 with errno set. */
int metrics_seal(const struct metrics *m);

/* A consistent copy of the supervisor's figures and child table, with the
 * live slots of `slots` (row i: slots[i]) added to the totals. */
struct metrics_snap {
    struct metrics_table t;         /* private; sorted by queue, type */
    uint64_t restarts, reconnects, failovers;
    int stopping;
    uint64_t conf_gen;
    size_t nchildren;
    struct metrics_post children[METRICS_CHILDREN_MAX];
    struct metrics_source sources[METRICS_SOURCES_MAX]; /* name "": unused */
    const struct worker_slot *slots;
};

/* Source `name`'s totals in the snapshot (zeros when it has none). */
struct metrics_source metrics_source_totals(const struct metrics_snap *s, const char *name);

/* Take a snapshot (malloc'd; metrics_snap_free).  NULL when out of
 * memory, or when the supervisor stayed in the middle of a change for
 * 100 ms (it is stopped, or dying). */
struct metrics_snap *metrics_snap_take(const struct metrics *m,
                                       const struct worker_slot *slots);
void metrics_snap_free(struct metrics_snap *s);

/* What one request reads (borrowed for the call). */
struct metrics_view {
    const struct metrics_snap *snap;
    const struct daemon_conf *conf;     /* the admin process's generation */
    const struct qstats_view *stats;    /* the queue gauges of conf, cached */
};

/* `queue`'s running totals in the snapshot (exited children and live
 * slots): they never go back from one snapshot to the next. */
void metrics_queue_totals(const struct metrics_snap *s, const char *queue,
                          struct ui_totals *out);

/* Write the /metrics page to `out`: the counters, and the cached queue
 * gauges with their age.  Returns the HTTP status: 200. */
int metrics_write(const struct metrics_view *v, FILE *out);

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
