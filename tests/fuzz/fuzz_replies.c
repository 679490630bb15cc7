/*
 * Fuzz target: the script-reply parsers (src/lib/proto.c).  The input is
 * what a Redis server sends (RESP), turned into redisReply trees by
 * hiredis's own reader exactly as a connection would; each reply is then
 * given to every reader of a script's reply.  A reply of the wrong shape
 * (a server with other scripts, a corrupt record) must be refused or read,
 * never crash or leak; what the readers accept must be complete (every
 * string of an accepted job present, NUL-terminated where promised).
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
    if (st == DQ_OK) {
        FUZZ_ASSERT(out.n == 0 || out.jobs);
        for (size_t i = 0; i < out.n; i++)
            check_job(&out.jobs[i], 1);
    }
    dq_claim_result_free(&out);
}

static void show(const redisReply *r)
{
    dq_job_info out;
    dq_status st = proto_show_reply(r, &out);
    if (st == DQ_OK)
        check_job(&out.job, 0);
    dq_job_info_free(&out);
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
    if (st == DQ_OK)
        for (size_t i = 0; i < out.n; i++) {
            FUZZ_ASSERT(out.entries[i].id && out.entries[i].type
                        && out.entries[i].last_error);
            (void)dq_dead_page_unreadable(&out, i);
        }
    FUZZ_ASSERT(!dq_dead_page_unreadable(&out, out.n));
    dq_dead_page_free(&out);
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
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
        freeReplyObject(reply);
    }
done:
    redisReaderFree(reader);
    return 0;
}
