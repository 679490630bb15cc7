/*
 * generation: one configuration and everything the supervisor derives
 * from it, built whole and swapped whole on a reload, as nginx's
 * ngx_init_cycle builds a new cycle and keeps the old one when that
 * fails.  Nothing built from an older configuration survives a reload: a
 * changed Redis address, database or prefix, queue list or admin address
 * takes effect everywhere at once.
 *
 * A generation holds the configuration (queues, handler entries, Redis
 * options, the admin address) and its number, which names its dead
 * workers' posts on the settle board (settle_board.h: its own settler
 * process settles them) and its admin process's view (metrics_post_state).
 * It holds no connection: what talks to Redis or a sentinel for it is its
 * children's (the settler, settler.h; the admin process, admin_main.h).
 * Its children point to it; the supervisor frees it once none is left and
 * nothing of it waits on the board.
 *
 * The handler table is part of building one (the reload's checker child
 * opens and initialises every handler, so a reload refuses what a worker
 * would refuse) but is not kept: each worker opens its own after fork.
 */
#ifndef DQ_GENERATION_H
#define DQ_GENERATION_H

#include <stdint.h>

#include "daemon/dconfig.h"

struct generation {
    struct daemon_conf *conf;   /* owned */
    uint64_t id;                /* 1, 2, ...: this run's generations in order */
};

/* Generation number `id` for `conf` (loaded and checked; taken over on
 * success only).  NULL when out of memory. */
struct generation *generation_new(struct daemon_conf *conf, uint64_t id);

/* Free it with its configuration; NULL is ignored. */
void generation_free(struct generation *g);

#endif
