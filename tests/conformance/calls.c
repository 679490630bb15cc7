/* The conformance calls through libdelayq's public API (driver.h). */
#include "driver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *str_arg(const struct jv *args, const char *key)
{
    const struct jv *v = json_get(args, key);
    return v && v->t == J_STR ? v->s : NULL;
}

static int64_t int_arg(const struct jv *args, const char *key, int64_t def)
{
    const struct jv *v = json_get(args, key);
    return v && (v->t == J_INT || v->t == J_BOOL) ? v->i : def;
}

/* A payload: a string (UTF-8), {"hex"} or {"repeat", "times"}; malloc'd. */
static char *payload_arg(const struct jv *args, size_t *len)
{
    const struct jv *p = json_get(args, "payload");
    *len = 0;
    if (!p)
        return calloc(1, 1);
    if (p->t == J_STR) {
        *len = p->len;
        char *b = malloc(p->len + 1);
        memcpy(b, p->s, p->len + 1);
        return b;
    }
    const struct jv *hex = json_get(p, "hex"), *rep = json_get(p, "repeat");
    if (hex) {
        char *b = malloc(hex->len / 2 + 1);
        for (size_t k = 0; k + 1 < hex->len; k += 2) {
            unsigned x;
            sscanf(hex->s + k, "%2x", &x);
            b[(*len)++] = (char)x;
        }
        return b;
    }
    int64_t times = int_arg(p, "times", 0);
    char *b = malloc(rep->len * (size_t)times + 1);
    for (int64_t k = 0; k < times; k++)
        memcpy(b + (size_t)k * rep->len, rep->s, rep->len);
    *len = rep->len * (size_t)times;
    return b;
}

/* A request from a job's args; *payload must be freed after the call. */
static int make_req(struct case_run *r, const struct jv *a, dq_enqueue_req *req,
                    char **payload)
{
    memset(req, 0, sizeof *req);
    req->queue = r->queue;
    req->type = str_arg(a, "type");
    req->id = str_arg(a, "id");
    *payload = payload_arg(a, &req->payload_len);
    req->payload = *payload;
    req->delay_ms = int_arg(a, "delay_ms", 0);
    req->at_ms = int_arg(a, "at_ms", 0);
    if (json_get(a, "at_ms_from_now")) {
        int64_t now = 0;
        if (dq_server_time(r->c, &now) != DQ_OK)
            return -1;
        req->at_ms = now + int_arg(a, "at_ms_from_now", 0);
    }
    req->max_attempts = (int)int_arg(a, "max_attempts", 0);
    req->replace = int_arg(a, "replace", 0) != 0;
    const struct jv *p = json_get(a, "priority");
    if (p && p->t == J_INT)
        req->priority = DQ_PRIORITY((int)p->i);
    else if (p && p->t == J_STR)
        req->priority = dq_priority_parse(p->s) < 0 ? -1 : DQ_PRIORITY(dq_priority_parse(p->s));
    return 0;
}

static int all_digits(const char *s)
{
    return *s && strspn(s, "0123456789") == strlen(s);
}

static struct jv *do_enqueue(struct case_run *r, const struct jv *a, dq_status *st)
{
    dq_enqueue_req req;
    char *payload;
    dq_enqueued out;
    *st = make_req(r, a, &req, &payload) < 0 ? DQ_ERR_CONNECT : dq_enqueue(r->c, &req, &out);
    free(payload);
    return *st == DQ_OK ? jv_str(out.id) : NULL;
}

static const char *const status_names[] = {
    "ok", "invalid", "notfound", "exists", "running", "dead", "stale", "too_large",
    "connect", "auth", "timeout", "redis", "nomem", "unique"
};

static struct jv *do_enqueue_many(struct case_run *r, const struct jv *a, dq_status *st)
{
    const struct jv *jobs = json_get(a, "jobs");
    size_t n = jobs->n;
    dq_enqueue_req *reqs = calloc(n, sizeof *reqs);
    char **payloads = calloc(n, sizeof *payloads);
    dq_enqueued *outs = calloc(n, sizeof *outs);
    dq_status *sts = calloc(n, sizeof *sts);
    *st = DQ_OK;
    for (size_t k = 0; k < n && *st == DQ_OK; k++)
        if (make_req(r, jobs->items[k], &reqs[k], &payloads[k]) < 0)
            *st = DQ_ERR_CONNECT;
    struct jv *res = NULL;
    if (*st == DQ_OK) {
        dq_status all = dq_enqueue_many(r->c, reqs, n, outs, sts);
        /* A call that failed as a whole (no connection) is its failure. */
        if (all == DQ_ERR_CONNECT || all == DQ_ERR_AUTH || all == DQ_ERR_TIMEOUT)
            *st = all;
    }
    if (*st == DQ_OK) {
        res = jv_arr();
        for (size_t k = 0; k < n; k++) {
            struct jv *item = jv_obj();
            const char *id = sts[k] == DQ_OK ? outs[k].id : reqs[k].id;
            jv_set(item, "id", id && *id ? jv_str(id) : jv_null());
            jv_set(item, "error", sts[k] == DQ_OK ? jv_null() : jv_str(status_names[sts[k]]));
            jv_set(item, "generated", jv_bool(sts[k] == DQ_OK && all_digits(outs[k].id)));
            jv_push(res, item);
        }
    }
    for (size_t k = 0; k < n; k++)
        free(payloads[k]);
    free(reqs);
    free(payloads);
    free(outs);
    free(sts);
    return res;
}

static struct jv *do_show(struct case_run *r, const char *id, dq_status *st)
{
    dq_job_info info;
    *st = dq_show(r->c, r->queue, id, &info);
    if (*st == DQ_ERR_NOTFOUND) {
        *st = DQ_OK;
        return jv_null();
    }
    if (*st != DQ_OK)
        return NULL;
    struct jv *o = jv_obj();
    jv_set(o, "state", jv_str(dq_state_str(info.state)));
    jv_set(o, "type", jv_str(info.job.type));
    jv_set(o, "payload", jv_bytes(info.job.payload, info.job.payload_len));
    jv_set(o, "attempts", jv_int(info.job.attempt));
    jv_set(o, "max_attempts", jv_int(info.job.max_attempts));
    jv_set(o, "priority", jv_int(info.job.priority));
    jv_set(o, "created_ms", jv_int(info.job.created_ms));
    jv_set(o, "due_ms", jv_int(info.job.due_ms));
    jv_set(o, "last_error", jv_str(info.job.last_error));
    jv_set(o, "fence", jv_int(info.job.fence));
    dq_job_info_free(&info);
    return o;
}

static struct jv *do_stats(struct case_run *r, dq_status *st)
{
    dq_stats s;
    if ((*st = dq_stats_get(r->c, r->queue, &s)) != DQ_OK)
        return NULL;
    struct jv *o = jv_obj(), *by = jv_arr();
    jv_set(o, "delayed", jv_int(s.delayed));
    jv_set(o, "due", jv_int(s.due));
    jv_set(o, "processing", jv_int(s.processing));
    jv_set(o, "dead", jv_int(s.dead));
    jv_set(o, "expired", jv_int(s.expired));
    jv_set(o, "next_due_in_ms", jv_int(s.next_due_in_ms));
    for (int p = 0; p < DQ_PRIORITY_LEVELS; p++)
        jv_push(by, jv_int(s.due_by_priority[p]));
    jv_set(o, "due_by_priority", by);
    jv_set(o, "jobs_cancelled", jv_int(s.jobs_cancelled));
    return o;
}

static struct jv *do_dead_list(struct case_run *r, const struct jv *a, dq_status *st)
{
    dq_dead_page pg;
    *st = dq_dead_list(r->c, r->queue, int_arg(a, "offset", 0), (int)int_arg(a, "count", 100),
                       &pg);
    if (*st != DQ_OK)
        return NULL;
    struct jv *o = jv_obj(), *jobs = jv_arr();
    jv_set(o, "total", jv_int(pg.total));
    for (size_t k = 0; k < pg.n; k++) {
        struct jv *j = jv_obj();
        jv_set(j, "id", jv_str(pg.entries[k].id));
        jv_set(j, "type", jv_str(pg.entries[k].type));
        jv_set(j, "attempts", jv_int(pg.entries[k].attempts));
        jv_set(j, "last_error", jv_str(pg.entries[k].last_error));
        jv_set(j, "payload_bytes", jv_int((int64_t)pg.entries[k].payload_len));
        jv_push(jobs, j);
    }
    jv_set(o, "jobs", jobs);
    dq_dead_page_free(&pg);
    return o;
}

static struct jv *do_schedule_add(struct case_run *r, const struct jv *a, dq_status *st)
{
    dq_schedule_req req;
    memset(&req, 0, sizeof req);
    req.queue = r->queue;
    req.name = str_arg(a, "name");
    req.type = str_arg(a, "type");
    req.expr = str_arg(a, "expr");
    req.tz = str_arg(a, "tz");
    char *payload = payload_arg(a, &req.payload_len);
    req.payload = payload;
    req.max_attempts = (int)int_arg(a, "max_attempts", 0);
    const char *cu = str_arg(a, "catch_up");
    if (cu && dq_catch_up_parse(cu, &req.catch_up) < 0)
        req.catch_up = (dq_catch_up)-1;
    req.replace = int_arg(a, "replace", 0) != 0;
    int64_t next = 0;
    *st = dq_schedule_add(r->c, &req, &next);
    free(payload);
    return *st == DQ_OK ? jv_int(next) : NULL;
}

static struct jv *do_schedule_list(struct case_run *r, dq_status *st)
{
    dq_schedule_list l;
    if ((*st = dq_schedule_list_get(r->c, r->queue, &l)) != DQ_OK) {
        dq_schedule_list_free(&l);
        return NULL;
    }
    struct jv *arr = jv_arr();
    for (size_t k = 0; k < l.n; k++) {
        const dq_schedule_info *s = &l.items[k];
        struct jv *o = jv_obj();
        jv_set(o, "name", jv_str(s->name));
        jv_set(o, "expr", jv_str(s->expr));
        jv_set(o, "tz", jv_str(s->tz));
        jv_set(o, "type", jv_str(s->type));
        jv_set(o, "payload", jv_bytes(s->payload, s->payload_len));
        jv_set(o, "max_attempts", jv_int(s->max_attempts));
        jv_set(o, "catch_up", jv_str(dq_catch_up_str(s->catch_up)));
        jv_push(arr, o);
    }
    dq_schedule_list_free(&l);
    return arr;
}

/* Claim every due job (a batch of up to 1000 from all the partitions);
 * with `error`, fail each dead with it.  The count claimed. */
static struct jv *do_claim(struct case_run *r, const char *error, dq_status *st)
{
    dq_claim_result res;
    *st = dq_claim(r->c, r->queue, DQ_CLAIM_MAX, 60000, &res);
    size_t n = res.n;
    dq_retry_policy pol;
    dq_retry_policy_init(&pol);
    for (size_t k = 0; *st == DQ_OK && error && k < n; k++)
        *st = dq_fail(r->c, r->queue, res.jobs[k].id, res.jobs[k].fence, error,
                      DQ_FAIL_DEAD, -1, &pol, NULL);
    dq_claim_result_free(&res);
    return *st == DQ_OK ? jv_int((int64_t)n) : NULL;
}

/* A call whose result is nothing, or a count, or since_ms. */
static struct jv *do_simple(struct case_run *r, const char *name, const struct jv *a,
                            dq_status *st)
{
    const char *id = str_arg(a, "id"), *sname = str_arg(a, "name");
    int64_t count = 0, since = -1;
    if (strcmp(name, "cancel") == 0) {
        *st = dq_cancel(r->c, r->queue, id);
        if (*st == DQ_ERR_NOTFOUND) {
            *st = DQ_OK;
            return jv_bool(0);
        }
        return *st == DQ_OK ? jv_bool(1) : NULL;
    }
    if (strcmp(name, "run_now") == 0)
        *st = dq_run_now(r->c, r->queue, id);
    else if (strcmp(name, "pause") == 0)
        *st = dq_pause(r->c, r->queue, NULL);
    else if (strcmp(name, "resume") == 0)
        *st = dq_resume(r->c, r->queue, NULL);
    else if (strcmp(name, "paused") == 0)
        return (*st = dq_paused(r->c, r->queue, &since)) == DQ_OK ? jv_bool(since >= 0) : NULL;
    else if (strcmp(name, "requeue") == 0)
        *st = dq_requeue(r->c, r->queue, id);
    else if (strcmp(name, "purge") == 0)
        *st = dq_purge(r->c, r->queue, id);
    else if (strcmp(name, "requeue_all") == 0 || strcmp(name, "purge_all") == 0)
        return (*st = name[0] == 'r' ? dq_requeue_all(r->c, r->queue, &count)
                                     : dq_purge_all(r->c, r->queue, &count)) == DQ_OK
               ? jv_int(count) : NULL;
    else if (strcmp(name, "schedule_remove") == 0)
        *st = dq_schedule_remove(r->c, r->queue, sname);
    else if (strcmp(name, "schedule_run_now") == 0) {
        dq_enqueued out;
        return (*st = dq_schedule_run_now(r->c, r->queue, sname, &out)) == DQ_OK
               ? jv_str(out.id) : NULL;
    } else {
        *st = DQ_ERR_INVALID;
        return NULL;
    }
    return *st == DQ_OK ? jv_null() : NULL;
}

static struct jv *dispatch(struct case_run *r, const char *name, const struct jv *a,
                           dq_status *st)
{
    *st = DQ_OK;
    if (strcmp(name, "redis_state") == 0)
        return direct_state(r);
    if (strcmp(name, "record") == 0)
        return direct_record(r, str_arg(a, "id"));
    if (strcmp(name, "redis") == 0)
        return direct_command(r, json_get(a, "argv"));
    if (strcmp(name, "wake_messages") == 0)
        return direct_wake_messages(r);
    if (!r->c) {
        *st = r->connect_status;
        return NULL;
    }
    if (strcmp(name, "enqueue") == 0)
        return do_enqueue(r, a, st);
    if (strcmp(name, "enqueue_many") == 0)
        return do_enqueue_many(r, a, st);
    if (strcmp(name, "show") == 0)
        return do_show(r, str_arg(a, "id"), st);
    if (strcmp(name, "stats") == 0)
        return do_stats(r, st);
    if (strcmp(name, "dead_list") == 0)
        return do_dead_list(r, a, st);
    if (strcmp(name, "schedule_add") == 0)
        return do_schedule_add(r, a, st);
    if (strcmp(name, "schedule_list") == 0)
        return do_schedule_list(r, st);
    if (strcmp(name, "claim") == 0)
        return do_claim(r, NULL, st);
    if (strcmp(name, "claim_and_fail") == 0) {
        const char *e = str_arg(a, "error");
        return do_claim(r, e ? e : "failed", st);
    }
    return do_simple(r, name, a, st);
}

void call_run(struct case_run *r, const char *name, const struct jv *args,
              struct outcome *out)
{
    memset(out, 0, sizeof *out);
    out->result = dispatch(r, name, args, &out->status);
    if (out->status != DQ_OK)
        snprintf(out->msg, sizeof out->msg, "%s",
                 r->c ? dq_errmsg(r->c) : r->connect_err);
    else if (!out->result)
        out->status = DQ_ERR_INVALID, snprintf(out->msg, sizeof out->msg,
                                                "no result from %s", name);
}

const char *driver_status_name(dq_status st)
{
    return (unsigned)st < sizeof status_names / sizeof *status_names ? status_names[st] : "?";
}
