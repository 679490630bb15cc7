/*
 * fsck's arguments and the reading of its replies, page after page, into
 * one result (proto.h).
 */
#include "lib/proto.h"
#include "lib/proto_int.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void proto_fsck_cmd(struct cmd *c, const struct queue_keys *k, const char *cursor,
                    int count, bool repair)
{
    cmd_eval(c, DQ_SCRIPT_FSCK, k);
    cmd_push_str(c, cursor);
    cmd_push_i64(c, count < 1 ? DQ_FSCK_COUNT : (count > 1000 ? 1000 : count));
    cmd_push_str(c, repair ? "repair" : "check");
}

const char *dq_fsck_kind_str(dq_fsck_kind k)
{
    switch (k) {
    case DQ_FSCK_RECORD: return "record";
    case DQ_FSCK_MEMBER: return "member";
    case DQ_FSCK_LEASE: return "lease";
    case DQ_FSCK_WRONG_TYPE: return "type";
    }
    return "unknown";
}

static int fsck_kind_from(const redisReply *r, size_t i, dq_fsck_kind *k)
{
    static const dq_fsck_kind kinds[] = { DQ_FSCK_RECORD, DQ_FSCK_MEMBER, DQ_FSCK_LEASE,
                                          DQ_FSCK_WRONG_TYPE };
    for (size_t j = 0; j < sizeof kinds / sizeof kinds[0]; j++)
        if (elem_is(r, i, dq_fsck_kind_str(kinds[j]))) {
            *k = kinds[j];
            return 0;
        }
    return -1;
}

/* Is the wrong-type key of element i among acc's findings already? */
static int fsck_seen_key(const dq_fsck_result *acc, const redisReply *r, size_t i)
{
    const redisReply *e = r->element[i];
    for (size_t j = 0; j < acc->n; j++)
        if (acc->findings[j].kind == DQ_FSCK_WRONG_TYPE
            && strlen(acc->findings[j].key) == e->len
            && memcmp(acc->findings[j].key, e->str, e->len) == 0)
            return 1;
    return 0;
}

/* Append the finding of the four elements at `at` (room is there). */
static dq_status fsck_add(dq_fsck_result *acc, const redisReply *r, size_t at,
                          dq_fsck_kind kind, bool repair)
{
    dq_fsck_finding *f = &acc->findings[acc->n];
    f->kind = kind;
    f->repaired = repair && kind != DQ_FSCK_WRONG_TYPE;
    f->key = elem_dup(r, at + 1, NULL);
    f->id = elem_dup(r, at + 2, NULL);
    f->expected = elem_dup(r, at + 3, NULL);
    acc->n++;
    return f->key && f->id && f->expected ? DQ_OK : DQ_ERR_NOMEM;
}

/* Add a step's count to a pass's total: a count is never negative, and a
 * malformed reply's huge one saturates instead of overflowing (the
 * replies fuzzer found 1 + INT64_MAX over two steps). */
static void add_count(int64_t *total, int64_t v)
{
    if (v < 0)
        v = 0;
    *total = v > INT64_MAX - *total ? INT64_MAX : *total + v;
}

dq_status proto_fsck_reply(const redisReply *r, bool repair, dq_fsck_result *acc,
                           char *cursor, size_t cursorlen)
{
    if (!is_array(r, 8) || (r->elements - 8) % 4 != 0
        || r->element[0]->type != REDIS_REPLY_STRING)
        return DQ_ERR_REDIS;
    for (size_t i = 8; i < r->elements; i++)
        if (r->element[i]->type != REDIS_REPLY_STRING)
            return DQ_ERR_REDIS;
    snprintf(cursor, cursorlen, "%s", r->element[0]->str);
    acc->calls++;
    add_count(&acc->scanned, elem_int(r, 1));
    add_count(&acc->records, elem_int(r, 2));
    add_count(&acc->members, elem_int(r, 3));
    add_count(&acc->leases, elem_int(r, 4));
    add_count(&acc->repaired, elem_int(r, 6));
    acc->claim_dropped = elem_int(r, 7);
    for (size_t at = 8; at < r->elements; at += 4) {
        dq_fsck_kind kind;
        if (fsck_kind_from(r, at, &kind) < 0)
            return DQ_ERR_REDIS;
        if (kind == DQ_FSCK_WRONG_TYPE) {
            /* SCAN may return a key twice in one pass: count it once. */
            if (fsck_seen_key(acc, r, at + 1))
                continue;
            acc->wrong_types++;
        } else if (acc->n >= DQ_FSCK_FINDINGS_MAX) {
            continue;
        }
        /* The capacity is the next power of two: grow when n reaches it. */
        if ((acc->n & (acc->n - 1)) == 0) {
            size_t cap = acc->n ? 2 * acc->n : 1;
            dq_fsck_finding *f = realloc(acc->findings, cap * sizeof *f);
            if (!f)
                return DQ_ERR_NOMEM;
            acc->findings = f;
        }
        dq_status st = fsck_add(acc, r, at, kind, repair);
        if (st != DQ_OK)
            return st;
    }
    return DQ_OK;
}

void dq_fsck_result_free(dq_fsck_result *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++) {
        free(r->findings[i].key);
        free(r->findings[i].id);
        free(r->findings[i].expected);
    }
    free(r->findings);
    memset(r, 0, sizeof *r);
}
