/* libdelayq calls for operators: stats, show, the dead-letter set, pause. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lib/client_internal.h"
#include "lib/partitions.h"
#include "lib/proto.h"

#define ADMIN_BATCH 500  /* dead jobs moved per script call: keeps each short */
#define DEAD_PAGE_MAX 10000  /* dead jobs in one page, as dead_list.lua allows */

/* Run an operator script's command, built by its proto_*_cmd, and free
 * the command. */
static dq_status run_admin(dq_client *c, struct cmd *cmd, enum dq_script_id s,
                           redisReply **r)
{
    dq_status st = client_run(c, cmd, s, r);
    cmd_free(cmd);
    return st;
}

/* Check the queue's name and read its partition count into *n. */
static dq_status queue_parts(dq_client *c, const char *queue, unsigned *n)
{
    struct queue_keys k;
    dq_status st = client_queue_keys(c, queue, &k);
    return st == DQ_OK ? part_count(c, queue, n) : st;
}

static dq_status bad_reply(dq_client *c, dq_status st, enum dq_script_id s)
{
    if (st == DQ_ERR_NOMEM)
        return client_fail(c, st, "out of memory");
    return client_fail(c, st, "unexpected reply from the %s script", dq_scripts[s].name);
}

/* Add one partition's stats to the sum: counts add up, the next due
 * time is the soonest. */

dq_status dq_stats_get(dq_client *c, const char *queue, dq_stats *out)
{
    memset(out, 0, sizeof *out);
    unsigned n;
    dq_status st = queue_parts(c, queue, &n);
    if (st != DQ_OK || n == 1)
        return st == DQ_OK ? dq_stats_partition(c, queue, 0, out) : st;
    out->next_due_in_ms = -1;
    dq_stats *each = calloc(n, sizeof *each);
    if (!each)
        return client_fail(c, DQ_ERR_NOMEM, "out of memory");
    st = part_stats_all(c, queue, n, each);
    for (unsigned p = 0; st == DQ_OK && p < n; p++)
        proto_stats_add(out, &each[p]);
    free(each);
    return st;
}

dq_status dq_show(dq_client *c, const char *queue, const char *id,
                  dq_job_info *out)
{
    memset(out, 0, sizeof *out);
    if (!id || !*id)
        return client_fail(c, DQ_ERR_INVALID, "job id is empty");
    struct queue_keys k;
    dq_status st = client_queue_keys(c, queue, &k);
    if (st == DQ_OK)
        st = part_keys_of_id(c, queue, id, &k, NULL);
    if (st != DQ_OK)
        return st;
    /* The record undecoded first; in full when this library cannot read
     * it as the scripts would (the script then says why). */
    bool again = false;
    for (int raw = 1; raw >= 0; raw--) {
        redisReply *r;
        struct cmd cmd;
        cmd_init(&cmd);
        proto_show_cmd(&cmd, &k, id, raw);
        if ((st = run_admin(c, &cmd, DQ_SCRIPT_SHOW, &r)) != DQ_OK)
            return st;
        st = proto_show_reply(r, out, raw ? &again : NULL);
        freeReplyObject(r);
        if (!again)
            break;
    }
    if (st == DQ_ERR_NOTFOUND)
        return client_fail(c, st, "no job %s in queue %s", id, queue);
    if (st == DQ_OK) {
        out->job.id = strdup(id);
        if (!out->job.id)
            st = DQ_ERR_NOMEM;
    }
    return st == DQ_OK ? st : bad_reply(c, st, DQ_SCRIPT_SHOW);
}

/* One page of the dead set whose keys are `k`. */
static dq_status dead_page(dq_client *c, const struct queue_keys *k, int64_t offset,
                           int count, dq_dead_page *out)
{
    struct cmd cmd;
    cmd_init(&cmd);
    proto_dead_list_cmd(&cmd, k, offset, count);
    redisReply *r;
    dq_status st = run_admin(c, &cmd, DQ_SCRIPT_DEAD_LIST, &r);
    if (st != DQ_OK)
        return st;
    st = proto_dead_list_reply(r, out);
    freeReplyObject(r);
    return st == DQ_OK ? st : bad_reply(c, st, DQ_SCRIPT_DEAD_LIST);
}

/* A partition's place in the merge of the dead sets: its page in hand,
 * where that page starts in its set and the next entry to look at. */
struct dead_cursor {
    struct queue_keys k;
    dq_dead_page page;
    int64_t page_at;
    size_t next;
};

/* The next entry of cursor `d` (paging on with `size` entries a page), or
 * false when its set has no more. */
static dq_status dead_cursor_peek(dq_client *c, struct dead_cursor *d, int size, bool *more)
{
    *more = d->next < d->page.n;
    if (*more || d->page_at + (int64_t)d->page.n >= d->page.total)
        return DQ_OK;
    d->page_at += (int64_t)d->page.n;
    dq_dead_page_free(&d->page);
    d->next = 0;
    dq_status st = dead_page(c, &d->k, d->page_at, size, &d->page);
    *more = st == DQ_OK && d->page.n > 0;
    return st;
}

static void make_first_page(void *ctx, unsigned part, const struct queue_keys *k,
                            struct cmd *cmd)
{
    (void)part;
    proto_dead_list_cmd(cmd, k, 0, *(const int *)ctx);
}

/* The first page (`size` entries) of each partition's dead set, in one
 * pipeline, into the cursors d[0..n). */
static dq_status first_pages(dq_client *c, const char *queue, unsigned n, int size,
                             struct dead_cursor *d)
{
    redisReply **replies;
    dq_status st = part_pipeline(c, queue, n, n, NULL, DQ_SCRIPT_DEAD_LIST, make_first_page,
                                 &size, &replies);
    for (unsigned p = 0; p < n; p++) {
        part_keys(c, queue, p, n, &d[p].k);
        if (st == DQ_OK && (st = proto_dead_list_reply(replies[p], &d[p].page)) != DQ_OK)
            st = bad_reply(c, st, DQ_SCRIPT_DEAD_LIST);
    }
    part_replies_free(replies, n);
    return st;
}

/*
 * dq_dead_list of a queue of `n` > 1 partitions: the dead sets merged by
 * time of death (the lower partition first on a tie), the page cut from
 * that order.  Each set is read in pages as the merge goes.
 */
static dq_status dead_list_merged(dq_client *c, const char *queue, unsigned n,
                                  int64_t offset, int count, dq_dead_page *out)
{
    int size = offset + count < DEAD_PAGE_MAX ? (int)offset + count : DEAD_PAGE_MAX;
    struct dead_cursor *d = calloc(n, sizeof *d);
    if (!d)
        return client_fail(c, DQ_ERR_NOMEM, "out of memory");
    int64_t total = 0;
    dq_status st = first_pages(c, queue, n, size, d);
    for (unsigned p = 0; p < n && st == DQ_OK; p++)
        total += d[p].page.total;
    if (st == DQ_OK && proto_dead_page_alloc(out, (size_t)count) != DQ_OK)
        st = client_fail(c, DQ_ERR_NOMEM, "out of memory");
    for (int64_t seen = 0; st == DQ_OK && out->n < (size_t)count; seen++) {
        int best = -1;
        for (unsigned p = 0; p < n && st == DQ_OK; p++) {
            bool more;
            st = dead_cursor_peek(c, &d[p], size, &more);
            if (more && (best < 0 || d[p].page.entries[d[p].next].died_ms
                                     < d[best].page.entries[d[best].next].died_ms))
                best = (int)p;
        }
        if (best < 0)
            break;
        struct dead_cursor *b = &d[best];
        if (seen >= offset)
            proto_dead_entry_move(out, (size_t)count, &b->page, b->next);
        b->next++;
    }
    proto_dead_page_seal(out, (size_t)count);
    out->total = total;
    for (unsigned p = 0; p < n; p++)
        dq_dead_page_free(&d[p].page);
    free(d);
    if (st != DQ_OK)
        dq_dead_page_free(out);
    return st;
}

dq_status dq_dead_list(dq_client *c, const char *queue, int64_t offset,
                       int count, dq_dead_page *out)
{
    memset(out, 0, sizeof *out);
    if (offset < 0 || count < 1 || count > DEAD_PAGE_MAX)
        return client_fail(c, DQ_ERR_INVALID, "bad page: offset %lld, count %d "
                           "(1..%d)", (long long)offset, count, DEAD_PAGE_MAX);
    unsigned n;
    dq_status st = queue_parts(c, queue, &n);
    if (st != DQ_OK)
        return st;
    if (n > 1)
        return dead_list_merged(c, queue, n, offset, count, out);
    struct queue_keys k;
    part_keys(c, queue, 0, 1, &k);
    return dead_page(c, &k, offset, count, out);
}

/* Run requeue or purge of one dead job, `id`, in its partition of `n`;
 * *count receives 1 or 0. */
static dq_status dead_one(dq_client *c, enum dq_script_id s, const char *queue, unsigned n,
                          const char *id, int64_t *count)
{
    struct queue_keys k;
    part_keys(c, queue, keys_partition_of(id, n), n, &k);
    struct cmd cmd;
    cmd_init(&cmd);
    proto_dead_cmd(&cmd, &k, s, id, ADMIN_BATCH);
    redisReply *r;
    dq_status st = run_admin(c, &cmd, s, &r);
    if (st != DQ_OK)
        return st;
    int64_t remaining;
    st = proto_count_reply(r, count, &remaining);
    freeReplyObject(r);
    return st == DQ_OK ? DQ_OK : bad_reply(c, st, s);
}

static void make_dead_batch(void *ctx, unsigned part, const struct queue_keys *k,
                            struct cmd *cmd)
{
    (void)part;
    proto_dead_cmd(cmd, k, *(const enum dq_script_id *)ctx, NULL, ADMIN_BATCH);
}

/*
 * Run requeue or purge on every dead job of the `n` partitions, in
 * batches of ADMIN_BATCH so that no single script call blocks Redis for
 * long: each round one batch in every partition that has more, in one
 * pipeline (one round trip, one per master under Cluster).  A partition
 * is done when none is left, or when a batch moved nothing (records that
 * cannot be requeued stay dead).  *count receives how many jobs moved.
 */
static dq_status dead_all(dq_client *c, enum dq_script_id s, const char *queue, unsigned n,
                          int64_t *count)
{
    unsigned *left = malloc(n * sizeof *left);
    if (!left)
        return client_fail(c, DQ_ERR_NOMEM, "out of memory");
    for (unsigned p = 0; p < n; p++)
        left[p] = p;
    unsigned nleft = n;
    int64_t total = 0;
    dq_status st = DQ_OK;
    while (st == DQ_OK && nleft > 0) {
        redisReply **replies;
        st = part_pipeline(c, queue, n, nleft, left, s, make_dead_batch, &s, &replies);
        unsigned more = 0;
        for (unsigned i = 0; st == DQ_OK && i < nleft; i++) {
            int64_t moved, remaining;
            if ((st = proto_count_reply(replies[i], &moved, &remaining)) != DQ_OK) {
                st = bad_reply(c, st, s);
                break;
            }
            total += moved;
            if (remaining > 0 && moved > 0)
                left[more++] = left[i];
        }
        part_replies_free(replies, nleft);
        nleft = more;
    }
    free(left);
    *count = total;
    return st;
}

/* requeue or purge of one dead job (in its partition) or of all (in
 * every partition, summed). */
static dq_status run_dead_batches(dq_client *c, enum dq_script_id s,
                                  const char *queue, const char *id,
                                  int64_t *count)
{
    unsigned n;
    dq_status st = queue_parts(c, queue, &n);
    if (st != DQ_OK)
        return st;
    int64_t total = 0;
    st = id ? dead_one(c, s, queue, n, id, &total) : dead_all(c, s, queue, n, &total);
    if (st != DQ_OK)
        return st;
    if (count)
        *count = total;
    if (id && total == 0)
        return client_fail(c, DQ_ERR_NOTFOUND, "no dead job %s in queue %s", id, queue);
    return DQ_OK;
}

dq_status dq_requeue(dq_client *c, const char *queue, const char *id)
{
    if (!id || !*id)
        return client_fail(c, DQ_ERR_INVALID, "job id is empty");
    return run_dead_batches(c, DQ_SCRIPT_REQUEUE, queue, id, NULL);
}

dq_status dq_requeue_all(dq_client *c, const char *queue, int64_t *moved)
{
    return run_dead_batches(c, DQ_SCRIPT_REQUEUE, queue, NULL, moved);
}

dq_status dq_purge(dq_client *c, const char *queue, const char *id)
{
    if (!id || !*id)
        return client_fail(c, DQ_ERR_INVALID, "job id is empty");
    return run_dead_batches(c, DQ_SCRIPT_PURGE, queue, id, NULL);
}

dq_status dq_purge_all(dq_client *c, const char *queue, int64_t *deleted)
{
    return run_dead_batches(c, DQ_SCRIPT_PURGE, queue, NULL, deleted);
}

const char *dq_state_str(dq_state s)
{
    switch (s) {
    case DQ_STATE_DELAYED: return "delayed";
    case DQ_STATE_PROCESSING: return "processing";
    case DQ_STATE_DEAD: return "dead";
    case DQ_STATE_ORPHAN: return "orphan";
    case DQ_STATE_UNREADABLE: return "unreadable";
    case DQ_STATE_DONE: return "done";
    case DQ_STATE_CANCELLED: return "cancelled";
    }
    return "unknown";
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void dq_strv_free(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

static dq_status run_plain(dq_client *c, struct cmd *cmd, redisReply **r)
{
    return client_run(c, cmd, -1, r);
}

dq_status dq_queues(dq_client *c, char ***names, size_t *n)
{
    *names = NULL;
    *n = 0;
    char key[KEYS_NAME_MAX];
    keys_registry(key, sizeof key, c->prefix);
    struct cmd cmd;
    cmd_init(&cmd);
    cmd_push_str(&cmd, "SMEMBERS");
    cmd_push_str(&cmd, key);
    redisReply *r;
    dq_status st = run_plain(c, &cmd, &r);
    cmd_free(&cmd);
    if (st != DQ_OK)
        return st;
    if (r->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(r);
        return client_fail(c, DQ_ERR_REDIS, "%s is not a set", key);
    }
    char **v = calloc(r->elements ? r->elements : 1, sizeof *v);
    for (size_t i = 0; v && i < r->elements; i++)
        if (!(v[i] = strndup(r->element[i]->str, r->element[i]->len))) {
            dq_strv_free(v, i);
            v = NULL;
        }
    size_t count = r->elements;
    freeReplyObject(r);
    if (!v)
        return client_fail(c, DQ_ERR_NOMEM, "out of memory");
    qsort(v, count, sizeof *v, cmp_str);
    *names = v;
    *n = count;
    return DQ_OK;
}

dq_status dq_server_time(dq_client *c, int64_t *now_ms)
{
    struct cmd cmd;
    cmd_init(&cmd);
    cmd_push_str(&cmd, "TIME");
    redisReply *r;
    dq_status st = run_plain(c, &cmd, &r);
    cmd_free(&cmd);
    if (st != DQ_OK)
        return st;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
        freeReplyObject(r);
        return client_fail(c, DQ_ERR_REDIS, "unexpected reply to TIME");
    }
    *now_ms = strtoll(r->element[0]->str, NULL, 10) * 1000
              + strtoll(r->element[1]->str, NULL, 10) / 1000;
    freeReplyObject(r);
    return DQ_OK;
}

/* The script's cursor is a phase letter and a SCAN cursor (an unsigned
 * 64-bit number): short. */
typedef char fsck_cursor[64];

struct fsck_round {
    fsck_cursor *cursor;        /* per partition */
    bool repair;
    int count;
};

static void make_fsck_step(void *ctx, unsigned part, const struct queue_keys *k,
                           struct cmd *cmd)
{
    const struct fsck_round *f = ctx;
    proto_fsck_cmd(cmd, k, f->cursor[part], f->count, f->repair);
}

/* One fsck pass over the `n` partitions, its findings added to `out`:
 * each round the next step of every partition whose pass goes on, in one
 * pipeline (a step's command points to its cursor, which the reply then
 * replaces). */
static dq_status fsck_parts(dq_client *c, const char *queue, unsigned n, bool repair,
                            int count, dq_fsck_result *out)
{
    struct fsck_round f = { calloc(n, sizeof *f.cursor), repair, count };
    unsigned *left = malloc(n * sizeof *left);
    if (!f.cursor || !left) {
        free(f.cursor);
        free(left);
        return client_fail(c, DQ_ERR_NOMEM, "out of memory");
    }
    for (unsigned p = 0; p < n; p++) {
        snprintf(f.cursor[p], sizeof f.cursor[p], "0");
        left[p] = p;
    }
    unsigned nleft = n;
    dq_status st = DQ_OK;
    while (st == DQ_OK && nleft > 0) {
        redisReply **replies;
        st = part_pipeline(c, queue, n, nleft, left, DQ_SCRIPT_FSCK, make_fsck_step, &f,
                           &replies);
        unsigned more = 0;
        for (unsigned i = 0; st == DQ_OK && i < nleft; i++) {
            char *cursor = f.cursor[left[i]];
            if ((st = proto_fsck_reply(replies[i], repair, out, cursor,
                                       sizeof f.cursor[0])) != DQ_OK) {
                st = bad_reply(c, st, DQ_SCRIPT_FSCK);
                break;
            }
            if (strcmp(cursor, "0") != 0)
                left[more++] = left[i];
        }
        part_replies_free(replies, nleft);
        nleft = more;
    }
    free(f.cursor);
    free(left);
    return st;
}

dq_status dq_fsck(dq_client *c, const char *queue, bool repair, int count,
                  dq_fsck_result *out)
{
    memset(out, 0, sizeof *out);
    if (count < 0 || count > 1000)
        return client_fail(c, DQ_ERR_INVALID, "bad fsck count %d: from 1 to 1000 "
                           "(0: %d)", count, DQ_FSCK_COUNT);
    unsigned n;
    dq_status st = queue_parts(c, queue, &n);
    return st == DQ_OK ? fsck_parts(c, queue, n, repair, count, out) : st;
}

/* ---- pause, resume ------------------------------------------------------ */

static void make_pause(void *ctx, unsigned part, const struct queue_keys *k, struct cmd *cmd)
{
    (void)part;
    proto_pause_cmd(cmd, k, *(const enum dq_script_id *)ctx);
}

/* Run pause or resume (which take the wake channel), or pause_state, on
 * every partition of the queue, in one pipeline (pause_state: partition 0
 * only, which holds the state as every partition does); *since_ms (may be
 * NULL) receives partition 0's since_ms. */
static dq_status run_pause_script(dq_client *c, enum dq_script_id s, const char *queue,
                                  int64_t *since_ms)
{
    unsigned n;
    dq_status st = queue_parts(c, queue, &n);
    if (st != DQ_OK)
        return st;
    unsigned calls = s == DQ_SCRIPT_PAUSE_STATE ? 1 : n;
    redisReply **replies;
    st = part_pipeline(c, queue, n, calls, NULL, s, make_pause, &s, &replies);
    for (unsigned p = 0; st == DQ_OK && p < calls; p++) {
        int64_t now, since;
        if ((st = proto_pause_reply(replies[p], &now, &since)) != DQ_OK)
            st = bad_reply(c, st, s);
        else if (since_ms && p == 0)
            *since_ms = since;
    }
    part_replies_free(replies, calls);
    return st;
}

dq_status dq_pause(dq_client *c, const char *queue, int64_t *since_ms)
{
    return run_pause_script(c, DQ_SCRIPT_PAUSE, queue, since_ms);
}

dq_status dq_resume(dq_client *c, const char *queue, int64_t *since_ms)
{
    return run_pause_script(c, DQ_SCRIPT_RESUME, queue, since_ms);
}

dq_status dq_paused(dq_client *c, const char *queue, int64_t *since_ms)
{
    if (!since_ms)
        return client_fail(c, DQ_ERR_INVALID, "dq_paused: since_ms is NULL");
    return run_pause_script(c, DQ_SCRIPT_PAUSE_STATE, queue, since_ms);
}
