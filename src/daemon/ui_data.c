/*
 * ui_data: the dashboard's questions to Redis (ui_data.h says the
 * contract).  Each call is an operation (struct ui_op) made of one or
 * more requests (struct ui_sub), one per partition it reaches; the
 * operation ends, and its callback runs, when its last request has
 * answered.  rconn answers every request it took exactly once (with NULL
 * when the connection is lost or freed), so every operation ends, also
 * inside ui_data_free.
 *
 * A page of a queue of N > 1 partitions takes two steps: each partition's
 * first offset + count entries of the list, ids and times only (the
 * browse script's "ids" mode), merged here by time (the lower partition
 * first on a tie); then the records of the entries of the merged page
 * from the partitions that hold them ("these" mode).  UI_OFFSET_MAX
 * bounds the first step.
 */
#include "daemon/ui_data.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/rconn.h"
#include "lib/keys.h"
#include "lib/proto.h"
#include "lib/sched.h"

#define UI_TYPE_EXAMINE 5000    /* with a type filter: entries examined per partition */
#define UI_DEAD_BATCH 500       /* dead jobs per requeue/purge call, as the CLI's */
#define UI_SCHEDULES_MAX 10000  /* as sched_list.lua allows */

struct ui_data {
    const struct daemon_conf *dc;
    struct rconn *conn;
    int freeing;
};

enum op_kind { OP_PAGE, OP_SHOW, OP_SCHEDULES, OP_ACTION };

/* One partition's first step of a merged page. */
struct part_head {
    char **ids;
    int64_t *at;
    size_t n;
    size_t next;
};

struct ui_op {
    struct ui_data *d;
    enum op_kind kind;
    const struct queue_conf *q;
    unsigned nparts;
    size_t outstanding;         /* requests sent and not answered */
    dq_status st;               /* the first failure, or DQ_OK */
    char err[256];
    void *arg;
    union {
        ui_page_fn page;
        ui_show_fn show;
        ui_schedules_fn schedules;
        ui_action_fn action;
    } fn;
    /* OP_PAGE */
    enum ui_list which;
    int64_t offset;
    int count;
    char *type;
    int merging;                /* N > 1 and in the second step */
    struct part_head *heads;    /* the first step's, per partition */
    unsigned *slot_part;        /* the partition of page entry i ... */
    const char **slot_id;       /* ... and its id (in heads), or NULL */
    struct ui_page page;
    /* OP_SHOW, one-job actions */
    char *id;
    dq_job_info info;
    /* OP_SCHEDULES */
    dq_schedule_list list;
    int have_list;
    /* OP_ACTION */
    enum ui_action act;
    int64_t done;
};

/* One request of an operation: the partition it went to, and for the
 * second step of a page the ids asked for. */
struct ui_sub {
    struct ui_op *op;
    unsigned part;
    const char **ids;
    size_t nids;
};

static void on_reply(struct rconn *rc, redisReply *reply, void *arg);

/* ---- operations ---------------------------------------------------------- */

static void op_fail(struct ui_op *op, dq_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Record why the operation fails; the first reason wins. */
static void op_fail(struct ui_op *op, dq_status st, const char *fmt, ...)
{
    if (op->st != DQ_OK)
        return;
    op->st = st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(op->err, sizeof op->err, fmt, ap);
    va_end(ap);
}

static struct ui_op *op_new(struct ui_data *d, enum op_kind kind,
                            const struct queue_conf *q, void *arg)
{
    struct ui_op *op = calloc(1, sizeof *op);
    if (!op)
        return NULL;
    op->d = d;
    op->kind = kind;
    op->q = q;
    op->nparts = q->partitions > 1 ? (unsigned)q->partitions : 1;
    op->arg = arg;
    return op;
}

static void page_entries_free(struct ui_page *p, size_t n)
{
    for (size_t i = 0; p->e && i < n; i++) {
        free(p->e[i].id);
        free(p->e[i].type);
        free(p->e[i].last_error);
    }
    free(p->e);
    p->e = NULL;
}

static void heads_free(struct ui_op *op)
{
    for (unsigned p = 0; op->heads && p < op->nparts; p++) {
        for (size_t i = 0; i < op->heads[p].n; i++)
            free(op->heads[p].ids[i]);
        free(op->heads[p].ids);
        free(op->heads[p].at);
    }
    free(op->heads);
    op->heads = NULL;
}

static void op_free(struct ui_op *op)
{
    page_entries_free(&op->page, (size_t)op->count);
    heads_free(op);
    free(op->slot_part);
    free(op->slot_id);
    free(op->type);
    free(op->id);
    dq_job_info_free(&op->info);
    dq_schedule_list_free(&op->list);
    free(op);
}

/* Drop the page's empty entries (jobs that left the list between the two
 * steps of a merge), keeping the order. */
static void page_compact(struct ui_page *p, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < cap; i++) {
        if (!p->e[i].id)
            continue;
        if (n != i) {
            p->e[n] = p->e[i];
            memset(&p->e[i], 0, sizeof p->e[i]);
        }
        n++;
    }
    p->n = n;
}

/* The operation is over: its callback, once, then free it. */
static void op_finish(struct ui_op *op)
{
    const char *err = op->st == DQ_OK ? NULL : op->err;
    switch (op->kind) {
    case OP_PAGE:
        if (op->st == DQ_OK && op->merging)
            page_compact(&op->page, (size_t)op->count);
        op->fn.page(op->st == DQ_OK ? &op->page : NULL, err, op->arg);
        break;
    case OP_SHOW:
        op->fn.show(op->st == DQ_OK ? &op->info : NULL, op->st, err, op->arg);
        break;
    case OP_SCHEDULES:
        op->fn.schedules(op->st == DQ_OK ? &op->list : NULL, err, op->arg);
        break;
    case OP_ACTION:
        op->fn.action(op->st, op->done, err, op->arg);
        break;
    }
    op_free(op);
}

/* ---- building and sending requests ---------------------------------------- */

static const char *list_word(enum ui_list which)
{
    switch (which) {
    case UI_LIST_PROCESSING: return "processing";
    case UI_LIST_DEAD: return "dead";
    case UI_LIST_DELAYED: break;
    }
    return "delayed";
}

static const char *prefix_of(const struct ui_data *d)
{
    return d->dc->redis.prefix ? d->dc->redis.prefix : DQ_DEFAULT_PREFIX;
}

static enum dq_script_id page_cmd(struct ui_op *op, struct ui_sub *s, struct cmd *c,
                                  const struct queue_keys *k)
{
    enum proto_browse_mode mode = PROTO_BROWSE_RECORDS;
    int64_t offset = op->offset;
    int count = op->count;
    if (s->ids) {
        mode = PROTO_BROWSE_THESE;
    } else if (op->nparts > 1) {
        mode = PROTO_BROWSE_IDS;
        count = (int)(offset + count);
        offset = 0;
    }
    proto_browse_cmd(c, k, list_word(op->which), offset, count, op->type, UI_TYPE_EXAMINE,
                     mode, s->ids, s->nids);
    return DQ_SCRIPT_BROWSE;
}

static enum dq_script_id action_cmd(struct ui_op *op, struct cmd *c,
                                    const struct queue_keys *k)
{
    switch (op->act) {
    case UI_ACT_REQUEUE:
    case UI_ACT_REQUEUE_ALL:
        proto_dead_cmd(c, k, DQ_SCRIPT_REQUEUE, op->id, UI_DEAD_BATCH);
        return DQ_SCRIPT_REQUEUE;
    case UI_ACT_PURGE:
    case UI_ACT_PURGE_ALL:
        proto_dead_cmd(c, k, DQ_SCRIPT_PURGE, op->id, UI_DEAD_BATCH);
        return DQ_SCRIPT_PURGE;
    case UI_ACT_CANCEL:
        proto_cancel_cmd(c, k, op->id);
        return DQ_SCRIPT_CANCEL;
    case UI_ACT_RUN_NOW:
        proto_run_now_cmd(c, k, op->id);
        return DQ_SCRIPT_RUN_NOW;
    case UI_ACT_PAUSE:
        proto_pause_cmd(c, k, DQ_SCRIPT_PAUSE);
        return DQ_SCRIPT_PAUSE;
    case UI_ACT_RESUME:
        break;
    }
    proto_pause_cmd(c, k, DQ_SCRIPT_RESUME);
    return DQ_SCRIPT_RESUME;
}

/* Send request `s` of its operation.  0 when sent (on_reply then runs
 * once), -1 when not (s is the caller's still). */
static int sub_send(struct ui_sub *s)
{
    struct ui_op *op = s->op;
    if (op->d->freeing)
        return -1;
    struct queue_keys k;
    struct sched_keys sk;
    keys_build_part(&k, prefix_of(op->d), op->q->name, s->part, op->nparts);
    struct cmd c;
    cmd_init(&c);
    enum dq_script_id script;
    switch (op->kind) {
    case OP_PAGE:
        script = page_cmd(op, s, &c, &k);
        break;
    case OP_SHOW:
        proto_show_cmd(&c, &k, op->id);
        script = DQ_SCRIPT_SHOW;
        break;
    case OP_SCHEDULES:
        keys_build_sched_part(&sk, prefix_of(op->d), op->q->name, op->nparts);
        sched_list_cmd(&c, &k, &sk, -1, UI_SCHEDULES_MAX);
        script = DQ_SCRIPT_SCHED_LIST;
        break;
    default:
        script = action_cmd(op, &c, &k);
        break;
    }
    int rc = c.oom ? -1 : rconn_send(op->d->conn, &c, (int)script, on_reply, s);
    cmd_free(&c);
    if (rc == 0)
        op->outstanding++;
    return rc;
}

static struct ui_sub *sub_new(struct ui_op *op, unsigned part)
{
    struct ui_sub *s = calloc(1, sizeof *s);
    if (s) {
        s->op = op;
        s->part = part;
    }
    return s;
}

static void sub_free(struct ui_sub *s)
{
    free(s->ids);
    free(s);
}

/* Send a request to partition `part`: 0 when sent, else -1 with the
 * operation marked failed. */
static int send_to(struct ui_op *op, unsigned part)
{
    struct ui_sub *s = sub_new(op, part);
    if (s && sub_send(s) == 0)
        return 0;
    free(s);
    op_fail(op, DQ_ERR_CONNECT, "cannot send to Redis: %s",
            op->d->freeing ? "the dashboard is closing"
                           : s ? "not connected" : "out of memory");
    return -1;
}

/*
 * Start an operation: a request to each partition in parts[0..n-1].  0
 * when at least one went (the operation then ends by its replies), -1
 * when none did: the operation is freed and its callback never runs.
 */
static int op_start(struct ui_op *op, const unsigned *parts, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (send_to(op, parts[i]) != 0)
            break;
    if (op->outstanding > 0)
        return 0;
    op_free(op);
    return -1;
}

/* Start op on every partition of its queue. */
static int op_start_all(struct ui_op *op)
{
    unsigned *parts = malloc(op->nparts * sizeof *parts);
    if (!parts) {
        op_free(op);
        return -1;
    }
    for (unsigned p = 0; p < op->nparts; p++)
        parts[p] = p;
    int rc = op_start(op, parts, op->nparts);
    free(parts);
    return rc;
}

/* ---- replies ---------------------------------------------------------------- */

/* Whether a reply can be read; if not the operation is marked failed. */
static int reply_usable(struct ui_op *op, const redisReply *r)
{
    if (!r) {
        op_fail(op, DQ_ERR_CONNECT, "no answer from Redis: %s",
                op->d->freeing ? "the dashboard is closing"
                               : rconn_last_failure(op->d->conn));
        return 0;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        op_fail(op, DQ_ERR_REDIS, "%s", r->str);
        return 0;
    }
    return 1;
}

static void bad_reply(struct ui_op *op, const char *script)
{
    op_fail(op, DQ_ERR_REDIS, "unexpected reply from the %s script", script);
}

/* Fill page entry `e` from a browse item. */
static int entry_fill(struct ui_entry *e, const struct proto_browse_item *it)
{
    e->id = strdup(it->id);
    e->type = strdup(it->type);
    e->unreadable = it->unreadable[0] != '\0';
    e->last_error = strdup(e->unreadable ? it->unreadable : it->last_error);
    e->at_ms = it->at_ms;
    e->attempts = it->attempts;
    e->max_attempts = it->max_attempts;
    e->priority = it->priority;
    e->created_ms = it->created_ms;
    e->payload_len = it->payload_len;
    return e->id && e->type && e->last_error ? 0 : -1;
}

/* The reply of a page's one step (N = 1) or a merge's second step. */
static void page_records(struct ui_op *op, struct ui_sub *s, const redisReply *r)
{
    int64_t now, total, matched;
    size_t n;
    enum proto_browse_mode mode = s->ids ? PROTO_BROWSE_THESE : PROTO_BROWSE_RECORDS;
    if (proto_browse_reply(r, mode, &now, &total, &matched, &n) != DQ_OK) {
        bad_reply(op, "browse");
        return;
    }
    if (!s->ids) {
        op->page.now_ms = now;
        op->page.total = total;
        op->page.matched = matched;
    }
    for (size_t i = 0; i < n; i++) {
        struct proto_browse_item it;
        proto_browse_item(r, mode, i, &it);
        size_t slot = i;
        if (s->ids) {           /* the entry of the merged page it fills */
            for (slot = 0; slot < (size_t)op->count; slot++)
                if (op->slot_id[slot] && op->slot_part[slot] == s->part
                    && !op->page.e[slot].id && strcmp(op->slot_id[slot], it.id) == 0)
                    break;
        }
        if (slot >= (size_t)op->count)
            continue;
        if (entry_fill(&op->page.e[slot], &it) != 0) {
            op_fail(op, DQ_ERR_NOMEM, "out of memory");
            return;
        }
    }
    if (!s->ids)
        op->page.n = n;
}

/* A merge's first step, from partition s->part: its head, kept. */
static void page_head(struct ui_op *op, struct ui_sub *s, const redisReply *r)
{
    int64_t now, total, matched;
    size_t n;
    if (proto_browse_reply(r, PROTO_BROWSE_IDS, &now, &total, &matched, &n) != DQ_OK) {
        bad_reply(op, "browse");
        return;
    }
    if (now > op->page.now_ms)
        op->page.now_ms = now;
    op->page.total += total;
    if (matched < 0 || op->page.matched < 0)
        op->page.matched = -1;
    else
        op->page.matched += matched;
    struct part_head *h = &op->heads[s->part];
    h->ids = calloc(n ? n : 1, sizeof *h->ids);
    h->at = calloc(n ? n : 1, sizeof *h->at);
    if (!h->ids || !h->at) {
        op_fail(op, DQ_ERR_NOMEM, "out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        struct proto_browse_item it;
        proto_browse_item(r, PROTO_BROWSE_IDS, i, &it);
        if (!(h->ids[i] = strdup(it.id))) {
            op_fail(op, DQ_ERR_NOMEM, "out of memory");
            return;
        }
        h->at[i] = it.at_ms;
        h->n = i + 1;
    }
}

/* The partition whose next head entry comes first (the lower on a tie),
 * or -1 when every head is used up. */
static int head_first(const struct ui_op *op)
{
    int best = -1;
    for (unsigned p = 0; p < op->nparts; p++) {
        const struct part_head *h = &op->heads[p];
        if (h->next < h->n
            && (best < 0 || h->at[h->next] < op->heads[best].at[op->heads[best].next]))
            best = (int)p;
    }
    return best;
}

/* Cut the merged page from the heads: slot i gets its partition and id. */
static void page_cut(struct ui_op *op)
{
    size_t filled = 0;
    for (int64_t seen = 0; filled < (size_t)op->count; seen++) {
        int p = head_first(op);
        if (p < 0)
            break;
        struct part_head *h = &op->heads[p];
        if (seen >= op->offset) {
            op->slot_part[filled] = (unsigned)p;
            op->slot_id[filled] = h->ids[h->next];
            filled++;
        }
        h->next++;
    }
}

/* A merge's second step: ask each partition for the records of its
 * entries of the page. */
static void page_second_step(struct ui_op *op)
{
    op->merging = 1;
    page_cut(op);
    for (unsigned p = 0; p < op->nparts; p++) {
        size_t n = 0;
        for (size_t i = 0; i < (size_t)op->count; i++)
            n += op->slot_id[i] && op->slot_part[i] == p;
        if (n == 0)
            continue;
        struct ui_sub *s = sub_new(op, p);
        const char **ids = calloc(n, sizeof *ids);
        if (!s || !ids) {
            free(s);
            free(ids);
            op_fail(op, DQ_ERR_NOMEM, "out of memory");
            return;
        }
        s->ids = ids;
        for (size_t i = 0; i < (size_t)op->count; i++)
            if (op->slot_id[i] && op->slot_part[i] == p)
                ids[s->nids++] = op->slot_id[i];
        if (sub_send(s) != 0) {
            sub_free(s);
            op_fail(op, DQ_ERR_CONNECT, "cannot send to Redis: not connected");
            return;
        }
    }
}

static void show_reply(struct ui_op *op, const redisReply *r)
{
    dq_status st = proto_show_reply(r, &op->info);
    if (st == DQ_OK && !(op->info.job.id = strdup(op->id)))
        st = DQ_ERR_NOMEM;
    if (st == DQ_ERR_NOTFOUND)
        op_fail(op, st, "no job %s in queue %s", op->id, op->q->name);
    else if (st == DQ_ERR_NOMEM)
        op_fail(op, st, "out of memory");
    else if (st != DQ_OK)
        bad_reply(op, "show");
}

static void schedules_reply(struct ui_op *op, const redisReply *r)
{
    if (sched_list_reply(r, &op->list) != DQ_OK)
        bad_reply(op, "sched_list");
}

/* A one-job action's answer from cancel or run_now. */
static void one_job_outcome(struct ui_op *op, dq_status st)
{
    const char *what = op->act == UI_ACT_CANCEL ? "cancel" : "run_now";
    switch (st) {
    case DQ_OK:
        op->done = 1;
        break;
    case DQ_ERR_NOTFOUND:
        op_fail(op, st, "no job %s in queue %s", op->id, op->q->name);
        break;
    case DQ_ERR_RUNNING:
        op_fail(op, st, "job %s in queue %s is running", op->id, op->q->name);
        break;
    case DQ_ERR_DEAD:
        op_fail(op, st, "job %s in queue %s is dead", op->id, op->q->name);
        break;
    default:
        bad_reply(op, what);
    }
}

/* An action's answer; 1 when the same request must go again (a requeue
 * or purge of all whose batch left more). */
static int action_reply(struct ui_op *op, const redisReply *r)
{
    int64_t moved, remaining, now, since;
    switch (op->act) {
    case UI_ACT_CANCEL:
        one_job_outcome(op, proto_cancel_reply(r));
        return 0;
    case UI_ACT_RUN_NOW:
        one_job_outcome(op, proto_run_now_reply(r));
        return 0;
    case UI_ACT_PAUSE:
    case UI_ACT_RESUME:
        if (proto_pause_reply(r, &now, &since) != DQ_OK)
            bad_reply(op, op->act == UI_ACT_PAUSE ? "pause" : "resume");
        op->done = 1;
        return 0;
    default:
        break;
    }
    int requeue = op->act == UI_ACT_REQUEUE || op->act == UI_ACT_REQUEUE_ALL;
    if (proto_count_reply(r, &moved, &remaining) != DQ_OK) {
        bad_reply(op, requeue ? "requeue" : "purge");
        return 0;
    }
    op->done += moved;
    if (op->id) {
        if (moved == 0)
            op_fail(op, DQ_ERR_NOTFOUND, "no dead job %s in queue %s", op->id, op->q->name);
        return 0;
    }
    /* As the CLI: on until none is left, or a batch moved nothing
     * (records that cannot be requeued stay dead). */
    return op->st == DQ_OK && remaining > 0 && moved > 0;
}

/* What follows once the last request of a step has answered. */
static void op_step_done(struct ui_op *op)
{
    if (op->kind == OP_PAGE && op->nparts > 1 && !op->merging && op->st == DQ_OK) {
        page_second_step(op);
        if (op->outstanding > 0)
            return;
    }
    op_finish(op);
}

static void on_reply(struct rconn *rc, redisReply *reply, void *arg)
{
    (void)rc;
    struct ui_sub *s = arg;
    struct ui_op *op = s->op;
    op->outstanding--;
    int again = 0;
    if (op->st == DQ_OK && reply_usable(op, reply)) {
        switch (op->kind) {
        case OP_PAGE:
            if (op->nparts > 1 && !s->ids)
                page_head(op, s, reply);
            else
                page_records(op, s, reply);
            break;
        case OP_SHOW:
            show_reply(op, reply);
            break;
        case OP_SCHEDULES:
            schedules_reply(op, reply);
            break;
        case OP_ACTION:
            again = action_reply(op, reply);
            break;
        }
    }
    if (again && sub_send(s) != 0) {
        op_fail(op, DQ_ERR_CONNECT, "cannot send to Redis: not connected");
        again = 0;
    }
    if (!again)
        sub_free(s);
    if (op->outstanding == 0)
        op_step_done(op);
}

/* ---- the calls ------------------------------------------------------------ */

struct ui_data *ui_data_new(struct event_base *base, const struct daemon_conf *dc)
{
    struct ui_data *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->dc = dc;
    struct rconn_events ev = { NULL, NULL, d };
    if (!(d->conn = rconn_from_conf(base, &dc->redis, "ui", &ev))) {
        free(d);
        return NULL;
    }
    rconn_start(d->conn);
    return d;
}

void ui_data_free(struct ui_data *d)
{
    if (!d)
        return;
    d->freeing = 1;
    rconn_free(d->conn);        /* every pending request answers NULL: each op ends */
    free(d);
}

void ui_data_close_in_child(struct ui_data *d)
{
    if (d)
        rconn_close_in_child(d->conn);
}

int ui_data_is_up(const struct ui_data *d)
{
    return d && !d->freeing && rconn_is_up(d->conn);
}

int ui_data_page(struct ui_data *d, const struct queue_conf *q, enum ui_list which,
                 int64_t offset, int count, const char *type, ui_page_fn fn, void *arg)
{
    if (!d || d->freeing || offset < 0 || offset > UI_OFFSET_MAX || count < 1
        || count > UI_PAGE_MAX)
        return -1;
    struct ui_op *op = op_new(d, OP_PAGE, q, arg);
    if (!op)
        return -1;
    op->fn.page = fn;
    op->which = which;
    op->offset = offset;
    op->count = count;
    op->page.e = calloc((size_t)count, sizeof *op->page.e);
    op->type = type && *type ? strdup(type) : NULL;
    if (op->nparts > 1) {
        op->heads = calloc(op->nparts, sizeof *op->heads);
        op->slot_part = calloc((size_t)count, sizeof *op->slot_part);
        op->slot_id = calloc((size_t)count, sizeof *op->slot_id);
    }
    if (!op->page.e || (type && *type && !op->type)
        || (op->nparts > 1 && (!op->heads || !op->slot_part || !op->slot_id))) {
        op_free(op);
        return -1;
    }
    return op_start_all(op);
}

/* An operation on the one partition that holds job `id`. */
static int op_start_on_job(struct ui_op *op, const char *id)
{
    if (!(op->id = strdup(id))) {
        op_free(op);
        return -1;
    }
    unsigned part = keys_partition_of(id, op->nparts);
    return op_start(op, &part, 1);
}

int ui_data_show(struct ui_data *d, const struct queue_conf *q, const char *id,
                 ui_show_fn fn, void *arg)
{
    if (!d || d->freeing || !id || !*id)
        return -1;
    struct ui_op *op = op_new(d, OP_SHOW, q, arg);
    if (!op)
        return -1;
    op->fn.show = fn;
    return op_start_on_job(op, id);
}

int ui_data_schedules(struct ui_data *d, const struct queue_conf *q,
                      ui_schedules_fn fn, void *arg)
{
    if (!d || d->freeing)
        return -1;
    struct ui_op *op = op_new(d, OP_SCHEDULES, q, arg);
    if (!op)
        return -1;
    op->fn.schedules = fn;
    unsigned part = 0;          /* a partitioned queue's schedules live in 0 */
    return op_start(op, &part, 1);
}

static int one_job_action(enum ui_action a)
{
    return a == UI_ACT_REQUEUE || a == UI_ACT_PURGE || a == UI_ACT_CANCEL
           || a == UI_ACT_RUN_NOW;
}

int ui_data_action(struct ui_data *d, const struct queue_conf *q, enum ui_action a,
                   const char *id, ui_action_fn fn, void *arg)
{
    if (!d || d->freeing || (one_job_action(a) && (!id || !*id)))
        return -1;
    struct ui_op *op = op_new(d, OP_ACTION, q, arg);
    if (!op)
        return -1;
    op->fn.action = fn;
    op->act = a;
    if (one_job_action(a))
        return op_start_on_job(op, id);
    return op_start_all(op);
}
