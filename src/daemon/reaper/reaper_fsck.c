#include "daemon/reaper/reaper_fsck.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/dconfig_parts.h"
#include "daemon/log.h"
#include "lib/proto.h"

#define FSCK_LOG_MAX 20         /* repairs of a pass logged one by one */

_Static_assert(SLOT_FSCK_QUEUES >= DCONFIG_MAX_QUEUES, "a slot entry per queue");

/* A key of the wrong type this queue's passes found. */
struct bad_key {
    char *key;
    char *reason;               /* the /healthz line */
    int seen;                   /* found again by the pass under way */
};

/* One partition of a queue (the queue itself when it has one); the
 * partitions of a queue share its slot entry. */
struct fsck_queue {
    struct reaper_fsck *f;
    const struct queue_conf *q;
    struct queue_keys keys;     /* its partition's */
    struct slot_fsck_queue *entry;  /* NULL: counted nowhere (cannot be) */
    struct event *timer;
    int busy;                   /* a step is in flight */
    char cursor[64];
    int64_t logged;             /* repairs of this pass logged */
    dq_fsck_result pass;        /* this pass's counts (findings not kept) */
    struct bad_key *bad;
    size_t nbad;
    int claim_seen;             /* claim_base holds a value read */
    int64_t claim_base;
};

struct reaper_fsck {
    const struct daemon_conf *dc;
    struct rconn *conn;
    struct slot_fsck *slot;
    struct fsck_queue *queues;
    size_t nqueues;
};

static void schedule(struct fsck_queue *fq, int64_t ms)
{
    struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000) };
    if (evtimer_add(fq->timer, &tv) < 0)
        log_err("cannot arm the fsck timer of a partition: its next pass waits for a "
                "reconnect");
}

/* The /healthz line: the first wrong-type key of the first queue that has
 * one, and how many more there are. */
static void publish(struct reaper_fsck *f)
{
    const char *first = NULL;
    size_t n = 0;
    for (size_t i = 0; i < f->nqueues; i++) {
        if (!first && f->queues[i].nbad)
            first = f->queues[i].bad[0].reason;
        n += f->queues[i].nbad;
    }
    char line[SLOT_FSCK_REASON] = "";
    if (first && n > 1)
        snprintf(line, sizeof line, "%s (and %zu more wrong-type key%s: see the log)",
                 first, n - 1, n == 2 ? "" : "s");
    else if (first)
        snprintf(line, sizeof line, "%s", first);
    slot_fsck_set_reason(f->slot, line);
}

/* A wrong-type key found by this pass: logged when it is new. */
static void note_bad(struct fsck_queue *fq, const dq_fsck_finding *fd)
{
    for (size_t i = 0; i < fq->nbad; i++)
        if (strcmp(fq->bad[i].key, fd->key) == 0) {
            fq->bad[i].seen = 1;
            return;
        }
    log_err("queue=%s: key %s has type %s, expected %s: fsck leaves it to an "
            "operator (jobs whose keys it holds cannot move)", fq->q->name, fd->key,
            fd->id, fd->expected);
    char reason[SLOT_FSCK_REASON];
    snprintf(reason, sizeof reason, "queue %s: key %s has type %s, expected %s",
             fq->q->name, fd->key, fd->id, fd->expected);
    struct bad_key *b = realloc(fq->bad, (fq->nbad + 1) * sizeof *b);
    if (!b)
        return;                 /* logged; it is looked for again next pass */
    fq->bad = b;
    b = &fq->bad[fq->nbad];
    b->key = strdup(fd->key);
    b->reason = strdup(reason);
    b->seen = 1;
    if (!b->key || !b->reason) {
        free(b->key);
        free(b->reason);
        return;
    }
    fq->nbad++;
}

/* At the end of a pass: forget the keys it did not find again. */
static void forget_fixed(struct fsck_queue *fq)
{
    size_t kept = 0;
    for (size_t i = 0; i < fq->nbad; i++) {
        if (fq->bad[i].seen) {
            fq->bad[kept++] = fq->bad[i];
            continue;
        }
        log_info("queue=%s: key %s no longer has the wrong type", fq->q->name,
                 fq->bad[i].key);
        free(fq->bad[i].key);
        free(fq->bad[i].reason);
    }
    fq->nbad = kept;
}

static void log_repair(struct fsck_queue *fq, const dq_fsck_finding *fd)
{
    if (fq->logged++ >= FSCK_LOG_MAX)
        return;
    if (fd->kind == DQ_FSCK_RECORD)
        log_warn("queue=%s: record %s in %s was in no set: moved to dead "
                 "(error \"orphan record\")", fq->q->name, fd->id, fd->key);
    else
        log_warn("queue=%s: %s %s of %s had no record: removed", fq->q->name,
                 fd->kind == DQ_FSCK_LEASE ? "lease field" : "member", fd->id, fd->key);
}

/* Count what claims dropped since the last look (the first look only sets
 * the base: earlier drops were another run's to count). */
static void count_claim_drops(struct fsck_queue *fq, int64_t total)
{
    if (fq->claim_seen && total > fq->claim_base && fq->entry)
        slot_add(&fq->entry->claim_dropped, (uint64_t)(total - fq->claim_base));
    fq->claim_seen = 1;
    fq->claim_base = total;
}

static void end_pass(struct fsck_queue *fq)
{
    const dq_fsck_result *p = &fq->pass;
    forget_fixed(fq);
    publish(fq->f);
    if (p->repaired > 0)
        log_warn("queue=%s: fsck repaired %lld: %lld record%s in no set to dead, "
                 "%lld set member%s and %lld lease field%s without a record removed",
                 fq->q->name, (long long)p->repaired, (long long)p->records,
                 p->records == 1 ? "" : "s", (long long)p->members,
                 p->members == 1 ? "" : "s", (long long)p->leases,
                 p->leases == 1 ? "" : "s");
    schedule(fq, fq->f->dc->fsck_interval_ms);
}

static void send_step(struct fsck_queue *fq);

static void on_step(struct rconn *rc, redisReply *reply, void *arg)
{
    (void)rc;
    struct fsck_queue *fq = arg;
    fq->busy = 0;
    dq_fsck_result step = { 0 };
    char cursor[sizeof fq->cursor];
    dq_status st = reply ? proto_fsck_reply(reply, true, &step, cursor, sizeof cursor)
                         : DQ_ERR_CONNECT;
    if (st != DQ_OK) {
        /* Lost connections restart at on_up; an error (a slot migrating)
         * waits for the next pass. */
        if (reply)
            log_warn("queue=%s: fsck step failed: %s", fq->q->name,
                     reply->type == REDIS_REPLY_ERROR ? reply->str : "unexpected reply");
        dq_fsck_result_free(&step);
        schedule(fq, fq->f->dc->fsck_interval_ms);
        return;
    }
    for (size_t i = 0; i < step.n; i++) {
        if (step.findings[i].kind == DQ_FSCK_WRONG_TYPE)
            note_bad(fq, &step.findings[i]);
        else
            log_repair(fq, &step.findings[i]);
    }
    fq->pass.records += step.records;
    fq->pass.members += step.members;
    fq->pass.leases += step.leases;
    fq->pass.repaired += step.repaired;
    if (fq->entry)
        slot_add(&fq->entry->repaired, (uint64_t)step.repaired);
    count_claim_drops(fq, step.claim_dropped);
    dq_fsck_result_free(&step);
    publish(fq->f);             /* a new wrong-type key shows at once */
    snprintf(fq->cursor, sizeof fq->cursor, "%s", cursor);
    if (strcmp(cursor, "0") == 0)
        end_pass(fq);
    else
        send_step(fq);
}

static void send_step(struct fsck_queue *fq)
{
    struct cmd cmd;
    cmd_init(&cmd);
    proto_fsck_cmd(&cmd, &fq->keys, fq->cursor, fq->f->dc->reaper_batch, true);
    if (rconn_send(fq->f->conn, &cmd, DQ_SCRIPT_FSCK, on_step, fq) == 0)
        fq->busy = 1;
    else
        schedule(fq, fq->f->dc->fsck_interval_ms);  /* down: on_up starts again */
    cmd_free(&cmd);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct fsck_queue *fq = arg;
    if (fq->busy)
        return;
    snprintf(fq->cursor, sizeof fq->cursor, "0");
    memset(&fq->pass, 0, sizeof fq->pass);
    fq->logged = 0;
    for (size_t i = 0; i < fq->nbad; i++)
        fq->bad[i].seen = 0;
    send_step(fq);
}

struct reaper_fsck *reaper_fsck_new(struct event_base *base, struct rconn *conn,
                                    const struct daemon_conf *dc,
                                    struct slot_fsck *slot)
{
    struct reaper_fsck *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->dc = dc;
    f->conn = conn;
    f->slot = slot;
    if (dc->fsck_interval_ms <= 0 || dc->nqueues == 0)
        return f;
    f->queues = calloc(dconfig_parts_count(dc), sizeof *f->queues);
    if (!f->queues)
        goto fail;
    struct dconfig_part it;
    for (dconfig_parts_begin(&it, dc); dconfig_parts_next(&it);) {
        struct fsck_queue *fq = &f->queues[f->nqueues++];
        fq->f = f;
        fq->q = it.q;
        fq->keys = it.keys;
        fq->entry = slot_fsck_entry(slot, it.q->name);
        if (!(fq->timer = evtimer_new(base, on_timer, fq)))
            goto fail;
    }
    return f;
fail:
    reaper_fsck_free(f);
    return NULL;
}

void reaper_fsck_up(struct reaper_fsck *f)
{
    for (size_t i = 0; f && i < f->nqueues; i++) {
        evtimer_del(f->queues[i].timer);
        f->queues[i].busy = 0;
        schedule(&f->queues[i], 0);
    }
}

void reaper_fsck_free(struct reaper_fsck *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->nqueues; i++) {
        struct fsck_queue *fq = &f->queues[i];
        if (fq->timer)
            event_free(fq->timer);
        for (size_t k = 0; k < fq->nbad; k++) {
            free(fq->bad[k].key);
            free(fq->bad[k].reason);
        }
        free(fq->bad);
    }
    free(f->queues);
    free(f);
}
