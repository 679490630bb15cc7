/*
 * The producer's scripts against their commands (--only producer).
 *
 * For enqueue (a generated id; a producer's id, alone or with a ttl, a
 * dedupe window or a debounce), enqueue_many (100 jobs a call), cancel
 * and show: Redis's own time per call, from INFO
 * commandstats around a hot loop of calls one at a time, next to
 * - a minimal script: the same commands as the script runs for that call,
 *   with the same keys and arguments, and no checks, no record handling,
 *   no prelude (the commands' own work plus what any script call costs);
 * - an empty script ("return 1") with the same keys and arguments;
 * - a bare ZADD;
 * all measured in the same run, in rounds (the script and its minimal
 * script taking turns by 100 calls inside each), the median round of each
 * kept.  The ratio to the minimal script is what the issue of the
 * producer's path sets a bound on (1.3): machines differ, the ratio does
 * not.  Each row also checks that its minimal script ran the same
 * commands, as many times, as the real one, and says so when not.
 *
 * Redis is pinned to CPU 0 and the bench to CPU 1 (when there are two),
 * so that the scheduler's placement does not decide a comparison.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/measure.h"
#include "bench/redis_proc.h"
#include "bench/report.h"
#include "lib/keys.h"
#include "lib/proto.h"
#include "lib/scripts.h"

#define ROUNDS 5
#define HOUR_MS (3600 * 1000LL)
#define MANY 100                /* jobs per enqueue_many call */

/*
 * The minimal scripts.  Each runs the commands that its script runs on the
 * call measured (a new job of normal priority; a delayed job of normal
 * priority for cancel and show), reading its arguments where the script's
 * call has them, and returns the commands' replies without looking at
 * them.  When a script's commands change, its minimal script changes with
 * it: the row's "commands" check says when they differ.  An enqueue's
 * minimal script writes a value as long as the record (the payload or the
 * body and a constant, by one concatenation), since a hash's command costs
 * more with longer values: the bench's record is 61 bytes, its payload 32
 * and its body (enqueue_many's argument) 42.
 */
/* What a record has beyond the payload (29 bytes: "3:0:", the array's,
 * type's and payload's heads, the type, max_attempts, the two times and
 * the error) and beyond enqueue_many's body (19: "3:0:", the times, the
 * error), for the bench's type and payload. */
#define RECORD_REST "rrrrrrrrrrrrrrrrrrrrrrrrrrrrr"
#define BODY_REST "bbbbbbbbbbbbbbbbbbb"
/* "3:0:", created (\207 and 8 bytes), the offset (an hour: \206 and 4),
 * the empty error; then the array's head, the type's (a fixstr), the
 * payload's (str8) and max_attempts 0. */
_Static_assert(sizeof BODY_REST - 1 == 4 + 9 + 5 + 1, "the times' bytes");
_Static_assert(sizeof RECORD_REST - 1 == sizeof BODY_REST - 1 + 1 + 1 + sizeof BENCH_TYPE - 1
               + 2 + 1 && BENCH_PAYLOAD_LEN >= 32 && BENCH_PAYLOAD_LEN < 256
               && sizeof BENCH_TYPE - 1 < 32, "the heads' bytes");

static const char MIN_ENQUEUE[] =
    "local t = redis.call('TIME')\n"
    "redis.call('HGET', KEYS[5], 'partitions')\n"
    "local seq = redis.call('HINCRBY', KEYS[5], 'seq', '1')\n"
    "local id = string.format('%d', seq)\n"
    "redis.call('HSETNX', KEYS[1] .. ':' .. string.sub(id, 1, -3), id,\n"
    "           ARGV[4] .. '" RECORD_REST "')\n"
    "redis.call('ZADD', KEYS[2], ARGV[6], id)\n"
    "redis.call('ZRANGE', KEYS[2], '0', '0')\n"
    "return { 'ok', id, ARGV[6], t[1] }\n";

static const char MIN_ENQUEUE_ID[] =
    "local t = redis.call('TIME')\n"
    "redis.call('HGET', KEYS[5], 'partitions')\n"
    "redis.call('HSETNX', KEYS[1], ARGV[2], ARGV[4] .. '" RECORD_REST "')\n"
    "redis.call('ZADD', KEYS[2], ARGV[6], ARGV[2])\n"
    "redis.call('ZRANGE', KEYS[2], '0', '0')\n"
    "return { 'ok', ARGV[2], ARGV[6], t[1] }\n";

/* With a ttl, a dedupe window or a debounce: the same, and the entries
 * those write (the expiry's time and record, the window's record); a
 * debounce first looks for a waiting job of its id, and its due time is
 * now + its ms, made a string as a score. */
static const char MIN_ENQUEUE_TTL[] =
    "local t = redis.call('TIME')\n"
    "redis.call('HGET', KEYS[5], 'partitions')\n"
    "redis.call('HSETNX', KEYS[1], ARGV[2], ARGV[4] .. '" RECORD_REST "')\n"
    "redis.call('ZADD', KEYS[2], ARGV[6], ARGV[2])\n"
    "local base = string.sub(KEYS[5], 1, -5)\n"
    "redis.call('ZADD', base .. 'expire_at', ARGV[6], ARGV[2])\n"
    "redis.call('HSET', base .. 'expire_info', ARGV[2], ARGV[6] .. ' ' .. t[1] .. ' dead')\n"
    "redis.call('ZRANGE', KEYS[2], '0', '0')\n"
    "return { 'ok', ARGV[2], ARGV[6], t[1] }\n";

static const char MIN_ENQUEUE_WINDOW[] =
    "local t = redis.call('TIME')\n"
    "redis.call('HGET', KEYS[5], 'partitions')\n"
    "redis.call('HSETNX', KEYS[1], ARGV[2], ARGV[4] .. '" RECORD_REST "')\n"
    "redis.call('ZADD', KEYS[2], ARGV[6], ARGV[2])\n"
    "redis.call('HSET', string.sub(KEYS[5], 1, -5) .. 'unique', ARGV[2],\n"
    "           t[1] .. ' ' .. ARGV[14])\n"
    "redis.call('ZRANGE', KEYS[2], '0', '0')\n"
    "return { 'ok', ARGV[2], ARGV[6], t[1] }\n";

static const char MIN_ENQUEUE_DEBOUNCE[] =
    "local t = redis.call('TIME')\n"
    "redis.call('HGET', KEYS[5], 'partitions')\n"
    "redis.call('HGET', KEYS[1], ARGV[2])\n"
    "redis.call('HSETNX', KEYS[1], ARGV[2], ARGV[4] .. '" RECORD_REST "')\n"
    "local due = string.format('%d', t[1] * 1000 + ARGV[6])\n"
    "redis.call('ZADD', KEYS[2], due, ARGV[2])\n"
    "redis.call('ZRANGE', KEYS[2], '0', '0')\n"
    "return { 'ok', ARGV[2], due, t[1] }\n";

/* A debounced add of a waiting job: the job's record and where it is,
 * then its new record and due time, and its next run dropped. */
static const char MIN_DEBOUNCE_HIT[] =
    "local t = redis.call('TIME')\n"
    "redis.call('HGET', KEYS[5], 'partitions')\n"
    "redis.call('HGET', KEYS[1], ARGV[2])\n"
    "redis.call('ZSCORE', KEYS[3], ARGV[2])\n"
    "redis.call('ZSCORE', KEYS[2], ARGV[2])\n"
    "redis.call('HSET', KEYS[1], ARGV[2], ARGV[4] .. '" RECORD_REST "')\n"
    "local due = string.format('%d', t[1] * 1000 + ARGV[6])\n"
    "redis.call('ZADD', KEYS[2], due, ARGV[2])\n"
    "redis.call('HDEL', string.sub(KEYS[5], 1, -5) .. 'next', ARGV[2])\n"
    "redis.call('ZRANGE', KEYS[2], '0', '0')\n"
    "return { 'debounced', ARGV[2], due, t[1] }\n";

/* ARGV: the wake channel, then (id, when, body) per job; every id is ''
 * and every when "@MS" here. */
static const char MIN_ENQUEUE_MANY[] =
    "local t = redis.call('TIME')\n"
    "local n = (#ARGV - 1) / 3\n"
    "local seq = tonumber(redis.call('HGET', KEYS[5], 'seq') or '0')\n"
    "redis.call('HGET', KEYS[5], 'partitions')\n"
    "local ids, rec, z = {}, {}, {}\n"
    "for i = 1, n do\n"
    "  local id = string.format('%d', seq + i)\n"
    "  ids[i] = id\n"
    "  rec[2 * i - 1] = id\n"
    "  rec[2 * i] = ARGV[3 * i + 1] .. '" BODY_REST "'\n"
    "  z[2 * i - 1] = string.sub(ARGV[3 * i], 2)\n"
    "  z[2 * i] = id\n"
    "end\n"
    "local b = KEYS[1] .. ':' .. string.sub(ids[1], 1, -3)\n"
    "redis.call('HMGET', b, unpack(ids))\n"
    "redis.call('HINCRBY', KEYS[5], 'seq', string.format('%d', n))\n"
    "redis.call('HSET', b, unpack(rec))\n"
    "redis.call('ZADD', KEYS[2], unpack(z))\n"
    "redis.call('ZRANGE', KEYS[2], '0', '0', 'WITHSCORES')\n"
    "return { t[1], seq }\n";

static const char MIN_CANCEL[] =
    "redis.call('ZSCORE', KEYS[2], ARGV[1])\n"
    "redis.call('EXISTS', string.sub(KEYS[5], 1, -5) .. 'unique')\n"
    "redis.call('HDEL', KEYS[1], ARGV[1])\n"
    "redis.call('ZREM', KEYS[2], ARGV[1])\n"
    "redis.call('HINCRBY', KEYS[5], 'jobs_cancelled', '1')\n"
    "return 'cancelled'\n";

static const char MIN_SHOW[] =
    "local t = redis.call('TIME')\n"
    "local raw = redis.call('HGET', KEYS[1], ARGV[1])\n"
    "local s = redis.call('ZSCORE', KEYS[2], ARGV[1])\n"
    "local base = string.sub(KEYS[5], 1, -5)\n"
    "redis.call('EXISTS', base .. 'expire_info', base .. 'unique')\n"
    "return { 'delayed', raw, s, t[1] }\n";

static const char EMPTY[] = "return 1\n";

/* What one row measures. */
enum probe_kind {
    P_ENQUEUE, P_ENQUEUE_ID, P_ENQUEUE_TTL, P_ENQUEUE_WINDOW, P_ENQUEUE_DEBOUNCE,
    P_DEBOUNCE_HIT, P_ENQUEUE_MANY, P_CANCEL, P_SHOW
};

struct probe {
    enum probe_kind kind;
    const char *name;
    const char *minimal;
    int jobs_per_call;
};

static const struct probe probes[] = {
    { P_ENQUEUE, "enqueue", MIN_ENQUEUE, 1 },
    { P_ENQUEUE_ID, "enqueue with id", MIN_ENQUEUE_ID, 1 },
    { P_ENQUEUE_MANY, "enqueue_many 100", MIN_ENQUEUE_MANY, MANY },
    { P_CANCEL, "cancel", MIN_CANCEL, 1 },
    { P_SHOW, "show", MIN_SHOW, 1 },
    /* Last: a queue with expiries or windows takes cancel and show off
     * their common call. */
    { P_ENQUEUE_TTL, "enqueue id+ttl", MIN_ENQUEUE_TTL, 1 },
    { P_ENQUEUE_WINDOW, "enqueue id+window", MIN_ENQUEUE_WINDOW, 1 },
    { P_ENQUEUE_DEBOUNCE, "enqueue debounced", MIN_ENQUEUE_DEBOUNCE, 1 },
    { P_DEBOUNCE_HIT, "debounce waiting job", MIN_DEBOUNCE_HIT, 1 },
};

struct pctx {
    struct redis_proc redis;
    redisContext *rc;
    struct queue_keys keys;
    char min_sha[41], empty_sha[41];
    int64_t at0;
    long serial;                /* makes every producer id unique */
};

/* Free the reply r of a command: 0 when it came and is no error, else -1
 * with `what` and the reason in err. */
static int reply_done(redisContext *rc, redisReply *r, const char *what, char *err,
                      size_t errlen)
{
    if (r && r->type != REDIS_REPLY_ERROR) {
        freeReplyObject(r);
        return 0;
    }
    snprintf(err, errlen, "%s%s", what, r ? r->str : rc->errstr);
    if (r)
        freeReplyObject(r);
    return -1;
}

/* SCRIPT LOAD `text` into sha (41 bytes). */
static int load(redisContext *rc, const char *text, char *sha, char *err, size_t errlen)
{
    redisReply *r = redisCommand(rc, "SCRIPT LOAD %s", text);
    if (!r || r->type != REDIS_REPLY_STRING || r->len != 40) {
        snprintf(err, errlen, "SCRIPT LOAD: %s", r ? (r->str ? r->str : "?") : rc->errstr);
        if (r)
            freeReplyObject(r);
        return -1;
    }
    memcpy(sha, r->str, 41);
    freeReplyObject(r);
    return 0;
}

/* Send c as it is, or with its script's digest replaced by `sha`, and
 * insist on a reply that is not an error. */
static int send_cmd(struct pctx *x, struct cmd *c, const char *sha, char *err, size_t errlen)
{
    if (c->oom) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    const char *saved = c->argv[1];
    size_t saved_len = c->lens[1];
    if (sha) {
        c->argv[1] = sha;
        c->lens[1] = 40;
    }
    redisReply *r = redisCommandArgv(x->rc, c->argc, c->argv, c->lens);
    c->argv[1] = saved;
    c->lens[1] = saved_len;
    return reply_done(x->rc, r, "", err, errlen);
}

/* Producer id number i of the run, for the jobs cancel and show find. */
static void job_id(char *out, size_t len, const char *tag, long i)
{
    snprintf(out, len, "%s-%ld", tag, i);
}

static void fill_req(struct pctx *x, dq_enqueue_req *req, const char *id)
{
    memset(req, 0, sizeof *req);
    req->queue = BENCH_QUEUE;
    req->type = BENCH_TYPE;
    req->payload = bench_payload;
    req->payload_len = BENCH_PAYLOAD_LEN;
    req->at_ms = x->at0 + (x->serial++ % 100000);
    req->id = id;
}

/* One call of the probe's script (sha NULL) or of another with the same
 * keys and arguments.  `tag` and i name the job cancel and show act on. */
static int one_call(struct pctx *x, const struct probe *p, const char *sha, const char *tag,
                    long i, char *err, size_t errlen)
{
    struct cmd c;
    cmd_init(&c);
    char id[64];
    dq_enqueue_req reqs[MANY];
    size_t idx[MANY];
    switch (p->kind) {
    case P_ENQUEUE:
        fill_req(x, &reqs[0], NULL);
        proto_enqueue_cmd(&c, &x->keys, &reqs[0], 1, 0);
        break;
    case P_ENQUEUE_ID:
    case P_ENQUEUE_TTL:
    case P_ENQUEUE_WINDOW:
    case P_ENQUEUE_DEBOUNCE:
    case P_DEBOUNCE_HIT:
        /* A debounce of a waiting job: the one planted for this variant
         * and round, every call. */
        if (p->kind == P_DEBOUNCE_HIT)
            job_id(id, sizeof id, tag, 0);
        else
            job_id(id, sizeof id, "e", x->serial);
        fill_req(x, &reqs[0], id);
        if (p->kind == P_ENQUEUE_TTL) {
            reqs[0].ttl_ms = 60000;
        } else if (p->kind == P_ENQUEUE_WINDOW) {
            reqs[0].unique_for_ms = 60000;
        } else if (p->kind == P_ENQUEUE_DEBOUNCE || p->kind == P_DEBOUNCE_HIT) {
            reqs[0].at_ms = 0;      /* a debounce is a delay: due in an hour */
            reqs[0].debounce_ms = HOUR_MS;
        }
        proto_enqueue_cmd(&c, &x->keys, &reqs[0], 1, 0);
        break;
    case P_ENQUEUE_MANY:
        for (size_t j = 0; j < MANY; j++) {
            fill_req(x, &reqs[j], NULL);
            idx[j] = j;
        }
        proto_enqueue_many_cmd(&c, &x->keys, reqs, idx, MANY, 1, 0);
        break;
    case P_CANCEL:
        job_id(id, sizeof id, tag, i);
        proto_cancel_cmd(&c, &x->keys, id);
        break;
    case P_SHOW:
        job_id(id, sizeof id, tag, i);
        proto_show_cmd(&c, &x->keys, id, true);
        break;
    }
    int rc = send_cmd(x, &c, sha, err, errlen);
    cmd_free(&c);
    return rc;
}

/* Delayed jobs TAG-0 .. TAG-(n-1), for cancel and show to find. */
static int plant(struct pctx *x, const char *tag, long n, char *err, size_t errlen)
{
    for (long i = 0; i < n; i++) {
        char id[64];
        dq_enqueue_req req;
        job_id(id, sizeof id, tag, i);
        fill_req(x, &req, id);
        struct cmd c;
        cmd_init(&c);
        proto_enqueue_cmd(&c, &x->keys, &req, 1, 0);
        int rc = send_cmd(x, &c, NULL, err, errlen);
        cmd_free(&c);
        if (rc < 0)
            return -1;
    }
    return 0;
}

#define CHUNK 100   /* calls of one variant between two looks at INFO */

/* Calls number from .. to - 1 of one variant: 0 the script, 1 its minimal
 * script, 2 the empty script, 3 a bare ZADD.  `tag` names the jobs that
 * cancel and show act on. */
static int run_calls(struct pctx *x, const struct probe *p, int variant, const char *tag,
                     int round, long from, long to, char *err, size_t errlen)
{
    const char *sha = variant == 1 ? x->min_sha : variant == 2 ? x->empty_sha : NULL;
    for (long i = from; i < to; i++) {
        if (variant == 3) {
            char member[64];
            snprintf(member, sizeof member, "z%d-%ld", round, i);
            redisReply *r = redisCommand(x->rc, "ZADD bench:zadd %lld %s",
                                         (long long)(x->at0 + i), member);
            if (reply_done(x->rc, r, "ZADD: ", err, errlen) < 0)
                return -1;
        } else if (one_call(x, p, sha, tag, i, err, errlen) < 0) {
            return -1;
        }
    }
    return 0;
}

/*
 * Redis's time per EVALSHA (or per ZADD) over `calls` calls of each of
 * two variants, `first` and first + 1: the script and its minimal script,
 * or the empty script and the ZADD.  The script and its minimal script
 * take turns by CHUNK calls, each going first in every other turn, so
 * that both meet the keys as they grow: when each ran its calls in one
 * go, the first of a round paid for the hash tables doubling under it (a
 * producer's id showed its script 1 us a call slower than its minimal
 * script when the script went first, and the same as it when the minimal
 * went first).  d[k] gets variant first + k's commandstats, summed.
 */
static int measure_pair(struct pctx *x, const struct probe *p, int first, int round,
                        long calls, double us[2], struct info_snap d[2], char *err,
                        size_t errlen)
{
    static const char *const tags[] = { "r", "m", "x", "z" };
    char tag[2][16];
    for (int k = 0; k < 2; k++) {
        int variant = first + k;
        snprintf(tag[k], sizeof tag[k], "%s%d", tags[variant], round);
        if ((p->kind == P_CANCEL || p->kind == P_SHOW) && variant < 3
            && plant(x, tag[k], calls, err, errlen) < 0)
            return -1;
        if (p->kind == P_DEBOUNCE_HIT && variant < 3 && plant(x, tag[k], 1, err, errlen) < 0)
            return -1;
    }
    memset(d, 0, 2 * sizeof *d);
    long chunk = first == 0 ? CHUNK : calls;
    for (long from = 0; from < calls; from += chunk) {
        long to = from + chunk < calls ? from + chunk : calls;
        for (int turn = 0; turn < 2; turn++) {
            int k = turn ^ (int)((from / chunk) & 1);
            struct info_snap i0, i1, delta;
            if (info_take(x->rc, &i0, err, errlen) < 0
                || run_calls(x, p, first + k, tag[k], round, from, to, err, errlen) < 0
                || info_take(x->rc, &i1, err, errlen) < 0)
                return -1;
            info_delta(&i1, &i0, &delta);
            info_accumulate(&d[k], &delta);
        }
    }
    for (int k = 0; k < 2; k++) {
        struct cmd_stat s = info_cmd(&d[k], first + k == 3 ? "zadd" : "evalsha");
        us[k] = s.calls > 0 ? s.usec / s.calls : NAN;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Whether the commands two deltas ran (other than evalsha and info) are
 * the same, as many per call; when not, the first difference in `why`. */
static bool same_commands(const struct info_snap *a, const struct info_snap *b, double calls,
                          char *why, size_t len)
{
    for (int pass = 0; pass < 2; pass++) {
        const struct info_snap *s = pass ? b : a, *o = pass ? a : b;
        for (size_t i = 0; i < s->ncmds; i++) {
            const char *name = s->cmds[i].name;
            if (strcmp(name, "evalsha") == 0 || strcmp(name, "info") == 0)
                continue;
            double mine = s->cmds[i].calls / calls, theirs = info_cmd(o, name).calls / calls;
            if (fabs(mine - theirs) > 0.01) {
                snprintf(why, len, "%s %.2f/call in the %s, %.2f in the %s", name,
                         pass ? theirs : mine, "script", pass ? mine : theirs, "minimal");
                return false;
            }
        }
    }
    return true;
}

/* Generated ids from a multiple of 100 on: each enqueue_many call of 100
 * then fills one bucket, as its minimal script assumes. */
static int align_seq(struct pctx *x, char *err, size_t errlen)
{
    redisReply *r = redisCommand(x->rc, "HINCRBY %s seq 0", x->keys.key[4]);
    if (!r || r->type != REDIS_REPLY_INTEGER) {
        snprintf(err, errlen, "HINCRBY: %s", r ? "not an integer" : x->rc->errstr);
        if (r)
            freeReplyObject(r);
        return -1;
    }
    long long seq = r->integer;
    freeReplyObject(r);
    r = redisCommand(x->rc, "HSET %s seq %lld", x->keys.key[4], (seq / 100 + 1) * 100 - 1);
    if (!r) {
        snprintf(err, errlen, "HSET: %s", x->rc->errstr);
        return -1;
    }
    freeReplyObject(r);
    return 0;
}

static int probe_row(struct pctx *x, const struct probe *p, long calls, char *err,
                     size_t errlen)
{
    if (load(x->rc, p->minimal, x->min_sha, err, errlen) < 0)
        return -1;
    if (p->kind == P_ENQUEUE_MANY && align_seq(x, err, errlen) < 0)
        return -1;
    double v[4][ROUNDS];
    static struct info_snap d[4];     /* the last round's, script and minimal first */
    for (int round = 0; round < ROUNDS; round++)
        for (int first = 0; first < 4; first += 2) {
            double us[2];
            if (measure_pair(x, p, first, round, calls, us, &d[first], err, errlen) < 0)
                return -1;
            v[first][round] = us[0];
            v[first + 1][round] = us[1];
        }
    const struct info_snap *real_d = &d[0], *min_d = &d[1];
    double med[4];
    for (int variant = 0; variant < 4; variant++) {
        qsort(v[variant], ROUNDS, sizeof v[variant][0], cmp_double);
        med[variant] = v[variant][ROUNDS / 2];
    }
    char why[96] = "";
    bool same = same_commands(real_d, min_d, (double)calls, why, sizeof why);
    struct report_row row;
    report_row_init(&row, "producer", p->name);
    row.v[COL_JOBS] = (double)calls * p->jobs_per_call;
    row.v[COL_CALL_US] = med[0];
    row.v[COL_MINIMAL_US] = med[1];
    row.v[COL_RATIO] = med[0] / med[1];
    row.v[COL_EMPTY_US] = med[2];
    row.v[COL_ZADD_US] = med[3];
    row.v[COL_SCRIPT_US_PER_JOB] = med[0] / p->jobs_per_call;
    char inner[96];
    info_breakdown(real_d, (double)calls, "evalsha", 6, inner, sizeof inner);
    snprintf(row.note, sizeof row.note,
             "%.2f us/call = %.2fx minimal %.2f; empty %.2f, ZADD %.2f%s%s; %s",
             med[0], row.v[COL_RATIO], med[1], med[2], med[3],
             same ? "" : "; COMMANDS DIFFER: ", why, inner);
    report_add(&row);
    return 0;
}

/* Pin `pid` (0: this process) to one CPU, when there is more than one. */
static void pin(pid_t pid, int cpu)
{
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
        return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    sched_setaffinity(pid, sizeof one, &one);
}

int run_producer(const struct bench_env *env, char *err, size_t errlen)
{
    long calls = env->opt.quick ? 200 : 4000;
    bench_progress("producer: %d rounds of %ld calls per script, minimal script, "
                   "empty script and ZADD", ROUNDS, calls);
    struct pctx x;
    memset(&x, 0, sizeof x);
    cpu_set_t mask;
    sched_getaffinity(0, sizeof mask, &mask);
    int rc = -1;
    if (redis_proc_start(&x.redis, env->redis_server, err, errlen) < 0)
        goto done;
    if (!(x.rc = redis_proc_connect(&x.redis, err, errlen)))
        goto done;
    pin(x.redis.pid, 0);
    pin(0, 1);
    keys_build(&x.keys, DQ_DEFAULT_PREFIX, BENCH_QUEUE);
    x.at0 = bench_real_ms() + HOUR_MS;
    for (int s = 0; s < DQ_SCRIPT_COUNT; s++) {
        char sha[41];
        if (load(x.rc, dq_scripts[s].text, sha, err, errlen) < 0)
            goto done;
    }
    if (load(x.rc, EMPTY, x.empty_sha, err, errlen) < 0)
        goto done;
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
        long n = probes[i].kind == P_ENQUEUE_MANY ? calls / 10 : calls;
        if (probe_row(&x, &probes[i], n, err, errlen) < 0) {
            bench_err_prefix(err, errlen, probes[i].name);
            goto done;
        }
    }
    rc = 0;
done:
    sched_setaffinity(0, sizeof mask, &mask);
    if (x.rc)
        redisFree(x.rc);
    redis_proc_stop(&x.redis);
    return rc;
}
