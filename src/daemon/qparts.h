/*
 * qparts: a daemon process's view of a partitioned queue (keys.h): the
 * keys of each of its N partitions, and, for a worker, the order it claims
 * from them in.
 *
 * Worker k of a queue's W workers has home partitions: p with p % W == k
 * (when W > N, the one partition k % N).  It claims from its homes in
 * turn, and steals from the others only when its homes have nothing due,
 * so that every partition is drained even when no worker calls it home
 * (a worker died, or W does not divide N).  The claims of one look at the
 * queue make a sweep: the homes (starting with the home after the one the
 * last sweep started with), then the others.  A sweep ends early when a
 * partition it claimed from has more due at once (a full batch): the next
 * sweep starts over with the homes.  With N = 1 a sweep is one claim, and
 * the worker claims exactly as an unpartitioned one does.
 */
#ifndef DQ_QPARTS_H
#define DQ_QPARTS_H

#include <stdbool.h>
#include <stdint.h>

#include "config/redis_conf.h"
#include "lib/keys.h"

struct qparts {
    unsigned n;                 /* the queue's partitions, >= 1 */
    struct queue_keys *keys;    /* n: partition i's keys */
    unsigned *order;            /* n: the homes, then the others */
    unsigned nhomes;
    /* The sweep in progress (worker only). */
    unsigned pos;               /* claims answered in this sweep */
    unsigned home_start;        /* the home it started with */
    unsigned steal_start;       /* the other it steals from first */
    bool more;                  /* a partition has more due at once */
    int64_t next_due;           /* server ms: the soonest due seen; -1 none */
};

/* Keys for queue `queue` of `nparts` partitions under rc's prefix; the
 * claim order of worker `k` of `nworkers` (0 of 1 for a process that does
 * not claim).  -1 when out of memory. */
int qparts_init(struct qparts *p, const struct redis_conf *rc, const char *queue,
                unsigned nparts, unsigned k, unsigned nworkers)
    __attribute__((warn_unused_result));

void qparts_free(struct qparts *p);

/* Partition i's keys. */
static inline const struct queue_keys *qparts_keys(const struct qparts *p, unsigned i)
{
    return &p->keys[i < p->n ? i : 0];
}

/* The partition to claim from next: the sweep's next, or the first of a
 * new sweep when the last one ended. */
unsigned qparts_next_claim(struct qparts *p);

/* The claim from the partition qparts_next_claim named was answered:
 * `more` when that partition has more due now (a full batch), else the
 * server ms of its next due job (-1 none). */
void qparts_claimed(struct qparts *p, bool more, int64_t next_due);

/* Whether to claim again at once (the sweep goes on, or found more due);
 * false: sleep until qparts_next_due.  Either way the sweep is over
 * when this says false. */
bool qparts_claim_now(const struct qparts *p);

/* The soonest due time the last sweep saw (server ms), -1 none. */
int64_t qparts_next_due(const struct qparts *p);

#endif
