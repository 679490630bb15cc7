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
 *
 * A sweep asks only the partitions that may have a job due: a claim
 * answers when its partition's next job is due (or that it has none), a
 * wake message when a job there became due sooner, and a partition known
 * to have nothing due yet is not asked again before that time.  What
 * the worker knows is never later than the truth (a claim of another
 * worker only takes jobs away, and every script that makes a job due
 * sooner than the head publishes a wake); when it knows of nothing due,
 * or may have missed messages (qparts_forget), it asks them all.
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
    /* The sweeps (worker only). */
    int64_t *known;             /* n: when partition i's next job is due
                                   (server ms), as far as the worker knows */
    int64_t *heard;             /* n: the soonest wake for i since its last
                                   claim was sent; -1 none */
    bool *unreachable;          /* n: its master was out of reach at its
                                   last turn */
    unsigned *sweep;            /* the partitions the sweep in progress asks */
    unsigned nsweep, sweep_homes;   /* how many; how many of them homes */
    bool started;
    unsigned pos;               /* claims answered in this sweep */
    unsigned home_start;        /* the home it started with */
    unsigned steal_start;       /* the other it steals from first */
    bool more;                  /* a partition has more due at once */
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
 * new sweep when the last one ended (`now_ms`: the server's time, as the
 * worker estimates it). */
unsigned qparts_next_claim(struct qparts *p, int64_t now_ms);

/* The claim from the partition qparts_next_claim named was answered:
 * `more` when that partition has more due now (a full batch), else the
 * server ms of its next due job (-1 none).  True when the partition had
 * been out of reach until now. */
bool qparts_claimed(struct qparts *p, bool more, int64_t next_due);

/* The partition qparts_next_claim named cannot be asked now (its master
 * is down): the sweep goes on without it, which is asked again from
 * `retry_at` (server ms) on.  True when it was in reach until now. */
bool qparts_out_of_reach(struct qparts *p, int64_t retry_at);

/* A wake message from partition i: a job there is due at `due` (server
 * ms), maybe sooner than the worker knew. */
void qparts_woken(struct qparts *p, unsigned i, int64_t due);

/* Messages may have been lost (the subscription or the connection was
 * made again, the queue resumed): ask every partition at the next sweep. */
void qparts_forget(struct qparts *p);

/* Whether to claim again at once (the sweep goes on, or found more due);
 * false: sleep until qparts_next_due.  Either way the sweep is over
 * when this says false. */
bool qparts_claim_now(const struct qparts *p);

/* The soonest time a partition may have a job due (server ms; in the
 * past when one is to be asked at once), -1 when none has any. */
int64_t qparts_next_due(const struct qparts *p);

#endif
