/*
 * The text half of metrics.h: the /metrics page in the Prometheus text
 * format 0.0.4, and the /healthz answer, from a snapshot
 * (metrics_table.c) and the cached queue statistics.
 */
#include "config.h"

#include "daemon/admin/metrics.h"
#include "daemon/dconfig_parts.h"
#include "daemon/dconfig_sources.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

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
static void put_series(FILE *out, const char *name, const struct metrics_row *r, const char *le)
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

enum field { F_CLAIMED, F_SUCCEEDED, F_RETRIED, F_DEAD, F_TIMED_OUT };

static uint64_t field(const struct metrics_row *r, enum field f)
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

static void put_counters(FILE *out, const struct metrics_table *t)
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

static void put_histogram(FILE *out, const struct metrics_table *t, const char *name,
                          const char *help, int lateness)
{
    put_head(out, name, "histogram", help);
    for (size_t i = 0; i < t->n; i++) {
        const struct metrics_row *r = &t->rows[i];
        if (r->type[0])
            put_hist_series(out, name, r->queue, (struct hist_label){ "type", r->type },
                            lateness ? &r->lateness : &r->duration);
    }
}

/* Lateness per queue and priority level, for the levels that ran jobs. */
static void put_priority_lateness(FILE *out, const struct metrics_table *t)
{
    const char *name = "delayq_fire_lateness_by_priority_seconds";
    put_head(out, name, "histogram", "Handler start minus the job's due time, by the "
             "job's priority level (0 the most urgent).");
    for (size_t i = 0; i < t->n; i++) {
        const struct metrics_row *r = &t->rows[i];
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
/* A counter kept in Redis, one series per queue: the int64_t member of
 * dq_stats at `member` (offsetof). */
static void put_queue_counter(FILE *out, const struct metrics_view *v, const char *name,
                              const char *help, size_t member)
{
    put_head(out, name, "counter", help);
    for (size_t i = 0; i < v->conf->nqueues; i++) {
        int64_t n;
        memcpy(&n, (const char *)&v->stats->stats[i] + member, sizeof n);
        fprintf(out, "%s{", name);
        put_label(out, "queue", v->conf->queues[i].name);
        fprintf(out, "} %lld\n", (long long)n);
    }
}

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

/* One partition's series of a family (put_per_partition). */
typedef void (*put_part_fn)(FILE *out, const struct metrics_view *v,
                            const struct dconfig_part *it);

/* A family with series per partition, for the queues of more than one (at
 * most 256 partitions a queue, each named in the configuration: the label
 * set is bounded); nothing when no queue has more than one. */
static void put_per_partition(FILE *out, const struct metrics_view *v, const char *name,
                              const char *help, put_part_fn put)
{
    struct dconfig_part it;
    int head = 0;
    for (dconfig_parts_begin(&it, v->conf); dconfig_parts_next(&it);) {
        if (it.nparts <= 1)
            continue;
        if (!head++)
            put_head(out, name, "gauge", help);
        put(out, v, &it);
    }
}

/* delayq_partition_jobs: a partition's jobs by state. */
static void put_partition_jobs(FILE *out, const struct metrics_view *v,
                               const struct dconfig_part *it)
{
    static const char *const states[] = { "delayed", "due", "processing", "dead" };
    const dq_stats *st = &v->stats->parts[it->at];
    const int64_t n[] = { st->delayed, st->due, st->processing, st->dead };
    for (int k = 0; k < 4; k++) {
        fputs("delayq_partition_jobs{", out);
        put_label(out, "queue", it->q->name);
        fprintf(out, ",partition=\"%u\",", it->part);
        put_label(out, "state", states[k]);
        fprintf(out, "} %lld\n", (long long)n[k]);
    }
}

/* delayq_partition_up: whether the partition answered the last refresh. */
static void put_partition_up(FILE *out, const struct metrics_view *v,
                             const struct dconfig_part *it)
{
    fputs("delayq_partition_up{", out);
    put_label(out, "queue", it->q->name);
    fprintf(out, ",partition=\"%u\"} %d\n", it->part,
            v->stats->parts_state[it->at] == PART_UP);
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
        put_per_partition(out, v, "delayq_partition_jobs",
                          "Jobs in each partition of a partitioned queue by state (their "
                          "sum is delayq_queue_jobs).", put_partition_jobs);
        put_per_partition(out, v, "delayq_partition_up",
                          "1 when the partition's Redis master answered the last refresh "
                          "of the statistics; 0 while it is out of reach or answers an "
                          "error (its figures are then the last it gave).", put_partition_up);
        put_queue_paused(out, v);
        put_queue_counter(out, v, "delayq_jobs_expired_total",
                          "Jobs that reached their expiry before they started (to dead, "
                          "or dropped), counted in Redis over every daemon.",
                          offsetof(dq_stats, jobs_expired));
        put_queue_counter(out, v, "delayq_jobs_cancelled_total",
                          "Jobs cancelled (delayq cancel, dq_cancel, the dashboard), waiting "
                          "or running, counted in Redis over every daemon.",
                          offsetof(dq_stats, jobs_cancelled));
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
        for (size_t i = 0; i < v->snap->nchildren; i++) {
            const struct metrics_post *c = &v->snap->children[i];
            n += c->role == MR_WORKER && c->pid && strcmp(c->queue, name) == 0;
        }
        fputs("delayq_workers{", out);
        put_label(out, "queue", name);
        fprintf(out, "} %d\n", n);
    }
}

/* The relay of source `name` in force, running: its row, or -1. */
static int relay_row(const struct metrics_view *v, const char *name)
{
    for (size_t i = 0; i < v->snap->nchildren; i++) {
        const struct metrics_post *c = &v->snap->children[i];
        if (c->role == MR_RELAY && c->in_force && c->pid && strcmp(c->queue, name) == 0)
            return (int)i;
    }
    return -1;
}

/* The outbox relays (docs/outbox.md): series per source of the
 * configuration, so as many as it has. */
static void put_sources(FILE *out, const struct metrics_view *v)
{
    const struct daemon_conf *dc = v->conf;
    if (!dc->nsources)
        return;
    put_head(out, "delayq_outbox_rows_total", "counter",
             "Rows of a source's outbox table this daemon relayed: applied to Redis, or "
             "moved to its dead table (outcome).");
    for (size_t i = 0; i < dc->nsources; i++) {
        struct metrics_source t = metrics_source_totals(v->snap, dc->sources[i].name);
        for (int dead = 0; dead < 2; dead++) {
            fputs("delayq_outbox_rows_total{", out);
            put_label(out, "source", dc->sources[i].name);
            fputc(',', out);
            put_label(out, "outcome", dead ? "dead" : "applied");
            fprintf(out, "} %llu\n", (unsigned long long)(dead ? t.dead : t.applied));
        }
    }
    put_head(out, "delayq_outbox_leader", "gauge",
             "1 when this daemon's relay applies the source's rows (it holds the table's "
             "lock); 0 while another daemon's does, or it cannot reach the database.");
    int64_t now = slots_now_ms();
    for (size_t i = 0; i < dc->nsources; i++) {
        int row = relay_row(v, dc->sources[i].name);
        fputs("delayq_outbox_leader{", out);
        put_label(out, "source", dc->sources[i].name);
        fprintf(out, "} %d\n", row >= 0 && __atomic_load_n(&v->snap->slots[row].relay_leader,
                                                            __ATOMIC_RELAXED));
    }
    put_head(out, "delayq_outbox_held_rows", "gauge",
             "Rows the source's relay holds in its table while their partition's cluster "
             "master is out of reach (the other rows go on).");
    for (size_t i = 0; i < dc->nsources; i++) {
        int row = relay_row(v, dc->sources[i].name);
        fputs("delayq_outbox_held_rows{", out);
        put_label(out, "source", dc->sources[i].name);
        fprintf(out, "} %d\n", row >= 0 ? __atomic_load_n(&v->snap->slots[row].relay_held,
                                                             __ATOMIC_RELAXED) : 0);
    }
    put_head(out, "delayq_outbox_failing_seconds", "gauge",
             "How long the source's relay has been failing (PostgreSQL or Redis); 0 while "
             "it works.");
    for (size_t i = 0; i < dc->nsources; i++) {
        int row = relay_row(v, dc->sources[i].name);
        struct slot_claims cl;
        int failing = row >= 0 && slot_claims_read(&v->snap->slots[row], &cl);
        fputs("delayq_outbox_failing_seconds{", out);
        put_label(out, "source", dc->sources[i].name);
        fprintf(out, "} %.3f\n", failing ? (double)(now - cl.failing_since_ms) / 1000.0 : 0.0);
    }
}

int metrics_write(const struct metrics_view *v, FILE *out)
{
    const struct metrics_snap *m = v->snap;
    const struct metrics_table *t = &m->t;
    put_counters(out, t);
    put_histogram(out, t, "delayq_handler_duration_seconds",
                  "Time handlers took, from start to outcome.", 0);
    put_histogram(out, t, "delayq_fire_lateness_seconds",
                  "Handler start minus the job's due time (0 when early).", 1);
    put_priority_lateness(out, t);
    int up = put_queue_gauges(out, v);
    put_head(out, "delayq_redis_up", "gauge",
             "1 when Redis answered the last refresh of the queue statistics, in the "
             "last 2 seconds.");
    fprintf(out, "delayq_redis_up %d\n", up);
    put_workers(out, v);
    put_sources(out, v);
    put_head(out, "delayq_worker_restarts_total", "counter",
             "Children (workers, the reaper, the admin process) restarted after they "
             "died.");
    fprintf(out, "delayq_worker_restarts_total %llu\n", (unsigned long long)m->restarts);
    put_head(out, "delayq_redis_reconnects_total", "counter",
             "Redis connections of the workers and the reaper made again after a loss.");
    fprintf(out, "delayq_redis_reconnects_total %llu\n", (unsigned long long)m->reconnects);
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
    for (size_t i = 0; i < v->snap->nchildren; i++) {
        const struct metrics_post *c = &v->snap->children[i];
        struct slot_claims cl;
        if (c->role != MR_WORKER || !c->in_force || !c->pid
            || !slot_claims_read(&v->snap->slots[i], &cl)
            || now - cl.failing_since_ms <= v->conf->claim_failure_grace_ms)
            continue;
        fprintf(out, "queue %s: claims failing for %.1f s: %s\n", c->queue,
                (double)(now - cl.failing_since_ms) / 1000.0, cl.error);
        return 1;
    }
    return 0;
}

/* A source whose relay has failed longer than its failure_grace: its
 * line. */
static int sources_failing(const struct metrics_view *v, FILE *out)
{
    int64_t now = slots_now_ms();
    for (size_t i = 0; i < v->conf->nsources; i++) {
        const struct source_conf *sc = &v->conf->sources[i];
        int row = relay_row(v, sc->name);
        struct slot_claims cl;
        if (row < 0 || !slot_claims_read(&v->snap->slots[row], &cl)
            || now - cl.failing_since_ms <= sc->grace_ms)
            continue;
        fprintf(out, "source %s: relay failing for %.1f s: %s\n", sc->name,
                (double)(now - cl.failing_since_ms) / 1000.0, cl.error);
        return 1;
    }
    return 0;
}

/* " q/p" for each partition in `state`, 16 at most. */
static void name_partitions(const struct metrics_view *v, FILE *out, enum part_state state)
{
    struct dconfig_part it;
    int named = 0;
    for (dconfig_parts_begin(&it, v->conf); dconfig_parts_next(&it);)
        if (v->stats->parts_state[it.at] == state && named++ < 16)
            fprintf(out, " %s/%u", it.q->name, it.part);
    if (named > 16)
        fputs(" ...", out);
}

/* Partitions whose master is out of reach (a cluster master down), and
 * those whose statistics fail (a key of the wrong type): one line naming
 * each kind with its reason, at most a line's worth of each. */
static int partitions_down(const struct metrics_view *v, FILE *out)
{
    const struct qstats_view *s = v->stats;
    if (s->out_of_reach == 0 && s->failing == 0)
        return 0;
    if (s->out_of_reach) {
        fprintf(out, "%zu partition%s out of reach (%s):", s->out_of_reach,
                s->out_of_reach == 1 ? "" : "s", s->why_reach);
        name_partitions(v, out, PART_OUT_OF_REACH);
    }
    if (s->failing) {
        fprintf(out, "%s%zu partition%s whose statistics fail (%s):",
                s->out_of_reach ? "; " : "", s->failing, s->failing == 1 ? "" : "s",
                s->why_fail);
        name_partitions(v, out, PART_FAILING);
    }
    fputc('\n', out);
    return 1;
}

int metrics_health(const struct metrics_view *v, FILE *out)
{
    if (v->snap->stopping) {
        fputs("stopping\n", out);
        return 503;
    }
    if (!v->stats->fresh) {
        fprintf(out, "redis unreachable: %s\n", v->stats->why);
        return 503;
    }
    if (partitions_down(v, out))
        return 503;
    int want = 0, up = 0;
    for (size_t q = 0; q < v->conf->nqueues; q++)
        want += v->conf->queues[q].workers;
    for (size_t i = 0; i < v->snap->nchildren; i++) {
        const struct metrics_post *c = &v->snap->children[i];
        up += c->role == MR_WORKER && c->in_force && c->pid
              && __atomic_load_n(&v->snap->slots[i].ready, __ATOMIC_RELAXED);
    }
    if (up < want) {
        fprintf(out, "%d of %d workers down\n", want - up, want);
        return 503;
    }
    if (claims_failing(v, out) || sources_failing(v, out))
        return 503;
    /* A key of the wrong type, as the reaper's fsck found it. */
    for (size_t i = 0; i < v->snap->nchildren; i++) {
        char reason[SLOT_FSCK_REASON];
        if (v->snap->children[i].pid && slot_fsck_reason(&v->snap->slots[i].fsck, reason,
                                                          sizeof reason)) {
            fprintf(out, "%s\n", reason);
            return 503;
        }
    }
    fputs("ok\n", out);
    return 200;
}
