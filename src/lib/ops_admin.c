/* libdelayq calls for operators: stats, show, the dead-letter set, pause. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lib/client_internal.h"
#include "lib/proto.h"

#define ADMIN_BATCH 500  /* dead jobs moved per script call: keeps each short */
#define DEAD_PAGE_MAX 10000  /* dead jobs in one page, as dead_list.lua allows */

/*
 * Run an operator script on `queue` with optional string arguments.  When
 * `wake_first`, the queue's wake channel goes before them as the first
 * argument (requeue.lua takes it there).  The channel is asked for by this
 * flag, never by a marker among `args`: any string, "@wake" included, can be
 * a job id and must reach the script as it is.
 */
static dq_status run_admin(dq_client *c, enum dq_script_id s, const char *queue,
                           bool wake_first, const char *const *args, int nargs,
                           redisReply **r)
{
    struct queue_keys k;
    dq_status st = client_queue_keys(c, queue, &k);
    if (st != DQ_OK)
        return st;
    struct cmd cmd;
    cmd_init(&cmd);
    cmd_eval(&cmd, s, &k);
    if (wake_first)
        cmd_push_str(&cmd, k.wake);
    for (int i = 0; i < nargs; i++)
        cmd_push_str(&cmd, args[i]);
    st = client_run(c, &cmd, s, r);
    cmd_free(&cmd);
    return st;
}

static dq_status bad_reply(dq_client *c, dq_status st, enum dq_script_id s)
{
    if (st == DQ_ERR_NOMEM)
        return client_fail(c, st, "out of memory");
    return client_fail(c, st, "unexpected reply from the %s script", dq_scripts[s].name);
}

dq_status dq_stats_get(dq_client *c, const char *queue, dq_stats *out)
{
    redisReply *r;
    dq_status st = run_admin(c, DQ_SCRIPT_STATS, queue, false, NULL, 0, &r);
    if (st != DQ_OK)
        return st;
    st = proto_stats_reply(r, out);
    freeReplyObject(r);
    return st == DQ_OK ? st : bad_reply(c, st, DQ_SCRIPT_STATS);
}

dq_status dq_show(dq_client *c, const char *queue, const char *id,
                  dq_job_info *out)
{
    memset(out, 0, sizeof *out);
    if (!id || !*id)
        return client_fail(c, DQ_ERR_INVALID, "job id is empty");
    redisReply *r;
    const char *args[] = { id };
    dq_status st = run_admin(c, DQ_SCRIPT_SHOW, queue, false, args, 1, &r);
    if (st != DQ_OK)
        return st;
    st = proto_show_reply(r, out);
    freeReplyObject(r);
    if (st == DQ_ERR_NOTFOUND)
        return client_fail(c, st, "no job %s in queue %s", id, queue);
    if (st == DQ_OK) {
        out->job.id = strdup(id);
        if (!out->job.id)
            st = DQ_ERR_NOMEM;
    }
    return st == DQ_OK ? st : bad_reply(c, st, DQ_SCRIPT_SHOW);
}

dq_status dq_dead_list(dq_client *c, const char *queue, int64_t offset,
                       int count, dq_dead_page *out)
{
    memset(out, 0, sizeof *out);
    if (offset < 0 || count < 1 || count > DEAD_PAGE_MAX)
        return client_fail(c, DQ_ERR_INVALID, "bad page: offset %lld, count %d "
                           "(1..%d)", (long long)offset, count, DEAD_PAGE_MAX);
    char off[24], cnt[24];
    snprintf(off, sizeof off, "%lld", (long long)offset);
    snprintf(cnt, sizeof cnt, "%d", count);
    const char *args[] = { off, cnt };
    redisReply *r;
    dq_status st = run_admin(c, DQ_SCRIPT_DEAD_LIST, queue, false, args, 2, &r);
    if (st != DQ_OK)
        return st;
    st = proto_dead_list_reply(r, out);
    freeReplyObject(r);
    return st == DQ_OK ? st : bad_reply(c, st, DQ_SCRIPT_DEAD_LIST);
}

/*
 * Run requeue or purge: for one id once, for all in batches of ADMIN_BATCH
 * until none is left, so that no single script call blocks Redis for long.
 * *count receives how many jobs were moved.
 */
static dq_status run_dead_batches(dq_client *c, enum dq_script_id s,
                                  const char *queue, const char *id,
                                  int64_t *count)
{
    char batch[16];
    snprintf(batch, sizeof batch, "%d", ADMIN_BATCH);
    const char *args[] = { id ? id : "", batch };
    bool wake_first = s == DQ_SCRIPT_REQUEUE;
    int64_t total = 0;
    for (;;) {
        redisReply *r;
        dq_status st = run_admin(c, s, queue, wake_first, args, 2, &r);
        if (st != DQ_OK)
            return st;
        int64_t moved, remaining;
        st = proto_count_reply(r, &moved, &remaining);
        freeReplyObject(r);
        if (st != DQ_OK)
            return bad_reply(c, st, s);
        total += moved;
        /* Stop on a single id, when done, or when a batch moved nothing
         * (records that cannot be requeued stay dead). */
        if (id || remaining == 0 || moved == 0)
            break;
    }
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

dq_status dq_fsck(dq_client *c, const char *queue, bool repair, int count,
                  dq_fsck_result *out)
{
    memset(out, 0, sizeof *out);
    if (count < 0 || count > 1000)
        return client_fail(c, DQ_ERR_INVALID, "bad fsck count %d: from 1 to 1000 "
                           "(0: %d)", count, DQ_FSCK_COUNT);
    struct queue_keys k;
    dq_status st = client_queue_keys(c, queue, &k);
    if (st != DQ_OK)
        return st;
    /* The script's cursor is a phase letter and a SCAN cursor (an unsigned
     * 64-bit number): short. */
    char cursor[64] = "0";
    do {
        struct cmd cmd;
        cmd_init(&cmd);
        proto_fsck_cmd(&cmd, &k, cursor, count, repair);
        redisReply *r;
        st = client_run(c, &cmd, DQ_SCRIPT_FSCK, &r);
        cmd_free(&cmd);
        if (st != DQ_OK)
            return st;
        st = proto_fsck_reply(r, repair, out, cursor, sizeof cursor);
        freeReplyObject(r);
        if (st != DQ_OK)
            return bad_reply(c, st, DQ_SCRIPT_FSCK);
    } while (strcmp(cursor, "0") != 0);
    return DQ_OK;
}

/* ---- pause, resume ------------------------------------------------------ */

/* Run pause or resume (which take the wake channel), or pause_state;
 * *since_ms (may be NULL) receives the reply's since_ms. */
static dq_status run_pause_script(dq_client *c, enum dq_script_id s, const char *queue,
                                  int64_t *since_ms)
{
    redisReply *r;
    dq_status st = run_admin(c, s, queue, s != DQ_SCRIPT_PAUSE_STATE, NULL, 0, &r);
    if (st != DQ_OK)
        return st;
    int64_t now, since;
    st = proto_pause_reply(r, &now, &since);
    freeReplyObject(r);
    if (st != DQ_OK)
        return bad_reply(c, st, s);
    if (since_ms)
        *since_ms = since;
    return DQ_OK;
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
