/* The browse script's arguments and reply (proto.h): the dashboard's
 * pages of a queue's lists. */
#include <string.h>

#include "lib/proto.h"

#define BROWSE_HEAD 3       /* now_ms, total, matched */
#define BROWSE_RECORD 10    /* elements per entry with its record */
#define BROWSE_ID 2         /* elements per entry in PROTO_BROWSE_IDS mode */

static const char *mode_word(enum proto_browse_mode mode)
{
    switch (mode) {
    case PROTO_BROWSE_IDS: return "ids";
    case PROTO_BROWSE_THESE: return "these";
    case PROTO_BROWSE_RECORDS: break;
    }
    return "records";
}

void proto_browse_cmd(struct cmd *c, const struct queue_keys *k, const char *which,
                      int64_t offset, int count, const char *type, int examine,
                      enum proto_browse_mode mode, const char *const *ids, size_t nids)
{
    cmd_eval(c, DQ_SCRIPT_BROWSE, k);
    cmd_push_str(c, which);
    cmd_push_i64(c, offset);
    cmd_push_i64(c, count);
    cmd_push_str(c, type ? type : "");
    cmd_push_i64(c, examine);
    cmd_push_str(c, mode_word(mode));
    for (size_t i = 0; mode == PROTO_BROWSE_THESE && i < nids; i++)
        cmd_push_str(c, ids[i]);
}

static size_t entry_elems(enum proto_browse_mode mode)
{
    return mode == PROTO_BROWSE_IDS ? BROWSE_ID : BROWSE_RECORD;
}

/* Whether element i is a string (ids, types, errors are; a script of
 * another version may have put something else there). */
static int is_str(const redisReply *r, size_t i)
{
    return r->element[i]->type == REDIS_REPLY_STRING;
}

dq_status proto_browse_reply(const redisReply *r, enum proto_browse_mode mode,
                             int64_t *now_ms, int64_t *total, int64_t *matched,
                             size_t *n)
{
    size_t per = entry_elems(mode);
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < BROWSE_HEAD
        || (r->elements - BROWSE_HEAD) % per != 0)
        return DQ_ERR_REDIS;
    *n = (r->elements - BROWSE_HEAD) / per;
    for (size_t i = 0; i < *n; i++) {
        size_t at = BROWSE_HEAD + per * i;
        if (!is_str(r, at) || (per == BROWSE_RECORD && (!is_str(r, at + 2)
                                                        || !is_str(r, at + 8)
                                                        || !is_str(r, at + 9))))
            return DQ_ERR_REDIS;
    }
    *now_ms = proto_elem_int(r, 0);
    *total = proto_elem_int(r, 1);
    *matched = proto_elem_int(r, 2);
    return DQ_OK;
}

void proto_browse_item(const redisReply *r, enum proto_browse_mode mode, size_t i,
                       struct proto_browse_item *out)
{
    size_t at = BROWSE_HEAD + entry_elems(mode) * i;
    memset(out, 0, sizeof *out);
    out->id = r->element[at]->str;
    out->at_ms = proto_elem_int(r, at + 1);
    out->type = out->last_error = out->unreadable = "";
    if (mode == PROTO_BROWSE_IDS)
        return;
    out->type = r->element[at + 2]->str;
    out->attempts = (int)proto_elem_int(r, at + 3);
    out->max_attempts = (int)proto_elem_int(r, at + 4);
    out->priority = (int)proto_elem_int(r, at + 5);
    out->created_ms = proto_elem_int(r, at + 6);
    out->payload_len = (size_t)proto_elem_int(r, at + 7);
    out->last_error = r->element[at + 8]->str;
    out->unreadable = r->element[at + 9]->str;
}
