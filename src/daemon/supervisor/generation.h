/*
 * generation: one configuration and everything the supervisor derives
 * from it, built whole and swapped whole on a reload, as nginx's
 * ngx_init_cycle builds a new cycle and keeps the old one when that
 * fails.  Nothing built from an older configuration survives a reload: a
 * changed Redis address, database or prefix, queue list or admin address
 * takes effect everywhere at once.
 *
 * A generation holds the configuration (queues, handler entries, Redis
 * options, the admin address), its number (which names its dead workers'
 * posts on the settle board, settle_board.h: its own settler process
 * settles them) and, while it is in force and metrics are on, the
 * cached queue statistics that /metrics and /healthz serve (qstats.h)
 * and the dashboard's connection (ui_data.h) when admin.ui is on.
 * Its children point to it; the supervisor frees it once none is left and
 * nothing of it waits on the board.
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
#include <stdint.h>

#include "daemon/dconfig.h"
#include "daemon/admin/qstats.h"
#include "daemon/admin/ui_data.h"

struct generation {
    struct daemon_conf *conf;   /* owned */
    uint64_t id;                /* 1, 2, ...: this run's generations in order */
    struct qstats *stats;       /* NULL: retired, or metrics off */
    struct ui_data *ui;         /* the dashboard's Redis questions; NULL:
                                   retired, or admin.ui off */
};

/*
 * Build generation number `id` on `base` for `conf` (loaded and checked;
 * taken over on success only).  NULL when out of memory, with nothing of
 * it left.
 */
struct generation *generation_new(struct event_base *base, struct daemon_conf *conf,
                                  uint64_t id);

/* No longer in force: stop refreshing statistics nobody reads. */
void generation_retire(struct generation *g);

/* In a forked child: close the child's copies of its connections. */
void generation_close_in_child(struct generation *g);

/* Free it with its configuration; NULL is ignored. */
void generation_free(struct generation *g);

#endif
