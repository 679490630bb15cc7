#include "config.h"

#include "daemon/admin/metrics.h"

#include <stdlib.h>
#include <string.h>

/* Beyond this many (queue, type) rows, new types of a queue are counted
 * under SLOT_OTHER_TYPE: a producer inventing types cannot grow the page
 * without bound. */
#define MAX_ROWS 4096

/* The figures of one (queue, type); type "" holds the queue's own (stale). */
struct row {
    char *queue;
    char type[DQ_TYPE_MAX + 1];
    struct slot_counters c;
    uint64_t timed_out;
    uint64_t orphans;           /* type "" only: the reaper's fsck repairs */
    struct slot_hist duration;
    struct slot_hist lateness;
    struct slot_hist lateness_by_priority[DQ_PRIORITY_LEVELS]; /* type "" only */
};

struct table {
    struct row *rows;
    size_t n, cap;
};

struct metrics {
    struct table totals;        /* exited children and the supervisor's counts */
    uint64_t restarts;
    uint64_t reconnects;
    uint64_t failovers;         /* master moves announced by the sentinels */
};

/* ---- the table ------------------------------------------------------------ */

static struct row *find_row(struct table *t, const char *queue, const char *type)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->rows[i].type, type) == 0 && strcmp(t->rows[i].queue, queue) == 0)
            return &t->rows[i];
    return NULL;
}

/* The row of (queue, type), added when new; NULL when out of memory. */
static struct row *get_row(struct table *t, const char *queue, const char *type)
{
    struct row *r = find_row(t, queue, type);
    if (r)
        return r;
    if (t->n >= MAX_ROWS && *type && (r = find_row(t, queue, SLOT_OTHER_TYPE)))
        return r;
    if (t->n >= MAX_ROWS && *type)
        type = SLOT_OTHER_TYPE;
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
        struct row *rows = realloc(t->rows, cap * sizeof *rows);
        if (!rows)
            return NULL;
        t->rows = rows;
        t->cap = cap;
    }
    r = &t->rows[t->n];
    memset(r, 0, sizeof *r);
    if (!(r->queue = strdup(queue)))
        return NULL;
    snprintf(r->type, sizeof r->type, "%s", type);
    t->n++;
    return r;
}

static void table_free(struct table *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->rows[i].queue);
    free(t->rows);
    memset(t, 0, sizeof *t);
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

static void add_row(struct row *to, const struct row *from)
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
static void fold_fsck(struct table *t, const struct slot_fsck *f)
{
    for (int i = 0; i < SLOT_FSCK_QUEUES; i++) {
        const char *queue = slot_fsck_queue_name(&f->queues[i]);
        struct row *r = queue ? get_row(t, queue, "") : NULL;
        if (r)
            r->orphans += slot_get(&f->queues[i].repaired)
                          + slot_get(&f->queues[i].claim_dropped);
    }
}

/* Add a slot's figures to `t` (and its reconnects to *reconnects). */
static void fold(struct table *t, uint64_t *reconnects, const char *queue,
                 const struct worker_slot *slot)
{
    *reconnects += slot_get(&slot->redis_reconnects);
    fold_fsck(t, &slot->fsck);
    if (!queue)
        return;
    struct row *q = get_row(t, queue, "");
    if (q)
        q->c.stale += slot_get(&slot->stale);
    for (int p = 0; q && p < DQ_PRIORITY_LEVELS; p++)
        add_hist(&q->lateness_by_priority[p], &slot->lateness_by_priority[p]);
    for (int i = 0; i < SLOT_TYPES; i++) {
        const char *type = slot_type_name(&slot->types[i]);
        struct row *r = type ? get_row(t, queue, type) : NULL;
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
    return calloc(1, sizeof(struct metrics));
}

void metrics_free(struct metrics *m)
{
    if (!m)
        return;
    table_free(&m->totals);
    free(m);
}

void metrics_fold_slot(struct metrics *m, const char *queue, const struct worker_slot *slot)
{
    fold(&m->totals, &m->reconnects, queue, slot);
}

void metrics_count_timeout(struct metrics *m, const char *queue, const char *type)
{
    struct row *r = get_row(&m->totals, queue, type);
    if (r)
        r->timed_out++;
}

void metrics_count_orphan(struct metrics *m, const char *queue, const char *type, int dead)
{
    struct row *r = get_row(&m->totals, queue, type);
    if (r && dead)
        r->c.dead++;
    else if (r)
        r->c.retried++;
}

void metrics_count_restart(struct metrics *m)
{
    m->restarts++;
}

void metrics_count_failover(struct metrics *m)
{
    m->failovers++;
}

/* Add a row's (or a slot type's) figures to a queue's totals. */
static void add_totals(struct ui_totals *to, const struct slot_counters *c,
                       const struct slot_hist *lateness)
{
    to->succeeded += slot_get(&c->succeeded);
    to->retried += slot_get(&c->retried);
    to->dead += slot_get(&c->dead);
    add_hist(&to->lateness, lateness);
}

void metrics_queue_totals(const struct metrics *m, const struct metrics_view *v,
                          const char *queue, struct ui_totals *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < m->totals.n; i++) {
        const struct row *r = &m->totals.rows[i];
        if (r->type[0] && strcmp(r->queue, queue) == 0)
            add_totals(out, &r->c, &r->lateness);
    }
    for (size_t i = 0; i < v->nchildren; i++) {
        const struct metrics_child *c = &v->children[i];
        if (!c->queue || strcmp(c->queue, queue) != 0)
            continue;
        for (int k = 0; k < SLOT_TYPES; k++)
            if (slot_type_name(&c->slot->types[k]))
                add_totals(out, &c->slot->types[k].counters, &c->slot->types[k].lateness);
    }
}

/* ---- the text format ---------------------------------------------------------- */

/* A label value: backslash, double quote and newline escaped. */
static void put_label(FILE *out, const char *name, const char *value)
{
    fprintf(out, "%s=\"", name);
    for (const char *p = value; *p; p++) {
        if (*p == '\\' || *p == '"')
            fputc('\\', out);
        if (*p == '\n')
            fputs("\\n", out);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

static void put_head(FILE *out, const char *name, const char *type, const char *help)
{
    fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{queue="..",type=".."[,le=".."]} */
static void put_series(FILE *out, const char *name, const struct row *r, const char *le)
{
    fprintf(out, "%s{", name);
    put_label(out, "queue", r->queue);
    fputc(',', out);
    put_label(out, "type", r->type);
    if (le) {
        fputc(',', out);
        put_label(out, "le", le);
    }
    fputs("} ", out);
}

static int cmp_rows(const void *a, const void *b)
{
    const struct row *x = a, *y = b;
    int c = strcmp(x->queue, y->queue);
    return c ? c : strcmp(x->type, y->type);
}

enum field { F_CLAIMED, F_SUCCEEDED, F_RETRIED, F_DEAD, F_TIMED_OUT };

static uint64_t field(const struct row *r, enum field f)
{
    switch (f) {
    case F_CLAIMED: return r->c.claimed;
    case F_SUCCEEDED: return r->c.succeeded;
    case F_RETRIED: return r->c.retried;
    case F_DEAD: return r->c.dead;
    case F_TIMED_OUT: return r->timed_out;
    }
    return 0;
}

static void put_counters(FILE *out, const struct table *t)
{
    static const struct { const char *name, *help; enum field f; } fams[] = {
        { "delayq_jobs_claimed_total", "Jobs claimed by the workers.", F_CLAIMED },
        { "delayq_jobs_succeeded_total", "Jobs whose handler succeeded.", F_SUCCEEDED },
        { "delayq_jobs_retried_total",
          "Failed attempts that were scheduled again (handler failure, timeout, "
          "worker death).", F_RETRIED },
        { "delayq_jobs_dead_total",
          "Jobs moved to the dead-letter set by the daemon (handler verdict, attempts "
          "used up, no handler for the type).", F_DEAD },
        { "delayq_jobs_timed_out_total",
          "Handlers stopped at their timeout (the job is then retried or dead).",
          F_TIMED_OUT },
    };
    for (size_t k = 0; k < sizeof fams / sizeof fams[0]; k++) {
        put_head(out, fams[k].name, "counter", fams[k].help);
        for (size_t i = 0; i < t->n; i++)
            if (t->rows[i].type[0]) {
                put_series(out, fams[k].name, &t->rows[i], NULL);
                fprintf(out, "%llu\n", (unsigned long long)field(&t->rows[i], fams[k].f));
            }
    }
    put_head(out, "delayq_jobs_stale_total", "counter",
             "Acks and fails refused because the lease had expired (the job may run "
             "again).");
    for (size_t i = 0; i < t->n; i++)
        if (!t->rows[i].type[0]) {
            fputs("delayq_jobs_stale_total{", out);
            put_label(out, "queue", t->rows[i].queue);
            fprintf(out, "} %llu\n", (unsigned long long)t->rows[i].c.stale);
        }
    put_head(out, "delayq_orphans_repaired_total", "counter",
             "Orphans the reaper's fsck repaired (records in no set to dead, set members "
             "and lease fields without a record removed), plus ids claims dropped for a "
             "missing record.");
    for (size_t i = 0; i < t->n; i++)
        if (!t->rows[i].type[0]) {
            fputs("delayq_orphans_repaired_total{", out);
            put_label(out, "queue", t->rows[i].queue);
            fprintf(out, "} %llu\n", (unsigned long long)t->rows[i].orphans);
        }
}

/* The second label of a histogram's series: type, or priority. */
struct hist_label {
    const char *name;
    const char *value;
};

/* One series of a histogram: its buckets (cumulative), sum and count. */
static void put_hist_series(FILE *out, const char *name, const char *queue,
                            struct hist_label l, const struct slot_hist *h)
{
    static const int64_t bounds[SLOT_HIST_BOUNDS] = SLOT_HIST_BOUNDS_US;
    uint64_t cum = 0;
    for (int b = 0; b <= SLOT_HIST_BOUNDS; b++) {
        char le[32];
        if (b < SLOT_HIST_BOUNDS)
            snprintf(le, sizeof le, "%g", (double)bounds[b] / 1e6);
        else
            snprintf(le, sizeof le, "+Inf");
        cum += h->counts[b];
        fprintf(out, "%s_bucket{", name);
        put_label(out, "queue", queue);
        fputc(',', out);
        put_label(out, l.name, l.value);
        fputc(',', out);
        put_label(out, "le", le);
        fprintf(out, "} %llu\n", (unsigned long long)cum);
    }
    fprintf(out, "%s_sum{", name);
    put_label(out, "queue", queue);
    fputc(',', out);
    put_label(out, l.name, l.value);
    fprintf(out, "} %.6f\n%s_count{", (double)h->sum_us / 1e6, name);
    put_label(out, "queue", queue);
    fputc(',', out);
    put_label(out, l.name, l.value);
    fprintf(out, "} %llu\n", (unsigned long long)cum);
}

static void put_histogram(FILE *out, const struct table *t, const char *name,
                          const char *help, int lateness)
{
    put_head(out, name, "histogram", help);
    for (size_t i = 0; i < t->n; i++) {
        const struct row *r = &t->rows[i];
        if (r->type[0])
            put_hist_series(out, name, r->queue, (struct hist_label){ "type", r->type },
                            lateness ? &r->lateness : &r->duration);
    }
}

/* Lateness per queue and priority level, for the levels that ran jobs. */
static void put_priority_lateness(FILE *out, const struct table *t)
{
    const char *name = "delayq_fire_lateness_by_priority_seconds";
    put_head(out, name, "histogram", "Handler start minus the job's due time, by the "
             "job's priority level (0 the most urgent).");
    for (size_t i = 0; i < t->n; i++) {
        const struct row *r = &t->rows[i];
        for (int p = 0; r->type[0] == '\0' && p < DQ_PRIORITY_LEVELS; p++) {
            const struct slot_hist *h = &r->lateness_by_priority[p];
            uint64_t n = 0;
            for (int b = 0; b <= SLOT_HIST_BOUNDS; b++)
                n += h->counts[b];
            char level[4];
            snprintf(level, sizeof level, "%d", p);
            if (n)
                put_hist_series(out, name, r->queue,
                                (struct hist_label){ "priority", level }, h);
        }
    }
}

/* Whether each queue is paused (delayq pause): 1 or 0. */
static void put_queue_paused(FILE *out, const struct metrics_view *v)
{
    put_head(out, "delayq_queue_paused", "gauge",
             "1 while the queue is paused (delayq pause): no job is claimed.");
    for (size_t i = 0; i < v->conf->nqueues; i++) {
        fputs("delayq_queue_paused{", out);
        put_label(out, "queue", v->conf->queues[i].name);
        fprintf(out, "} %d\n", v->stats->paused_since[i] >= 0);
    }
}

/* The cached queue gauges, when fresh (a stale set would mislead: Redis
 * may have moved on), and the age of the figures; returns 1 when fresh. */
static int put_queue_gauges(FILE *out, const struct metrics_view *v)
{
    const struct daemon_conf *dc = v->conf;
    const struct qstats_view *q = v->stats;
    if (q->fresh) {
        static const char *const states[] = { "delayed", "due", "processing", "dead" };
        put_head(out, "delayq_queue_jobs", "gauge",
                 "Jobs in the queue by state, read from Redis about every second.");
        for (size_t i = 0; i < dc->nqueues; i++) {
            const dq_stats *st = &q->stats[i];
            const int64_t n[] = { st->delayed, st->due, st->processing, st->dead };
            for (int k = 0; k < 4; k++) {
                fputs("delayq_queue_jobs{", out);
                put_label(out, "queue", dc->queues[i].name);
                fputc(',', out);
                put_label(out, "state", states[k]);
                fprintf(out, "} %lld\n", (long long)n[k]);
            }
        }
        put_queue_paused(out, v);
    }
    put_head(out, "delayq_stats_age_seconds", "gauge",
             "Age of the queue statistics (delayq_queue_jobs): how long ago Redis was "
             "asked for them.");
    if (q->age_ms >= 0)
        fprintf(out, "delayq_stats_age_seconds %.3f\n", (double)q->age_ms / 1000.0);
    return q->fresh;
}

static void put_workers(FILE *out, const struct metrics_view *v)
{
    put_head(out, "delayq_workers", "gauge", "Worker processes running, per queue.");
    for (size_t q = 0; q < v->conf->nqueues; q++) {
        const char *name = v->conf->queues[q].name;
        int n = 0;
        for (size_t i = 0; i < v->nchildren; i++)
            n += v->children[i].running && v->children[i].queue
                 && strcmp(v->children[i].queue, name) == 0;
        fputs("delayq_workers{", out);
        put_label(out, "queue", name);
        fprintf(out, "} %d\n", n);
    }
}

int metrics_write(const struct metrics *m, const struct metrics_view *v, FILE *out)
{
    /* This scrape's figures: the totals plus every live slot. */
    struct table t = { 0 };
    uint64_t reconnects = m->reconnects;
    for (size_t i = 0; i < m->totals.n; i++) {
        struct row *r = get_row(&t, m->totals.rows[i].queue, m->totals.rows[i].type);
        if (r)
            add_row(r, &m->totals.rows[i]);
    }
    for (size_t i = 0; i < v->nchildren; i++)
        fold(&t, &reconnects, v->children[i].queue, v->children[i].slot);
    if (t.n)
        qsort(t.rows, t.n, sizeof *t.rows, cmp_rows);
    put_counters(out, &t);
    put_histogram(out, &t, "delayq_handler_duration_seconds",
                  "Time handlers took, from start to outcome.", 0);
    put_histogram(out, &t, "delayq_fire_lateness_seconds",
                  "Handler start minus the job's due time (0 when early).", 1);
    put_priority_lateness(out, &t);
    table_free(&t);
    int up = put_queue_gauges(out, v);
    put_head(out, "delayq_redis_up", "gauge",
             "1 when Redis answered the last refresh of the queue statistics, in the "
             "last 2 seconds.");
    fprintf(out, "delayq_redis_up %d\n", up);
    put_workers(out, v);
    put_head(out, "delayq_worker_restarts_total", "counter",
             "Children (workers and the reaper) restarted after they died.");
    fprintf(out, "delayq_worker_restarts_total %llu\n", (unsigned long long)m->restarts);
    put_head(out, "delayq_redis_reconnects_total", "counter",
             "Redis connections of the workers and the reaper made again after a loss.");
    fprintf(out, "delayq_redis_reconnects_total %llu\n", (unsigned long long)reconnects);
    put_head(out, "delayq_failovers_total", "counter",
             "Moves of the Redis master announced by the sentinels (+switch-master).");
    fprintf(out, "delayq_failovers_total %llu\n", (unsigned long long)m->failovers);
    put_head(out, "delayq_build_info", "gauge", "The delayqd version; always 1.");
    fputs("delayq_build_info{", out);
    put_label(out, "version", PACKAGE_VERSION);
    fputs("} 1\n", out);
    return 200;
}

/* A worker of the configuration in force whose claims have failed for
 * longer than the grace (a demoted Redis answers READONLY): its line. */
static int claims_failing(const struct metrics_view *v, FILE *out)
{
    int64_t now = slots_now_ms();
    for (size_t i = 0; i < v->nchildren; i++) {
        const struct metrics_child *c = &v->children[i];
        struct slot_claims cl;
        if (!c->in_force || !c->running || !slot_claims_read(c->slot, &cl)
            || now - cl.failing_since_ms <= v->conf->claim_failure_grace_ms)
            continue;
        fprintf(out, "queue %s: claims failing for %.1f s: %s\n", c->queue,
                (double)(now - cl.failing_since_ms) / 1000.0, cl.error);
        return 1;
    }
    return 0;
}

int metrics_health(const struct metrics_view *v, FILE *out)
{
    if (v->stopping) {
        fputs("stopping\n", out);
        return 503;
    }
    if (!v->stats->fresh) {
        fprintf(out, "redis unreachable: %s\n", v->stats->why);
        return 503;
    }
    int want = 0, up = 0;
    for (size_t q = 0; q < v->conf->nqueues; q++)
        want += v->conf->queues[q].workers;
    for (size_t i = 0; i < v->nchildren; i++) {
        const struct metrics_child *c = &v->children[i];
        up += c->in_force && c->running && __atomic_load_n(&c->slot->ready, __ATOMIC_RELAXED);
    }
    if (up < want) {
        fprintf(out, "%d of %d workers down\n", want - up, want);
        return 503;
    }
    if (claims_failing(v, out))
        return 503;
    /* A key of the wrong type, as the reaper's fsck found it. */
    for (size_t i = 0; i < v->nchildren; i++) {
        char reason[SLOT_FSCK_REASON];
        if (v->children[i].running && slot_fsck_reason(&v->children[i].slot->fsck,
                                                       reason, sizeof reason)) {
            fprintf(out, "%s\n", reason);
            return 503;
        }
    }
    fputs("ok\n", out);
    return 200;
}
