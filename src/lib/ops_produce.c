/* libdelayq calls for producers: enqueue, cancel and run now. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/client_internal.h"
#include "lib/partitions.h"
#include "lib/proto.h"

/* This host's clock in Unix ms, for the bound of an absolute time only:
 * the scripts check it again on the Redis server's clock. */
static int64_t local_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Refuse an expiry that is not after the due time (the script checks
 * again on the server's clock), a negative one, or an unknown on_expire;
 * and a dedupe window out of range or without an id. */
static dq_status check_expiry(dq_client *c, const dq_enqueue_req *req)
{
    if (req->on_expire != DQ_EXPIRE_DEAD && req->on_expire != DQ_EXPIRE_DROP)
        return client_fail(c, DQ_ERR_INVALID, "on_expire %d is not DQ_EXPIRE_DEAD or "
                           "DQ_EXPIRE_DROP", req->on_expire);
    if (req->ttl_ms < 0 || req->ttl_ms > DQ_MAX_AHEAD_MS)
        return client_fail(c, DQ_ERR_INVALID, "ttl %lld ms is not in 1..%lld (100 years)",
                           (long long)req->ttl_ms, (long long)DQ_MAX_AHEAD_MS);
    if (req->expire_at < 0 || req->expire_at > local_now_ms() + 2 * DQ_MAX_AHEAD_MS)
        return client_fail(c, DQ_ERR_INVALID, "expiry %lld (Unix ms) is negative or "
                           "more than 200 years from now", (long long)req->expire_at);
    if (req->unique_for_ms < 0 || req->unique_for_ms > DQ_MAX_AHEAD_MS)
        return client_fail(c, DQ_ERR_INVALID, "dedupe window %lld ms is not in 1..%lld "
                           "(100 years)", (long long)req->unique_for_ms,
                           (long long)DQ_MAX_AHEAD_MS);
    if (req->unique_for_ms > 0 && !(req->id && *req->id))
        return client_fail(c, DQ_ERR_INVALID, "a dedupe window needs the job's id");
    if (req->debounce_ms < 0 || req->debounce_ms > DQ_MAX_AHEAD_MS
        || req->max_wait_ms < 0 || req->max_wait_ms > DQ_MAX_AHEAD_MS)
        return client_fail(c, DQ_ERR_INVALID, "debounce %lld ms or max wait %lld ms is "
                           "not in 0..%lld (100 years)", (long long)req->debounce_ms,
                           (long long)req->max_wait_ms, (long long)DQ_MAX_AHEAD_MS);
    if (req->max_wait_ms > 0 && req->debounce_ms <= 0)
        return client_fail(c, DQ_ERR_INVALID, "a max wait needs a debounce");
    if (req->debounce_ms > 0 && !(req->id && *req->id))
        return client_fail(c, DQ_ERR_INVALID, "a debounce needs the job's id");
    if (req->debounce_ms > 0 && (req->delay_ms || req->at_ms || req->replace
                                 || req->expire_at || req->ttl_ms || req->unique_for_ms))
        return client_fail(c, DQ_ERR_INVALID, "a debounce goes alone: no delay, time, "
                           "replace, expiry or dedupe window");
    if (req->unique_ok && req->unique_for_ms <= 0)
        return client_fail(c, DQ_ERR_INVALID, "unique_ok needs a dedupe window "
                           "(unique_for_ms)");
    /* The due time on this host's clock: the script checks it again on
     * the server's, but a refusal there fails a whole enqueue_many call. */
    int64_t due = req->at_ms > 0 ? req->at_ms : local_now_ms() + req->delay_ms;
    if (req->expire_at > 0 && req->expire_at <= due)
        return client_fail(c, DQ_ERR_INVALID, "expiry %lld (Unix ms) is not after the "
                           "due time %lld", (long long)req->expire_at, (long long)due);
    return DQ_OK;
}

/* Refuse a delay or an absolute time beyond DQ_MAX_AHEAD_MS (or negative),
 * naming the value. */
static dq_status check_when(dq_client *c, const dq_enqueue_req *req)
{
    if (req->delay_ms < 0 || req->delay_ms > DQ_MAX_AHEAD_MS)
        return client_fail(c, DQ_ERR_INVALID, "delay %lld ms is not in 0..%lld "
                           "(100 years)", (long long)req->delay_ms,
                           (long long)DQ_MAX_AHEAD_MS);
    if (req->at_ms < 0 || req->at_ms > local_now_ms() + DQ_MAX_AHEAD_MS)
        return client_fail(c, DQ_ERR_INVALID, "time %lld (Unix ms) is negative or "
                           "more than 100 years from now", (long long)req->at_ms);
    return check_expiry(c, req);
}

/* Check a request before anything is sent: a refused job costs no round
 * trip and changes nothing.  `prev` is the request checked just before
 * (or NULL): a bulk producer's jobs mostly share a queue and a type, which
 * are then checked once. */
static dq_status check_request(dq_client *c, const dq_enqueue_req *req,
                               const dq_enqueue_req *prev)
{
    const char *why = NULL;
    if (!prev || !prev->queue || !req->queue || strcmp(req->queue, prev->queue) != 0)
        why = keys_check_queue(req->queue);
    if (!why && (!prev || !prev->type || !req->type || strcmp(req->type, prev->type) != 0))
        why = keys_check_type(req->type);
    if (!why && req->id && *req->id)
        why = keys_check_id(req->id);
    if (why)
        return client_fail(c, DQ_ERR_INVALID, "%s", why);
    if (req->payload_len > c->max_payload)
        return client_fail(c, DQ_ERR_TOO_LARGE,
                           "payload is %zu bytes, over the limit of %zu",
                           req->payload_len, c->max_payload);
    if (req->payload_len && !req->payload)
        return client_fail(c, DQ_ERR_INVALID, "payload is NULL but its length is not 0");
    if (req->max_attempts < 0)
        return client_fail(c, DQ_ERR_INVALID, "max attempts is negative");
    if (req->priority < 0 || req->priority > DQ_PRIORITY(9))
        return client_fail(c, DQ_ERR_INVALID, "priority %d is not 0 (normal) or "
                           "DQ_PRIORITY(0..9)", req->priority);
    return check_when(c, req);
}

int dq_priority_parse(const char *s)
{
    if (!s)
        return -1;
    if (strcmp(s, "high") == 0)
        return 0;
    if (strcmp(s, "normal") == 0)
        return DQ_PRIORITY_NORMAL_LEVEL;
    if (strcmp(s, "low") == 0)
        return 9;
    if (s[0] >= '0' && s[0] <= '9' && s[1] == '\0')
        return s[0] - '0';
    return -1;
}

/* Message for a job the enqueue script refused. */
static dq_status refused(dq_client *c, dq_status st, const dq_enqueue_req *req)
{
    if (st == DQ_ERR_EXISTS)
        return client_fail(c, st, "job %s already exists in queue %s (use replace)",
                           req->id, req->queue);
    if (st == DQ_ERR_RUNNING)
        return client_fail(c, st, "job %s in queue %s is running and cannot be replaced",
                           req->id, req->queue);
    if (st == DQ_ERR_UNIQUE)
        return client_fail(c, st, "job %s in queue %s finished within its dedupe window",
                           req->id, req->queue);
    if (st == DQ_ERR_STALE)
        return client_fail(c, st, "queue %s: its partition count changed twice while "
                           "adding: not added", req->queue);
    return client_fail(c, st, "unexpected reply from the enqueue script");
}

/* One enqueue call at the partition count this client knows. */
static dq_status enqueue_once(dq_client *c, const dq_enqueue_req *req, dq_enqueued *out)
{
    unsigned n, part;
    dq_status st = part_assign(c, req->queue, req->id, &n, &part);
    if (st != DQ_OK)
        return st;
    struct queue_keys k;
    part_keys(c, req->queue, part, n, &k);
    struct cmd cmd;
    cmd_init(&cmd);
    proto_enqueue_cmd(&cmd, &k, req, n, part);
    redisReply *r;
    st = client_run(c, &cmd, DQ_SCRIPT_ENQUEUE, &r);
    cmd_free(&cmd);
    if (st != DQ_OK)
        return st;
    dq_enqueued tmp;
    st = proto_enqueue_reply(r, out ? out : &tmp);
    freeReplyObject(r);
    return st == DQ_OK || st == DQ_ERR_STALE ? st : refused(c, st, req);
}

dq_status dq_enqueue(dq_client *c, const dq_enqueue_req *req, dq_enqueued *out)
{
    dq_status st = check_request(c, req, NULL);
    if (st == DQ_OK)
        st = client_register_queue(c, req->queue);
    if (st != DQ_OK)
        return st;
    /* The queue's partition count changed since this client read it (the
     * script wrote nothing): read it again, and go where it says now. */
    for (int tries = 0; tries < 2; tries++) {
        if ((st = enqueue_once(c, req, out)) != DQ_ERR_STALE)
            return st;
        part_forget(c, req->queue);
    }
    return refused(c, DQ_ERR_STALE, req);
}

#define ENQUEUE_CHUNK 1000  /* jobs per enqueue_many call: keeps each short */

/* A run of jobs of one queue and partition, sent as one enqueue_many. */
struct chunk {
    size_t start;           /* into the list of jobs sent */
    size_t count;
    unsigned nparts;        /* the queue's partitions */
    unsigned part;          /* the partition the run goes to */
};

/* Remember the first failure's status and message: the caller reports it,
 * not the last one. */
static void note_failure(dq_client *c, dq_status st, dq_status *first, char *msg,
                         size_t len)
{
    if (st != DQ_OK && *first == DQ_OK) {
        *first = st;
        snprintf(msg, len, "%s", c->err);
    }
}

/*
 * Order send[from..to) (jobs of one queue of `nparts` > 1 partitions) by
 * partition, keeping the order within each: the partition of each job
 * goes to part[], where the jobs without an id take the client's round
 * robin.  `tmp` has room for to - from entries.
 */
static dq_status sort_by_partition(dq_client *c, const dq_enqueue_req *reqs, size_t *send,
                                   unsigned *part, size_t from, size_t to, size_t *tmp,
                                   unsigned *tmp_part)
{
    size_t count[KEYS_PARTITIONS_MAX + 1] = { 0 };
    unsigned n = 1;
    for (size_t i = from; i < to; i++) {
        dq_status st = part_assign(c, reqs[send[i]].queue, reqs[send[i]].id, &n, &part[i]);
        if (st != DQ_OK)
            return st;
        count[part[i] + 1]++;
    }
    for (unsigned p = 1; p <= n; p++)
        count[p] += count[p - 1];
    for (size_t i = from; i < to; i++) {
        size_t at = count[part[i]]++;
        tmp[at] = send[i];
        tmp_part[at] = part[i];
    }
    memcpy(&send[from], tmp, (to - from) * sizeof *send);
    memcpy(&part[from], tmp_part, (to - from) * sizeof *part);
    return DQ_OK;
}

/*
 * Cut the jobs to send into chunks: a new one where the queue or the
 * partition changes or the chunk is full.  The jobs of a partitioned
 * queue are first grouped by partition (sort_by_partition).  *nchunks
 * receives the number of chunks.
 */
static dq_status make_chunks(dq_client *c, const dq_enqueue_req *reqs, size_t *send,
                             size_t nsend, struct chunk *chunks, size_t *nchunks)
{
    size_t n = 0;
    unsigned *part = calloc(nsend ? nsend : 1, sizeof *part);
    unsigned *tmp_part = calloc(nsend ? nsend : 1, sizeof *tmp_part);
    size_t *tmp = calloc(nsend ? nsend : 1, sizeof *tmp);
    dq_status st = DQ_OK;
    if (!part || !tmp || !tmp_part) {
        st = client_fail(c, DQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0, end; i < nsend; i = end) {
        const char *queue = reqs[send[i]].queue;
        for (end = i + 1; end < nsend && strcmp(reqs[send[end]].queue, queue) == 0; end++)
            ;
        unsigned nparts;
        if ((st = part_count(c, queue, &nparts)) != DQ_OK)
            goto done;
        if (nparts > 1
            && (st = sort_by_partition(c, reqs, send, part, i, end, tmp, tmp_part)) != DQ_OK)
            goto done;
        for (size_t j = i; j < end; j++) {
            if (j == i || chunks[n - 1].count == ENQUEUE_CHUNK || part[j] != part[j - 1])
                chunks[n++] = (struct chunk){ j, 0, nparts, part[j] };
            chunks[n - 1].count++;
        }
    }
    *nchunks = n;
done:
    free(part);
    free(tmp);
    free(tmp_part);
    return st;
}

/* What build_chunk needs to turn chunk i into its enqueue_many command. */
struct chunk_builder {
    dq_client *c;
    const dq_enqueue_req *reqs;
    const size_t *send;
    const struct chunk *chunks;
    struct queue_keys *keys;
};

static void build_chunk(void *ctx, size_t i, struct cmd *cmd)
{
    struct chunk_builder *b = ctx;
    const struct chunk *ch = &b->chunks[i];
    part_keys(b->c, b->reqs[b->send[ch->start]].queue, ch->part, ch->nparts, &b->keys[i]);
    proto_enqueue_many_cmd(cmd, &b->keys[i], b->reqs, &b->send[ch->start], ch->count,
                           ch->nparts, ch->part);
}

/*
 * One pass of dq_enqueue_many at the partition counts this client knows.
 * `statuses` is required.  With `first_try`, a job refused because its
 * queue's count changed (DQ_ERR_STALE: nothing of its call was written)
 * is not taken as the first failure: the caller sends it again.
 */
static dq_status enqueue_many_pass(dq_client *c, const dq_enqueue_req *reqs, size_t n,
                                   dq_enqueued *results, dq_status *statuses,
                                   bool first_try)
{
    dq_status first = DQ_OK;
    char firstmsg[sizeof c->err] = "";
    size_t m = n ? n : 1, nsend = 0, nchunks = 0;
    size_t *send = calloc(m, sizeof *send);
    struct chunk *chunks = calloc(m, sizeof *chunks);
    struct queue_keys *keys = calloc(m, sizeof *keys);
    struct cmd *cmds = calloc(m, sizeof *cmds);
    redisReply **replies = calloc(m, sizeof *replies);
    dq_status *each = NULL;
    size_t per = m < ENQUEUE_CHUNK ? m : ENQUEUE_CHUNK;
    dq_enqueued *outs = calloc(per, sizeof *outs);
    dq_status *sts = calloc(per, sizeof *sts);
    if (!send || !chunks || !keys || !cmds || !replies || !outs || !sts) {
        first = client_fail(c, DQ_ERR_NOMEM, "out of memory");
        for (size_t i = 0; statuses && i < n; i++)
            statuses[i] = first;
        goto done;
    }
    /* Jobs that fail the checks are reported; the others are sent. */
    const dq_enqueue_req *checked = NULL;  /* the last request that passed */
    for (size_t i = 0; i < n; i++) {
        dq_status st = check_request(c, &reqs[i], checked);
        if (st == DQ_OK && reqs[i].debounce_ms > 0)
            st = client_fail(c, DQ_ERR_INVALID, "a debounced add goes one at a time "
                             "(dq_enqueue)");
        if (st == DQ_OK)
            checked = &reqs[i];
        if (statuses)
            statuses[i] = st;
        note_failure(c, st, &first, firstmsg, sizeof firstmsg);
        if (st == DQ_OK)
            send[nsend++] = i;
    }
    /* Until a job's chunk has its reply, the job's status is the call's
     * failure: none of the jobs sent is known to be scheduled. */
    dq_status st = nsend ? make_chunks(c, reqs, send, nsend, chunks, &nchunks) : DQ_OK;
    /* A chunk holds jobs of one queue: register each chunk's. */
    for (size_t k = 0; st == DQ_OK && k < nchunks; k++)
        st = client_register_queue(c, reqs[send[chunks[k].start]].queue);
    if (st == DQ_OK && !(each = calloc(nchunks ? nchunks : 1, sizeof *each)))
        st = client_fail(c, DQ_ERR_NOMEM, "out of memory");
    if (st != DQ_OK) {
        for (size_t j = 0; statuses && j < nsend; j++)
            statuses[send[j]] = st;
        first = st;
        goto done;
    }
    struct chunk_builder cb = { c, reqs, send, chunks, keys };
    char outage[sizeof c->err] = "";
    if (nchunks && client_pipeline_each(c, cmds, nchunks, DQ_SCRIPT_ENQUEUE_MANY, replies,
                                        build_chunk, &cb, each) != DQ_OK)
        snprintf(outage, sizeof outage, "%s", c->err);
    for (size_t k = 0; k < nchunks; k++) {
        const size_t *idx = &send[chunks[k].start];
        size_t cnt = chunks[k].count;
        if (!replies[k]) {
            /* None of the chunk's jobs is known to be scheduled (or, under
             * replicated durability, to be on a replica); on a cluster the
             * chunks of the masters that answered are. */
            snprintf(c->err, sizeof c->err, "%s", outage);
            for (size_t j = 0; j < cnt; j++) {
                if (statuses)
                    statuses[idx[j]] = each[k];
                note_failure(c, each[k], &first, firstmsg, sizeof firstmsg);
            }
            continue;
        }
        dq_status rst = replies[k]->type == REDIS_REPLY_ERROR
            ? client_fail(c, DQ_ERR_REDIS, "redis error in enqueue_many: %s", replies[k]->str)
            : proto_enqueue_many_reply(replies[k], reqs, idx, cnt, chunks[k].nparts,
                                       chunks[k].part, outs, sts);
        if (rst != DQ_OK && replies[k]->type != REDIS_REPLY_ERROR)
            client_fail(c, rst, "unexpected reply from the enqueue_many script");
        for (size_t j = 0; j < cnt; j++) {
            dq_status jst = rst != DQ_OK ? rst : sts[j];
            if (jst != DQ_OK && rst == DQ_OK)
                refused(c, jst, &reqs[idx[j]]);
            if (results)
                results[idx[j]] = outs[j];
            if (statuses)
                statuses[idx[j]] = jst;
            if (!(first_try && jst == DQ_ERR_STALE))
                note_failure(c, jst, &first, firstmsg, sizeof firstmsg);
        }
    }
    if (first != DQ_OK)
        snprintf(c->err, sizeof c->err, "%s", firstmsg);
    else
        c->err[0] = '\0';
done:
    for (size_t k = 0; cmds && replies && k < nchunks; k++) {
        if (replies[k])
            freeReplyObject(replies[k]);
        cmd_free(&cmds[k]);
    }
    free(send);
    free(chunks);
    free(keys);
    free(cmds);
    free(replies);
    free(outs);
    free(sts);
    free(each);
    return first;
}

/* Send again the jobs of `reqs` whose queue's count changed under the
 * first pass (statuses DQ_ERR_STALE), after reading each such count
 * again; their results and statuses replace the first pass's.  The first
 * failure of this pass, or `first` when there was an earlier one. */
static dq_status enqueue_many_again(dq_client *c, const dq_enqueue_req *reqs, size_t n,
                                    dq_enqueued *results, dq_status *statuses,
                                    dq_status first)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        m += statuses[i] == DQ_ERR_STALE;
    if (m == 0)
        return first;
    char firstmsg[sizeof c->err];
    snprintf(firstmsg, sizeof firstmsg, "%s", c->err);
    dq_enqueue_req *again = calloc(m, sizeof *again);
    size_t *idx = calloc(m, sizeof *idx);
    dq_enqueued *res = calloc(m, sizeof *res);
    dq_status *sts = calloc(m, sizeof *sts);
    if (!again || !idx || !res || !sts) {
        first = client_fail(c, DQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0, k = 0; i < n; i++)
        if (statuses[i] == DQ_ERR_STALE) {
            part_forget(c, reqs[i].queue);
            idx[k] = i;
            again[k++] = reqs[i];
        }
    dq_status st = enqueue_many_pass(c, again, m, res, sts, false);
    for (size_t k = 0; k < m; k++) {
        if (results)
            results[idx[k]] = res[k];
        statuses[idx[k]] = sts[k];
    }
    if (first != DQ_OK)
        snprintf(c->err, sizeof c->err, "%s", firstmsg);
    else
        first = st;
done:
    free(again);
    free(idx);
    free(res);
    free(sts);
    return first;
}

dq_status dq_enqueue_many(dq_client *c, const dq_enqueue_req *reqs, size_t n,
                          dq_enqueued *results, dq_status *statuses)
{
    dq_status *sts = statuses ? statuses : calloc(n ? n : 1, sizeof *sts);
    if (!sts)
        return client_fail(c, DQ_ERR_NOMEM, "out of memory");
    dq_status first = enqueue_many_pass(c, reqs, n, results, sts, true);
    first = enqueue_many_again(c, reqs, n, results, sts, first);
    if (sts != statuses)
        free(sts);
    return first;
}

/*
 * cancel or run_now (by `s`) of the delayed job `id`, in its partition;
 * a refusal is told in the words `running` and `dead` (what to do
 * instead).
 */
static dq_status delayed_job_call(dq_client *c, enum dq_script_id s, const char *queue,
                                  const char *id, const char *running, const char *dead)
{
    struct queue_keys k;
    dq_status st = client_queue_keys(c, queue, &k);
    if (st != DQ_OK)
        return st;
    if (!id || !*id)
        return client_fail(c, DQ_ERR_INVALID, "job id is empty");
    if ((st = part_keys_of_id(c, queue, id, &k, NULL)) != DQ_OK)
        return st;
    struct cmd cmd;
    cmd_init(&cmd);
    if (s == DQ_SCRIPT_CANCEL)
        proto_cancel_cmd(&cmd, &k, id);
    else
        proto_run_now_cmd(&cmd, &k, id);
    redisReply *r;
    st = client_run(c, &cmd, s, &r);
    cmd_free(&cmd);
    if (st != DQ_OK)
        return st;
    st = s == DQ_SCRIPT_CANCEL ? proto_cancel_reply(r) : proto_run_now_reply(r);
    freeReplyObject(r);
    switch (st) {
    case DQ_OK: return DQ_OK;
    case DQ_ERR_RUNNING:
        return client_fail(c, st, "job %s in queue %s is running; %s", id, queue, running);
    case DQ_ERR_DEAD:
        return client_fail(c, st, "job %s in queue %s is dead; %s", id, queue, dead);
    case DQ_ERR_NOTFOUND:
        return client_fail(c, st, s == DQ_SCRIPT_CANCEL
                           ? "no job %s in queue %s: it finished, or was never added"
                           : "no job %s in queue %s", id, queue);
    default:
        return client_fail(c, st, "unexpected reply from the %s script", dq_scripts[s].name);
    }
}

dq_status dq_cancel(dq_client *c, const char *queue, const char *id)
{
    return delayed_job_call(c, DQ_SCRIPT_CANCEL, queue, id,
                            "it can no longer be cancelled", "purge it instead");
}

dq_status dq_run_now(dq_client *c, const char *queue, const char *id)
{
    return delayed_job_call(c, DQ_SCRIPT_RUN_NOW, queue, id,
                            "it is no longer waiting", "requeue it instead");
}
