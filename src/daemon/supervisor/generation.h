/*
 * generation: one configuration and everything the supervisor derives
 * from it, built whole and swapped whole on a reload, as nginx's
 * ngx_init_cycle builds a new cycle and keeps the old one when that
 * fails.  Nothing built from an older configuration survives a reload: a
 * changed Redis address, database or prefix, queue list or admin address
 * takes effect everywhere at once.
 *
 * A generation holds the configuration (queues, handler entries, Redis
 * options, the admin address), the settler of its dead workers' jobs (on
 * its Redis, settle.h) and, while in force and behind Sentinel, the
 * subscriptions to the sentinels' +switch-master (sentinel_watch.h).  The
 * statistics and the dashboard's connection are its admin process's
 * (admin_main.h).
 * Its children point to it; the supervisor frees it once none is left and
 * its settler is idle.
 *
 * The handler table is part of building one (handlers_load_config opens
 * and initialises every handler, so a reload refuses what a worker would
 * refuse) but is not kept: each worker opens its own after fork, and a
 * table held here would be inherited, half-initialised, by every child.
 */
#ifndef DQ_GENERATION_H
#define DQ_GENERATION_H

#include <event2/event.h>
#include <stddef.h>

#include "daemon/dconfig.h"
#include "daemon/admin/metrics.h"
#include "redis/sentinel_watch.h"
#include "daemon/supervisor/settle.h"

struct generation {
    struct daemon_conf *conf;   /* owned */
    struct settler *settler;
    struct sentinel_watch *watch; /* NULL: retired, or no Sentinel */
    uint64_t serial;            /* its number: 1 at start, one more at each
                                   reload (metrics_post_state) */
};

/*
 * Build a generation on `base` for `conf` (loaded and checked; taken over
 * on success only).  `metrics` counts the settler's failed jobs.  NULL
 * when out of memory, with nothing of it left.
 */
struct generation *generation_new(struct event_base *base, struct daemon_conf *conf,
                                  struct metrics *metrics);

/* No longer in force: stop watching the sentinels for it. */
void generation_retire(struct generation *g);

/* Nothing of its settler is left to send or to hear back. */
int generation_idle(const struct generation *g);

/* In a forked child: close the child's copies of its connections. */
void generation_close_in_child(struct generation *g);

/* Free it with its configuration; NULL is ignored. */
void generation_free(struct generation *g);

#endif
