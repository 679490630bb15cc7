#include "daemon/supervisor/qparts_record.h"

#include <stdio.h>
#include <string.h>

#include "config/redis_conf.h"

#define RECORD_TIMEOUT_MS 2000

static dq_client *connect_short(const struct daemon_conf *dc, char *err, size_t errlen)
{
    dq_options opt;
    redis_conf_to_options(&dc->redis, &opt);
    opt.connect_timeout_ms = RECORD_TIMEOUT_MS;
    opt.command_timeout_ms = RECORD_TIMEOUT_MS;
    char why[512];
    dq_client *c = dq_connect(&opt, why, sizeof why, NULL);
    if (!c)
        snprintf(err, errlen, "redis not reachable: %s", why);
    return c;
}

static enum qparts_outcome read_stored(dq_client *c, const struct queue_conf *q,
                                       unsigned *stored, char *err, size_t errlen)
{
    if (dq_queue_partitions(c, q->name, stored) == DQ_OK)
        return QPARTS_OK;
    snprintf(err, errlen, "queue %s: cannot read its partition count: %s", q->name,
             dq_errmsg(c));
    return QPARTS_UNREACHABLE;
}

/* The jobs (delayed, due, processing, dead) in the `n` stored partitions
 * of `queue`; -1 when they cannot be counted. */
static int64_t count_jobs(dq_client *c, const char *queue, unsigned n)
{
    int64_t jobs = 0;
    for (unsigned p = 0; p < n; p++) {
        dq_stats s;
        if (dq_stats_partition(c, queue, p, &s) != DQ_OK)
            return -1;
        jobs += s.delayed + s.due + s.processing + s.dead;
    }
    return jobs;
}

/* -t: the change start-up would refuse, without making it. */
static enum qparts_outcome check_one(dq_client *c, const struct daemon_conf *dc,
                                     const struct queue_conf *q, unsigned stored,
                                     char *err, size_t errlen)
{
    if (stored == (unsigned)q->partitions)
        return QPARTS_OK;
    int64_t jobs = count_jobs(c, q->name, stored);
    if (jobs == 0)
        return QPARTS_OK;       /* start-up would change it */
    char held[300];
    if (jobs < 0)
        snprintf(held, sizeof held, "jobs it cannot count (%s)", dq_errmsg(c));
    else
        snprintf(held, sizeof held, "%lld job%s", (long long)jobs, jobs == 1 ? "" : "s");
    snprintf(err, errlen, "%s:%d: queue %s: partitions = %d, but Redis holds it with %u "
             "partition%s and %s: drain it first, or keep partitions = %u", dc->path,
             q->line, q->name, q->partitions, stored, stored == 1 ? "" : "s", held, stored);
    return QPARTS_REFUSED;
}

static enum qparts_outcome record_one(dq_client *c, const struct daemon_conf *dc,
                                      const struct queue_conf *q, char *err, size_t errlen)
{
    unsigned stored = 0;
    dq_status st = dq_queue_set_partitions(c, q->name, (unsigned)q->partitions);
    if (st == DQ_OK)
        return QPARTS_OK;
    if (st != DQ_ERR_EXISTS && st != DQ_ERR_STALE) {
        snprintf(err, errlen, "queue %s: cannot record its partition count: %s", q->name,
                 dq_errmsg(c));
        return QPARTS_UNREACHABLE;
    }
    char why[300];
    snprintf(why, sizeof why, "%s", dq_errmsg(c));     /* the next call resets it */
    if (dq_queue_partitions(c, q->name, &stored) != DQ_OK)
        stored = 0;
    snprintf(err, errlen, "%s:%d: queue %s: partitions = %d refused: Redis holds it with %u "
             "partition%s: %s", dc->path, q->line, q->name, q->partitions, stored,
             stored == 1 ? "" : "s", why);
    return QPARTS_REFUSED;
}

/* A queue without `partitions` runs with the stored count: refused only
 * when that count would give it a partition's key tag another configured
 * queue's name already has. */
static enum qparts_outcome take_stored(const struct daemon_conf *dc, struct queue_conf *q,
                                       unsigned stored, char *err, size_t errlen)
{
    const struct queue_conf *tag = stored > 1 ? dconfig_partition_clash(dc, q) : NULL;
    if (tag) {
        snprintf(err, errlen, "%s:%d: queue '%s' collides with the keys of queue '%s', "
                 "which Redis holds with %u partitions", dc->path, tag->line, tag->name,
                 q->name, stored);
        return QPARTS_REFUSED;
    }
    q->partitions = (int)stored;
    return QPARTS_OK;
}

enum qparts_outcome qparts_record(struct daemon_conf *dc, int check_only, char *err,
                                  size_t errlen)
{
    dq_client *c = connect_short(dc, err, errlen);
    if (!c)
        return QPARTS_UNREACHABLE;
    enum qparts_outcome out = QPARTS_OK;
    for (size_t i = 0; i < dc->nqueues && out == QPARTS_OK; i++) {
        struct queue_conf *q = &dc->queues[i];
        unsigned stored;
        if (q->partitions_set && !check_only)
            out = record_one(c, dc, q, err, errlen);
        else if ((out = read_stored(c, q, &stored, err, errlen)) == QPARTS_OK)
            out = q->partitions_set ? check_one(c, dc, q, stored, err, errlen)
                                    : take_stored(dc, q, stored, err, errlen);
    }
    dq_close(c);
    return out;
}

static const struct queue_conf *find_queue(const struct daemon_conf *dc, const char *name)
{
    for (size_t i = 0; i < dc->nqueues; i++)
        if (strcmp(dc->queues[i].name, name) == 0)
            return &dc->queues[i];
    return NULL;
}

void qparts_carry_over(const struct daemon_conf *old, struct daemon_conf *new)
{
    for (size_t i = 0; i < new->nqueues; i++) {
        struct queue_conf *q = &new->queues[i];
        const struct queue_conf *was = find_queue(old, q->name);
        if (was && !q->partitions_set)
            q->partitions = was->partitions;
    }
}

/* A queue a reload adds: a count the file names is recorded as at start;
 * without one it must be stored as 1, or be refused (the count read here,
 * in the checker, cannot reach the supervisor).  Redis out of reach
 * refuses only a count above 1, as before: a plain queue is added then. */
static enum qparts_outcome check_added(dq_client *c, const struct daemon_conf *dc,
                                       const struct queue_conf *q, const char *unreachable,
                                       char *err, size_t errlen)
{
    if (q->partitions_set && q->partitions > 1) {
        if (!c) {
            snprintf(err, errlen, "%s", unreachable);
            return QPARTS_UNREACHABLE;
        }
        return record_one(c, dc, q, err, errlen);
    }
    unsigned stored;
    if (!c || read_stored(c, q, &stored, err, errlen) != QPARTS_OK || stored <= 1) {
        err[0] = '\0';
        return QPARTS_OK;
    }
    snprintf(err, errlen, "%s:%d: queue %s: Redis holds it with %u partitions: a reload "
             "adds it only with partitions = %u in its group", dc->path, q->line, q->name,
             stored, stored);
    return QPARTS_REFUSED;
}

enum qparts_outcome qparts_reload_check(const struct daemon_conf *old,
                                        const struct daemon_conf *new, char *err,
                                        size_t errlen)
{
    size_t added = 0;
    for (size_t i = 0; i < new->nqueues; i++) {
        const struct queue_conf *q = &new->queues[i];
        const struct queue_conf *was = find_queue(old, q->name);
        if (was && was->partitions != q->partitions) {
            snprintf(err, errlen, "%s:%d: queue %s: partitions = %d, but it runs with %d: a "
                     "reload cannot change it (stop delayqd, drain the queue, start it "
                     "again)", new->path, q->line, q->name, q->partitions, was->partitions);
            return QPARTS_REFUSED;
        }
        added += !was;
    }
    if (added == 0)
        return QPARTS_OK;
    char unreachable[600] = "";
    dq_client *c = connect_short(new, unreachable, sizeof unreachable);
    enum qparts_outcome out = QPARTS_OK;
    for (size_t i = 0; i < new->nqueues && out == QPARTS_OK; i++)
        if (!find_queue(old, new->queues[i].name))
            out = check_added(c, new, &new->queues[i], unreachable, err, errlen);
    if (c)
        dq_close(c);
    return out;
}
