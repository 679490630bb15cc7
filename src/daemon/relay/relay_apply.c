#include "daemon/relay/relay_apply.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/slots.h"
#include "lib/keys.h"

/* A day short of the scripts' bound, so that a clock ahead of the
 * server's cannot make a row pass here and be refused there. */
#define AHEAD_MAX_MS (DQ_MAX_AHEAD_MS - 86400000)

/* One batch's apply. */
struct apply_ctx {
    dq_client *c;
    const struct source_conf *sc;
    struct relay_defer *defer;  /* NULL: an outage fails the batch */
    int64_t now_ms;
    int full;                   /* a row found no room among the held */
};

static void dead(struct relay_row *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void dead(struct relay_row *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->reason, sizeof r->reason, fmt, ap);
    va_end(ap);
    r->outcome = ROW_DEAD;
}

/* The configuration of `queue`, or NULL when this daemon has none. */
static const struct queue_conf *queue_of(const struct daemon_conf *dc, const char *queue)
{
    for (size_t i = 0; i < dc->nqueues; i++)
        if (strcmp(dc->queues[i].name, queue) == 0)
            return &dc->queues[i];
    return NULL;
}

/* The job's id: the row's, or SOURCE:ROW_ID for an add without one (the
 * same at every apply, so a replay is recognised); 0, or -1 dead. */
static int name_job(const struct source_conf *sc, struct relay_row *r)
{
    if (!*r->job_id) {
        if (r->op != RELAY_ADD) {
            dead(r, "a %s needs the job's id", r->op == RELAY_CANCEL ? "cancel" : "replace");
            return -1;
        }
        snprintf(r->name, sizeof r->name, "%s:%lld", sc->name, (long long)r->id);
        return 0;
    }
    const char *bad = keys_check_id(r->job_id);
    if (bad) {
        dead(r, "job_id: %s", bad);
        return -1;
    }
    snprintf(r->name, sizeof r->name, "%s", r->job_id);
    return 0;
}

/* What the table's constraints cannot know: this daemon's queues, the
 * names' rules, the payload limit, a delay's 100-year bound (the library
 * checks the rest, apply_one says what).  0, or -1 with the row dead. */
static int check_row(const struct daemon_conf *dc, const struct source_conf *sc,
                     struct relay_row *r)
{
    const char *bad = keys_check_queue(r->queue);
    if (bad) {
        dead(r, "queue: %s", bad);
        return -1;
    }
    const struct queue_conf *q = queue_of(dc, r->queue);
    if (!q) {
        dead(r, "queue \"%s\" is not one of the queues of %s", r->queue, dc->path);
        return -1;
    }
    if (name_job(sc, r) < 0)
        return -1;
    r->qname = q->name;
    r->part = q->partitions > 1 ? keys_partition_of(r->name, (unsigned)q->partitions) : 0;
    if (r->op == RELAY_CANCEL)
        return 0;
    if ((bad = keys_check_type(r->type))) {
        dead(r, "type: %s", bad);
        return -1;
    }
    size_t limit = dc->redis.max_payload ? dc->redis.max_payload : DQ_DEFAULT_MAX_PAYLOAD;
    if (r->payload_len > limit) {
        dead(r, "payload of %zu bytes is over the limit of %zu (redis.max_payload)",
             r->payload_len, limit);
        return -1;
    }
    if (r->delay_ms > AHEAD_MAX_MS) {
        dead(r, "due more than 100 years ahead");
        return -1;
    }
    return 0;
}

static void fill_req(const struct source_conf *sc, const struct relay_row *r,
                     dq_enqueue_req *q)
{
    *q = (dq_enqueue_req){
        .queue = r->queue, .type = r->type, .id = r->name,
        .payload = r->payload, .payload_len = r->payload_len,
        .max_attempts = r->max_attempts, .replace = r->op == RELAY_REPLACE,
        .priority = r->priority >= 0 ? DQ_PRIORITY(r->priority) : 0,
        .unique_for_ms = sc->replay_window_ms, .unique_ok = true,
    };
    if (r->at_ms > 0)
        q->at_ms = r->at_ms;
    else if (r->at_ms < 0)
        q->delay_ms = r->delay_ms;
    if (r->expire_at_ms > 0)
        q->expire_at = r->expire_at_ms;
    else if (r->ttl_ms > 0)
        q->ttl_ms = r->ttl_ms;
}

/* Hold row `r` back: its partition's master is out of reach (`why`), or
 * an earlier row of its partition is held.  0, or -1 when the batch is to
 * fail as a whole (one server, or the bound of held rows reached). */
static int hold(struct apply_ctx *x, struct relay_row *r, const char *why)
{
    if (!x->defer)
        return -1;
    int fresh = relay_defer_hold(x->defer, r->qname, r->part, r->id, x->now_ms);
    if (fresh < 0) {
        x->full = 1;
        return -1;
    }
    r->outcome = ROW_HELD;
    r->newly_held = fresh;
    snprintf(r->reason, sizeof r->reason, "%s", why);
    return 0;
}

/* An error reply of a script that refused its arguments: about the row,
 * not about Redis. */
static int refused_by_script(const dq_client *c)
{
    return strstr(dq_errmsg(c), "ERR delayq:") != NULL;
}

/* The outcome of an add or replace that came back `st`; -1 when Redis
 * failed (the batch is taken again). */
static int settle_enqueue(dq_client *c, struct relay_row *r, dq_status st)
{
    switch (st) {
    case DQ_OK:                 /* added, replaced, or finished within the window */
        r->outcome = ROW_APPLIED;
        return 0;
    case DQ_ERR_EXISTS:         /* a job of this id waits: this row's, or the
                                   producer's; an add leaves it alone */
    case DQ_ERR_UNIQUE:
        r->outcome = ROW_APPLIED;
        r->replayed = 1;
        return 0;
    case DQ_ERR_INVALID:
    case DQ_ERR_TOO_LARGE:
        dead(r, "%s", dq_errmsg(c));
        return 0;
    case DQ_ERR_RUNNING:
        dead(r, "replace refused: job %s of queue %s is running", r->name, r->queue);
        return 0;
    case DQ_ERR_REDIS:
        if (refused_by_script(c)) {
            dead(r, "%s", dq_errmsg(c));
            return 0;
        }
        return -1;
    default:
        return -1;
    }
}

/* A status that says the row's master is out of reach: refused (down),
 * or silent past the command timeout (hung, or cut off). A row that timed
 * out may have been written; held and applied again, it finds its job
 * (EXISTS: applied), since every row names its job. */
static bool out_of_reach(dq_status st)
{
    return st == DQ_ERR_CONNECT || st == DQ_ERR_TIMEOUT;
}

/* Apply one add or replace alone, for its own status and message. */
static int apply_one(struct apply_ctx *x, struct relay_row *r)
{
    dq_client *c = x->c;
    dq_enqueue_req q;
    dq_enqueued out;
    fill_req(x->sc, r, &q);
    dq_status st = dq_enqueue(c, &q, &out);
    if (out_of_reach(st))
        return hold(x, r, dq_errmsg(c));
    int rc = settle_enqueue(c, r, st);
    if (rc == 0 && r->outcome == ROW_APPLIED && out.finished)
        r->replayed = 1;
    return rc;
}

#define BEHIND_HELD "an earlier row of its partition is held"

/* Whether a failure of dq_enqueue_many is carried by the statuses of its
 * jobs, as the library gives it (a cluster: per master): a row is then
 * held or applied by its own.  A failure none of them carries would let
 * rows that were not sent pass for applied. */
static int outage_is_each(dq_status first, const dq_status *sts, size_t n)
{
    if (first == DQ_OK)
        return 1;
    for (size_t k = 0; k < n; k++)
        if (sts[k] == first)
            return 1;
    return 0;
}

/* Whether a row after rows[idx[k]] in this run, of its partition, was
 * applied: holding row k would then put its job's rows out of order, and
 * the batch fails as a whole instead (taken again later, in order). */
static int applied_after(const struct relay_row *rows, const size_t *idx, size_t n, size_t k,
                         const dq_status *sts)
{
    const struct relay_row *r = &rows[idx[k]];
    for (size_t j = k + 1; j < n; j++) {
        const struct relay_row *o = &rows[idx[j]];
        if (o->part == r->part && strcmp(o->qname, r->qname) == 0
            && (sts[j] == DQ_OK || sts[j] == DQ_ERR_EXISTS || sts[j] == DQ_ERR_UNIQUE))
            return 1;
    }
    return 0;
}

/* Rows first .. last - 1 that are adds or replaces (and passed the
 * checks), in one pipeline.  A row that comes back with anything but
 * success is applied again alone: dq_enqueue_many refuses bad requests
 * before sending them, and the script refuses its whole call when one job
 * is bad, so such a row was not written, and alone it says what is wrong
 * with it. */
static int apply_run(struct apply_ctx *x, struct relay_row *rows, const size_t *idx,
                     size_t n)
{
    dq_client *c = x->c;
    if (n == 0)
        return 0;
    dq_enqueue_req *reqs = calloc(n, sizeof *reqs);
    dq_status *sts = calloc(n, sizeof *sts);
    dq_enqueued *outs = calloc(n, sizeof *outs);
    int rc = -1;
    if (!reqs || !sts || !outs)
        goto done;
    for (size_t k = 0; k < n; k++)
        fill_req(x->sc, &rows[idx[k]], &reqs[k]);
    dq_status first = dq_enqueue_many(c, reqs, n, outs, sts);
    if (first == DQ_ERR_NOMEM || (out_of_reach(first) && !x->defer)
        || first == DQ_ERR_AUTH || !outage_is_each(first, sts, n))
        goto done;
    /* A cluster's masters answer on their own: the rows bound for one out
     * of reach (down, or hung past the command timeout) are held, the
     * others' statuses are their own. */
    char why[RELAY_REASON_MAX];
    snprintf(why, sizeof why, "%s", out_of_reach(first) ? dq_errmsg(c)
                                    : "its master did not answer");
    for (size_t k = 0; k < n; k++) {
        struct relay_row *r = &rows[idx[k]];
        if (sts[k] == DQ_OK || sts[k] == DQ_ERR_EXISTS || sts[k] == DQ_ERR_UNIQUE) {
            r->outcome = ROW_APPLIED;
            r->replayed = sts[k] != DQ_OK || outs[k].finished;
            continue;
        }
        int held = x->defer && relay_defer_holds(x->defer, r->qname, r->part);
        if (held || out_of_reach(sts[k])) {
            if (hold(x, r, held ? BEHIND_HELD : why) < 0
                || applied_after(rows, idx, n, k, sts))
                goto done;
        } else if (apply_one(x, r) < 0
                   || (r->outcome == ROW_HELD && applied_after(rows, idx, n, k, sts))) {
            goto done;
        }
    }
    rc = 0;
done:
    free(reqs);
    free(sts);
    free(outs);
    return rc;
}

/* A cancel: done when the job is gone already (its earlier apply, or its
 * own end). */
static int apply_cancel(struct apply_ctx *x, struct relay_row *r)
{
    dq_client *c = x->c;
    dq_status st = dq_cancel(c, r->queue, r->name);
    if (out_of_reach(st))
        return hold(x, r, dq_errmsg(c));
    switch (st) {
    case DQ_OK:
    case DQ_ERR_NOTFOUND:
        r->outcome = ROW_APPLIED;
        return 0;
    case DQ_ERR_DEAD:
        dead(r, "job %s of queue %s is dead already: nothing to cancel (purge it with "
             "delayq dlq purge)", r->name, r->queue);
        return 0;
    case DQ_ERR_INVALID:
    case DQ_ERR_RUNNING:
        dead(r, "%s", dq_errmsg(c));
        return 0;
    default:
        return -1;
    }
}

int relay_apply(dq_client *c, const struct daemon_conf *dc, const struct source_conf *sc,
                struct relay_defer *defer, struct relay_batch *b, char *why, size_t whylen)
{
    struct apply_ctx x = { c, sc, defer, slots_now_ms(), 0 };
    size_t *idx = calloc(b->n ? b->n : 1, sizeof *idx);
    if (!idx) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    size_t run = 0;
    int rc = 0;
    for (size_t i = 0; i < b->n && rc == 0; i++) {
        struct relay_row *r = &b->rows[i];
        r->outcome = ROW_APPLIED;
        r->replayed = r->newly_held = 0;
        r->reason[0] = '\0';
        if (check_row(dc, sc, r) < 0)
            continue;
        /* Behind a held row of its partition: held too, untried, so that
         * each job's rows keep their order. */
        if (defer && relay_defer_holds(defer, r->qname, r->part)) {
            rc = hold(&x, r, BEHIND_HELD);
            continue;
        }
        if (r->op != RELAY_CANCEL) {
            idx[run++] = i;
            continue;
        }
        /* A cancel goes after the adds before it, in order: held when
         * they held its partition (its job's add may be among them). */
        rc = apply_run(&x, b->rows, idx, run);
        run = 0;
        if (rc == 0 && defer && relay_defer_holds(defer, r->qname, r->part))
            rc = hold(&x, r, BEHIND_HELD);
        else if (rc == 0)
            rc = apply_cancel(&x, r);
    }
    if (rc == 0)
        rc = apply_run(&x, b->rows, idx, run);
    if (rc < 0 && x.full)
        snprintf(why, whylen, "a partition out of reach, and %d rows or %d partitions are "
                 "held already", RELAY_HELD_MAX, RELAY_HELD_PARTS_MAX);
    else if (rc < 0)
        snprintf(why, whylen, "%s", *dq_errmsg(c) ? dq_errmsg(c) : "redis: out of memory");
    free(idx);
    return rc;
}
