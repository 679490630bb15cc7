/*
 * settle_board: what the supervisor tells the settler (settler/settler.h),
 * in memory shared across fork (MAP_SHARED | MAP_ANONYMOUS, made before
 * the first fork, like the slots).
 *
 * When a worker dies the supervisor posts its death here: which
 * generation and queue, the owner name its claims carried, why its running
 * job failed, and a copy of its slot's tables (slots.h), so that the row's
 * slot can serve the respawned worker at once.  Posting is a memcpy and
 * two atomic stores: the supervisor never waits.  The settler of that
 * generation picks the post up, settles it on its own Redis connection,
 * writes what became of the running job, and marks it done; the
 * supervisor then counts that outcome and frees the post.  A settler that
 * dies leaves its posts posted: its respawn settles them again (every
 * action is fenced in Redis, so what was applied once is refused the
 * second time and changes nothing).
 *
 * The board also carries the few figures its users exchange: the
 * generation in force (a settler watches the sentinels only while its
 * generation is in force) and the failovers the watcher saw.
 *
 * One writer per field at a time: the supervisor writes a free post and
 * frees a done one; the settler writes a posted one's outcome and state.
 * A post's fields are written before its state (release), and read after
 * it (acquire).
 */
#ifndef DQ_SETTLE_BOARD_H
#define DQ_SETTLE_BOARD_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/slots.h"

#define SETTLE_BOARD_POSTS 256  /* deaths waiting to be settled, over all
                                   generations; memory is reserved lazily */

enum settle_post_state {
    SP_FREE = 0,
    SP_POSTED,                  /* the supervisor wrote it; to settle */
    SP_DONE                     /* settled (or given up); outcome written */
};

struct settle_post {
    uint64_t gen;               /* the generation the worker ran with */
    int queue;                  /* index into that generation's queues */
    int64_t posted_ms;          /* monotonic (slots_now_ms) */
    char who[16];               /* "w3", for the log */
    char owner[64];             /* the owner name its claims carried */
    char cause[128];            /* why its running job failed */
    char running_type[DQ_TYPE_MAX + 1]; /* the type of the job it ran */
    /* The outcome, written by the settler before SP_DONE: the running
     * job's fail was applied here (not refused as already settled), and
     * sent it to the dead set. */
    int running_failed;
    int running_dead;
    struct slot_table tables[SLOT_TABLES]; /* only [0, n) copied */
};

/* A post's state and generation, apart from the post: the supervisor and
 * the settlers scan these often, and a scan then touches a page or two
 * rather than one page of every (large) post. */
struct settle_head {
    int state;                  /* enum settle_post_state; stored last */
    uint64_t gen;               /* = its post's gen */
};

struct settle_board {
    uint64_t gen_in_force;      /* the supervisor's: the generation in force */
    uint64_t sentinel_failovers; /* the watcher's: master moves announced */
    struct settle_head heads[SETTLE_BOARD_POSTS];
    struct settle_post posts[SETTLE_BOARD_POSTS];
};

/* Map a zeroed board; NULL on failure (errno set). */
struct settle_board *settle_board_create(void);
void settle_board_destroy(struct settle_board *b);

/* Supervisor side: what a dead worker leaves to settle. */
struct settle_death {
    uint64_t gen;
    int queue;
    const char *who, *owner, *cause;
    const struct worker_slot *slot; /* its tables and running job, copied */
};

/* Post a death (copying what the slot holds).  -1 when every post is in
 * use: the caller keeps the slot as it is and tries again later. */
int settle_board_post(struct settle_board *b, const struct settle_death *d);

/* Supervisor side: call `done(post, arg)` for each settled post, then free
 * it.  Returns how many. */
int settle_board_collect(struct settle_board *b,
                         void (*done)(const struct settle_post *p, void *arg), void *arg);

/* Posts of generation `gen` not yet freed (posted, or done but not yet
 * collected). */
int settle_board_pending(const struct settle_board *b, uint64_t gen);

/* The state of post `i` (acquire). */
int settle_board_state(const struct settle_board *b, size_t i);

/* Settler side: whether post `i` is posted for generation `gen`. */
int settle_board_posted_for(const struct settle_board *b, size_t i, uint64_t gen);

/* Settler side: write post `i`'s outcome, then mark it done. */
void settle_board_done(struct settle_board *b, size_t i, int running_failed,
                       int running_dead);

/* The watcher's count of failovers (either side). */
void settle_board_count_failover(struct settle_board *b);
uint64_t settle_board_failovers(const struct settle_board *b);

/* The generation in force: set by the supervisor, read by settlers. */
void settle_board_set_in_force(struct settle_board *b, uint64_t gen);
uint64_t settle_board_in_force(const struct settle_board *b);

#endif
