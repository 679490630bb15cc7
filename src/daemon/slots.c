#include "daemon/slots.h"
#include "util/clock.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

struct worker_slot *slots_create(size_t n)
{
    void *p = mmap(NULL, n * sizeof(struct worker_slot), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void slots_destroy(struct worker_slot *s, size_t n)
{
    if (s)
        munmap(s, n * sizeof *s);
}

int slots_seal(struct worker_slot *s, size_t n)
{
    return mprotect(s, n * sizeof *s, PROT_READ);
}

void slot_reset(struct worker_slot *s)
{
    memset(s, 0, offsetof(struct worker_slot, tables));
    for (int t = 0; t < SLOT_TABLES; t++)
        s->tables[t].n = 0;
}

void slot_table_publish(struct worker_slot *s, int t, unsigned part, const dq_job *jobs,
                        size_t n)
{
    struct slot_table *tb = &s->tables[t];
    tb->part = part;
    for (size_t i = 0; i < n; i++) {
        struct slot_entry *e = &tb->e[i];
        e->state = SE_PENDING;
        e->fence = jobs[i].fence;
        /* On the job path (every claim): a bounded copy, not snprintf. */
        size_t len = strnlen(jobs[i].id, DQ_ID_MAX);
        memcpy(e->id, jobs[i].id, len);
        e->id[len] = '\0';
    }
    __atomic_store_n(&tb->n, (uint32_t)n, __ATOMIC_RELEASE);
}

void slot_entry_set(struct worker_slot *s, int t, size_t i, enum slot_entry_state state)
{
    __atomic_store_n(&s->tables[t].e[i].state, (int)state, __ATOMIC_RELEASE);
}

void slot_entry_fail(struct worker_slot *s, int t, size_t i, enum slot_entry_state state,
                     const char *type, int64_t retry_delay_ms, const char *error)
{
    struct slot_entry *e = &s->tables[t].e[i];
    snprintf(e->type, sizeof e->type, "%s", type);
    snprintf(e->error, sizeof e->error, "%s", error);
    e->retry_delay_ms = retry_delay_ms;
    slot_entry_set(s, t, i, state);
}

void slot_table_clear(struct worker_slot *s, int t)
{
    __atomic_store_n(&s->tables[t].n, 0, __ATOMIC_RELEASE);
}

void slot_set_job(struct worker_slot *s, const struct slot_job *job)
{
    __atomic_add_fetch(&s->seq, 1, __ATOMIC_ACQ_REL);
    if (job)
        s->job = *job;
    else
        memset(&s->job, 0, sizeof s->job);
    __atomic_add_fetch(&s->seq, 1, __ATOMIC_ACQ_REL);
}

int slot_read_job(const struct worker_slot *s, struct slot_job *out)
{
    for (int tries = 0; tries < 1000; tries++) {
        uint32_t before = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
        if (before & 1)
            continue;
        memcpy(out, &s->job, sizeof *out);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) == before)
            return out->started_ms != 0;
    }
    /* The worker is stuck mid-write (it was killed there): the copy may be
     * torn, so report no job rather than act on a wrong id. */
    memset(out, 0, sizeof *out);
    return 0;
}

int64_t slots_now_ms(void)
{
    return clock_mono_ms();
}

int64_t slots_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

struct slot_type *slot_type_entry(struct worker_slot *s, const char *type)
{
    for (int i = 0; i < SLOT_TYPES - 1; i++) {
        struct slot_type *t = &s->types[i];
        if (!t->used) {
            /* Only this worker writes: publish the name, then the flag. */
            snprintf(t->type, sizeof t->type, "%s", type);
            __atomic_store_n(&t->used, 1, __ATOMIC_RELEASE);
            return t;
        }
        if (strcmp(t->type, type) == 0)
            return t;
    }
    struct slot_type *other = &s->types[SLOT_TYPES - 1];
    if (!other->used) {
        snprintf(other->type, sizeof other->type, "%s", SLOT_OTHER_TYPE);
        __atomic_store_n(&other->used, 1, __ATOMIC_RELEASE);
    }
    return other;
}

void slot_hist_observe(struct slot_hist *h, int64_t us)
{
    static const int64_t bounds[SLOT_HIST_BOUNDS] = SLOT_HIST_BOUNDS_US;
    if (us < 0)
        us = 0;
    int i = 0;
    while (i < SLOT_HIST_BOUNDS && us > bounds[i])
        i++;
    slot_add(&h->counts[i], 1);
    slot_add(&h->sum_us, (uint64_t)us);
}

const char *slot_type_name(const struct slot_type *t)
{
    return __atomic_load_n(&t->used, __ATOMIC_ACQUIRE) ? t->type : NULL;
}

struct slot_fsck_queue *slot_fsck_entry(struct slot_fsck *f, const char *queue)
{
    for (int i = 0; i < SLOT_FSCK_QUEUES; i++) {
        struct slot_fsck_queue *q = &f->queues[i];
        if (!q->used) {
            /* Only the reaper writes: publish the name, then the flag. */
            snprintf(q->queue, sizeof q->queue, "%s", queue);
            __atomic_store_n(&q->used, 1, __ATOMIC_RELEASE);
            return q;
        }
        if (strcmp(q->queue, queue) == 0)
            return q;
    }
    return NULL;
}

const char *slot_fsck_queue_name(const struct slot_fsck_queue *q)
{
    return __atomic_load_n(&q->used, __ATOMIC_ACQUIRE) ? q->queue : NULL;
}

void slot_fsck_set_reason(struct slot_fsck *f, const char *reason)
{
    if (strcmp(f->reason, reason) == 0)
        return;                 /* one writer: its own copy is stable */
    __atomic_add_fetch(&f->seq, 1, __ATOMIC_ACQ_REL);
    snprintf(f->reason, sizeof f->reason, "%s", reason);
    __atomic_add_fetch(&f->seq, 1, __ATOMIC_ACQ_REL);
}

int slot_fsck_reason(const struct slot_fsck *f, char *out, size_t len)
{
    char copy[SLOT_FSCK_REASON];
    for (int tries = 0; tries < 1000; tries++) {
        uint32_t before = __atomic_load_n(&f->seq, __ATOMIC_ACQUIRE);
        if (before & 1)
            continue;
        memcpy(copy, f->reason, sizeof copy);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&f->seq, __ATOMIC_ACQUIRE) == before) {
            copy[sizeof copy - 1] = '\0';
            snprintf(out, len, "%s", copy);
            return copy[0] != '\0';
        }
    }
    /* Stuck mid-write (killed there): say nothing rather than half a line. */
    if (len)
        out[0] = '\0';
    return 0;
}

void slot_claims_ok(struct worker_slot *s)
{
    struct slot_claims *c = &s->claims;
    if (c->failing_since_ms == 0) {     /* one writer: its own copy is stable */
        __atomic_store_n(&c->ok_ms, slots_now_ms(), __ATOMIC_RELAXED);
        return;
    }
    __atomic_add_fetch(&c->seq, 1, __ATOMIC_ACQ_REL);
    c->ok_ms = slots_now_ms();
    c->failing_since_ms = 0;
    c->error[0] = '\0';
    __atomic_add_fetch(&c->seq, 1, __ATOMIC_ACQ_REL);
}

void slot_claims_failed(struct worker_slot *s, const char *why)
{
    struct slot_claims *c = &s->claims;
    if (c->failing_since_ms != 0)
        return;
    __atomic_add_fetch(&c->seq, 1, __ATOMIC_ACQ_REL);
    c->failing_since_ms = slots_now_ms();
    snprintf(c->error, sizeof c->error, "%s", why);
    __atomic_add_fetch(&c->seq, 1, __ATOMIC_ACQ_REL);
}

int slot_claims_read(const struct worker_slot *s, struct slot_claims *out)
{
    const struct slot_claims *c = &s->claims;
    for (int tries = 0; tries < 1000; tries++) {
        uint32_t before = __atomic_load_n(&c->seq, __ATOMIC_ACQUIRE);
        if (before & 1)
            continue;
        memcpy(out, c, sizeof *out);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&c->seq, __ATOMIC_ACQUIRE) == before) {
            out->error[sizeof out->error - 1] = '\0';
            return out->failing_since_ms != 0;
        }
    }
    /* Stuck mid-write (killed there): say nothing rather than half a line. */
    memset(out, 0, sizeof *out);
    return 0;
}
