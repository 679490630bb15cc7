/*
 * The shared half of metrics.h: the supervisor's totals and child table in
 * memory shared with the admin process, written under a sequence counter
 * (a seqlock: odd while a change is being written), and the admin's
 * consistent copy of them with the live slots added.
 *
 * Why one counter for all of it: when a child exits the supervisor folds
 * its slot into the totals and zeroes the slot; a reader that saw the
 * totals before and the slot after would see its counts go back.  The
 * reader therefore reads the totals, the child table and the live slots
 * between two readings of the counter, and starts again when it moved.
 */
#include "daemon/admin/metrics.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

/* Beyond this many (queue, type) rows, new types of a queue are counted
 * under SLOT_OTHER_TYPE: a producer inventing types cannot grow the page
 * without bound.  The shared table has room for each queue's own rows on
 * top. */
#define MAX_ROWS 4096
#define SHARED_ROWS (MAX_ROWS + 4 * DCONFIG_MAX_QUEUES)
#define READ_TRIES 1000             /* 100 us apart: 100 ms */

struct metrics {
    uint32_t seq;                   /* even: stable; odd: being written */
    int depth;                      /* begin/end nesting (the supervisor's) */
    uint64_t restarts;
    uint64_t reconnects;
    uint64_t failovers;             /* master moves announced by the sentinels */
    int stopping;
    uint64_t conf_gen;
    size_t nchildren;               /* rows posted: the highest used + 1 */
    struct metrics_post children[METRICS_CHILDREN_MAX];
    struct metrics_source sources[METRICS_SOURCES_MAX]; /* exited relays' */
    struct metrics_table totals;    /* rows: just after this struct */
};

/* ---- the table -------------------------------------------------------------- */

static struct metrics_row *find_row(struct metrics_table *t, const char *queue,
                                    const char *type)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->rows[i].type, type) == 0 && strcmp(t->rows[i].queue, queue) == 0)
            return &t->rows[i];
    return NULL;
}

/* The row of (queue, type), added when new; NULL when out of memory (or
 * of room, in the shared table). */
static struct metrics_row *get_row(struct metrics_table *t, const char *queue,
                                   const char *type)
{
    struct metrics_row *r = find_row(t, queue, type);
    if (r)
        return r;
    if (t->n >= MAX_ROWS && *type && (r = find_row(t, queue, SLOT_OTHER_TYPE)))
        return r;
    if (t->n >= MAX_ROWS && *type)
        type = SLOT_OTHER_TYPE;
    if (t->n == t->cap && t->fixed)
        return NULL;
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
        struct metrics_row *rows = realloc(t->rows, cap * sizeof *rows);
        if (!rows)
            return NULL;
        t->rows = rows;
        t->cap = cap;
    }
    r = &t->rows[t->n];
    memset(r, 0, sizeof *r);
    snprintf(r->queue, sizeof r->queue, "%s", queue);
    snprintf(r->type, sizeof r->type, "%s", type);
    t->n++;
    return r;
}

static void add_counters(struct slot_counters *to, const struct slot_counters *from)
{
    to->claimed += slot_get(&from->claimed);
    to->succeeded += slot_get(&from->succeeded);
    to->retried += slot_get(&from->retried);
    to->dead += slot_get(&from->dead);
    to->stale += slot_get(&from->stale);
}

static void add_hist(struct slot_hist *to, const struct slot_hist *from)
{
    for (int i = 0; i <= SLOT_HIST_BOUNDS; i++)
        to->counts[i] += slot_get(&from->counts[i]);
    to->sum_us += slot_get(&from->sum_us);
}

static void add_row(struct metrics_row *to, const struct metrics_row *from)
{
    add_counters(&to->c, &from->c);
    to->timed_out += from->timed_out;
    to->orphans += from->orphans;
    add_hist(&to->duration, &from->duration);
    add_hist(&to->lateness, &from->lateness);
    for (int p = 0; p < DQ_PRIORITY_LEVELS; p++)
        add_hist(&to->lateness_by_priority[p], &from->lateness_by_priority[p]);
}

/* Add the reaper's fsck repairs (zero in a worker's slot) to the queues'
 * rows. */
static void fold_fsck(struct metrics_table *t, const struct slot_fsck *f)
{
    for (int i = 0; i < SLOT_FSCK_QUEUES; i++) {
        const char *queue = slot_fsck_queue_name(&f->queues[i]);
        struct metrics_row *r = queue ? get_row(t, queue, "") : NULL;
        if (r)
            r->orphans += slot_get(&f->queues[i].repaired)
                          + slot_get(&f->queues[i].claim_dropped);
    }
}

/* Add a slot's figures to `t` (and its reconnects to *reconnects). */
static void fold(struct metrics_table *t, uint64_t *reconnects, const char *queue,
                 const struct worker_slot *slot)
{
    *reconnects += slot_get(&slot->redis_reconnects);
    fold_fsck(t, &slot->fsck);
    if (!queue)
        return;
    struct metrics_row *q = get_row(t, queue, "");
    if (q)
        q->c.stale += slot_get(&slot->stale);
    for (int p = 0; q && p < DQ_PRIORITY_LEVELS; p++)
        add_hist(&q->lateness_by_priority[p], &slot->lateness_by_priority[p]);
    for (int i = 0; i < SLOT_TYPES; i++) {
        const char *type = slot_type_name(&slot->types[i]);
        struct metrics_row *r = type ? get_row(t, queue, type) : NULL;
        if (!r)
            continue;
        add_counters(&r->c, &slot->types[i].counters);
        add_hist(&r->duration, &slot->types[i].duration);
        add_hist(&r->lateness, &slot->types[i].lateness);
    }
}

/* ---- the supervisor's side ------------------------------------------------- */

struct metrics *metrics_new(void)
{
    size_t len = sizeof(struct metrics) + SHARED_ROWS * sizeof(struct metrics_row);
    _Static_assert(sizeof(struct metrics) % _Alignof(struct metrics_row) == 0,
                   "the rows follow the header aligned");
    /* Lazily backed (MAP_NORESERVE): only the rows in use cost memory. */
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    struct metrics *m = p;
    m->totals.rows = (struct metrics_row *)(m + 1);
    m->totals.cap = SHARED_ROWS;
    m->totals.fixed = 1;
    m->conf_gen = 1;
    return m;
}

#define MAPPED_LEN (sizeof(struct metrics) + SHARED_ROWS * sizeof(struct metrics_row))

void metrics_free(struct metrics *m)
{
    if (m)
        munmap(m, MAPPED_LEN);
}

int metrics_seal(const struct metrics *m)
{
    return mprotect((void *)m, MAPPED_LEN, PROT_READ);
}

void metrics_begin(struct metrics *m)
{
    if (m->depth++ > 0)
        return;
    __atomic_store_n(&m->seq, m->seq + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
}

/* Add a relay's rows to its source's entry (made when new; not kept
 * when the table is full). */
static void fold_relay(struct metrics_source *t, const char *source,
                       const struct worker_slot *slot)
{
    if (!source)
        return;
    for (int i = 0; i < METRICS_SOURCES_MAX; i++) {
        if (t[i].name[0] && strcmp(t[i].name, source) != 0)
            continue;
        if (!t[i].name[0])
            snprintf(t[i].name, sizeof t[i].name, "%s", source);
        t[i].applied += slot_get(&slot->relay_applied);
        t[i].dead += slot_get(&slot->relay_dead);
        return;
    }
}

void metrics_end(struct metrics *m)
{
    if (--m->depth > 0)
        return;
    __atomic_store_n(&m->seq, m->seq + 1, __ATOMIC_RELEASE);
}

void metrics_fold_slot(struct metrics *m, const char *queue, const struct worker_slot *slot)
{
    metrics_begin(m);
    fold(&m->totals, &m->reconnects, queue, slot);
    metrics_end(m);
}

void metrics_fold_relay(struct metrics *m, const char *source, const struct worker_slot *slot)
{
    metrics_begin(m);
    fold_relay(m->sources, source, slot);
    metrics_end(m);
}

struct metrics_source metrics_source_totals(const struct metrics_snap *s, const char *name)
{
    for (int i = 0; i < METRICS_SOURCES_MAX; i++)
        if (strcmp(s->sources[i].name, name) == 0)
            return s->sources[i];
    return (struct metrics_source){ .applied = 0 };
}

void metrics_count_timeout(struct metrics *m, const char *queue, const char *type)
{
    metrics_begin(m);
    struct metrics_row *r = get_row(&m->totals, queue, type);
    if (r)
        r->timed_out++;
    metrics_end(m);
}

void metrics_count_orphan(struct metrics *m, const char *queue, const char *type, int dead)
{
    metrics_begin(m);
    struct metrics_row *r = get_row(&m->totals, queue, type);
    if (r && dead)
        r->c.dead++;
    else if (r)
        r->c.retried++;
    metrics_end(m);
}

void metrics_count_restart(struct metrics *m)
{
    metrics_begin(m);
    m->restarts++;
    metrics_end(m);
}

void metrics_count_failover(struct metrics *m)
{
    metrics_begin(m);
    m->failovers++;
    metrics_end(m);
}

void metrics_post_child(struct metrics *m, size_t i, enum metrics_role role, int pid,
                        int in_force, const char *queue)
{
    if (i >= METRICS_CHILDREN_MAX)
        return;
    const char *q = queue ? queue : "";
    struct metrics_post *to = &m->children[i];
    if (to->role == (int)role && to->pid == pid && to->in_force == in_force
        && strncmp(to->queue, q, sizeof to->queue) == 0)
        return;
    metrics_begin(m);
    to->role = (int)role;
    to->pid = pid;
    to->in_force = in_force;
    snprintf(to->queue, sizeof to->queue, "%s", q);
    if (role != MR_NONE && i >= m->nchildren)
        m->nchildren = i + 1;
    metrics_end(m);
}

void metrics_post_state(struct metrics *m, int stopping, uint64_t conf_gen)
{
    if (m->stopping == stopping && m->conf_gen == conf_gen)
        return;
    metrics_begin(m);
    m->stopping = stopping;
    m->conf_gen = conf_gen;
    metrics_end(m);
}

/* ---- the admin process's side ------------------------------------------------ */

static int cmp_rows(const void *a, const void *b)
{
    const struct metrics_row *x = a, *y = b;
    int c = strcmp(x->queue, y->queue);
    return c ? c : strcmp(x->type, y->type);
}

/* One try at a copy: 0 when it is consistent, 1 when the supervisor was
 * writing (try again), -1 when out of memory. */
static int try_copy(const struct metrics *m, struct metrics_snap *s)
{
    uint32_t seq = __atomic_load_n(&m->seq, __ATOMIC_ACQUIRE);
    if (seq & 1)
        return 1;
    size_t n = m->totals.n < m->totals.cap ? m->totals.n : m->totals.cap;
    s->t.n = 0;
    for (size_t i = 0; i < n; i++) {
        struct metrics_row row = m->totals.rows[i];
        row.queue[sizeof row.queue - 1] = row.type[sizeof row.type - 1] = '\0';
        struct metrics_row *r = get_row(&s->t, row.queue, row.type);
        if (!r)
            return -1;
        add_row(r, &row);
    }
    s->restarts = m->restarts;
    s->reconnects = m->reconnects;
    s->failovers = m->failovers;
    s->stopping = m->stopping;
    s->conf_gen = m->conf_gen;
    s->nchildren = m->nchildren < METRICS_CHILDREN_MAX ? m->nchildren : METRICS_CHILDREN_MAX;
    memcpy(s->children, m->children, s->nchildren * sizeof s->children[0]);
    memcpy(s->sources, m->sources, sizeof s->sources);
    for (int i = 0; i < METRICS_SOURCES_MAX; i++)
        s->sources[i].name[sizeof s->sources[i].name - 1] = '\0';
    for (size_t i = 0; i < s->nchildren; i++) {
        struct metrics_post *c = &s->children[i];
        c->queue[sizeof c->queue - 1] = '\0';
        if (c->role == MR_RELAY)
            fold_relay(s->sources, c->queue, &s->slots[i]);
        else if (c->role != MR_NONE)
            fold(&s->t, &s->reconnects, c->role == MR_WORKER ? c->queue : NULL,
                 &s->slots[i]);
    }
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n(&m->seq, __ATOMIC_RELAXED) == seq ? 0 : 1;
}

struct metrics_snap *metrics_snap_take(const struct metrics *m,
                                       const struct worker_slot *slots)
{
    struct metrics_snap *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->slots = slots;
    for (int tries = 0; tries < READ_TRIES; tries++) {
        int rc = try_copy(m, s);
        if (rc == 0) {
            if (s->t.n)
                qsort(s->t.rows, s->t.n, sizeof *s->t.rows, cmp_rows);
            return s;
        }
        if (rc < 0)
            break;
        struct timespec pause = { 0, 100000 };
        nanosleep(&pause, NULL);
    }
    metrics_snap_free(s);
    errno = EAGAIN;
    return NULL;
}

void metrics_snap_free(struct metrics_snap *s)
{
    if (!s)
        return;
    free(s->t.rows);
    free(s);
}

/* Add a row's (or a slot type's) figures to a queue's totals. */
static void add_totals(struct ui_totals *to, const struct slot_counters *c,
                       const struct slot_hist *lateness)
{
    to->succeeded += c->succeeded;
    to->retried += c->retried;
    to->dead += c->dead;
    add_hist(&to->lateness, lateness);
}

void metrics_queue_totals(const struct metrics_snap *s, const char *queue,
                          struct ui_totals *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < s->t.n; i++) {
        const struct metrics_row *r = &s->t.rows[i];
        if (r->type[0] && strcmp(r->queue, queue) == 0)
            add_totals(out, &r->c, &r->lateness);
    }
}
