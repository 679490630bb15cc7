/*
 * Validate, then write: what the scripts and libdelayq do with bad
 * arguments and odd records (issue 10, items 4 to 8 and 10), against a
 * real redis-server.  Each test plants what a bug, an operator or another
 * language's producer could leave in Redis, and checks that a bad record
 * or argument costs nothing to the jobs next to it and that the whole of
 * a refused call changed nothing.
 *
 * Scripts are run two ways: through the library, as programs use them,
 * and as redis-cli users run them (EVAL of scripts/NAME.lua, the full text
 * the build installs), for the arguments the library never sends.
 */
#include <check.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fixture.h"
#include "run_prog.h"

#define Q "rec"
#define K(s) "dq:{" Q "}:" s

static struct redis_fixture fx;
static dq_client *cl;
static redisContext *rc;

/* A good record's Lua expression, with its fields as Lua text. */
#define REC(type, payload, max, created, offset, err) \
    "'3:0:' .. cmsgpack.pack({" type ", " payload ", " max ", " created ", " offset ", " err "})"
#define GOOD REC("'email'", "'x'", "0", "0", "0", "''")

/* ---- helpers ------------------------------------------------------------ */

/* A raw command's reply (as redisCommand, %b included); the caller frees. */
static redisReply *cmd(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(rc, fmt, ap);
    va_end(ap);
    ck_assert_msg(r != NULL, "redis: %s", rc->errstr);
    return r;
}

/* A raw command's integer reply (or array length; -1 for nil or error). */
__attribute__((format(printf, 1, 2)))
static long long num(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(rc, fmt, ap);
    va_end(ap);
    ck_assert_msg(r != NULL, "redis: %s", rc->errstr);
    long long v = -1;
    if (r->type == REDIS_REPLY_INTEGER)
        v = r->integer;
    else if (r->type == REDIS_REPLY_ARRAY)
        v = (long long)r->elements;
    else if (r->type == REDIS_REPLY_STRING)
        v = strtoll(r->str, NULL, 10);
    else if (r->type == REDIS_REPLY_STATUS)
        v = 0;
    freeReplyObject(r);
    return v;
}

/* Store a record for producer id `id` (in K("jobs")) from a Lua
 * expression, so that malformed MessagePack is easy to write. */
static void plant(const char *id, const char *lua_raw)
{
    char script[1024];
    snprintf(script, sizeof script,
             "return redis.call('HSET', KEYS[1], ARGV[1], %s)", lua_raw);
    redisReply *r = cmd("EVAL %s 1 %s %s", script, K("jobs"), id);
    ck_assert_msg(r->type == REDIS_REPLY_INTEGER, "plant %s: %s", id,
                  r->type == REDIS_REPLY_ERROR ? r->str : "?");
    freeReplyObject(r);
}

/* Run scripts/NAME.lua as a redis-cli user does (EVAL, the six keys) with
 * `argc` arguments; the caller frees the reply. */
static redisReply *script(const char *name, int argc, const char *const *args)
{
    char path[256];
    snprintf(path, sizeof path, "scripts/%s.lua", name);
    FILE *f = fopen(fixture_build_path(path), "r");
    ck_assert_msg(f != NULL, "cannot open %s", fixture_build_path(path));
    static char text[200000];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *argv[40] = { "EVAL", text, "6", K("jobs"), K("delayed"), K("processing"),
                             K("dead"), K("meta"), K("lease") };
    ck_assert_int_le(argc, 40 - 9);
    for (int i = 0; i < argc; i++)
        argv[9 + i] = args[i];
    redisReply *r = redisCommandArgv(rc, 9 + argc, argv, NULL);
    ck_assert_msg(r != NULL, "redis: %s", rc->errstr);
    return r;
}

/* The script refused its arguments: one line "ERR delayq: NAME: ..." that
 * contains `phrase`. */
static void assert_refused(redisReply *r, const char *name, const char *phrase)
{
    char want[64];
    snprintf(want, sizeof want, "ERR delayq: %s: ", name);
    ck_assert_msg(r->type == REDIS_REPLY_ERROR, "%s was not refused", name);
    ck_assert_msg(strncmp(r->str, want, strlen(want)) == 0, "error: %s", r->str);
    ck_assert_msg(!strchr(r->str, '\n'), "not one line: %s", r->str);
    ck_assert_msg(strstr(r->str, phrase), "'%s' does not name '%s'", r->str, phrase);
    freeReplyObject(r);
}

/* Nothing in the queue: no record, no member of any set (but the pin of
 * processing, scored after every deadline). */
static void assert_queue_empty(void)
{
    ck_assert_int_eq(fixture_record_count(&fx, Q), 0);
    ck_assert_int_eq(num("ZCARD %s", K("delayed")), 0);
    ck_assert_int_eq(num("ZCOUNT %s -inf (9007199254740991", K("processing")), 0);
    ck_assert_int_eq(num("ZCARD %s", K("dead")), 0);
}

static dq_enqueue_req req_make(const char *id, int64_t delay_ms, int max_attempts)
{
    dq_enqueue_req r = { .queue = Q, .type = "email", .id = id, .payload = "x",
                         .payload_len = 1, .delay_ms = delay_ms,
                         .max_attempts = max_attempts };
    return r;
}

static void enq(const char *id, int max_attempts)
{
    dq_enqueue_req r = req_make(id, 0, max_attempts);
    ck_assert_msg(dq_enqueue(cl, &r, NULL) == DQ_OK, "enqueue %s: %s", id, dq_errmsg(cl));
}

/* Enqueue job `id` and claim it (with a minute's lease): its fence. */
static int64_t claim_one(const char *id)
{
    enq(id, 0);
    dq_claim_result res;
    ck_assert_int_eq(dq_claim(cl, Q, 1, 60000, &res), DQ_OK);
    ck_assert_uint_eq(res.n, 1);
    ck_assert_str_eq(res.jobs[0].id, id);
    int64_t fence = res.jobs[0].fence;
    dq_claim_result_free(&res);
    return fence;
}

static void show(const char *id, dq_job_info *info)
{
    ck_assert_msg(dq_show(cl, Q, id, info) == DQ_OK, "show %s: %s", id, dq_errmsg(cl));
}

/* The job is dead as an unreadable record, with `attempts` counted. */
static void assert_dead_unreadable(const char *id, int attempts)
{
    ck_assert_msg(num("ZSCORE %s %s", K("dead"), id) >= 0, "%s is not dead", id);
    dq_job_info info;
    show(id, &info);
    ck_assert_msg(info.state == DQ_STATE_UNREADABLE, "%s: state %s", id,
                  dq_state_str(info.state));
    ck_assert_msg(strstr(info.job.last_error, "unreadable record")
                  && strstr(info.job.last_error, "(in dead)"), "%s: %s", id,
                  info.job.last_error);
    if (attempts >= 0)
        ck_assert_int_eq(info.job.attempt, attempts);
    dq_job_info_free(&info);
}

/* delayq -s SOCK COMMAND -q Q A1..A4 (a NULL ends them): the run's result
 * (static). */
static struct run_result *cli(const char *command, const char *a1, const char *a2,
                              const char *a3, const char *a4)
{
    static struct run_result r;
    char *argv[] = { (char *)fixture_build_path("delayq"), "-s", fx.sock, (char *)command,
                     "-q", Q, (char *)a1, (char *)a2, (char *)a3, (char *)a4, NULL };
    struct run_opts o = { .env = { "DELAYQ_PASSWORD" } };
    run_prog(&o, argv, &r);
    return &r;
}

/* delayq add -q Q -t email A1 A2. */
static struct run_result *add(const char *a1, const char *a2)
{
    return cli("add", "-t", "email", a1, a2);
}

/* The run succeeded and printed `phrase`. */
static void assert_prints(const struct run_result *r, const char *phrase)
{
    ck_assert_msg(r->status == 0, "exit %d, stderr: %s", r->status, r->err);
    ck_assert_msg(strstr(r->out, phrase), "'%s' does not say '%s'", r->out, phrase);
}

/* ---- 4: a bad record in a reap pass ------------------------------------- */

START_TEST(reap_buries_a_bad_record_and_retries_its_neighbours)
{
    char id[16];
    for (int i = 0; i < 5; i++) {
        snprintf(id, sizeof id, "ok-%d", i);
        enq(id, 3);
    }
    plant("bad", REC("'email'", "'x'", "'3'", "0", "0", "''")); /* max_attempts "3" */
    ck_assert_int_eq(num("ZADD %s 0 bad", K("delayed")), 1);
    dq_claim_result res;
    ck_assert_int_eq(dq_claim(cl, Q, 10, 1, &res), DQ_OK);       /* lease 1 ms */
    ck_assert_uint_eq(res.n, 6);
    dq_claim_result_free(&res);
    tu_sleep_ms(20);
    dq_reap_result rr;
    ck_assert_msg(dq_reap(cl, Q, 100, NULL, &rr) == DQ_OK, "reap: %s", dq_errmsg(cl));
    ck_assert_uint_eq(rr.retried, 5);
    ck_assert_uint_eq(rr.dead, 1);
    for (int i = 0; i < 5; i++) {
        snprintf(id, sizeof id, "ok-%d", i);
        dq_job_info info;
        show(id, &info);
        ck_assert_int_eq(info.state, DQ_STATE_DELAYED);
        ck_assert_int_eq(info.job.attempt, 1);
        ck_assert_str_eq(info.job.last_error, "lease expired");
        dq_job_info_free(&info);
    }
    assert_dead_unreadable("bad", 1);
    ck_assert_int_eq(num("ZCARD %s", K("processing")), 1);      /* the pin alone */
    ck_assert_int_eq(num("HLEN %s", K("lease")), 1);
}
END_TEST

START_TEST(fail_checks_its_arguments_before_writing)
{
    char fence[24];
    snprintf(fence, sizeof fence, "%lld", (long long)claim_one("job"));
    const char *bad_delay[] = { "", "job", fence, "oops", "retry", "soon", "1000",
                                "60000", "0.2", "7", "5" };
    assert_refused(script("fail", 11, bad_delay), "fail", "retry_delay_ms");
    const char *bad_max[] = { "", "job", fence, "oops", "retry", "-1", "1000",
                              "60000", "0.2", "7", "five" };
    assert_refused(script("fail", 11, bad_max), "fail", "default_max_attempts");
    const char *bad_mode[] = { "", "job", fence, "oops", "later", "-1", "1000",
                               "60000", "0.2", "7", "5" };
    assert_refused(script("fail", 11, bad_mode), "fail", "mode");
    /* Still held under its fence: nothing was written. */
    ck_assert_int_eq(num("ZSCORE %s job", K("processing")) > 0, 1);
    ck_assert_int_eq(num("HGET %s job", K("lease")), strtoll(fence, NULL, 10));
    ck_assert_int_eq(dq_ack(cl, Q, "job", strtoll(fence, NULL, 10)), DQ_OK);
}
END_TEST

/* ---- 5 and 6: enqueue's arguments --------------------------------------- */

START_TEST(enqueue_refuses_bad_input_and_writes_nothing)
{
    const char *empty_max[] = { "", "a", "email", "x", "delay", "0", "", "0" };
    assert_refused(script("enqueue", 8, empty_max), "enqueue", "max_attempts");
    assert_queue_empty();
    const char *nan[] = { "", "b", "email", "x", "delay", "nan", "0", "0" };
    assert_refused(script("enqueue", 8, nan), "enqueue", "delay_ms");
    assert_queue_empty();
    const char *inf[] = { "", "c", "email", "x", "delay", "inf", "0", "0" };
    assert_refused(script("enqueue", 8, inf), "enqueue", "delay_ms");
    const char *far[] = { "", "d", "email", "x", "at", "9223372036854775807", "0", "0" };
    assert_refused(script("enqueue", 8, far), "enqueue", "at_ms");
    const char *spaced[] = { "", "e", "has space", "x", "delay", "0", "0", "0" };
    assert_refused(script("enqueue", 8, spaced), "enqueue", "type");
    assert_queue_empty();
    /* The ids refused above stay free. */
    const char *ok[] = { "", "b", "email", "x", "delay", "0", "3", "0" };
    redisReply *r = script("enqueue", 8, ok);
    ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
    ck_assert_str_eq(r->element[0]->str, "ok");
    freeReplyObject(r);
    ck_assert_int_eq(fixture_record_count(&fx, Q), 1);
}
END_TEST

/* The text of script `name` as the build made it (prelude included), to
 * call it with arguments libdelayq would not send.  A static buffer. */
static const char *script_text(const char *name)
{
    static char text[200000];
    char path[128];
    snprintf(path, sizeof path, "scripts/%s.lua", name);
    FILE *f = fopen(fixture_build_path(path), "r");
    ck_assert_ptr_nonnull(f);
    text[fread(text, 1, sizeof text - 1, f)] = '\0';
    fclose(f);
    return text;
}

static const char *enqueue_many_text(void)
{
    return script_text("enqueue_many");
}

START_TEST(enqueue_many_refuses_wrapped_times_before_writing)
{
    /* The body head of {type "email", payload "x", max_attempts 0}. */
    static const char body[] = "\x96\xa5" "email" "\xa1x\x00";
    redisReply *r;
    /* The body has a NUL: the calls go through redisCommand's %b. */
    const char *text = enqueue_many_text();
    static const char *const whens[] = { "9223372036854775807", "@9999999999999999999",
                                         "nan", "-5", "r@1e99" };
    for (size_t i = 0; i < sizeof whens / sizeof whens[0]; i++) {
        r = cmd("EVAL %s 6 %s %s %s %s %s %s %s %s %s %b %s %s %b", text, K("jobs"),
                K("delayed"), K("processing"), K("dead"), K("meta"), K("lease"), "",
                "a", "0", body, sizeof body - 1, "b", whens[i], body, sizeof body - 1);
        assert_refused(r, "enqueue_many", "job 2 when");
        assert_queue_empty();
        ck_assert_int_eq(num("HGET %s seq", K("meta")), -1);
    }
    /* A body that is not the head of a record is refused the same way. */
    r = cmd("EVAL %s 6 %s %s %s %s %s %s %s %s %s %b %s %s %s", text, K("jobs"),
            K("delayed"), K("processing"), K("dead"), K("meta"), K("lease"), "", "a",
            "0", body, sizeof body - 1, "b", "0", "\x81\xa1k\x01");
    assert_refused(r, "enqueue_many", "job 2 body");
    assert_queue_empty();
    /* And the same call with good times stores both. */
    r = cmd("EVAL %s 6 %s %s %s %s %s %s %s %s %s %b %s %s %b", text, K("jobs"),
            K("delayed"), K("processing"), K("dead"), K("meta"), K("lease"), "", "a",
            "0", body, sizeof body - 1, "b", "5000", body, sizeof body - 1);
    ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    ck_assert_int_eq(num("ZCARD %s", K("delayed")), 2);
}
END_TEST

/* A payload (or type) as MessagePack bin, which msgpack-python writes for
 * bytes by default, is refused: Redis 7.0's cmsgpack cannot decode it, so
 * show, requeue and run_now would find the job unreadable while the
 * daemon ran it. */
START_TEST(enqueue_many_refuses_a_bin_payload_or_type)
{
    static const char good[] = "\x96\xa5" "email" "\xa1x\x00";
#define BODY(s) { s, sizeof s - 1 }
    static const struct { const char *b; size_t n; } bad[] = {
        BODY("\x96\xa5" "email" "\xc4\x01x\x00"),                 /* bin 8 payload */
        BODY("\x96\xa5" "email" "\xc5\x00\x01x\x00"),             /* bin 16 payload */
        BODY("\x96\xa5" "email" "\xc6\x00\x00\x00\x01x\x00"),     /* bin 32 payload */
        BODY("\x96\xc4\x05" "email" "\xa1x\x00"),                 /* bin 8 type */
    };
#undef BODY
    const char *text = enqueue_many_text();
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        redisReply *r = cmd("EVAL %s 6 %s %s %s %s %s %s %s %s %s %b %s %s %b", text,
                            K("jobs"), K("delayed"), K("processing"), K("dead"), K("meta"),
                            K("lease"), "", "a", "0", good, sizeof good - 1, "b", "0",
                            bad[i].b, bad[i].n);
        assert_refused(r, "enqueue_many", "job 2 body");
        assert_queue_empty();
    }
}
END_TEST

/* One enqueue_many call on queue `q`, with the jobs' (id, when, body)
 * triples (bodies of the lengths given): the reply. */
static redisReply *enqueue_many_on(const char *q, const char *const *jobs, const size_t *lens,
                                   int njobs)
{
    enum { MAXJOBS = 8 };
    const char *argv[10 + 3 * MAXJOBS];
    size_t argl[10 + 3 * MAXJOBS];
    char keys[6][64];
    static const char *const names[6] = { "jobs", "delayed", "processing", "dead", "meta",
                                          "lease" };
    ck_assert_int_le(njobs, MAXJOBS);
    int n = 0;
    argv[n++] = "EVAL";
    argv[n++] = enqueue_many_text();
    argv[n++] = "6";
    for (int k = 0; k < 6; k++) {
        snprintf(keys[k], sizeof keys[k], "dq:{%s}:%s", q, names[k]);
        argv[n++] = keys[k];
    }
    argv[n++] = "";
    for (int i = 0; i < 3 * njobs; i++)
        argv[n++] = jobs[i];
    for (int i = 0; i < n; i++)
        argl[i] = strlen(argv[i]);
    for (int i = 0; i < njobs; i++)
        argl[10 + 3 * i + 2] = lens[i];
    redisReply *r = redisCommandArgv(rc, n, argv, argl);
    ck_assert_msg(r != NULL, "redis: %s", rc->errstr);
    return r;
}

/*
 * The bulk producer's common call (new jobs of normal priority) is
 * written before the prelude's functions are made; every other call goes
 * through them.  Both write each job's record byte for byte as the
 * protocol says, whatever the spelling of its time, id, payload and
 * max_attempts: the same jobs, once as a common call and once with one
 * job more that is not one ("/5", normal priority spelt out).
 */
START_TEST(enqueue_many_common_and_other_calls_write_the_same_records)
{
    char at_future[32], str8[200], str16[400];
    long long now = num("EVAL %s 0", "local t = redis.call('TIME') "
                        "return t[1] * 1000 + math.floor(t[2] / 1000)");
    snprintf(at_future, sizeof at_future, "@%lld", now + 60000);
    /* type email, payload "x", max_attempts 0 */
    static const char b1[] = "\x96\xa5" "email" "\xa1x\x00";
    /* payload of 100 bytes (str 8), max_attempts 3 */
    size_t l2 = 9;
    memcpy(str8, "\x96\xa5" "email" "\xd9\x64", l2);
    memset(str8 + l2, 'y', 100);
    l2 += 100;
    str8[l2++] = 3;
    /* type sms, payload of 300 bytes (str 16), max_attempts 300 (uint 16) */
    size_t l3 = 8;
    memcpy(str16, "\x96\xa3" "sms" "\xda\x01\x2c", l3);
    memset(str16 + l3, 'z', 300);
    l3 += 300;
    memcpy(str16 + l3, "\xcd\x01\x2c", 3);
    l3 += 3;
    /* empty payload, max_attempts 65536 (uint 32) */
    static const char b4[] = "\x96\xa5" "email" "\xa0\xce\x00\x01\x00\x00";
    const char *jobs[] = { "", at_future, b1,          /* generated, an absolute time */
                           "p-a", "5000", str8,        /* a producer's id, a delay */
                           "", "5000", str16,          /* another type */
                           "p-b", "@1000", b1,         /* due long ago */
                           "", "0", b4,
                           "p-c", "1/5", b1 };         /* not the common call */
    const size_t lens[] = { sizeof b1 - 1, l2, l3, sizeof b1 - 1, sizeof b4 - 1, sizeof b1 - 1 };
    static const char *const queues[2] = { "recA", "recB" };
    for (int qi = 0; qi < 2; qi++) {
        int njobs = qi == 0 ? 5 : 6;
        redisReply *r = enqueue_many_on(queues[qi], jobs, lens, njobs);
        ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 2,
                      "%s: type %d, %zu elements: %s", queues[qi], r->type, r->elements,
                      r->type == REDIS_REPLY_ERROR ? r->str : "");
        long long t = r->element[0]->integer, seq = r->element[1]->integer;
        freeReplyObject(r);
        ck_assert_int_eq(seq, 0);
        long long generated = 0;
        for (int i = 0; i < njobs; i++) {
            const char *id = jobs[3 * i], *when = jobs[3 * i + 1];
            char gen[32], key[96];
            if (*id == '\0') {
                snprintf(gen, sizeof gen, "%lld", seq + ++generated);
                id = gen;
                snprintf(key, sizeof key, "dq:{%s}:jobs:", queues[qi]);  /* ids 1..99 */
            } else {
                snprintf(key, sizeof key, "dq:{%s}:jobs", queues[qi]);
            }
            long long due = when[0] == '@' ? atoll(when + 1) : t + atoll(when);
            char zkey[96], created[32], offset[32];
            snprintf(zkey, sizeof zkey, "dq:{%s}:delayed", queues[qi]);
            ck_assert_int_eq(num("ZSCORE %s %s", zkey, id), due);
            snprintf(created, sizeof created, "%lld", t);
            snprintf(offset, sizeof offset, "%lld", due - t);
            redisReply *want = cmd("EVAL %s 0 %b %s %s",
                                   "return '3:0:' .. ARGV[1] .. cmsgpack.pack(tonumber(ARGV[2]),"
                                   " tonumber(ARGV[3])) .. '\\160'", jobs[3 * i + 2], lens[i],
                                   created, offset);
            redisReply *got = cmd("HGET %s %s", key, id);
            ck_assert_int_eq(want->type, REDIS_REPLY_STRING);
            ck_assert_msg(got->type == REDIS_REPLY_STRING && got->len == want->len
                          && memcmp(got->str, want->str, want->len) == 0,
                          "%s: job %d (%s): the record is not as the protocol says",
                          queues[qi], i + 1, id);
            freeReplyObject(want);
            freeReplyObject(got);
        }
        ck_assert_int_eq(num("HGET dq:{%s}:meta seq", queues[qi]), 3);
        ck_assert_int_eq(num("ZCARD dq:{%s}:delayed", queues[qi]), njobs);
    }
    /* Sent again: the producers' ids are taken, the generated ones new. */
    redisReply *r = enqueue_many_on("recA", jobs, lens, 5);
    ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
    ck_assert_int_eq(r->elements, 2 + 2 * 3);
    ck_assert_int_eq(r->element[2]->integer, 2);
    ck_assert_str_eq(r->element[3]->str, "exists");
    ck_assert_int_eq(r->element[5]->integer, 4);
    ck_assert_str_eq(r->element[6]->str, "exists");
    freeReplyObject(r);
    ck_assert_int_eq(num("ZCARD dq:{recA}:delayed"), 8);
    /* The same producer's id twice in one call: the second exists. */
    const char *twice[] = { "p-d", "0", b1, "p-d", "0", b1 };
    const size_t twice_lens[] = { sizeof b1 - 1, sizeof b1 - 1 };
    r = enqueue_many_on("recA", twice, twice_lens, 2);
    ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
    ck_assert_int_eq(r->elements, 2 + 3);
    ck_assert_int_eq(r->element[2]->integer, 2);
    ck_assert_str_eq(r->element[3]->str, "exists");
    freeReplyObject(r);
    ck_assert_int_eq(num("ZCARD dq:{recA}:delayed"), 9);
}
END_TEST

/*
 * enqueue's common call packs the usual record (a type under 32 bytes, a
 * payload under 256, a limit under 128, a due time under 2^32 ms ahead)
 * with one struct.pack whose format it picks by the values' sizes, and
 * any other with cmsgpack.  Either way the record is byte for byte what
 * cmsgpack packs, at every width's edge on both sides.
 */
START_TEST(enqueue_common_call_packs_every_width_as_cmsgpack_does)
{
    /* Delays, and absolute times in the past ("@"): the offset is then
     * negative (a negative fixint or int 8/16/32/64 for cmsgpack). */
    static const char *const delays[] = { "0", "127", "128", "255", "256", "65535", "65536",
                                          "4294967295", "4294967296", "@0", "@past" };
    static const size_t tlens[] = { 1, 31, 32 }, plens[] = { 0, 31, 32, 255, 256 };
    static const char *const maxes[] = { "0", "127", "128", "65536" };
    const char *text = script_text("enqueue");
    char type[40], payload[300], id[32];
    memset(type, 't', sizeof type);
    memset(payload, 'p', sizeof payload);
    int n = 0;
    for (size_t d = 0; d < sizeof delays / sizeof delays[0]; d++)
        for (size_t ti = 0; ti < sizeof tlens / sizeof tlens[0]; ti++)
            for (size_t pi = 0; pi < sizeof plens / sizeof plens[0]; pi++)
                for (size_t m = 0; m < sizeof maxes / sizeof maxes[0]; m++) {
                    /* Every other job with a generated id (a bucket). */
                    bool gen = n % 2 == 1, at = delays[d][0] == '@';
                    char ms[32];
                    snprintf(id, sizeof id, "e-%d", n++);
                    snprintf(ms, sizeof ms, "%s", at ? "0" : delays[d]);
                    if (strcmp(delays[d], "@past") == 0)   /* 100 ms ago */
                        snprintf(ms, sizeof ms, "%lld",
                                 num("EVAL %s 0", "local t = redis.call('TIME') return t[1] *"
                                     " 1000 + math.floor(t[2] / 1000) - 100"));
                    redisReply *r = cmd("EVAL %s 6 %s %s %s %s %s %s %s %s %b %b %s %s %s %s",
                                        text, K("jobs"), K("delayed"), K("processing"),
                                        K("dead"), K("meta"), K("lease"), "", gen ? "" : id,
                                        type, tlens[ti], payload, plens[pi],
                                        at ? "at" : "delay", ms, maxes[m], "0");
                    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 4
                                  && strcmp(r->element[0]->str, "ok") == 0,
                                  "job %s: not added", id);
                    char key[64];
                    snprintf(id, sizeof id, "%s", r->element[1]->str);
                    long long due = r->element[2]->integer, now = r->element[3]->integer;
                    freeReplyObject(r);
                    ck_assert_int_eq(due - now, at ? atoll(ms) - now : atoll(delays[d]));
                    snprintf(key, sizeof key, gen ? K("jobs") ":" : K("jobs"));
                    if (gen && strlen(id) > 2)
                        snprintf(key, sizeof key, K("jobs") ":%.*s", (int)strlen(id) - 2, id);
                    redisReply *want = cmd("EVAL %s 0 %b %b %s %lld %lld",
                                           "return '3:0:\\150' .. cmsgpack.pack(ARGV[1], ARGV[2],"
                                           " tonumber(ARGV[3]), tonumber(ARGV[4]),"
                                           " tonumber(ARGV[5])) .. '\\160'",
                                           type, tlens[ti], payload, plens[pi], maxes[m], now,
                                           due - now);
                    redisReply *got = cmd("HGET %s %s", key, id);
                    ck_assert_int_eq(want->type, REDIS_REPLY_STRING);
                    ck_assert_msg(got->type == REDIS_REPLY_STRING && got->len == want->len
                                  && memcmp(got->str, want->str, want->len) == 0,
                                  "type of %zu, payload of %zu, max %s, delay %s: the record"
                                  " is not what cmsgpack packs", tlens[ti], plens[pi],
                                  maxes[m], delays[d]);
                    freeReplyObject(want);
                    freeReplyObject(got);
                }
}
END_TEST

/*
 * A debounced add of a job waiting at the normal level is taken by
 * enqueue's common call; spelt otherwise ("05" for the normal priority)
 * the same add goes through the prelude's path.  Both write the same
 * record (the add's type, payload and limit; the job's attempts, created
 * time and last error), the same due time (capped by max_wait_ms from
 * the first add) and the same reply, and drop the job's next run.
 */
/* Insist that r is no error, and free it. */
static void cmd_ok(redisReply *r)
{
    ck_assert_msg(r->type != REDIS_REPLY_ERROR, "redis: %s", r->str);
    freeReplyObject(r);
}

/* A debounced add of a waiting job writes, for every width its common
 * call packs by hand, the bytes cmsgpack packs: payloads of each str head,
 * offsets of each uint width (and negative, for a first add dated after
 * now), errors kept of each length, a created time under 2^32. */
START_TEST(a_debounced_add_packs_every_width_as_cmsgpack_does)
{
    static const char *const debounces[] = { "1", "127", "128", "255", "256", "65535",
                                              "65536", "4294967296" };
    static const size_t plens[] = { 0, 31, 32, 255, 256 }, elens[] = { 0, 31, 32 };
    static const char *const createds[] = { "now", "small", "ahead" };
    const char *text = script_text("enqueue");
    char payload[300], err[40];
    memset(payload, 'p', sizeof payload);
    memset(err, 'e', sizeof err);
    long long now = num("EVAL %s 0", "local t = redis.call('TIME') "
                        "return t[1] * 1000 + math.floor(t[2] / 1000)");
    for (size_t d = 0; d < sizeof debounces / sizeof debounces[0]; d++)
        for (size_t pi = 0; pi < sizeof plens / sizeof plens[0]; pi++)
            for (size_t e = 0; e < sizeof elens / sizeof elens[0]; e++)
                for (size_t c = 0; c < sizeof createds / sizeof createds[0]; c++) {
                    long long created = c == 0 ? now - 1000 : c == 1 ? 3000000000LL
                                        : now + 600000;
                    cmd_ok(cmd("DEL %s %s", K("jobs"), K("delayed")));
                    /* (A head of "02" attempts: the prelude writes "2".) */
                    cmd_ok(cmd("EVAL %s 1 %s d-1 %lld %b", "return redis.call('HSET', KEYS[1], "
                               "ARGV[1], '3:02:' .. cmsgpack.pack({'old', 'p0', 3, "
                               "tonumber(ARGV[2]), 1000, ARGV[3]}))", K("jobs"), created,
                               err, elens[e]));
                    cmd_ok(cmd("ZADD %s 1 d-1", K("delayed")));
                    const char *argv[] = { "EVAL", text, "6", K("jobs"), K("delayed"),
                                           K("processing"), K("dead"), K("meta"), K("lease"),
                                           "", "d-1", "new", payload, "delay", debounces[d],
                                           "7", "0", "5", "1", "0", "", "dead", "", "0",
                                           debounces[d], "" };
                    size_t argl[sizeof argv / sizeof argv[0]];
                    for (size_t i = 0; i < sizeof argv / sizeof argv[0]; i++)
                        argl[i] = i == 12 ? plens[pi] : strlen(argv[i]);  /* 12: payload */
                    redisReply *r = redisCommandArgv(rc, (int)(sizeof argv / sizeof argv[0]),
                                                     argv, argl);
                    ck_assert_msg(r && r->type == REDIS_REPLY_ARRAY && r->elements == 4
                                  && strcmp(r->element[0]->str, "debounced") == 0,
                                  "payload of %zu, debounce %s: not debounced", plens[pi],
                                  debounces[d]);
                    long long due = r->element[2]->integer;
                    freeReplyObject(r);
                    redisReply *want = cmd("EVAL %s 0 %b %lld %lld %b",
                                           "return '3:2:' .. cmsgpack.pack({'new', ARGV[1], 7,"
                                           " tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]})",
                                           payload, plens[pi], created, due - created, err,
                                           elens[e]);
                    redisReply *got = cmd("HGET %s d-1", K("jobs"));
                    ck_assert_int_eq(want->type, REDIS_REPLY_STRING);
                    ck_assert_msg(got->type == REDIS_REPLY_STRING && got->len == want->len
                                  && memcmp(got->str, want->str, want->len) == 0,
                                  "payload of %zu, debounce %s, error of %zu, created %s: the"
                                  " record is not what cmsgpack packs", plens[pi], debounces[d],
                                  elens[e], createds[c]);
                    ck_assert_int_eq(num("ZSCORE %s d-1", K("delayed")), due);
                    freeReplyObject(want);
                    freeReplyObject(got);
                }
}
END_TEST


START_TEST(a_debounced_add_is_the_same_on_both_paths)
{
    const char *text = script_text("enqueue");
    static const char *const queues[2] = { "dbA", "dbB" };
    static const char *const prio[2] = { "5", "05" };
    static const char *const max_wait[2][2] = { { "", "" }, { "60000", "60000" } };
    redisReply *rec[2], *reply[2];
    long long score[2];
    for (int capped = 0; capped < 2; capped++) {
        long long created = num("EVAL %s 0", "local t = redis.call('TIME') "
                                "return t[1] * 1000 + math.floor(t[2] / 1000) - 90000");
        for (int q = 0; q < 2; q++) {
            char k[6][48];
            static const char *const names[6] = { "jobs", "delayed", "processing", "dead",
                                                  "meta", "lease" };
            for (int i = 0; i < 6; i++)
                snprintf(k[i], sizeof k[i], "dq:{%s}:%s", queues[q], names[i]);
            cmd_ok(cmd("DEL %s %s dq:{%s}:next", k[0], k[1], queues[q]));
            /* The waiting job: attempts 2, created 90 s ago, an error;
             * a next run left by an older give-back. */
            cmd_ok(cmd("EVAL %s 1 %s %s %lld", "return redis.call('HSET', KEYS[1], ARGV[1], "
                       "'3:2:' .. cmsgpack.pack({'old', 'p0', 3, tonumber(ARGV[2]), 100000,"
                       " 'boom'}))", k[0], "d-1", created));
            cmd_ok(cmd("ZADD %s 1 d-1", k[1]));
            cmd_ok(cmd("HSET dq:{%s}:next d-1 stale", queues[q]));
            /* (Argv: redisCommand drops some empty arguments.) */
            const char *argv[] = { "EVAL", text, "6", k[0], k[1], k[2], k[3], k[4], k[5],
                                   "", "d-1", "new", "p1", "delay", "3600000", "7", "0",
                                   prio[q], "1", "0", "", "dead", "", "0", "3600000",
                                   max_wait[capped][q] };
            size_t argl[sizeof argv / sizeof argv[0]];
            for (size_t i = 0; i < sizeof argv / sizeof argv[0]; i++)
                argl[i] = strlen(argv[i]);
            reply[q] = redisCommandArgv(rc, (int)(sizeof argv / sizeof argv[0]), argv, argl);
            ck_assert_ptr_nonnull(reply[q]);
            ck_assert_msg(reply[q]->type == REDIS_REPLY_ARRAY && reply[q]->elements == 4,
                          "%s: %s", queues[q], reply[q]->type == REDIS_REPLY_ERROR
                          ? reply[q]->str : "not 4 elements");
            ck_assert_msg(strcmp(reply[q]->element[0]->str, "debounced") == 0,
                          "%s, max_wait \"%s\": %s", queues[q], max_wait[capped][q],
                          reply[q]->element[0]->str);
            rec[q] = cmd("HGET %s d-1", k[0]);
            ck_assert_int_eq(rec[q]->type, REDIS_REPLY_STRING);
            score[q] = num("ZSCORE %s d-1", k[1]);
            ck_assert_int_eq(num("HEXISTS dq:{%s}:next d-1", queues[q]), 0);
        }
        /* Each record is what the prelude's encode writes for its due
         * time (the two calls' clocks may be a millisecond apart). */
        for (int q = 0; q < 2; q++) {
            ck_assert_int_eq(reply[q]->element[2]->integer, score[q]);
            redisReply *want = cmd("EVAL %s 0 %lld %lld", "return '3:2:' .. cmsgpack.pack("
                                   "{'new', 'p1', 7, tonumber(ARGV[1]), tonumber(ARGV[2]),"
                                   " 'boom'})", created, score[q] - created);
            ck_assert_msg(want->type == REDIS_REPLY_STRING && rec[q]->len == want->len
                          && memcmp(rec[q]->str, want->str, want->len) == 0,
                          "capped %d, %s: the record is not the prelude's", capped, queues[q]);
            freeReplyObject(want);
        }
        /* The two paths' due times are the same delay from each call's
         * clock: they differ by the time between the calls (8 ms seen on
         * a loaded CI machine), what the records above show is equal. */
        ck_assert_int_le(llabs(score[0] - score[1]), 250);
        long long now = reply[0]->element[3]->integer;
        if (capped)
            ck_assert_int_eq(score[0], created + 60000);
        else
            ck_assert_int_eq(score[0] - now, 3600000);
        for (int q = 0; q < 2; q++) {
            freeReplyObject(rec[q]);
            freeReplyObject(reply[q]);
        }
    }
}
END_TEST

/* The message a subscriber of channel "w" gets next (a static buffer). */
static const char *next_wake(redisContext *sub)
{
    static char msg[64];
    void *v = NULL;
    ck_assert_int_eq(redisGetReply(sub, &v), REDIS_OK);
    redisReply *r = v;
    ck_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    snprintf(msg, sizeof msg, "%s", r->element[2]->str);
    freeReplyObject(r);
    return msg;
}

/* The common call tells sleeping workers of a job due sooner than the
 * normal level's head, and says nothing of jobs due later. */
START_TEST(enqueue_many_common_call_wakes_for_a_sooner_job)
{
    static const char body[] = "\x96\xa5" "email" "\xa1x\x00";
    redisContext *sub = fixture_redis_connect(&fx);
    struct timeval tv = { 5, 0 };
    redisSetTimeout(sub, tv);
    redisReply *r = redisCommand(sub, "SUBSCRIBE w");
    ck_assert(r != NULL);
    freeReplyObject(r);
    /* Two jobs due at once, whose order differs between bytes ("B1"
     * first) and a locale's collation ("a1" first): the head is due then. */
    static const char *const calls[][2] = { { "@4000000000000", "@4000000000000" },
                                            { "@3000000000000", "@3000000000000" },
                                            { "@4500000000000", "@4500000000000" } };
    static const char *const want[] = { "4000000000000", "3000000000000", "end" };
    for (int c = 0; c < 3; c++) {
        char a1[16], b1[16];
        snprintf(a1, sizeof a1, "a%d", c);
        snprintf(b1, sizeof b1, "B%d", c);
        r = cmd("EVAL %s 6 %s %s %s %s %s %s w %s %s %b %s %s %b", enqueue_many_text(),
                K("jobs"), K("delayed"), K("processing"), K("dead"), K("meta"), K("lease"),
                a1, calls[c][0], body, sizeof body - 1, b1, calls[c][1], body,
                sizeof body - 1);
        ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 2, "call %d", c);
        freeReplyObject(r);
        ck_assert_int_eq(num("PUBLISH w end"), 1);
        ck_assert_str_eq(next_wake(sub), want[c]);
        if (c < 2)
            ck_assert_str_eq(next_wake(sub), "end");
    }
    redisFree(sub);
}
END_TEST

/* A schedule script's reply, with the queue's keys and its own two. */
#define SCHED_KEYS K("jobs"), K("delayed"), K("processing"), K("dead"), K("meta"), \
                   K("lease"), K("schedules"), K("schedule_due")

/*
 * A removed schedule takes back the jobs it fired ahead of their ticks
 * that still wait for them, and leaves alone one that has run and waits
 * for its retry (its score is no longer its tick).
 */
START_TEST(a_removed_schedule_takes_back_only_jobs_waiting_for_their_ticks)
{
    long long now = num("EVAL %s 0", "local t = redis.call('TIME') "
                        "return t[1] * 1000 + math.floor(t[2] / 1000)");
    char t1[24], t2[24], t3[24], retry[24];
    snprintf(t1, sizeof t1, "%lld", now + 60000);
    snprintf(t2, sizeof t2, "%lld", now + 120000);
    snprintf(t3, sizeof t3, "%lld", now + 180000);
    snprintf(retry, sizeof retry, "%lld", now + 65000);
    redisReply *r = cmd("EVAL %s 8 %s %s %s %s %s %s %s %s s %s %s t p 0 one %s 0",
                        script_text("sched_add"), SCHED_KEYS, "@every 1m", "", t1);
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY, "sched_add: %s", r->str ? r->str : "");
    freeReplyObject(r);
    /* Two ticks fired ahead, as the reaper does up to 3 s early. */
    const char *ticks[2][3] = { { t1, "s@A", t2 }, { t2, "s@B", t3 } };
    for (int i = 0; i < 2; i++) {
        r = cmd("EVAL %s 8 %s %s %s %s %s %s %s %s %s s %s %s %s %s", script_text("sched_fire"),
                SCHED_KEYS, "", ticks[i][0], ticks[i][0], ticks[i][1], ticks[i][2]);
        ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 2
                      && strcmp(r->element[0]->str, "fired") == 0, "sched_fire %d", i);
        freeReplyObject(r);
    }
    /* s@A ran early (run-now of its own) and failed: its retry waits. */
    ck_assert_int_eq(num("ZADD %s XX CH %s s@A", K("delayed"), retry), 1);
    r = cmd("EVAL %s 8 %s %s %s %s %s %s %s %s s", script_text("sched_remove"), SCHED_KEYS);
    ck_assert_int_eq(r->type, REDIS_REPLY_INTEGER);
    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
    ck_assert_int_eq(num("ZSCORE %s s@B", K("delayed")), -1);
    ck_assert_int_eq(num("HEXISTS %s s@B", K("jobs")), 0);
    ck_assert_int_eq(num("ZSCORE %s s@A", K("delayed")), now + 65000);
    ck_assert_int_eq(num("HEXISTS %s s@A", K("jobs")), 1);
    ck_assert_int_eq(num("EXISTS %s %s", K("schedules"), K("schedule_due")), 0);
    /* A name no schedule can have is refused, not taken for a list. */
    r = cmd("EVAL %s 8 %s %s %s %s %s %s %s %s x@", script_text("sched_remove"), SCHED_KEYS);
    assert_refused(r, "sched_remove", "name");
}
END_TEST

/* More jobs in one call than any client sends (1000) is refused before
 * anything is written: a ZADD of 4000 would fail after the records. */
START_TEST(enqueue_many_refuses_more_than_1000_jobs_a_call)
{
    static const char body[] = "\x96\xa5" "email" "\xa1x\x00";
    enum { N = 4001 };
    const char **argv = calloc(10 + 3 * N, sizeof *argv);
    size_t *argl = calloc(10 + 3 * N, sizeof *argl);
    ck_assert(argv && argl);
    static const char *const head[10] = { "EVAL", NULL, "6", K("jobs"), K("delayed"),
                                          K("processing"), K("dead"), K("meta"), K("lease"),
                                          "" };
    for (int n = 1001; n <= N; n += N - 1001) {
        int c = 0;
        for (; c < 10; c++)
            argv[c] = head[c];
        argv[1] = enqueue_many_text();
        for (int i = 0; i < n; i++) {
            argv[c++] = "";
            argv[c++] = "5000";
            argv[c++] = body;
        }
        for (int i = 0; i < c; i++)
            argl[i] = argv[i] == body ? sizeof body - 1 : strlen(argv[i]);
        redisReply *r = redisCommandArgv(rc, c, argv, argl);
        ck_assert_ptr_nonnull(r);
        assert_refused(r, "enqueue_many", "at most 1000 jobs");
        assert_queue_empty();
        ck_assert_int_eq(num("HGET %s seq", K("meta")), -1);
    }
    free(argv);
    free(argl);
}
END_TEST

START_TEST(library_refuses_times_beyond_100_years)
{
    int64_t now = 0;
    ck_assert_int_eq(dq_server_time(cl, &now), DQ_OK);
    dq_enqueue_req r = req_make("far", DQ_MAX_AHEAD_MS + 1, 0);
    ck_assert_int_eq(dq_enqueue(cl, &r, NULL), DQ_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(cl), "100 years"));
    r = req_make("neg", 0, 0);
    r.at_ms = -1;
    ck_assert_int_eq(dq_enqueue(cl, &r, NULL), DQ_ERR_INVALID);
    r.at_ms = INT64_MAX;
    ck_assert_int_eq(dq_enqueue(cl, &r, NULL), DQ_ERR_INVALID);
    r.at_ms = now + DQ_MAX_AHEAD_MS + 86400000;
    ck_assert_int_eq(dq_enqueue(cl, &r, NULL), DQ_ERR_INVALID);
    assert_queue_empty();
    /* In a bulk call the bad job is refused, the rest stored. */
    dq_enqueue_req many[3] = { req_make("m1", 0, 0), req_make("m2", 0, 0),
                               req_make("m3", 0, 0) };
    many[1].at_ms = INT64_MAX;
    dq_status sts[3];
    ck_assert_int_eq(dq_enqueue_many(cl, many, 3, NULL, sts), DQ_ERR_INVALID);
    ck_assert_int_eq(sts[0], DQ_OK);
    ck_assert_int_eq(sts[1], DQ_ERR_INVALID);
    ck_assert_int_eq(sts[2], DQ_OK);
    ck_assert_int_eq(num("ZCARD %s", K("delayed")), 2);
    ck_assert_int_eq(num("ZSCORE %s m2", K("delayed")), -1);
    /* The bound itself is allowed. */
    r = req_make("edge", DQ_MAX_AHEAD_MS, 0);
    ck_assert_int_eq(dq_enqueue(cl, &r, NULL), DQ_OK);
}
END_TEST


static void assert_usage_error(const struct run_result *r, const char *phrase)
{
    ck_assert_msg(r->status == 2, "exit %d, stderr: %s", r->status, r->err);
    const char *nl = strchr(r->err, '\n');
    ck_assert_msg(nl && nl[1] == '\0', "not one line: '%s'", r->err);
    ck_assert_msg(strstr(r->err, phrase), "'%s' does not say '%s'", r->err, phrase);
}

START_TEST(cli_refuses_times_beyond_100_years)
{
    assert_usage_error(add("-d", "200y"), "200y");
    assert_usage_error(add("-d", "36600d"), "100 years");
    assert_usage_error(add("--at", "9999999999999999999"), "9999999999999999999");
    assert_usage_error(add("--at", "253402300799"), "100 years");       /* year 9999 */
    assert_usage_error(add("--at", "2200-01-01T00:00:00Z"), "100 years");
    assert_queue_empty();
}
END_TEST

/* ---- 7: a handler's retry delay ----------------------------------------- */

START_TEST(asked_retry_delay_is_capped)
{
    int64_t fence = claim_one("slow");
    dq_retry_policy p;
    dq_retry_policy_init(&p);
    p.cap_ms = 60000;
    int64_t before = 0;
    ck_assert_int_eq(dq_server_time(cl, &before), DQ_OK);
    dq_fail_result fr;
    /* What an HTTP server's Retry-After of ~9.2e12 s asks for. */
    ck_assert_int_eq(dq_fail(cl, Q, "slow", fence, "HTTP 503", DQ_FAIL_RETRY,
                             INT64_MAX / 1000, &p, &fr), DQ_OK);
    ck_assert(!fr.dead);
    ck_assert_int_ge(fr.at_ms, before + 60000);
    ck_assert_int_le(fr.at_ms, before + 60000 + 5000);
    ck_assert_int_eq(num("ZSCORE %s slow", K("delayed")), fr.at_ms);
}
END_TEST

/* ---- 8: the claim side of orphans and wrong-type keys -------------------- */

START_TEST(claim_removes_ids_without_a_record_and_counts_them)
{
    enq("a", 0);
    enq("b", 0);
    ck_assert_int_eq(num("ZADD %s 0 ghost-1 0 ghost-2", K("delayed")), 2);
    ck_assert_int_eq(num("ZADD %s 0 123", K("delayed")), 1);    /* a bucket id */
    dq_claim_result res;
    ck_assert_int_eq(dq_claim(cl, Q, 10, 60000, &res), DQ_OK);
    ck_assert_uint_eq(res.n, 2);
    dq_claim_result_free(&res);
    ck_assert_int_eq(num("ZCARD %s", K("delayed")), 0);
    ck_assert_int_eq(num("ZCARD %s", K("dead")), 0);
    ck_assert_int_eq(num("HGET %s orphans_removed", K("meta")), 3);
}
END_TEST

START_TEST(a_bucket_of_the_wrong_type_does_not_stop_claims)
{
    enq("mine", 0);
    dq_enqueue_req r = req_make(NULL, 0, 0);   /* generated: ids 1.., bucket "" */
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(dq_enqueue(cl, &r, NULL), DQ_OK);
    /* ids 150 and 151 belong in bucket jobs:1, which is a string. */
    ck_assert_int_eq(num("SET %s oops", K("jobs:1")), 0);
    ck_assert_int_eq(num("ZADD %s 0 150 0 151", K("delayed")), 2);
    dq_claim_result res;
    ck_assert_msg(dq_claim(cl, Q, 10, 60000, &res) == DQ_OK, "claim: %s", dq_errmsg(cl));
    ck_assert_uint_eq(res.n, 4);
    for (size_t i = 0; i < res.n; i++)
        ck_assert_str_eq(res.jobs[i].type, "email");
    ck_assert_int_eq(dq_ack_many(cl, Q, res.jobs, res.n, NULL), DQ_OK);
    dq_claim_result_free(&res);
    ck_assert_int_eq(num("ZCARD %s", K("dead")), 2);           /* kept visible */
    ck_assert_int_eq(num("ZCARD %s", K("delayed")), 0);
    dq_dead_page page;
    ck_assert_int_eq(dq_dead_list(cl, Q, 0, 10, &page), DQ_OK);
    ck_assert_uint_eq(page.n, 2);
    ck_assert(dq_dead_page_unreadable(&page, 0) && dq_dead_page_unreadable(&page, 1));
    dq_dead_page_free(&page);
    /* Purge takes them out; the key itself is fsck's to report. */
    int64_t purged = 0;
    ck_assert_int_eq(dq_purge_all(cl, Q, &purged), DQ_OK);
    ck_assert_int_eq(purged, 2);
}
END_TEST

/* ---- 10: listings of odd records ---------------------------------------- */

START_TEST(dead_list_and_show_survive_odd_records)
{
    plant("num-payload", REC("'email'", "42", "0", "0", "0", "'boom'"));
    /* Arrays of six with a nil (0xc0) in them, written by hand: Lua's
     * tables end at a nil, and cmsgpack with them. */
    plant("nil-error", "'3:0:\\150' .. string.sub(cmsgpack.pack({'email', 'x', 0, 0, 0}), 2)"
                       " .. '\\192'");
    plant("nil-type", "'3:2:\\150\\192' .. string.sub(cmsgpack.pack({'x', 0, 0, 0, 'e'}), 2)");
    plant("fine", REC("'email'", "'hello'", "2", "0", "0", "'gave up'"));
    ck_assert_int_eq(num("ZADD %s 1 num-payload 2 nil-error 3 nil-type 4 fine",
                         K("dead")), 4);
    dq_dead_page page;
    ck_assert_msg(dq_dead_list(cl, Q, 0, 10, &page) == DQ_OK, "dlq: %s", dq_errmsg(cl));
    ck_assert_uint_eq(page.n, 4);
    ck_assert_int_eq(page.total, 4);
    ck_assert_str_eq(page.entries[0].id, "num-payload");
    ck_assert(dq_dead_page_unreadable(&page, 0));
    ck_assert_str_eq(page.entries[0].type, "email");
    ck_assert_str_eq(page.entries[0].last_error, "unreadable record: payload is not a string");
    ck_assert(!dq_dead_page_unreadable(&page, 1));            /* nil last_error is fine */
    ck_assert_str_eq(page.entries[1].last_error, "");
    ck_assert(dq_dead_page_unreadable(&page, 2));
    ck_assert_int_eq(page.entries[2].attempts, 2);
    ck_assert(!dq_dead_page_unreadable(&page, 3));
    ck_assert_str_eq(page.entries[3].last_error, "gave up");
    ck_assert_uint_eq(page.entries[3].payload_len, 5);
    ck_assert(!dq_dead_page_unreadable(&page, 4));             /* out of range */
    dq_dead_page_free(&page);

    dq_job_info info;
    show("nil-error", &info);
    ck_assert_int_eq(info.state, DQ_STATE_DEAD);
    ck_assert_str_eq(info.job.last_error, "");
    ck_assert_int_eq(info.state_ms, 2);
    dq_job_info_free(&info);
    show("nil-type", &info);
    ck_assert_int_eq(info.state, DQ_STATE_UNREADABLE);
    ck_assert_int_eq(info.job.attempt, 2);
    ck_assert_str_eq(info.job.payload, "x");
    ck_assert_str_eq(info.job.last_error, "unreadable record: type is not a string (in dead)");
    dq_job_info_free(&info);

    /* The command line shows the same, plain and as JSON. */
    assert_prints(cli("dlq", "list", NULL, NULL, NULL),
                  "unreadable record: payload is not a string");
    assert_prints(cli("dlq", "list", "--json", NULL, NULL),
                  "\"payload_size\":0,\"unreadable\":true}");
    assert_prints(cli("dlq", "list", "--json", NULL, NULL),
                  "\"payload_size\":5,\"unreadable\":false}");
    assert_prints(cli("show", "nil-type", NULL, NULL, NULL), "state: unreadable");
    assert_prints(cli("show", "nil-type", "--json", NULL, NULL),
                  "\"unreadable\":true,\"created_ms\":null");
}
END_TEST

/* ---- every kind of bad record next to healthy jobs ----------------------- */

/* One planted bad record: its id and the Lua expression of its text. */
struct bad_kind {
    const char *id;
    const char *raw;
};

static const struct bad_kind bad_kinds[] = {
    { "bad-type", REC("7", "'x'", "0", "0", "0", "''") },
    { "bad-payload", REC("'email'", "{1}", "0", "0", "0", "''") },
    { "bad-max-str", REC("'email'", "'x'", "'3'", "0", "0", "''") },
    { "bad-max-neg", REC("'email'", "'x'", "-1", "0", "0", "''") },
    { "bad-max-frac", REC("'email'", "'x'", "1.5", "0", "0", "''") },
    { "bad-created", REC("'email'", "'x'", "0", "'now'", "0", "''") },
    { "bad-offset", REC("'email'", "'x'", "0", "0", "0.5", "''") },
    { "bad-error", REC("'email'", "'x'", "0", "0", "0", "false") },
    { "truncated", "string.sub(" GOOD ", 1, -3)" },
    { "trailing", GOOD " .. cmsgpack.pack(1)" },
    { "map-body", "'3:0:' .. cmsgpack.pack({type = 'email', payload = 'x'})" },
    { "short-array", "'3:0:' .. cmsgpack.pack({'email', 'x', 0, 0, 0})" },
    { "wrong-head", "'2:0:' .. cmsgpack.pack({'email', 'x', 0, 0, 0, ''})" },
    { "no-head", "'garbage'" },
};
#define NBAD (sizeof bad_kinds / sizeof bad_kinds[0])
#define NGOOD 8

/* Claim whatever is due: healthy jobs are counted per id in `claims`;
 * an unreadable one (type "") is failed dead at once, as the daemon does,
 * or, every other one, left for its lease to expire and the reaper. */
static void claim_round(int claims[NGOOD], dq_claim_result *res)
{
    ck_assert_msg(dq_claim(cl, Q, 100, 1, res) == DQ_OK, "claim: %s", dq_errmsg(cl));
    static int odd;
    for (size_t i = 0; i < res->n; i++) {
        dq_job *j = &res->jobs[i];
        if (j->type[0]) {
            ck_assert_msg(strncmp(j->id, "good-", 5) == 0, "%s was claimed as type %s",
                          j->id, j->type);
            int k = atoi(j->id + strlen("good-"));
            ck_assert_int_lt(k, NGOOD);
            claims[k]++;
        } else if (odd++ % 2 == 0) {
            ck_assert_str_eq(j->last_error, "unreadable record");
            ck_assert_int_eq(dq_fail(cl, Q, j->id, j->fence, j->last_error, DQ_FAIL_DEAD,
                                     -1, NULL, NULL), DQ_OK);
        }
    }
}

START_TEST(bad_records_never_cost_healthy_jobs_anything)
{
    char id[32];
    for (int k = 0; k < NGOOD; k++) {
        snprintf(id, sizeof id, "good-%d", k);
        enq(id, 5);
    }
    for (size_t b = 0; b < NBAD; b++) {
        plant(bad_kinds[b].id, bad_kinds[b].raw);
        ck_assert_int_eq(num("ZADD %s 0 %s", K("delayed"), bad_kinds[b].id), 1);
    }
    ck_assert_int_eq(num("ZADD %s 0 ghost", K("delayed")), 1);          /* no record */
    ck_assert_int_eq(num("SET %s oops", K("jobs:7")), 0);             /* not a hash */
    ck_assert_int_eq(num("ZADD %s 0 700 0 701", K("delayed")), 2);

    /* Round 1: everything is claimed once; the healthy jobs are acked (0,
     * 1), failed for a retry (2, 3), failed dead (4) or left to expire
     * (5, 6, 7), next to the bad ones left to expire. */
    int claims[NGOOD] = { 0 };
    dq_claim_result res;
    claim_round(claims, &res);
    dq_retry_policy p;
    dq_retry_policy_init(&p);
    p.base_ms = p.cap_ms = 1;
    for (size_t i = 0; i < res.n; i++) {
        dq_job *j = &res.jobs[i];
        if (!j->type[0])
            continue;
        int k = atoi(j->id + 5);
        if (k <= 1)
            ck_assert_int_eq(dq_ack(cl, Q, j->id, j->fence), DQ_OK);
        else if (k <= 4)
            ck_assert_int_eq(dq_fail(cl, Q, j->id, j->fence, "try again",
                                     k == 4 ? DQ_FAIL_DEAD : DQ_FAIL_RETRY, -1, &p, NULL),
                             DQ_OK);
    }
    dq_claim_result_free(&res);
    for (int k = 0; k < NGOOD; k++)
        ck_assert_msg(claims[k] == 1, "good-%d claimed %d times", k, claims[k]);
    tu_sleep_ms(20);
    dq_reap_result rr;
    ck_assert_msg(dq_reap(cl, Q, 100, &p, &rr) == DQ_OK, "reap: %s", dq_errmsg(cl));
    ck_assert_uint_eq(rr.retried, 3);                            /* 5, 6, 7 */

    /* The dead healthy job is requeued; then everything healthy left runs
     * once more and is acked. */
    ck_assert_int_eq(dq_requeue(cl, Q, "good-4"), DQ_OK);
    tu_sleep_ms(5);
    claim_round(claims, &res);
    ck_assert_uint_eq(res.n, 6);                                 /* 2..7 */
    ck_assert_int_eq(dq_ack_many(cl, Q, res.jobs, res.n, NULL), DQ_OK);
    dq_claim_result_free(&res);
    for (int k = 0; k < NGOOD; k++)
        ck_assert_msg(claims[k] == (k <= 1 ? 1 : 2), "good-%d claimed %d times", k,
                      claims[k]);
    ck_assert_int_eq(num("ZCARD %s", K("delayed")), 0);
    ck_assert_int_eq(num("ZCARD %s", K("processing")), 1);        /* the pin */

    /* Every bad record is dead, visible as unreadable; the ghost is gone
     * and counted. */
    for (size_t b = 0; b < NBAD; b++)
        assert_dead_unreadable(bad_kinds[b].id, -1);
    ck_assert_int_eq(num("ZCARD %s", K("dead")), NBAD + 2);
    ck_assert_int_eq(num("HGET %s orphans_removed", K("meta")), 1);
    dq_dead_page page;
    ck_assert_int_eq(dq_dead_list(cl, Q, 0, 100, &page), DQ_OK);
    ck_assert_uint_eq(page.n, NBAD + 2);
    for (size_t i = 0; i < page.n; i++)
        ck_assert_msg(dq_dead_page_unreadable(&page, i), "%s", page.entries[i].id);
    dq_dead_page_free(&page);
    /* A requeue leaves them dead; a purge takes them all. */
    int64_t moved = -1, purged = 0;
    ck_assert_int_eq(dq_requeue_all(cl, Q, &moved), DQ_OK);
    ck_assert_int_eq(moved, 0);
    ck_assert_int_eq(dq_purge_all(cl, Q, &purged), DQ_OK);
    ck_assert_int_eq(purged, NBAD + 2);
    ck_assert_int_eq(num("DEL %s", K("jobs:7")), 1);
    assert_queue_empty();
}
END_TEST

/* show reads a delayed job of normal priority on a short path of its own
 * and leaves every record that path does not plainly read to read_record:
 * each bad kind, delayed, is unreadable for the reason it has when dead;
 * records of the usual shape (retried, a nil error, a priority) show
 * their fields.  cancel takes a delayed job whose bucket is not a hash,
 * and a generated id passes over such a bucket. */
START_TEST(show_and_cancel_read_every_record_as_before)
{
    dq_job_info a, b;
    for (size_t k = 0; k < NBAD; k++) {
        const char *id = bad_kinds[k].id;
        plant(id, bad_kinds[k].raw);
        ck_assert_int_eq(num("ZADD %s 1000 %s", K("delayed"), id), 1);
        show(id, &a);
        ck_assert_int_eq(num("ZREM %s %s", K("delayed"), id), 1);
        ck_assert_int_eq(num("ZADD %s 1000 %s", K("dead"), id), 1);
        show(id, &b);
        ck_assert_msg(a.state == DQ_STATE_UNREADABLE, "%s: %s", id, dq_state_str(a.state));
        char *in = strstr(a.job.last_error, " (in delayed)");
        ck_assert_msg(in != NULL, "%s: %s", id, a.job.last_error);
        size_t why = (size_t)(in - a.job.last_error);
        ck_assert_msg(strncmp(a.job.last_error, b.job.last_error, why) == 0
                      && strcmp(b.job.last_error + why, " (in dead)") == 0,
                      "%s: '%s' delayed, '%s' dead", id, a.job.last_error, b.job.last_error);
        dq_job_info_free(&a);
        dq_job_info_free(&b);
    }

    plant("retried", "'3:2:' .. cmsgpack.pack({'email', 'hello', 5, 1000, 500, 'boom'})");
    plant("nil-error", "'3:0:\\150' .. string.sub(cmsgpack.pack({'email', 'x', 0, 0, 0}), 2)"
                       " .. '\\192'");
    plant("urgent", "'3:0:' .. cmsgpack.pack({'email', 'x', 0, 0, 0, '', 0})");
    ck_assert_int_eq(num("ZADD %s 1500 retried 7 nil-error", K("delayed")), 2);
    ck_assert_int_eq(num("ZADD %s:0 9 urgent", K("delayed")), 1);
    ck_assert_int_eq(num("HSET %s levels 0", K("meta")), 1);   /* level 0 in use */
    show("retried", &a);
    ck_assert_int_eq(a.state, DQ_STATE_DELAYED);
    ck_assert_str_eq(a.job.type, "email");
    ck_assert_uint_eq(a.job.payload_len, 5);
    ck_assert_int_eq(a.job.attempt, 2);
    ck_assert_int_eq(a.job.max_attempts, 5);
    ck_assert_int_eq(a.job.created_ms, 1000);
    ck_assert_int_eq(a.job.due_ms, 1500);
    ck_assert_int_eq(a.state_ms, 1500);
    ck_assert_str_eq(a.job.last_error, "boom");
    ck_assert_int_eq(a.job.priority, 5);
    dq_job_info_free(&a);
    show("nil-error", &a);
    ck_assert_int_eq(a.state, DQ_STATE_DELAYED);
    ck_assert_str_eq(a.job.last_error, "");
    dq_job_info_free(&a);
    show("urgent", &a);
    ck_assert_int_eq(a.state, DQ_STATE_DELAYED);
    ck_assert_int_eq(a.job.priority, 0);
    ck_assert_int_eq(a.state_ms, 9);
    dq_job_info_free(&a);

    /* Generated ids 1..3 are in bucket jobs:, then 100..199 would be in
     * jobs:1, a string: the next id written is 200. */
    dq_enqueue_req r = req_make(NULL, 60000, 0);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(dq_enqueue(cl, &r, NULL), DQ_OK);
    ck_assert_int_eq(num("HSET %s seq 99", K("meta")), 0);
    ck_assert_int_eq(num("SET %s oops", K("jobs:1")), 0);
    ck_assert_int_eq(num("ZADD %s 2000 150", K("delayed")), 1);
    dq_enqueued out;
    ck_assert_int_eq(dq_enqueue(cl, &r, &out), DQ_OK);
    ck_assert_str_eq(out.id, "200");
    /* cancel: a delayed job in that bucket goes; the string stays. */
    ck_assert_msg(dq_cancel(cl, Q, "150") == DQ_OK, "cancel: %s", dq_errmsg(cl));
    ck_assert_int_eq(num("ZSCORE %s 150", K("delayed")), -1);
    ck_assert_int_eq(num("STRLEN %s", K("jobs:1")), 4);
}
END_TEST

/* ---- other scripts' arguments ------------------------------------------- */

/* A script run with bad arguments, and the name its refusal must give. */
struct refusal {
    const char *script;
    const char *phrase;
    int argc;
    const char *args[12];
};

static const struct refusal refusals[] = {
    { "claim", "lease_ms", 2, { "10", "0" } },
    { "claim", "max", 2, { "nan", "1000" } },
    { "ack", "pairs", 1, { "a" } },
    { "ack", "fence 1", 2, { "a", "x1" } },
    { "reap", "type", 8, { "", "10", "1000", "60000", "0.2", "7", "5", "email" } },
    { "reap", "max_attempts of email", 9,
      { "", "10", "1000", "60000", "0.2", "7", "5", "email", "'3'" } },
    { "reap", "jitter", 7, { "", "10", "1000", "60000", "nan", "7", "5" } },
    { "dead_list", "count", 2, { "0", "0" } },
    { "purge", "batch", 2, { "", "-1" } },
    { "cancel", "id", 1, { "" } },
    { "requeue", "batch", 3, { "", "", "0" } },
    { "release", "pairs", 2, { "", "a" } },
    { "stats", "argument 1", 1, { "x" } },
    { "show", "form \"full\" is not 'raw'", 2, { "a", "full" } },
};

START_TEST(scripts_name_the_bad_argument)
{
    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++) {
        const struct refusal *f = &refusals[i];
        assert_refused(script(f->script, f->argc, f->args), f->script, f->phrase);
    }
    assert_queue_empty();
}
END_TEST

/* ---- the suite ---------------------------------------------------------- */

static void server_up(void)
{
    fixture_redis_start(&fx);
}

static void server_down(void)
{
    fixture_redis_stop(&fx);
}

static void test_setup(void)
{
    fixture_redis_flush(&fx);
    cl = fixture_client(&fx);
    rc = fixture_redis_connect(&fx);
}

static void test_teardown(void)
{
    redisFree(rc);
    rc = NULL;
    dq_close(cl);
    cl = NULL;
}

static Suite *records_suite(void)
{
    Suite *s = suite_create("records");
    TCase *tc = fixture_tcase(s, "records", 20, server_up, server_down, test_setup,
                              test_teardown);
    tcase_add_test(tc, reap_buries_a_bad_record_and_retries_its_neighbours);
    tcase_add_test(tc, bad_records_never_cost_healthy_jobs_anything);
    tcase_add_test(tc, show_and_cancel_read_every_record_as_before);
    tcase_add_test(tc, claim_removes_ids_without_a_record_and_counts_them);
    tcase_add_test(tc, a_bucket_of_the_wrong_type_does_not_stop_claims);
    tcase_add_test(tc, dead_list_and_show_survive_odd_records);

    tc = fixture_tcase(s, "arguments", 30, server_up, server_down, test_setup,
                       test_teardown);
    tcase_add_test(tc, fail_checks_its_arguments_before_writing);
    tcase_add_test(tc, enqueue_refuses_bad_input_and_writes_nothing);
    tcase_add_test(tc, enqueue_many_refuses_wrapped_times_before_writing);
    tcase_add_test(tc, enqueue_many_refuses_a_bin_payload_or_type);
    tcase_add_test(tc, enqueue_many_common_and_other_calls_write_the_same_records);
    tcase_add_test(tc, enqueue_many_refuses_more_than_1000_jobs_a_call);
    tcase_add_test(tc, enqueue_many_common_call_wakes_for_a_sooner_job);
    tcase_add_test(tc, a_removed_schedule_takes_back_only_jobs_waiting_for_their_ticks);
    tcase_add_test(tc, library_refuses_times_beyond_100_years);
    tcase_add_test(tc, cli_refuses_times_beyond_100_years);
    tcase_add_test(tc, asked_retry_delay_is_capped);
    tcase_add_test(tc, scripts_name_the_bad_argument);
    tcase_add_test(tc, enqueue_common_call_packs_every_width_as_cmsgpack_does);
    tcase_add_test(tc, a_debounced_add_is_the_same_on_both_paths);
    tcase_add_test(tc, a_debounced_add_packs_every_width_as_cmsgpack_does);
    return s;
}

int main(void)
{
    return fixture_run_suite(records_suite());
}
