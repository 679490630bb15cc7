#include "daemon/qparts.h"

#include <stdlib.h>

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
    *p = (struct qparts){ .n = nparts ? nparts : 1, .next_due = -1 };
    p->keys = calloc(p->n, sizeof *p->keys);
    p->order = calloc(p->n, sizeof *p->order);
    if (!p->keys || !p->order) {
        qparts_free(p);
        return -1;
    }
    for (unsigned i = 0; i < p->n; i++)
        keys_build_part(&p->keys[i], rc->prefix, queue, i, p->n);
    plan_order(p, k, nworkers);
    return 0;
}

void qparts_free(struct qparts *p)
{
    free(p->keys);
    free(p->order);
    p->keys = NULL;
    p->order = NULL;
}

/* Whether the sweep in progress is over: every partition answered, or
 * one of them has more due at once and the homes have all had their turn
 * (the next sweep starts over with them, before any stealing). */
static bool sweep_over(const struct qparts *p)
{
    return p->pos > 0 && (p->pos >= p->n || (p->more && p->pos >= p->nhomes));
}

/* A sweep tries the homes, starting with home_start, then the others,
 * starting with steal_start: each new sweep moves both on by one, so that
 * neither always favours the same partition. */
unsigned qparts_next_claim(struct qparts *p)
{
    if (sweep_over(p)) {
        p->home_start = (p->home_start + 1) % p->nhomes;
        if (p->n > p->nhomes)
            p->steal_start = (p->steal_start + 1) % (p->n - p->nhomes);
        p->pos = 0;
        p->more = false;
        p->next_due = -1;
    }
    if (p->pos < p->nhomes)
        return p->order[(p->home_start + p->pos) % p->nhomes];
    unsigned others = p->n - p->nhomes;
    return p->order[p->nhomes + (p->steal_start + p->pos - p->nhomes) % others];
}

void qparts_claimed(struct qparts *p, bool more, int64_t next_due)
{
    p->pos++;
    if (more)
        p->more = true;
    else if (next_due >= 0 && (p->next_due < 0 || next_due < p->next_due))
        p->next_due = next_due;
}

bool qparts_claim_now(const struct qparts *p)
{
    return !sweep_over(p) || p->more;
}

int64_t qparts_next_due(const struct qparts *p)
{
    return p->next_due;
}
