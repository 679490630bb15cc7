/*
 * The supervisor's side of settling a dead worker's jobs: it posts what
 * the worker left on the settle board (settle_board.h), wakes the
 * settlers, counts what they report, and stops a generation's settler
 * once nothing of that generation is left to settle.  Everything here is
 * memory and non-blocking system calls: the settling itself, on Redis, is
 * the settler process's (settler/settler.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "daemon/admin/metrics.h"
#include "daemon/log.h"
#include "daemon/supervisor/supervisor_int.h"

static const struct generation *find_generation(const struct supervisor *s, uint64_t id)
{
    if (s->cur && s->cur->id == id)
        return s->cur;
    for (int g = 0; g < MAX_GENERATIONS; g++)
        if (s->old[g] && s->old[g]->id == id)
            return s->old[g];
    return NULL;
}

/* A settled post: its running job's fail counted as the job's (retried or
 * dead) in the metrics, as a failure the worker reported would be. */
static void on_settled(const struct settle_post *p, void *arg)
{
    struct supervisor *s = arg;
    const struct generation *g = find_generation(s, p->gen);
    if (!p->running_failed || !g || p->queue < 0 || (size_t)p->queue >= g->conf->nqueues)
        return;
    metrics_count_orphan(s->metrics, g->conf->queues[p->queue].name, p->running_type,
                         p->running_dead);
}

/* One byte on the wake pipe; a full pipe already holds a wake. */
static void wake_settlers(struct supervisor *s)
{
    char b = 1;
    if (write(s->wake[1], &b, 1) < 0 && errno != EAGAIN) {
        static int warned;
        if (!warned++)
            log_warn("settle: waking the settlers: %s; they look every 100 ms",
                     strerror(errno));
    }
}

/* Post the death of worker `c` (its slot as it died); -1 when the board
 * is full. */
static int post(struct supervisor *s, const struct child *c, const char *owner,
                const char *cause)
{
    char who[16];
    snprintf(who, sizeof who, "w%d", (int)(c - s->children));
    struct settle_death d = { .gen = c->gen->id, .queue = c->queue, .who = who,
                              .owner = owner, .cause = cause,
                              .slot = &s->slots[c - s->children] };
    if (settle_board_post(s->board, &d) < 0)
        return -1;
    wake_settlers(s);
    return 0;
}

void settle_side_post(struct supervisor *s, struct child *c, const char *owner,
                      const char *cause)
{
    if (post(s, c, owner, cause) == 0)
        return;
    if (!c->unposted)
        log_warn("w%d: %d deaths already wait to be settled; its own waits, and it "
                 "restarts once it is posted", (int)(c - s->children), SETTLE_BOARD_POSTS);
    c->unposted = 1;
    snprintf(c->unposted_owner, sizeof c->unposted_owner, "%s", owner);
    snprintf(c->unposted_cause, sizeof c->unposted_cause, "%s", cause);
}

void settle_side_keep_slot(struct supervisor *s, const struct child *c)
{
    struct worker_slot *slot = &s->slots[c - s->children];
    slot->stale = slot->redis_reconnects = slot->jobs_done = 0;
    memset(slot->types, 0, sizeof slot->types);
    memset(&slot->fsck, 0, sizeof slot->fsck);
    memset(slot->lateness_by_priority, 0, sizeof slot->lateness_by_priority);
}

/* Rows whose death the board had no room for: post them now, then let
 * their slot and row go on (reset; respawn, or freed when retiring). */
static void post_waiting(struct supervisor *s)
{
    for (int i = 0; i < MAX_CHILDREN; i++) {
        struct child *c = &s->children[i];
        if (!c->unposted || post(s, c, c->unposted_owner, c->unposted_cause) < 0)
            continue;
        c->unposted = 0;
        slot_reset(&s->slots[i]);
        if (c->retiring || s->stopping)
            c->role = ROLE_NONE;
    }
}

int settle_side_pending(const struct supervisor *s, const struct generation *g)
{
    int n = settle_board_pending(s->board, g->id);
    for (int i = 0; i < MAX_CHILDREN; i++)
        n += s->children[i].unposted && s->children[i].gen == g;
    return n;
}

void settle_side_tick(struct supervisor *s)
{
    post_waiting(s);
    settle_board_collect(s->board, on_settled, s);
    uint64_t failovers = settle_board_failovers(s->board);
    for (; s->failovers_seen < failovers; s->failovers_seen++)
        metrics_count_failover(s->metrics);
}
