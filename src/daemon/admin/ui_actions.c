/*
 * The dashboard's actions (POST, past ui.c's gates: authenticated,
 * same-origin, not read_only).  Each is the one protocol script the CLI
 * runs for it (ui_data_action), then a 303 to the form's `back` page with
 * ?done=CODE or ?failed=CODE, or ?sent=unknown when the script was sent
 * and no answer came (it may have run: a timeout, a reload), which the
 * page turns into a fixed message (ui_layout.c): nothing of the request
 * is echoed.
 *
 * Requeue-all and purge-all touch every dead job, so they first answer a
 * page asking to confirm, showing how many there are now; the confirmed
 * form carries that count as `expect`, and when more jobs have died since,
 * the answer is 409 with a fresh confirmation rather than acting on jobs
 * the operator did not see counted.
 */
#include "daemon/admin/ui_pages.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/log.h"
#include "daemon/admin/ui_data.h"
#include "daemon/admin/ui_html.h"
#include "daemon/admin/ui_joblog.h"
#include "daemon/admin/ui_layout.h"

/* One action waiting for Redis. */
struct act {
    struct ui_ctx *x;
    char *queue;
    char *id;                   /* one-job actions, else NULL */
    char *back;                 /* validated, or NULL: the queue page */
    enum ui_action a;
    const char *done;           /* the code of success */
    const char *name;           /* as in the path: "requeue-all" ... */
    int64_t expect;             /* requeue-all/purge-all confirmed for this many, else -1 */
};

static void act_free(struct act *a)
{
    free(a->queue);
    free(a->id);
    free(a->back);
    free(a);
}

/* Whether `back` may be redirected to: a path of the dashboard, not one
 * that a browser would read as another host ("//", "\"), and nothing that
 * could break the Location header. */
static int back_ok(const char *back)
{
    if (!back || strncmp(back, "/ui/", 4) != 0 || strstr(back, "//") || strchr(back, '\\'))
        return 0;
    for (const unsigned char *s = (const unsigned char *)back; *s; s++)
        if (*s <= 0x20 || *s >= 0x7f)
            return 0;
    return strlen(back) < 2048;
}

/* 303 to the action's back page (or its queue page) with key=code. */
static void act_redirect(struct act *a, const char *key, const char *code)
{
    char *base = a->back ? strdup(a->back) : ui_layout_path(a->queue, NULL, "");
    char *loc = NULL;
    if (base && asprintf(&loc, "%s%c%s=%s", base, strchr(base, '?') ? '&' : '?', key,
                         code) < 0)
        loc = NULL;
    if (loc)
        ui_ctx_redirect(a->x, loc);
    else
        ui_layout_oom(a->x);
    free(base);
    free(loc);
}

static const char *failed_code(dq_status st)
{
    switch (st) {
    case DQ_ERR_NOTFOUND: return "notfound";
    case DQ_ERR_RUNNING: return "running";
    case DQ_ERR_DEAD: return "dead";
    default: return "error";
    }
}

static void on_action(dq_status st, int64_t count, const char *err, void *arg)
{
    struct act *a = arg;
    if (st == DQ_OK) {
        if (a->a == UI_ACT_REQUEUE_ALL || a->a == UI_ACT_PURGE_ALL)
            log_info("ui: %s in queue %s: %" PRId64 " job%s", a->name, a->queue, count,
                     count == 1 ? "" : "s");
        else
            log_info("ui: %s %sin queue %s: done", a->name, a->id ? "of a job " : "",
                     a->queue);
        if (a->id)
            ui_joblog_add(ui_ctx_env(a->x)->joblog, a->queue, a->id, a->done);
        act_redirect(a, "done", a->done);
    } else if (st == DQ_ERR_TIMEOUT) {
        /* Sent, and perhaps done: never say "failed" for it. */
        log_warn("ui: %s %sin queue %s: sent, but %s: the outcome is unknown", a->name,
                 a->id ? "of a job " : "", a->queue, err ? err : "no answer");
        act_redirect(a, "sent", "unknown");
    } else {
        if (st != DQ_ERR_NOTFOUND && st != DQ_ERR_RUNNING && st != DQ_ERR_DEAD)
            log_warn("ui: %s in queue %s failed: %s", a->name, a->queue,
                     err ? err : dq_status_str(st));
        act_redirect(a, "failed", failed_code(st));
    }
    act_free(a);
}

/* An action that could not be sent: 503, saying why and that nothing was
 * done. */
static void unavailable_undone(struct ui_ctx *x, const struct ui_data *d)
{
    char why[640];
    snprintf(why, sizeof why, "%s: nothing was done", ui_data_refusal(d));
    ui_layout_unavailable(x, why);
}

/* Send a's action; on failure to send, answer 503 and free a. */
static void act_send(struct act *a)
{
    const struct ui_env *env = ui_ctx_env(a->x);
    const struct queue_conf *q = ui_layout_queue(env, a->queue, NULL);
    if (!q) {
        ui_page_not_found(a->x, "such queue");
        act_free(a);
        return;
    }
    if (!env->data || ui_data_action(env->data, q, a->a, a->id, on_action, a) != 0) {
        unavailable_undone(a->x, env->data);
        act_free(a);
    }
}

/* A new action for x, or NULL (x answered) when out of memory. */
static struct act *act_new(struct ui_ctx *x, const char *queue, const char *id)
{
    const char *back = ui_ctx_form(x, "back");
    struct act *a = calloc(1, sizeof *a);
    if (!a || !(a->queue = strdup(queue)) || (id && !(a->id = strdup(id))) ||
        (back_ok(back) && !(a->back = strdup(back)))) {
        if (a)
            act_free(a);
        ui_layout_oom(x);
        return NULL;
    }
    a->x = x;
    a->expect = -1;
    return a;
}

void ui_action_job(struct ui_ctx *x, const char *queue, const char *id, const char *action)
{
    static const struct { const char *name; enum ui_action a; const char *done; } acts[] = {
        { "requeue", UI_ACT_REQUEUE, "requeued" },
        { "delete", UI_ACT_PURGE, "deleted" },
        { "cancel", UI_ACT_CANCEL, "cancelled" },
        { "run-now", UI_ACT_RUN_NOW, "ran-now" },
    };
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
        if (strcmp(action, acts[i].name) == 0) {
            struct act *a = act_new(x, queue, id);
            if (!a)
                return;
            a->a = acts[i].a;
            a->done = acts[i].done;
            a->name = acts[i].name;
            act_send(a);
            return;
        }
    }
    ui_page_not_found(x, "such action");
}

/* The page asking to confirm a's requeue-all or purge-all of `count`
 * dead jobs (code 200, or 409 when the count grew past the expected). */
static void confirm_page(struct act *a, int64_t count, int code)
{
    int purge = a->a == UI_ACT_PURGE_ALL;
    char *path = ui_layout_path(a->queue, NULL, "/dead/");
    char *back = a->back ? strdup(a->back) : ui_layout_path(a->queue, NULL, "?tab=dead");
    struct ui_out o;
    if (!path || !back || ui_layout_open(&o) != 0) {
        free(path);
        free(back);
        ui_layout_oom(a->x);
        return;
    }
    ui_layout_begin(o.f, a->x, purge ? "Delete all dead jobs" : "Requeue all dead jobs", 0);
    fputs("<h1>", o.f);
    fputs(purge ? "Delete all dead jobs of " : "Requeue all dead jobs of ", o.f);
    html_text(o.f, a->queue);
    fputs("</h1>\n", o.f);
    if (code == 409)
        fputs("<p id=\"confirm-changed\">More jobs have died since the count you "
              "confirmed: nothing was done. Here is the count now.</p>\n", o.f);
    fprintf(o.f, "<p id=\"confirm-text\">%s <span id=\"confirm-count\">%" PRId64
                 "</span> dead job%s of queue ", purge ? "Delete" : "Requeue", count,
            count == 1 ? "" : "s");
    html_text(o.f, a->queue);
    fputs(purge ? "? They are deleted for good.</p>\n"
                : "? They become due now, with their attempts reset.</p>\n", o.f);
    fputs("<form id=\"confirm\" class=\"action\" method=\"post\" action=\"", o.f);
    html_text(o.f, path);
    html_text(o.f, a->name);
    fprintf(o.f, "\"><input type=\"hidden\" name=\"expect\" value=\"%" PRId64 "\">", count);
    ui_layout_back_field(o.f, back);
    fprintf(o.f, "<button id=\"confirm-button\" type=\"submit\">%s %" PRId64 " job%s</button> "
                 "<a href=\"", purge ? "Delete" : "Requeue", count, count == 1 ? "" : "s");
    html_text(o.f, back);
    fputs("\">Cancel</a></form>\n", o.f);
    ui_layout_end(o.f, NULL);
    ui_layout_reply(&o, a->x, code);
    free(path);
    free(back);
}

/* The dead count is in: confirm, refuse (409), or act. */
static void on_dead_count(const struct ui_page *pg, const char *err, void *arg)
{
    struct act *a = arg;
    if (!pg) {
        ui_layout_unavailable(a->x, err);
        act_free(a);
    } else if (a->expect < 0) {
        confirm_page(a, pg->total, 200);
        act_free(a);
    } else if (pg->total > a->expect) {
        confirm_page(a, pg->total, 409);
        act_free(a);
    } else {
        act_send(a);
    }
}

/* expect=N of a confirmed form; -1 when absent or not a count. */
static int64_t parse_expect(const char *s)
{
    char *end;
    long long v;
    if (!s || !*s)
        return -1;
    v = strtoll(s, &end, 10);
    return *end || v < 0 ? -1 : v;
}

void ui_action_queue(struct ui_ctx *x, const char *queue, const char *action)
{
    static const struct { const char *name; enum ui_action a; const char *done; } acts[] = {
        { "pause", UI_ACT_PAUSE, "paused" },
        { "resume", UI_ACT_RESUME, "resumed" },
        { "requeue-all", UI_ACT_REQUEUE_ALL, "requeued-all" },
        { "purge-all", UI_ACT_PURGE_ALL, "purged-all" },
    };
    const struct ui_env *env = ui_ctx_env(x);
    const struct queue_conf *q = ui_layout_queue(env, queue, NULL);
    struct act *a = NULL;
    for (size_t i = 0; i < sizeof acts / sizeof acts[0] && !a; i++) {
        if (strcmp(action, acts[i].name) != 0)
            continue;
        if (!(a = act_new(x, queue, NULL)))
            return;
        a->a = acts[i].a;
        a->done = acts[i].done;
        a->name = acts[i].name;
    }
    if (!a) {
        ui_page_not_found(x, "such action");
        return;
    }
    if (a->a != UI_ACT_REQUEUE_ALL && a->a != UI_ACT_PURGE_ALL) {
        act_send(a);
        return;
    }
    a->expect = parse_expect(ui_ctx_form(x, "expect"));
    if (!q) {
        ui_page_not_found(x, "such queue");
        act_free(a);
    } else if (!env->data ||
               ui_data_page(env->data, q, UI_LIST_DEAD, 0, 1, NULL, on_dead_count, a) != 0) {
        unavailable_undone(x, env->data);
        act_free(a);
    }
}
