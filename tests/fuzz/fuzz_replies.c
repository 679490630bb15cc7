/*
 * Fuzz target: the script-reply parsers (src/lib/proto_*.c).  The input is
 * what a Redis server sends (RESP), turned into redisReply trees by
 * hiredis's own reader exactly as a connection would; each reply is then
 * given to every reader of a script's reply: claim, show (both forms), stats and
 * dead_list (with the record bodies a claim returns), fsck (whose replies
 * accumulate), and the readers of counts and statuses.  A reply of the
 * wrong shape (a server with other scripts, a corrupt record) must be
 * refused or read, never crash or leak, and never be taken for running
 * out of memory (an input of a few kilobytes cannot need much); what the
 * readers accept must be complete (every string of an accepted job
 * present, NUL-terminated where promised).
 */
#include <hiredis/hiredis.h>
#include <string.h>

#include "fuzz.h"
#include "lib/proto.h"

/* Readers of a job's strings: present, and the payload NUL-terminated. */
static void check_job(const dq_job *j, int with_id)
{
    FUZZ_ASSERT(!with_id || j->id);
    FUZZ_ASSERT(j->type && j->payload && j->last_error);
    FUZZ_ASSERT(((const char *)j->payload)[j->payload_len] == '\0');
}

static void claim(const redisReply *r)
{
    dq_claim_result out;
    dq_status st = proto_claim_reply(r, &out);
    FUZZ_ASSERT(st != DQ_ERR_NOMEM);
    if (st == DQ_OK) {
        FUZZ_ASSERT(out.n == 0 || out.jobs);
        for (size_t i = 0; i < out.n; i++)
            check_job(&out.jobs[i], 1);
    }
    dq_claim_result_free(&out);
}

/* show's reply, as a caller of the full form reads it and as a caller of
 * the form 'raw' does (a stored record in it, read by the library). */
static void show(const redisReply *r)
{
    for (int raw = 0; raw < 2; raw++) {
        dq_job_info out;
        bool again = false;
        dq_status st = proto_show_reply(r, &out, raw ? &again : NULL);
        FUZZ_ASSERT(st != DQ_ERR_NOMEM);
        if (st == DQ_OK && !again)
            check_job(&out.job, 0);
        dq_job_info_free(&out);
    }
}

static void stats(const redisReply *r)
{
    dq_stats out;
    (void)proto_stats_reply(r, &out);
}

static void dead_list(const redisReply *r)
{
    dq_dead_page out;
    dq_status st = proto_dead_list_reply(r, &out);
    FUZZ_ASSERT(st != DQ_ERR_NOMEM);
    if (st == DQ_OK)
        for (size_t i = 0; i < out.n; i++) {
            FUZZ_ASSERT(out.entries[i].id && out.entries[i].type
                        && out.entries[i].last_error);
            (void)dq_dead_page_unreadable(&out, i);
        }
    FUZZ_ASSERT(!dq_dead_page_unreadable(&out, out.n));
    dq_dead_page_free(&out);
}

/* browse's reply in each of its modes: every entry it accepts has its
 * strings. */
static void browse(const redisReply *r)
{
    static const enum proto_browse_mode modes[] = {
        PROTO_BROWSE_RECORDS, PROTO_BROWSE_IDS, PROTO_BROWSE_THESE
    };
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        int64_t now, total, matched;
        size_t n;
        if (proto_browse_reply(r, modes[m], &now, &total, &matched, &n) != DQ_OK)
            continue;
        for (size_t i = 0; i < n; i++) {
            struct proto_browse_item it;
            proto_browse_item(r, modes[m], i, &it);
            FUZZ_ASSERT(it.id && it.type && it.last_error && it.unreadable);
        }
    }
}

/* hiredis 0.14 allocates an array's element table as soon as it reads the
 * count: a count in the millions only measures the allocator, so such
 * inputs are skipped (the parsers see every shape with small counts). */
static int has_huge_array(const uint8_t *data, size_t size)
{
    for (size_t i = 0; i < size; i++) {
        if (data[i] != '*')
            continue;
        size_t digits = 0;
        while (i + 1 + digits < size && data[i + 1 + digits] >= '0'
               && data[i + 1 + digits] <= '9')
            digits++;
        if (digits > 5)
            return 1;
    }
    return 0;
}

/* fsck's replies accumulate: every reply of the input goes to one result,
 * as the calls of one pass do. */
static void fsck(const redisReply *r, dq_fsck_result *acc)
{
    char cursor[64];
    size_t before = acc->n;
    dq_status st = proto_fsck_reply(r, false, acc, cursor, sizeof cursor);
    FUZZ_ASSERT(st != DQ_ERR_NOMEM);
    if (st == DQ_OK)
        FUZZ_ASSERT(strlen(cursor) < sizeof cursor);
    FUZZ_ASSERT(acc->n >= before);
    for (size_t i = before; i < acc->n; i++)
        FUZZ_ASSERT(acc->findings[i].key && acc->findings[i].id
                    && acc->findings[i].expected);
}

/* The other scripts' replies: counts and statuses only. */
static void the_others(const redisReply *r)
{
    dq_enqueued enq;
    dq_fail_result fail;
    dq_reap_result reap;
    int64_t now, moved, remaining;
    bool flags[16];
    (void)proto_enqueue_reply(r, &enq);
    (void)proto_fail_reply(r, &fail);
    (void)proto_reap_reply(r, &reap);
    (void)proto_cancel_reply(r);
    (void)proto_run_now_reply(r);
    (void)proto_stats_oldest_due(r);
    (void)proto_count_reply(r, &moved, &remaining);
    if (r->type == REDIS_REPLY_ARRAY && r->elements <= 16) {
        (void)proto_ack_reply(r, r->elements, flags);
        if (r->elements > 0)
            (void)proto_renew_reply(r, r->elements - 1, &now, flags);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dq_fsck_result acc = { 0 };
    if (has_huge_array(data, size))
        return 0;
    redisReader *reader = redisReaderCreate();
    if (!reader)
        return 0;
    if (redisReaderFeed(reader, (const char *)data, size) != REDIS_OK)
        goto done;
    for (;;) {
        void *reply = NULL;
        if (redisReaderGetReply(reader, &reply) != REDIS_OK || !reply)
            break;
        claim(reply);
        show(reply);
        stats(reply);
        dead_list(reply);
        browse(reply);
        fsck(reply, &acc);
        the_others(reply);
        freeReplyObject(reply);
    }
done:
    dq_fsck_result_free(&acc);
    redisReaderFree(reader);
    return 0;
}
