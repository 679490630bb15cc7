#include "daemon/supervisor/qparts_record.h"

#include <stdio.h>
#include <string.h>

#include "config/redis_conf.h"

#define RECORD_TIMEOUT_MS 2000

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
                                     const struct queue_conf *q, char *err, size_t errlen)
{
    unsigned stored;
    if (dq_queue_partitions(c, q->name, &stored) != DQ_OK) {
        snprintf(err, errlen, "queue %s: cannot read its partition count: %s", q->name,
                 dq_errmsg(c));
        return QPARTS_UNREACHABLE;
    }
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

enum qparts_outcome qparts_record(const struct daemon_conf *dc, int check_only,
                                  int only_partitioned, char *err, size_t errlen)
{
    dq_options opt;
    redis_conf_to_options(&dc->redis, &opt);
    opt.connect_timeout_ms = RECORD_TIMEOUT_MS;
    opt.command_timeout_ms = RECORD_TIMEOUT_MS;
    char why[512];
    dq_client *c = dq_connect(&opt, why, sizeof why, NULL);
    if (!c) {
        snprintf(err, errlen, "redis not reachable: %s", why);
        return QPARTS_UNREACHABLE;
    }
    enum qparts_outcome out = QPARTS_OK;
    for (size_t i = 0; i < dc->nqueues && out == QPARTS_OK; i++) {
        const struct queue_conf *q = &dc->queues[i];
        if (only_partitioned && q->partitions <= 1)
            continue;
        out = check_only ? check_one(c, dc, q, err, errlen) : record_one(c, dc, q, err, errlen);
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

enum qparts_outcome qparts_reload_check(const struct daemon_conf *old,
                                        const struct daemon_conf *new, char *err,
                                        size_t errlen)
{
    int adds_partitioned = 0;
    for (size_t i = 0; i < new->nqueues; i++) {
        const struct queue_conf *q = &new->queues[i];
        const struct queue_conf *was = find_queue(old, q->name);
        if (was && was->partitions != q->partitions) {
            snprintf(err, errlen, "%s:%d: queue %s: partitions = %d, but it runs with %d: a "
                     "reload cannot change it (stop delayqd, drain the queue, start it "
                     "again)", new->path, q->line, q->name, q->partitions, was->partitions);
            return QPARTS_REFUSED;
        }
        adds_partitioned |= !was && q->partitions > 1;
    }
    return adds_partitioned ? qparts_record(new, 0, 1, err, errlen) : QPARTS_OK;
}
