#include "daemon/qparts.h"

#include <stdlib.h>

/* Known states of a partition's next due job, besides a server ms. */
#define QP_ASK INT64_MIN        /* not known: claim from it at the next sweep */
#define QP_EMPTY (-1)           /* nothing delayed there, as of its last claim */
/* A partition due this close after the estimated server time is asked
 * already: the estimate is off by up to half a round trip. */
#define QP_DUE_SLACK_MS 2

/* Worker k's homes first (p % W == k; k % N when W > N), then the rest,
 * both in ascending order. */
static void plan_order(struct qparts *p, unsigned k, unsigned nworkers)
{
    unsigned at = 0;
    if (nworkers == 0 || k >= nworkers) {
        for (unsigned i = 0; i < p->n; i++)     /* no plan: all are homes */
            p->order[i] = i;
        p->nhomes = p->n;
        return;
    }
    for (unsigned i = 0; i < p->n; i++)
        if (nworkers > p->n ? i == k % p->n : i % nworkers == k)
            p->order[at++] = i;
    p->nhomes = at;             /* >= 1: k < W, and k % N when W > N */
    for (unsigned i = 0; i < p->n; i++)
        if (!(nworkers > p->n ? i == k % p->n : i % nworkers == k))
            p->order[at++] = i;
}

int qparts_init(struct qparts *p, const struct redis_conf *rc, const char *queue,
                unsigned nparts, unsigned k, unsigned nworkers)
{
    *p = (struct qparts){ .n = nparts ? nparts : 1 };
    p->keys = calloc(p->n, sizeof *p->keys);
    p->order = calloc(p->n, sizeof *p->order);
    p->sweep = calloc(p->n, sizeof *p->sweep);
    p->known = calloc(p->n, sizeof *p->known);
    p->heard = calloc(p->n, sizeof *p->heard);
    p->unreachable = calloc(p->n, sizeof *p->unreachable);
    if (!p->keys || !p->order || !p->sweep || !p->known || !p->heard || !p->unreachable) {
        qparts_free(p);
        return -1;
    }
    for (unsigned i = 0; i < p->n; i++)
        keys_build_part(&p->keys[i], rc->prefix, queue, i, p->n);
    plan_order(p, k, nworkers);
    qparts_forget(p);
    return 0;
}

void qparts_free(struct qparts *p)
{
    free(p->keys);
    free(p->order);
    free(p->sweep);
    free(p->known);
    free(p->heard);
    free(p->unreachable);
    p->unreachable = NULL;
    p->keys = NULL;
    p->order = NULL;
    p->sweep = NULL;
    p->known = NULL;
    p->heard = NULL;
}

void qparts_forget(struct qparts *p)
{
    for (unsigned i = 0; i < p->n; i++)
        p->known[i] = QP_ASK;
}

static bool askable(const struct qparts *p, unsigned i, int64_t now_ms)
{
    int64_t due = p->known[i];
    return due == QP_ASK || (due >= 0 && due <= now_ms + QP_DUE_SLACK_MS);
}

/* Whether the sweep in progress is over: every partition it asks
 * answered, or one of them has more due at once and the homes it asks
 * have all had their turn (the next sweep starts over with them, before
 * any stealing). */
static bool sweep_over(const struct qparts *p)
{
    return p->started && (p->pos >= p->nsweep || (p->more && p->pos >= p->sweep_homes));
}

/* The partitions of a new sweep: the homes (starting with home_start),
 * then the others (starting with steal_start), each only when it may
 * have a job due by `now_ms`.  Returns how many. */
static unsigned plan_sweep(struct qparts *p, int64_t now_ms)
{
    unsigned at = 0;
    for (unsigned j = 0; j < p->nhomes; j++) {
        unsigned i = p->order[(p->home_start + j) % p->nhomes];
        if (askable(p, i, now_ms))
            p->sweep[at++] = i;
    }
    p->sweep_homes = at;
    unsigned others = p->n - p->nhomes;
    for (unsigned j = 0; j < others; j++) {
        unsigned i = p->order[p->nhomes + (p->steal_start + j) % others];
        if (askable(p, i, now_ms))
            p->sweep[at++] = i;
    }
    return at;
}

/* A new sweep moves both starts on by one, so that neither always
 * favours the same partition.  When no partition is known to have a job
 * due (the worker's idle cap ran out, or its estimate of the server's
 * clock woke it early), it asks them all: what it knows may be missing a
 * wake message. */
unsigned qparts_next_claim(struct qparts *p, int64_t now_ms)
{
    if (sweep_over(p)) {
        p->home_start = (p->home_start + 1) % p->nhomes;
        if (p->n > p->nhomes)
            p->steal_start = (p->steal_start + 1) % (p->n - p->nhomes);
    }
    if (!p->started || sweep_over(p)) {
        p->started = true;
        p->pos = 0;
        p->more = false;
        if ((p->nsweep = plan_sweep(p, now_ms)) == 0) {
            qparts_forget(p);
            p->nsweep = plan_sweep(p, now_ms);
        }
    }
    unsigned i = p->sweep[p->pos];
    p->heard[i] = -1;           /* what a wake says from now on, the claim may miss */
    return i;
}

bool qparts_out_of_reach(struct qparts *p, int64_t retry_at)
{
    unsigned i = p->sweep[p->pos < p->nsweep ? p->pos : 0];
    bool was = p->unreachable[i];
    p->heard[i] = -1;           /* a wake does not bring it back sooner */
    qparts_claimed(p, false, retry_at);
    p->unreachable[i] = true;
    return !was;
}

bool qparts_claimed(struct qparts *p, bool more, int64_t next_due)
{
    unsigned i = p->sweep[p->pos < p->nsweep ? p->pos : 0];
    bool was = p->unreachable[i];
    p->unreachable[i] = false;
    int64_t due = more ? QP_ASK : next_due < 0 ? QP_EMPTY : next_due;
    /* A wake heard while the claim was out may be of a job added after
     * the claim read the partition: the sooner of both. */
    if (due != QP_ASK && p->heard[i] >= 0 && (due == QP_EMPTY || p->heard[i] < due))
        due = p->heard[i];
    p->known[i] = due;
    p->pos++;
    if (more)
        p->more = true;
    return was;
}

void qparts_woken(struct qparts *p, unsigned i, int64_t due)
{
    if (i >= p->n || due < 0)
        return;
    if (p->heard[i] < 0 || due < p->heard[i])
        p->heard[i] = due;
    if (p->known[i] == QP_EMPTY || (p->known[i] != QP_ASK && due < p->known[i]))
        p->known[i] = due;
}

bool qparts_claim_now(const struct qparts *p)
{
    return !sweep_over(p) || p->more;
}

int64_t qparts_next_due(const struct qparts *p)
{
    int64_t next = -1;
    for (unsigned i = 0; i < p->n; i++) {
        int64_t due = p->known[i] == QP_ASK ? 0 : p->known[i];
        if (due >= 0 && (next < 0 || due < next))
            next = due;
    }
    return next;
}
