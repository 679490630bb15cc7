#include "daemon/settle_board.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

struct settle_board *settle_board_create(void)
{
    void *p = mmap(NULL, sizeof(struct settle_board), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void settle_board_destroy(struct settle_board *b)
{
    if (b)
        munmap(b, sizeof *b);
}

/* Copy the used entries of the slot's tables (the rest is never read). */
static void copy_tables(struct settle_post *p, const struct worker_slot *slot)
{
    for (int k = 0; k < SLOT_TABLES; k++) {
        const struct slot_table *from = &slot->tables[k];
        uint32_t n = __atomic_load_n(&from->n, __ATOMIC_ACQUIRE);
        if (n > DQ_CLAIM_MAX)
            n = DQ_CLAIM_MAX;
        p->tables[k].part = __atomic_load_n(&from->part, __ATOMIC_RELAXED);
        memcpy(p->tables[k].e, from->e, n * sizeof from->e[0]);
        p->tables[k].n = n;
    }
}

int settle_board_post(struct settle_board *b, const struct settle_death *d)
{
    for (size_t i = 0; i < SETTLE_BOARD_POSTS; i++) {
        struct settle_post *p = &b->posts[i];
        if (__atomic_load_n(&b->heads[i].state, __ATOMIC_ACQUIRE) != SP_FREE)
            continue;
        p->gen = b->heads[i].gen = d->gen;
        p->queue = d->queue;
        p->posted_ms = slots_now_ms();
        snprintf(p->who, sizeof p->who, "%s", d->who);
        snprintf(p->owner, sizeof p->owner, "%s", d->owner);
        snprintf(p->cause, sizeof p->cause, "%s", d->cause);
        struct slot_job job;
        if (slot_read_job(d->slot, &job))
            snprintf(p->running_type, sizeof p->running_type, "%s", job.type);
        else
            p->running_type[0] = '\0';
        p->running_failed = p->running_dead = 0;
        copy_tables(p, d->slot);
        __atomic_store_n(&b->heads[i].state, SP_POSTED, __ATOMIC_RELEASE);
        return 0;
    }
    return -1;
}

int settle_board_collect(struct settle_board *b,
                         void (*done)(const struct settle_post *p, void *arg), void *arg)
{
    int n = 0;
    for (size_t i = 0; i < SETTLE_BOARD_POSTS; i++) {
        if (__atomic_load_n(&b->heads[i].state, __ATOMIC_ACQUIRE) != SP_DONE)
            continue;
        if (done)
            done(&b->posts[i], arg);
        __atomic_store_n(&b->heads[i].state, SP_FREE, __ATOMIC_RELEASE);
        n++;
    }
    return n;
}

int settle_board_pending(const struct settle_board *b, uint64_t gen)
{
    int n = 0;
    for (size_t i = 0; i < SETTLE_BOARD_POSTS; i++)
        n += __atomic_load_n(&b->heads[i].state, __ATOMIC_ACQUIRE) != SP_FREE
             && b->heads[i].gen == gen;
    return n;
}

int settle_board_state(const struct settle_board *b, size_t i)
{
    return __atomic_load_n(&b->heads[i].state, __ATOMIC_ACQUIRE);
}

int settle_board_posted_for(const struct settle_board *b, size_t i, uint64_t gen)
{
    return settle_board_state(b, i) == SP_POSTED && b->heads[i].gen == gen;
}

void settle_board_done(struct settle_board *b, size_t i, int running_failed,
                       int running_dead)
{
    struct settle_post *p = &b->posts[i];
    p->running_failed = running_failed;
    p->running_dead = running_dead;
    __atomic_store_n(&b->heads[i].state, SP_DONE, __ATOMIC_RELEASE);
}

void settle_board_count_failover(struct settle_board *b)
{
    __atomic_fetch_add(&b->sentinel_failovers, 1, __ATOMIC_RELAXED);
}

uint64_t settle_board_failovers(const struct settle_board *b)
{
    return __atomic_load_n(&b->sentinel_failovers, __ATOMIC_RELAXED);
}

void settle_board_set_in_force(struct settle_board *b, uint64_t gen)
{
    __atomic_store_n(&b->gen_in_force, gen, __ATOMIC_RELEASE);
}

uint64_t settle_board_in_force(const struct settle_board *b)
{
    return __atomic_load_n(&b->gen_in_force, __ATOMIC_ACQUIRE);
}
