/*
 * The rows a relay holds back while their partition's master is out of
 * reach (a cluster, docs/outbox.md): the other partitions' rows go on.
 *
 * A job's rows all go to one partition (its id picks it), so holding a
 * partition back, rather than single rows, keeps each job's rows in
 * commit order: once a row of partition P is held, every later row of P
 * is held too, without a call, until the partitions are tried again.
 * They are tried again only at the start of a batch, before its rows are
 * taken: the held rows (the oldest of their partitions) then come back
 * in the take, in row id order, ahead of any later row of theirs.
 *
 * The held rows stay in the table (their batch does not delete them) and
 * are left out of the next takes by id; at most RELAY_HELD_MAX of them,
 * beyond which the relay waits for the master as a whole batch would.
 */
#ifndef DQ_RELAY_DEFER_H
#define DQ_RELAY_DEFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RELAY_HELD_MAX 1024         /* rows held back at once */
#define RELAY_HELD_PARTS_MAX 256    /* partitions held back at once */

struct relay_held_part {
    const char *queue;          /* the configuration's name (it outlives this) */
    unsigned part;
    bool held;                  /* held now (false: to be tried again) */
    bool tried;                 /* a row of it was tried since it was let go */
    size_t rows;                /* rows held since it was last let go */
    size_t rows_before;         /* rows held when it was let go: taken again
                                   one by one, they still wait meanwhile */
};

struct relay_defer {
    int64_t ids[RELAY_HELD_MAX];        /* the rows held, left out of the take */
    size_t nids;
    char literal[RELAY_HELD_MAX * 21 + 3];  /* relay_defer_ids's */
    struct relay_held_part parts[RELAY_HELD_PARTS_MAX];
    size_t nparts;
    int64_t retry_at_ms;        /* monotonic: when the held partitions are tried again */
    int64_t backoff_ms;
};

/* At the start of a batch, before its take: when the time has come, let
 * the held rows come back and try their partitions again.  Returns true
 * when it did. */
bool relay_defer_retry_due(struct relay_defer *d, int64_t now_ms);

/* Whether rows of `queue`'s partition `part` are held back now; when not,
 * a row of it is about to be tried (noted for relay_defer_next_back). */
bool relay_defer_holds(struct relay_defer *d, const char *queue, unsigned part);

/* Hold back row `id` of `queue`'s partition `part`, whose master is out
 * of reach.  1 when the partition was not known to be out of reach (the
 * caller says so), 0 when it was; -1 when RELAY_HELD_MAX rows (or
 * RELAY_HELD_PARTS_MAX partitions) are held already: the caller then
 * waits for the master with the whole batch. */
int relay_defer_hold(struct relay_defer *d, const char *queue, unsigned part, int64_t id,
                     int64_t now_ms);

/* After a batch: a partition that was out of reach and whose rows went
 * through since it was tried again, copied to *out and forgotten; false
 * when there is none (left). */
bool relay_defer_next_back(struct relay_defer *d, struct relay_held_part *out);

/* How many rows wait for partitions out of reach: held now, or let go
 * for a try and not taken again yet. */
size_t relay_defer_count(const struct relay_defer *d);

/* The held rows' ids as a PostgreSQL array literal ("{}" when none, and
 * for d NULL), valid until the next call. */
const char *relay_defer_ids(struct relay_defer *d);

#endif
