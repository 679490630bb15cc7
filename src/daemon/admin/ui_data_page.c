/*
 * ui_data's pages of a queue's lists (ui_data_page in ui_data.h).
 *
 * A queue of one partition: one browse call, its page as it comes.  A
 * queue of N > 1 partitions takes two steps: each partition's first
 * offset + count entries of the list, ids and times only (the browse
 * script's "ids" mode), merged here by time (the lower partition first on
 * a tie) to cut the page; then the records of the page's entries from the
 * partitions that hold them ("these" mode).  UI_OFFSET_MAX bounds the
 * first step.  A job that leaves the list between the two steps is not
 * on the page.
 */
#include <stdlib.h>
#include <string.h>

#include "daemon/admin/ui_data.h"
#include "daemon/admin/ui_data_op.h"
#include "lib/proto.h"

/* With a type filter: the entries examined per partition, from the head
 * of the list.  Each costs Redis a record read (about 3 us): 1000 keep a
 * filtered page near 3 ms of Redis time. */
#define UI_TYPE_EXAMINE 1000

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

/* Drop the page's empty entries (jobs that left the list between the two
 * steps of a merge), keeping the order. */
static void page_compact(struct ui_page *p, size_t cap)
{
    if (!p->e)
        return;
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

static const char *list_word(enum ui_list which)
{
    switch (which) {
    case UI_LIST_PROCESSING: return "processing";
    case UI_LIST_DEAD: return "dead";
    case UI_LIST_DELAYED: break;
    }
    return "delayed";
}

/* The browse call of request `s`: the page itself (one partition), a
 * merge's first step (ids and times of the first offset + count entries
 * of a partition) or its second (the records of the ids in s). */
static enum dq_script_id list_cmd(const struct ui_op *op, const struct ui_sub *s,
                                  struct cmd *c, const struct queue_keys *k)
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
        ui_data_op_bad_reply(op, "browse");
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
            ui_data_op_fail(op, DQ_ERR_NOMEM, "out of memory");
            return;
        }
    }
    if (!s->ids)
        op->page.n = n < (size_t)op->count ? n : (size_t)op->count;
}

/* A merge's first step, from partition s->part: its head, kept. */
static void page_head(struct ui_op *op, struct ui_sub *s, const redisReply *r)
{
    int64_t now, total, matched;
    size_t n;
    if (proto_browse_reply(r, PROTO_BROWSE_IDS, &now, &total, &matched, &n) != DQ_OK) {
        ui_data_op_bad_reply(op, "browse");
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
        ui_data_op_fail(op, DQ_ERR_NOMEM, "out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        struct proto_browse_item it;
        proto_browse_item(r, PROTO_BROWSE_IDS, i, &it);
        if (!(h->ids[i] = strdup(it.id))) {
            ui_data_op_fail(op, DQ_ERR_NOMEM, "out of memory");
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
        struct ui_sub *s = ui_data_sub_new(op, p);
        const char **ids = calloc(n, sizeof *ids);
        if (!s || !ids) {
            free(s);
            free(ids);
            ui_data_op_fail(op, DQ_ERR_NOMEM, "out of memory");
            return;
        }
        s->ids = ids;
        for (size_t i = 0; i < (size_t)op->count; i++)
            if (op->slot_id[i] && op->slot_part[i] == p)
                ids[s->nids++] = op->slot_id[i];
        if (ui_data_sub_send(s) != 0) {
            ui_data_sub_free(s);
            return;
        }
    }
}


/* A reply of either step. */
static void list_reply(struct ui_op *op, struct ui_sub *s, const redisReply *r)
{
    if (op->nparts > 1 && !s->ids)
        page_head(op, s, r);
    else
        page_records(op, s, r);
}

/* After a merge's first step, its second: 1 when requests went. */
static int list_next_step(struct ui_op *op)
{
    if (op->nparts == 1 || op->merging || op->st != DQ_OK)
        return 0;
    page_second_step(op);
    return op->outstanding > 0;
}

/* Entries that left the list between the two steps leave the page. */
static void list_seal(struct ui_op *op)
{
    if (op->merging)
        page_compact(&op->page, (size_t)op->count);
}

static void list_free(struct ui_op *op)
{
    page_entries_free(&op->page, (size_t)op->count);
    heads_free(op);
    free(op->slot_part);
    free(op->slot_id);
    free(op->type);
}

static const struct ui_op_hooks list_hooks = {
    list_cmd, list_reply, list_next_step, list_seal, list_free
};

int ui_data_page(struct ui_data *d, const struct queue_conf *q, enum ui_list which,
                 int64_t offset, int count, const char *type, ui_page_fn fn, void *arg)
{
    if (!d || d->freeing || offset < 0 || offset > UI_OFFSET_MAX || count < 1
        || count > UI_PAGE_MAX)
        return ui_data_call_refused(d);
    struct ui_op *op = ui_data_op_new(d, OP_PAGE, q, arg);
    if (!op)
        return -1;
    op->hooks = &list_hooks;
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
        ui_data_op_free(op);
        return -1;
    }
    return ui_data_op_start_all(op);
}
