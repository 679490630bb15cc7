/*
 * libdelayq: partitioned queues.  The cache of partition counts, and the
 * calls that read and set a queue's count and read one partition's stats.
 */
#include "lib/partitions.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/client_internal.h"
#include "lib/proto.h"

_Static_assert(KEYS_PARTITIONS_MAX == DQ_PARTITIONS_MAX, "one limit of partitions");

void part_keys(const dq_client *c, const char *queue, unsigned part, unsigned n,
               struct queue_keys *k)
{
    keys_build_part(k, c->prefix, queue, part, n);
}

/*
 * Refuse a queue whose protocol marker (meta field KEYS_PROTOCOL_FIELD,
 * `r`: the HMGET element) names a version newer than this library's:
 * its data may hold what this library would misread or damage.
 */
static dq_status check_protocol(dq_client *c, const char *queue, const redisReply *r)
{
    if (r->type == REDIS_REPLY_NIL)
        return DQ_OK;
    if (r->type == REDIS_REPLY_STRING && r->len > 0 && r->len < 10
        && strspn(r->str, "0123456789") == r->len
        && strtol(r->str, NULL, 10) <= KEYS_PROTOCOL_VERSION)
        return DQ_OK;
    return client_fail(c, DQ_ERR_REDIS, "queue %s holds data of protocol version \"%.20s\"; "
                       "this client knows versions up to %d: upgrade it", queue,
                       r->type == REDIS_REPLY_STRING ? r->str : "?", KEYS_PROTOCOL_VERSION);
}

/*
 * Read the stored count of `queue` from Redis (HMGET on the unpartitioned
 * meta hash, with the protocol marker, which is checked here): 1 when the
 * field is absent.  A field that is not a count in 1..KEYS_PARTITIONS_MAX
 * is DQ_ERR_REDIS: every key would be guessed.
 */
static dq_status read_count(dq_client *c, const char *queue, unsigned *n)
{
    struct queue_keys k;
    keys_build(&k, c->prefix, queue);
    struct cmd cmd;
    cmd_init(&cmd);
    cmd_push_str(&cmd, "HMGET");
    cmd_push_str(&cmd, k.key[4]);
    cmd_push_str(&cmd, KEYS_PARTITIONS_FIELD);
    cmd_push_str(&cmd, KEYS_PROTOCOL_FIELD);
    redisReply *r;
    dq_status st = client_run(c, &cmd, -1, &r);
    cmd_free(&cmd);
    if (st != DQ_OK)
        return st;
    *n = 1;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
        st = client_fail(c, DQ_ERR_REDIS, "unexpected reply to HMGET %s", k.key[4]);
        freeReplyObject(r);
        return st;
    }
    const redisReply *count = r->element[0];
    if ((st = check_protocol(c, queue, r->element[1])) != DQ_OK) {
        /* refused */
    } else if (count->type == REDIS_REPLY_STRING) {
        char *end;
        unsigned long v = strtoul(count->str, &end, 10);
        if (count->len == 0 || *end || count->str[0] < '0' || count->str[0] > '9'
            || v < 1 || v > KEYS_PARTITIONS_MAX)
            st = client_fail(c, DQ_ERR_REDIS, "%s field %s is \"%.20s\", not a "
                             "partition count (1..%d)", k.key[4], KEYS_PARTITIONS_FIELD,
                             count->str, KEYS_PARTITIONS_MAX);
        else
            *n = (unsigned)v;
    } else if (count->type != REDIS_REPLY_NIL) {
        st = client_fail(c, DQ_ERR_REDIS, "unexpected reply to HMGET %s", k.key[4]);
    }
    freeReplyObject(r);
    return st;
}

/* Where a new entry's round robins start: differently in each process
 * and client, so that short-lived producers (one job per connection, as
 * the command line) do not all start at partition 0. */
static unsigned round_robin_start(const dq_client *c)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint32_t x = (uint32_t)ts.tv_nsec ^ ((uint32_t)getpid() << 12) ^ c->jitter_seed;
    x ^= x >> 16;   /* mix the fast-changing low bits into the high ones */
    x *= 0x45d9f3bu;
    x ^= x >> 16;
    return x;
}

/* The cache entry of `queue`, added (count unread: gen 0 never matches a
 * connection) when there is none.  NULL when out of memory. */
static struct part_entry *entry_of(dq_client *c, const char *queue)
{
    struct part_cache *pc = &c->parts;
    for (size_t i = 0; i < pc->n; i++)
        if (strcmp(pc->e[i].queue, queue) == 0)
            return &pc->e[i];
    if (pc->n == pc->cap) {
        size_t cap = pc->cap ? pc->cap * 2 : 4;
        struct part_entry *e = realloc(pc->e, cap * sizeof *e);
        if (!e)
            return NULL;
        pc->e = e;
        pc->cap = cap;
    }
    struct part_entry *e = &pc->e[pc->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->queue, sizeof e->queue, "%s", queue);
    e->next_enqueue = e->next_claim = round_robin_start(c);
    return e;
}

/* Whether the entry was read on the connection the client holds now (a
 * broken one is replaced at the next command: read again then).  On a
 * cluster the client has no single connection: every connection it makes
 * to a master counts as a reconnect (client_cluster.c). */
static int entry_fresh(const dq_client *c, const struct part_entry *e)
{
    return e->gen != 0 && e->gen == c->conn_gen
           && (c->cluster || (c->rc && !c->rc->err));
}

struct part_entry *part_lookup(dq_client *c, const char *queue, dq_status *st)
{
    const char *why = keys_check_queue(queue);
    if (why) {
        *st = client_fail(c, DQ_ERR_INVALID, "%s", why);
        return NULL;
    }
    struct part_entry *e = entry_of(c, queue);
    if (!e) {
        *st = client_fail(c, DQ_ERR_NOMEM, "out of memory");
        return NULL;
    }
    *st = DQ_OK;
    if (entry_fresh(c, e))
        return e;
    unsigned n;
    if ((*st = read_count(c, queue, &n)) != DQ_OK)
        return NULL;
    e->n = n;
    e->gen = c->conn_gen;
    return e;
}

void part_forget(dq_client *c, const char *queue)
{
    struct part_entry *e = entry_of(c, queue);
    if (e)
        e->gen = 0;
}

dq_status part_count(dq_client *c, const char *queue, unsigned *n)
{
    dq_status st;
    struct part_entry *e = part_lookup(c, queue, &st);
    if (e)
        *n = e->n;
    return st;
}

dq_status part_assign(dq_client *c, const char *queue, const char *id,
                      unsigned *n, unsigned *part)
{
    dq_status st;
    struct part_entry *e = part_lookup(c, queue, &st);
    if (!e)
        return st;
    *n = e->n;
    if (e->n <= 1)
        *part = 0;
    else if (id && *id)
        *part = keys_partition_of(id, e->n);
    else
        *part = e->next_enqueue++ % e->n;
    return DQ_OK;
}

dq_status part_keys_of_id(dq_client *c, const char *queue, const char *id,
                          struct queue_keys *k, unsigned *n)
{
    unsigned count;
    dq_status st = part_count(c, queue, &count);
    if (st != DQ_OK)
        return st;
    part_keys(c, queue, keys_partition_of(id ? id : "", count), count, k);
    if (n)
        *n = count;
    return DQ_OK;
}

dq_status dq_queue_partitions(dq_client *c, const char *queue, unsigned *n)
{
    dq_status st;
    struct part_entry *e = part_lookup(c, queue, &st);
    if (!e)
        return st;
    /* Asked for: the stored value now, not the one cached. */
    if ((st = read_count(c, queue, n)) != DQ_OK)
        return st;
    e = part_lookup(c, queue, &st);   /* the read may have reconnected */
    if (!e)
        return st;
    e->n = *n;
    return DQ_OK;
}

struct part_builder {
    dq_client *c;
    const char *queue;
    unsigned n;
    const unsigned *which;      /* the partition of each command (NULL: i) */
    struct queue_keys *keys;    /* per command: a command points into its keys */
    part_make_fn make;
    void *ctx;
};

static void build_part(void *arg, size_t i, struct cmd *cmd)
{
    struct part_builder *b = arg;
    unsigned part = b->which ? b->which[i] : (unsigned)i;
    part_keys(b->c, b->queue, part, b->n, &b->keys[i]);
    b->make(b->ctx, part, &b->keys[i], cmd);
}

void part_replies_free(redisReply **replies, unsigned calls)
{
    for (unsigned p = 0; replies && p < calls; p++)
        if (replies[p])
            freeReplyObject(replies[p]);
    free(replies);
}

dq_status part_pipeline(dq_client *c, const char *queue, unsigned n, unsigned calls,
                        const unsigned *which, enum dq_script_id s, part_make_fn make,
                        void *ctx, redisReply ***out)
{
    *out = NULL;
    redisReply **replies = calloc(calls ? calls : 1, sizeof *replies);
    struct cmd *cmds = calloc(calls ? calls : 1, sizeof *cmds);
    struct queue_keys *keys = calloc(calls ? calls : 1, sizeof *keys);
    if (!replies || !cmds || !keys) {
        free(replies);
        free(cmds);
        free(keys);
        return client_fail(c, DQ_ERR_NOMEM, "out of memory");
    }
    struct part_builder b = { c, queue, n, which, keys, make, ctx };
    dq_status st = client_pipeline_build(c, cmds, calls, s, replies, build_part, &b);
    for (unsigned p = 0; st == DQ_OK && p < calls; p++)
        if (replies[p]->type == REDIS_REPLY_ERROR)
            st = client_fail(c, DQ_ERR_REDIS, "redis error in %s: %s",
                             (int)s >= 0 ? dq_scripts[s].name : cmds[p].argv[0],
                             replies[p]->str);
    for (unsigned p = 0; p < calls; p++)
        cmd_free(&cmds[p]);
    free(cmds);
    free(keys);
    if (st != DQ_OK)
        part_replies_free(replies, calls);
    else
        *out = replies;
    return st;
}

/* Run the stats script on partition `part` of `n`. */
static dq_status stats_of(dq_client *c, const char *queue, unsigned part,
                          unsigned n, dq_stats *out)
{
    struct queue_keys k;
    part_keys(c, queue, part, n, &k);
    struct cmd cmd;
    cmd_init(&cmd);
    cmd_eval(&cmd, DQ_SCRIPT_STATS, &k);
    redisReply *r;
    dq_status st = client_run(c, &cmd, DQ_SCRIPT_STATS, &r);
    cmd_free(&cmd);
    if (st != DQ_OK)
        return st;
    st = proto_stats_reply(r, out);
    freeReplyObject(r);
    if (st == DQ_ERR_NOMEM)
        return client_fail(c, st, "out of memory");
    if (st != DQ_OK)
        return client_fail(c, st, "unexpected reply from the stats script");
    return DQ_OK;
}

dq_status dq_stats_partition(dq_client *c, const char *queue, unsigned part,
                             dq_stats *out)
{
    memset(out, 0, sizeof *out);
    unsigned n;
    dq_status st = part_count(c, queue, &n);
    if (st != DQ_OK)
        return st;
    if (part >= n)
        return client_fail(c, DQ_ERR_INVALID, "queue %s has %u partition%s: "
                           "no partition %u", queue, n, n == 1 ? "" : "s", part);
    return stats_of(c, queue, part, n, out);
}

static void make_stats(void *ctx, unsigned part, const struct queue_keys *k, struct cmd *cmd)
{
    (void)ctx;
    (void)part;
    cmd_eval(cmd, DQ_SCRIPT_STATS, k);
}

dq_status part_stats_all(dq_client *c, const char *queue, unsigned n, dq_stats *each)
{
    redisReply **replies;
    dq_status st = part_pipeline(c, queue, n, n, NULL, DQ_SCRIPT_STATS, make_stats, NULL,
                                 &replies);
    for (unsigned p = 0; st == DQ_OK && p < n; p++)
        if ((st = proto_stats_reply(replies[p], &each[p])) != DQ_OK)
            st = client_fail(c, st, st == DQ_ERR_NOMEM ? "out of memory"
                             : "unexpected reply from the stats script");
    part_replies_free(replies, n);
    return st;
}

/* The jobs held by the `n` partitions of `queue` (n > 1), in *jobs. */
static dq_status count_jobs(dq_client *c, const char *queue, unsigned n, int64_t *jobs)
{
    *jobs = 0;
    dq_stats *each = calloc(n, sizeof *each);
    if (!each)
        return client_fail(c, DQ_ERR_NOMEM, "out of memory");
    dq_status st = part_stats_all(c, queue, n, each);
    for (unsigned i = 0; st == DQ_OK && i < n; i++)
        *jobs += each[i].delayed + each[i].due + each[i].processing + each[i].dead;
    free(each);
    return st;
}

/*
 * The recurring schedules a change from `from` to `n` partitions would
 * leave behind, into *count: they live with the unpartitioned keys when
 * the count is 1 and with partition 0 otherwise, so only a change between
 * 1 and more moves their home.
 */
static dq_status count_stranded_schedules(dq_client *c, const char *queue, unsigned from,
                                          unsigned n, long long *count)
{
    *count = 0;
    if ((from == 1) == (n == 1))
        return DQ_OK;
    struct sched_keys sk;
    keys_build_sched_part(&sk, c->prefix, queue, from);
    struct cmd cmd;
    cmd_init(&cmd);
    cmd_push_str(&cmd, "ZCARD");     /* the schedules, one member each */
    cmd_push_str(&cmd, sk.due);
    redisReply *r;
    dq_status st = client_run(c, &cmd, -1, &r);
    cmd_free(&cmd);
    if (st != DQ_OK)
        return st;
    if (r->type == REDIS_REPLY_INTEGER)
        *count = r->integer;
    else
        st = client_fail(c, DQ_ERR_REDIS, "unexpected reply to HLEN %s", sk.defs);
    freeReplyObject(r);
    return st;
}

static void make_mark(void *ctx, unsigned part, const struct queue_keys *k, struct cmd *cmd)
{
    (void)part;
    cmd_push_str(cmd, "HSET");
    cmd_push_str(cmd, k->key[4]);
    cmd_push_str(cmd, KEYS_PARTITIONS_FIELD);
    cmd_push_i64(cmd, *(const unsigned *)ctx);
}

/*
 * The count's epoch: write `count` into the meta hash of partitions
 * 0..upto-1 of `queue` (one pipeline; nothing when upto < 2), where
 * enqueue and enqueue_many compare it with the count their caller read,
 * so that a producer that read an older count is refused before it
 * writes and reads the count again (docs/protocol.md, "Partitioned
 * queues").
 */
static dq_status mark_partitions(dq_client *c, const char *queue, unsigned upto,
                                 unsigned count)
{
    if (upto < 2)
        return DQ_OK;
    redisReply **replies;
    dq_status st = part_pipeline(c, queue, upto, upto, NULL, -1, make_mark, &count,
                                 &replies);
    part_replies_free(replies, upto);
    return st;
}

/* Judge the partitions script's reply: {'ok'|'changed'|'jobs'|'bad', x}. */
static dq_status set_reply(dq_client *c, const char *queue, unsigned from,
                           unsigned n, const redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2
        || r->element[0]->type != REDIS_REPLY_STRING
        || r->element[1]->type != REDIS_REPLY_STRING)
        return client_fail(c, DQ_ERR_REDIS, "unexpected reply from the partitions script");
    const char *what = r->element[0]->str, *x = r->element[1]->str;
    if (strcmp(what, "ok") == 0)
        return DQ_OK;
    if (strcmp(what, "changed") == 0)
        return client_fail(c, DQ_ERR_STALE, "queue %s: its partition count changed "
                           "from %u to %s meanwhile: not set to %u", queue, from, x, n);
    if (strcmp(what, "jobs") == 0)
        return client_fail(c, DQ_ERR_EXISTS, "queue %s holds %s job%s unpartitioned: "
                           "drain it first (not set to %u partitions)", queue, x,
                           strcmp(x, "1") == 0 ? "" : "s", n);
    return client_fail(c, DQ_ERR_REDIS, "queue %s: stored partition count \"%.20s\" "
                       "is not a number 1..%d", queue, x, KEYS_PARTITIONS_MAX);
}

dq_status dq_queue_set_partitions(dq_client *c, const char *queue, unsigned n)
{
    if (n < 1 || n > KEYS_PARTITIONS_MAX)
        return client_fail(c, DQ_ERR_INVALID, "partitions %u is not in 1..%d", n,
                           KEYS_PARTITIONS_MAX);
    unsigned from;
    dq_status st = dq_queue_partitions(c, queue, &from);
    if (st != DQ_OK)
        return st;
    if (from == n)      /* a queue partitioned before the epoch gets it */
        return mark_partitions(c, queue, n, n);
    if (from > 1) {
        int64_t jobs;
        if ((st = count_jobs(c, queue, from, &jobs)) != DQ_OK)
            return st;
        if (jobs > 0)
            return client_fail(c, DQ_ERR_EXISTS, "queue %s holds %lld job%s in its %u "
                               "partitions: drain it first (not set to %u)", queue,
                               (long long)jobs, jobs == 1 ? "" : "s", from, n);
    }
    long long schedules;
    if ((st = count_stranded_schedules(c, queue, from, n, &schedules)) != DQ_OK)
        return st;
    if (schedules > 0)
        return client_fail(c, DQ_ERR_EXISTS, "queue %s has %lld recurring schedule%s: "
                           "remove them first and add them again after (not set to %u "
                           "partitions)", queue, schedules, schedules == 1 ? "" : "s", n);
    /* The new count goes into every partition either layout has before
     * it is stored: a producer of the old count is refused from now on
     * (and reads the old count again until the store), one of the new
     * count finds it there. */
    unsigned upto = from > n ? from : n;
    if ((st = mark_partitions(c, queue, upto, n)) != DQ_OK)
        return st;
    struct queue_keys k;
    keys_build(&k, c->prefix, queue);
    struct cmd cmd;
    cmd_init(&cmd);
    cmd_eval(&cmd, DQ_SCRIPT_PARTITIONS, &k);
    cmd_push_i64(&cmd, from);
    cmd_push_i64(&cmd, n);
    redisReply *r;
    st = client_run(c, &cmd, DQ_SCRIPT_PARTITIONS, &r);
    cmd_free(&cmd);
    if (st != DQ_OK)
        return st;
    st = set_reply(c, queue, from, n, r);
    freeReplyObject(r);
    part_forget(c, queue);      /* read again at the next use */
    if (st != DQ_OK) {
        /* Not stored: the partitions get back the count that is. */
        char why[sizeof c->err];
        snprintf(why, sizeof why, "%s", c->err);
        unsigned now;
        if (dq_queue_partitions(c, queue, &now) == DQ_OK)
            mark_partitions(c, queue, upto > now ? upto : now, now);
        snprintf(c->err, sizeof c->err, "%s", why);
    }
    return st;
}
