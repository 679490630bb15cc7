/*
 * The operator's scripts: cancel, run_now, stats, pause, resume,
 * pause_state, show and the dead letters (list, requeue, purge), their
 * arguments and their replies (proto.h).
 */
#include "lib/proto.h"
#include "lib/msgpack.h"
#include "lib/proto_int.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEAD_ENTRY_ELEMS 7  /* per job in dead_list's reply */

/* Fill a job from nine consecutive elements: id, type, payload, attempts,
 * max_attempts, due, created, fence, last_error.  Only show's reply is read
 * this way (a claim's has its own layout: proto_claim_reply). */
static dq_status read_job(const redisReply *r, size_t at, dq_job *j)
{
    j->id = elem_dup(r, at, NULL);
    j->type = elem_dup(r, at + 1, NULL);
    j->payload = elem_dup(r, at + 2, &j->payload_len);
    j->attempt = (int)elem_int(r, at + 3);
    j->max_attempts = (int)elem_int(r, at + 4);
    j->due_ms = elem_int(r, at + 5);
    j->created_ms = elem_int(r, at + 6);
    j->fence = elem_int(r, at + 7);
    j->last_error = elem_dup(r, at + 8, NULL);
    if (!j->id || !j->type || !j->payload || !j->last_error)
        return DQ_ERR_NOMEM;
    return DQ_OK;
}

void proto_cancel_cmd(struct cmd *c, const struct queue_keys *k, const char *id)
{
    cmd_eval(c, DQ_SCRIPT_CANCEL, k);
    cmd_push_str(c, id);
}

/* cancel's and run_now's replies: `done` (the script's word for success)
 * or why not. */
static dq_status one_job_reply(const redisReply *r, const char *done)
{
    if (!r || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS))
        return DQ_ERR_REDIS;
    if (strcmp(r->str, done) == 0)
        return DQ_OK;
    if (strcmp(r->str, "running") == 0)
        return DQ_ERR_RUNNING;
    if (strcmp(r->str, "dead") == 0)
        return DQ_ERR_DEAD;
    if (strcmp(r->str, "notfound") == 0)
        return DQ_ERR_NOTFOUND;
    return DQ_ERR_REDIS;
}

dq_status proto_cancel_reply(const redisReply *r)
{
    return one_job_reply(r, "cancelled");
}

void proto_run_now_cmd(struct cmd *c, const struct queue_keys *k, const char *id)
{
    cmd_eval(c, DQ_SCRIPT_RUN_NOW, k);
    cmd_push_str(c, k->wake);
    cmd_push_str(c, id);
}

dq_status proto_run_now_reply(const redisReply *r)
{
    return one_job_reply(r, "ran");
}

dq_status proto_stats_reply(const redisReply *r, dq_stats *out)
{
    if (!is_array(r, 7))
        return DQ_ERR_REDIS;
    out->now_ms = elem_int(r, 0);
    out->delayed = elem_int(r, 1);
    out->due = elem_int(r, 2);
    out->processing = elem_int(r, 3);
    out->dead = elem_int(r, 4);
    out->next_due_in_ms = elem_int(r, 5);
    out->expired = elem_int(r, 6);
    /* Then when the queue was paused (proto_stats_paused), and the due
     * jobs per priority level (a script older than priorities has none:
     * all due jobs are normal then). */
    memset(out->due_by_priority, 0, sizeof out->due_by_priority);
    if (is_array(r, 8 + DQ_PRIORITY_LEVELS))
        for (int p = 0; p < DQ_PRIORITY_LEVELS; p++)
            out->due_by_priority[p] = elem_int(r, 8 + (size_t)p);
    else
        out->due_by_priority[DQ_PRIORITY_NORMAL_LEVEL] = out->due;
    out->jobs_expired = is_array(r, 10 + DQ_PRIORITY_LEVELS)
                        ? elem_int(r, 9 + DQ_PRIORITY_LEVELS) : 0;
    out->jobs_cancelled = is_array(r, 11 + DQ_PRIORITY_LEVELS)
                          ? elem_int(r, 10 + DQ_PRIORITY_LEVELS) : 0;
    return DQ_OK;
}

void proto_stats_add(dq_stats *sum, const dq_stats *one)
{
    sum->delayed += one->delayed;
    sum->due += one->due;
    sum->processing += one->processing;
    sum->expired += one->expired;
    sum->dead += one->dead;
    sum->jobs_expired += one->jobs_expired;
    sum->jobs_cancelled += one->jobs_cancelled;
    for (int p = 0; p < DQ_PRIORITY_LEVELS; p++)
        sum->due_by_priority[p] += one->due_by_priority[p];
    if (one->next_due_in_ms >= 0
        && (sum->next_due_in_ms < 0 || one->next_due_in_ms < sum->next_due_in_ms))
        sum->next_due_in_ms = one->next_due_in_ms;
    if (one->now_ms > sum->now_ms)
        sum->now_ms = one->now_ms;
}

int64_t proto_stats_paused(const redisReply *r)
{
    return is_array(r, 8) ? elem_int(r, 7) : -1;
}

int64_t proto_stats_oldest_due(const redisReply *r)
{
    return is_array(r, 9 + DQ_PRIORITY_LEVELS) ? elem_int(r, 8 + DQ_PRIORITY_LEVELS) : -1;
}

void proto_pause_cmd(struct cmd *c, const struct queue_keys *k, enum dq_script_id s)
{
    cmd_eval(c, s, k);
    if (s != DQ_SCRIPT_PAUSE_STATE)
        cmd_push_str(c, k->wake);
}

dq_status proto_pause_reply(const redisReply *r, int64_t *now_ms, int64_t *since_ms)
{
    if (!is_array(r, 2))
        return DQ_ERR_REDIS;
    *now_ms = elem_int(r, 0);
    *since_ms = elem_int(r, 1);
    return DQ_OK;
}

static dq_state state_from(const redisReply *r)
{
    if (elem_is(r, 0, "delayed"))
        return DQ_STATE_DELAYED;
    if (elem_is(r, 0, "processing"))
        return DQ_STATE_PROCESSING;
    if (elem_is(r, 0, "dead"))
        return DQ_STATE_DEAD;
    if (elem_is(r, 0, "orphan"))
        return DQ_STATE_ORPHAN;
    if (elem_is(r, 0, "done"))
        return DQ_STATE_DONE;
    if (elem_is(r, 0, "cancelled"))
        return DQ_STATE_CANCELLED;
    return DQ_STATE_UNREADABLE;
}

/* An unreadable record's last error: what is wrong with it and which set
 * holds it ("unreadable record: type is not a string (in dead)"), from
 * show's elements 11 and 12.  dq_job_info has no field for either (it
 * was given none when the record's reasons came: a field changes its size,
 * and with it the soname); the state DQ_STATE_UNREADABLE is the flag. */
static dq_status describe_unreadable(const redisReply *r, dq_job *j)
{
    const char *why = is_array(r, 12) && r->element[11]->type == REDIS_REPLY_STRING
                      ? r->element[11]->str : "unknown";
    const char *where = is_array(r, 13) && r->element[12]->type == REDIS_REPLY_STRING
                        ? r->element[12]->str : "unknown";
    size_t n = strlen(why) + strlen(where) + 40;
    char *e = malloc(n);
    if (!e)
        return DQ_ERR_NOMEM;
    snprintf(e, n, "unreadable record: %s (in %s)", why, where);
    free(j->last_error);
    j->last_error = e;
    return DQ_OK;
}

void proto_show_cmd(struct cmd *c, const struct queue_keys *k, const char *id, bool raw)
{
    cmd_eval(c, DQ_SCRIPT_SHOW, k);
    cmd_push_str(c, id);
    if (raw)
        cmd_push_str(c, "raw");
}

/* A stored record, "3:<attempts>:" and its MessagePack body, into j: 0,
 * or -1 when read_record (src/scripts/lib.lua) might not read it the same
 * way.  Stricter than a worker's reading of a claimed body (it refuses a
 * bin, and a number the scripts' doubles cannot hold), since its -1 only
 * costs a second call, which the script answers with its reasons. */
static int read_stored_record(const char *raw, size_t len, dq_job *j)
{
    size_t i = 2;
    int64_t attempts = 0;
    if (len < 4 || raw[0] != '3' || raw[1] != ':')
        return -1;
    for (; i < len && i < 12 && raw[i] >= '0' && raw[i] <= '9'; i++)
        attempts = attempts * 10 + (raw[i] - '0');
    /* The body's head in one byte, 0x96 or 0x97, as read_record wants it
     * (an array 16 of six is not a record body). */
    if (i == 2 || i + 1 >= len || raw[i] != ':' || attempts > INT_MAX
        || ((unsigned char)raw[i + 1] != 0x96 && (unsigned char)raw[i + 1] != 0x97))
        return -1;
    struct mp_reader mp;
    size_t n, tlen, plen, elen = 0;
    const char *type, *payload, *err = "";
    int64_t max, created, offset, prio = DQ_PRIORITY_NORMAL_LEVEL;
    mp_init(&mp, raw + i + 1, len - i - 1);
    if (mp_read_array(&mp, &n) < 0 || (n != 6 && n != 7)
        || mp_read_str(&mp, &type, &tlen) < 0 || mp_read_str(&mp, &payload, &plen) < 0
        || mp_read_int(&mp, &max) < 0 || max < 0 || max > INT_MAX
        || mp_read_int(&mp, &created) < 0 || !mp_exact(created)
        || mp_read_int(&mp, &offset) < 0 || !mp_exact(offset) || !mp_exact(created + offset)
        || (mp_read_nil(&mp) < 0 && mp_read_str(&mp, &err, &elen) < 0)
        || (n == 7 && (mp_read_int(&mp, &prio) < 0 || prio < 0 || prio > 9))
        || !mp_at_end(&mp))
        return -1;
    j->attempt = (int)attempts;
    j->max_attempts = (int)max;
    j->created_ms = created;
    j->due_ms = created + offset;
    j->priority = (int)prio;
    j->type = strndup(type, tlen);
    j->payload = malloc(plen + 1);
    if (j->payload) {
        memcpy(j->payload, payload, plen);
        ((char *)j->payload)[plen] = '\0';
    }
    j->payload_len = plen;
    j->last_error = strndup(err, elen);
    return 0;
}

/* show's reply to form 'raw' for a waiting job: {'record', the record as
 * stored, due_ms, now_ms}. */
static dq_status show_record(const redisReply *r, dq_job_info *out, bool *again)
{
    const redisReply *rec = r->element[1];
    if (rec->type != REDIS_REPLY_STRING || read_stored_record(rec->str, rec->len, &out->job) < 0) {
        proto_job_free(&out->job);
        *again = true;
        return DQ_OK;
    }
    if (!out->job.type || !out->job.payload || !out->job.last_error) {
        proto_job_free(&out->job);
        return DQ_ERR_NOMEM;
    }
    out->state = DQ_STATE_DELAYED;
    out->state_ms = elem_int(r, 2);
    out->now_ms = elem_int(r, 3);
    out->on_expire = DQ_EXPIRE_DEAD;
    return DQ_OK;
}

dq_status proto_show_reply(const redisReply *r, dq_job_info *out, bool *again)
{
    memset(out, 0, sizeof *out);
    if (again)
        *again = false;
    if (is_array(r, 1) && elem_is(r, 0, "notfound"))
        return DQ_ERR_NOTFOUND;
    if (is_array(r, 4) && r->elements == 4 && elem_is(r, 0, "record"))
        return again ? show_record(r, out, again) : DQ_ERR_REDIS;
    if (!is_array(r, 11))
        return DQ_ERR_REDIS;
    out->state = state_from(r);
    out->state_ms = elem_int(r, 9);
    out->now_ms = elem_int(r, 10);
    /* read_job's nine elements, with the state where it reads an id ... */
    dq_status st = read_job(r, 0, &out->job);
    free(out->job.id);
    out->job.id = NULL;
    /* ... and created_ms before due_ms, where it reads due first (show.lua,
     * protocol.md). */
    int64_t created = out->job.due_ms;
    out->job.due_ms = out->job.created_ms;
    out->job.created_ms = created;
    out->job.priority = is_array(r, 14) ? (int)elem_int(r, 13) : DQ_PRIORITY_NORMAL_LEVEL;
    if (is_array(r, 16)) {      /* a script older than expiries says nothing */
        out->expire_at_ms = elem_int(r, 14);
        out->on_expire = elem_is(r, 15, "drop") ? DQ_EXPIRE_DROP : DQ_EXPIRE_DEAD;
    }
    if (is_array(r, 18)) {      /* nor one older than dedupe windows */
        out->unique_ms = elem_int(r, 16);
        out->unique_until_ms = elem_int(r, 17);
    }
    if (st == DQ_OK && out->state == DQ_STATE_UNREADABLE)
        st = describe_unreadable(r, &out->job);
    return st;
}

void dq_job_info_free(dq_job_info *info)
{
    if (info)
        proto_job_free(&info->job);
}

/*
 * The flags saying which entries are unreadable live in the same block as
 * the entries, after the last one: the block is the library's (callers
 * read it and free it with dq_dead_page_free), so this adds nothing to
 * dq_dead_entry, whose size programs built against the old header index
 * the array with.
 */
static bool *dead_flags(const dq_dead_page *p)
{
    return (bool *)(p->entries + p->n);
}

bool dq_dead_page_unreadable(const dq_dead_page *p, size_t i)
{
    return p && p->entries && i < p->n && dead_flags(p)[i];
}

/* One dead entry from its seven elements; an unreadable record's last
 * error says why it does not read. */
static dq_status read_dead_entry(const redisReply *r, size_t at, dq_dead_entry *e,
                                 bool *unreadable)
{
    e->id = elem_dup(r, at, NULL);
    e->died_ms = elem_int(r, at + 1);
    e->type = elem_dup(r, at + 2, NULL);
    e->attempts = (int)elem_int(r, at + 3);
    e->payload_len = (size_t)elem_int(r, at + 5);
    const redisReply *why = r->element[at + 6];
    *unreadable = why->type == REDIS_REPLY_STRING && why->len > 0;
    if (*unreadable) {
        size_t n = why->len + 24;
        e->last_error = malloc(n);
        if (e->last_error)
            snprintf(e->last_error, n, "unreadable record: %s", why->str);
    } else {
        e->last_error = elem_dup(r, at + 4, NULL);
    }
    if (!e->id || !e->type || !e->last_error)
        return DQ_ERR_NOMEM;
    return DQ_OK;
}

void proto_dead_list_cmd(struct cmd *c, const struct queue_keys *k, int64_t offset,
                         int count)
{
    cmd_eval(c, DQ_SCRIPT_DEAD_LIST, k);
    cmd_push_i64(c, offset);
    cmd_push_i64(c, count);
}

dq_status proto_dead_list_reply(const redisReply *r, dq_dead_page *out)
{
    memset(out, 0, sizeof *out);
    if (!is_array(r, 1) || (r->elements - 1) % DEAD_ENTRY_ELEMS != 0)
        return DQ_ERR_REDIS;
    out->total = elem_int(r, 0);
    size_t n = (r->elements - 1) / DEAD_ENTRY_ELEMS;
    if (n == 0)
        return DQ_OK;
    out->entries = calloc(1, n * (sizeof *out->entries + sizeof(bool)));
    if (!out->entries)
        return DQ_ERR_NOMEM;
    out->n = n;
    for (size_t i = 0; i < n; i++)
        if (read_dead_entry(r, 1 + DEAD_ENTRY_ELEMS * i, &out->entries[i],
                            &dead_flags(out)[i]) != DQ_OK)
            return DQ_ERR_NOMEM;
    return DQ_OK;
}

dq_status proto_dead_page_alloc(dq_dead_page *p, size_t cap)
{
    memset(p, 0, sizeof *p);
    if (cap == 0)
        return DQ_OK;
    p->entries = calloc(1, cap * (sizeof *p->entries + sizeof(bool)));
    return p->entries ? DQ_OK : DQ_ERR_NOMEM;
}

void proto_dead_entry_move(dq_dead_page *to, size_t cap, dq_dead_page *from, size_t i)
{
    /* The flags follow the entries: those of `to` sit after its `cap`. */
    bool *to_flags = (bool *)(to->entries + cap);
    to->entries[to->n] = from->entries[i];
    to_flags[to->n] = dead_flags(from)[i];
    to->n++;
    memset(&from->entries[i], 0, sizeof from->entries[i]);
}

void proto_dead_page_seal(dq_dead_page *p, size_t cap)
{
    if (p->entries && p->n < cap)
        memmove(p->entries + p->n, p->entries + cap, p->n * sizeof(bool));
}

void dq_dead_page_free(dq_dead_page *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++) {
        free(p->entries[i].id);
        free(p->entries[i].type);
        free(p->entries[i].last_error);
    }
    free(p->entries);
    memset(p, 0, sizeof *p);
}

void proto_dead_cmd(struct cmd *c, const struct queue_keys *k, enum dq_script_id s,
                    const char *id, int batch)
{
    cmd_eval(c, s, k);
    if (s == DQ_SCRIPT_REQUEUE)
        cmd_push_str(c, k->wake);
    cmd_push_str(c, id ? id : "");
    cmd_push_i64(c, batch);
}

dq_status proto_count_reply(const redisReply *r, int64_t *moved,
                            int64_t *remaining)
{
    if (!is_array(r, 2))
        return DQ_ERR_REDIS;
    *moved = elem_int(r, 0);
    *remaining = elem_int(r, 1);
    return DQ_OK;
}
