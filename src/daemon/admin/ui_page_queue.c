/*
 * The queue page (/ui/queues/Q): the queue's counts and state from the
 * cached stats, then one tab of jobs (delayed by due time, processing by
 * lease deadline, dead by time of death: one page of UI_PAGE entries from
 * Redis per view), or its schedules; and the search by id (find).
 * Rendering waits for Redis' answer, so the page is written in the
 * callback, from the daemon's state as it is then (ui_ctx_env).
 */
#include "daemon/admin/ui_pages.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/admin/ui_data.h"
#include "daemon/admin/ui_html.h"
#include "daemon/admin/ui_layout.h"

#define UI_PAGE 50              /* jobs per page */
#define ERROR_SHOWN 160         /* bytes of a last error shown in a list */

enum qtab { TAB_DELAYED, TAB_PROCESSING, TAB_DEAD, TAB_SCHEDULES };

static const char *const tab_names[] = { "delayed", "processing", "dead", "schedules" };
static const char *const tab_titles[] = { "Delayed", "Processing", "Dead", "Schedules" };

/* One queue page waiting for Redis. */
struct qpage {
    struct ui_ctx *x;
    char *queue;
    enum qtab tab;
    int64_t page;               /* 1.. */
    char *type;                 /* the filter, or NULL */
};

static void qpage_free(struct qpage *p)
{
    free(p->queue);
    free(p->type);
    free(p);
}

static enum qtab parse_tab(const char *s)
{
    for (size_t i = 0; s && i < sizeof tab_names / sizeof tab_names[0]; i++)
        if (strcmp(s, tab_names[i]) == 0)
            return (enum qtab)i;
    return TAB_DELAYED;
}

/* ?page=N, 1 when absent or not a number. */
static int64_t parse_page(const char *s)
{
    char *end;
    long long v;
    if (!s || !*s)
        return 1;
    v = strtoll(s, &end, 10);
    if (*end || v < 1 || v > UI_OFFSET_MAX)
        return 1;
    return v;
}

/* href to the queue page's `tab`, `page` (1: left out) and filter. */
static void queue_href(FILE *f, const char *queue, enum qtab tab, int64_t page,
                       const char *type)
{
    fputs("/ui/queues/", f);
    html_url(f, queue);
    fprintf(f, "?tab=%s", tab_names[tab]);
    if (page > 1)
        fprintf(f, "&amp;page=%" PRId64, page);
    if (type) {
        fputs("&amp;type=", f);
        html_url(f, type);
    }
}

static void job_href(FILE *f, const char *queue, const char *id)
{
    fputs("/ui/queues/", f);
    html_url(f, queue);
    fputs("/jobs/", f);
    html_url(f, id);
}

/* A POST form to /ui/queues/Q/ACTION with one button. */
static void queue_form(FILE *f, const char *queue, const char *form_id, const char *path,
                       const char *button_id, const char *label, const char *back)
{
    fprintf(f, "<form id=\"%s\" class=\"action\" method=\"post\" action=\"/ui/queues/",
            form_id);
    html_url(f, queue);
    fprintf(f, "/%s\">", path);
    ui_layout_back_field(f, back);
    fprintf(f, "<button id=\"%s\" type=\"submit\">%s</button></form>\n", button_id, label);
}

static void queue_counts(FILE *f, const dq_stats *s)
{
    static const char *const names[] = { "delayed", "due", "processing", "expired", "dead" };
    int64_t v[5] = { 0 };
    if (s) {
        v[0] = s->delayed, v[1] = s->due, v[2] = s->processing;
        v[3] = s->expired, v[4] = s->dead;
    }
    fputs("<dl id=\"queue-counts\">", f);
    for (size_t i = 0; i < 5; i++) {
        fprintf(f, "<div><dt>%s</dt><dd class=\"%s%s\">", names[i], names[i],
                s && v[i] > 0 ? " nonzero" : "");
        if (s)
            fprintf(f, "%" PRId64, v[i]);
        else
            fputs("-", f);
        fputs("</dd></div>", f);
    }
    fputs("</dl>\n", f);
}

static void priorities(FILE *f, const dq_stats *s)
{
    int any = 0;
    for (int i = 0; s && i < DQ_PRIORITY_LEVELS; i++)
        any |= s->due_by_priority[i] > 0;
    if (!any)
        return;
    fputs("<table id=\"priorities\"><caption>Due jobs by priority (0 most urgent)</caption>"
          "<thead><tr><th class=\"num\">Priority</th><th class=\"num\">Due</th></tr></thead>"
          "<tbody>\n", f);
    for (int i = 0; i < DQ_PRIORITY_LEVELS; i++)
        if (s->due_by_priority[i] > 0)
            fprintf(f, "<tr><td class=\"num\">%d</td><td class=\"num\">%" PRId64
                       "</td></tr>\n", i, s->due_by_priority[i]);
    fputs("</tbody></table>\n", f);
}

/* The page's top: name, state, counts, pause/resume, tabs, search, filter. */
static void queue_head(FILE *f, const struct ui_env *env, size_t qi, const struct qpage *p)
{
    const char *q = p->queue;
    const dq_stats *s = env->stats.stats ? &env->stats.stats[qi] : NULL;
    int paused = s && env->stats.paused_since && env->stats.paused_since[qi] >= 0;
    fputs("<h1 id=\"queue-name\">", f);
    html_text(f, q);
    fputs("</h1>\n<p class=\"queue-state\">", f);
    if (!s)
        fputs("<span id=\"queue-state\">unknown</span>", f);
    else if (paused)
        fputs("<span id=\"queue-state\" class=\"state-paused paused\">paused</span>", f);
    else
        fputs("<span id=\"queue-state\" class=\"state-running running\">running</span>", f);
    fputs("</p>\n", f);
    queue_counts(f, s);
    if (!env->read_only) {
        char tabq[32];
        char *b;
        snprintf(tabq, sizeof tabq, "?tab=%s", tab_names[p->tab]);
        b = ui_layout_path(q, NULL, tabq);
        if (b && paused)
            queue_form(f, q, "resume", "resume", "resume-button", "Resume", b);
        else if (b)
            queue_form(f, q, "pause", "pause", "pause-button", "Pause", b);
        free(b);
    }
    priorities(f, s);
    fputs("<nav class=\"tabs\">", f);
    for (size_t t = 0; t < sizeof tab_names / sizeof tab_names[0]; t++) {
        fprintf(f, "<a id=\"tab-%s\"%s href=\"", tab_names[t],
                t == (size_t)p->tab ? " class=\"current\"" : "");
        queue_href(f, q, (enum qtab)t, 1, NULL);
        fprintf(f, "\">%s</a>", tab_titles[t]);
    }
    fputs("</nav>\n<div class=\"tools\">"
          "<form id=\"search\" method=\"get\" action=\"/ui/queues/", f);
    html_url(f, q);
    fputs("/find\"><input name=\"id\" placeholder=\"job id\" aria-label=\"job id\">"
          "<button type=\"submit\">Find</button></form>\n", f);
    if (p->tab != TAB_SCHEDULES) {
        fputs("<form id=\"filter\" method=\"get\" action=\"/ui/queues/", f);
        html_url(f, q);
        fprintf(f, "\"><input type=\"hidden\" name=\"tab\" value=\"%s\">"
                   "<input name=\"type\" placeholder=\"job type\" aria-label=\"job type\" "
                   "value=\"", tab_names[p->tab]);
        html_text(f, p->type ? p->type : "");
        fputs("\"><button type=\"submit\">Filter</button></form>", f);
    }
    fputs("</div>\n", f);
}

/* A time cell with the distance from now: "2026-... UTC (in 4 s)". */
static void time_cell(FILE *f, const char *cls, int64_t at_ms, int64_t now_ms)
{
    fprintf(f, "<td class=\"%s\">", cls);
    ui_layout_when(f, at_ms, now_ms);
    fputs("</td>", f);
}

static void entry_row(FILE *f, const struct ui_env *env, const struct qpage *p,
                      const struct ui_entry *e, int64_t now_ms)
{
    fputs("<tr data-job=\"", f);
    html_text(f, e->id);
    fprintf(f, "\"%s><td><a class=\"job\" href=\"", e->unreadable ? " class=\"unreadable\"" : "");
    job_href(f, p->queue, e->id);
    fputs("\">", f);
    html_text(f, e->id);
    fputs("</a></td><td class=\"type\">", f);
    html_text(f, e->type);
    fputs("</td>", f);
    time_cell(f, "at", e->at_ms, now_ms);
    if (p->tab == TAB_PROCESSING) {
        pid_t pid = env->holder ? env->holder(env->holder_arg, p->queue, e->id) : 0;
        if (pid > 0)
            fprintf(f, "<td class=\"num worker\">pid %ld</td>", (long)pid);
        else
            fputs("<td class=\"num worker\">another host</td>", f);
    }
    fprintf(f, "<td class=\"num attempts\">%d</td><td class=\"num priority\">%d</td>"
               "<td class=\"num size\">%zu B</td>", e->attempts, e->priority, e->payload_len);
    if (p->tab == TAB_DEAD) {
        size_t n = strlen(e->last_error);
        fputs("<td class=\"error\">", f);
        html_textn(f, e->last_error, n > ERROR_SHOWN ? ERROR_SHOWN : n);
        if (n > ERROR_SHOWN)
            fputs("…", f);
        fputs("</td>", f);
    }
    fputs("</tr>\n", f);
}

static void jobs_table(FILE *f, const struct ui_env *env, const struct qpage *p,
                       const struct ui_page *pg)
{
    static const char *const at_titles[] = { "Due", "Lease deadline", "Died" };
    fprintf(f, "<table id=\"jobs\">\n<thead><tr><th>Id</th><th>Type</th><th>%s</th>",
            at_titles[p->tab]);
    if (p->tab == TAB_PROCESSING)
        fputs("<th class=\"num\">Worker</th>", f);
    fputs("<th class=\"num\">Attempts</th><th class=\"num\">Priority</th>"
          "<th class=\"num\">Payload</th>", f);
    if (p->tab == TAB_DEAD)
        fputs("<th>Last error</th>", f);
    fputs("</tr></thead>\n<tbody>\n", f);
    for (size_t i = 0; i < pg->n; i++)
        entry_row(f, env, p, &pg->e[i], pg->now_ms);
    fputs("</tbody>\n</table>\n", f);
    if (pg->n == 0)
        fputs("<p class=\"empty\">No jobs here.</p>\n", f);
}

/* page-prev, page-info "51–100 of 1234", page-next. */
static void paging(FILE *f, const struct qpage *p, const struct ui_page *pg)
{
    int64_t offset = (p->page - 1) * UI_PAGE;
    int64_t total = p->type ? pg->matched : pg->total;
    int more = total >= 0 ? offset + (int64_t)pg->n < total : pg->n == UI_PAGE;
    if (offset + UI_PAGE > UI_OFFSET_MAX)
        more = 0;
    fputs("<nav class=\"paging\">", f);
    if (p->page > 1) {
        fputs("<a id=\"page-prev\" href=\"", f);
        queue_href(f, p->queue, p->tab, p->page - 1, p->type);
        fputs("\">← previous</a> ", f);
    }
    fputs("<span id=\"page-info\">", f);
    if (pg->n > 0)
        fprintf(f, "%" PRId64 "–%" PRId64, offset + 1, offset + (int64_t)pg->n);
    else
        fputs("0", f);
    if (total >= 0)
        fprintf(f, " of %" PRId64, total);
    else
        fputs(" of many", f);
    if (p->type) {
        fputs(" of type ", f);
        html_text(f, p->type);
        fprintf(f, " (%" PRId64 " in all)", pg->total);
    }
    fputs("</span>", f);
    if (more) {
        fputs(" <a id=\"page-next\" href=\"", f);
        queue_href(f, p->queue, p->tab, p->page + 1, p->type);
        fputs("\">next →</a>", f);
    }
    fputs("</nav>\n", f);
}

static void dead_forms(FILE *f, const struct ui_env *env, const struct qpage *p,
                       const struct ui_page *pg)
{
    char *b;
    if (env->read_only || pg->total <= 0)
        return;
    b = ui_layout_path(p->queue, NULL, "?tab=dead");
    if (b) {
        fputs("<div class=\"bulk\">", f);
        queue_form(f, p->queue, "requeue-all", "dead/requeue-all", "requeue-all-button",
                   "Requeue all dead jobs…", b);
        queue_form(f, p->queue, "purge-all", "dead/purge-all", "purge-all-button",
                   "Delete all dead jobs…", b);
        fputs("</div>\n", f);
    }
    free(b);
}

/* Begin the page for p: the layout and the head.  -1 (the context then
 * answered) when the queue went away in a reload or memory ran out. */
static int qpage_begin(struct qpage *p, struct ui_out *o, const struct ui_env **env,
                       size_t *qi)
{
    *env = ui_ctx_env(p->x);
    if (!ui_layout_queue(*env, p->queue, qi)) {
        ui_page_not_found(p->x, "such queue");
        return -1;
    }
    if (ui_layout_open(o) != 0) {
        ui_layout_oom(p->x);
        return -1;
    }
    ui_layout_begin(o->f, p->x, p->queue, UI_LAYOUT_REFRESH);
    queue_head(o->f, *env, *qi, p);
    return 0;
}

static void on_page(const struct ui_page *pg, const char *err, void *arg)
{
    struct qpage *p = arg;
    const struct ui_env *env;
    struct ui_out o;
    size_t qi;
    if (!pg) {
        ui_layout_unavailable(p->x, err);
    } else if (qpage_begin(p, &o, &env, &qi) == 0) {
        if (p->tab == TAB_DEAD)
            dead_forms(o.f, env, p, pg);
        jobs_table(o.f, env, p, pg);
        paging(o.f, p, pg);
        ui_layout_end(o.f, p->queue);
        ui_layout_reply(&o, p->x, 200);
    }
    qpage_free(p);
}

static void on_schedules(const dq_schedule_list *l, const char *err, void *arg)
{
    struct qpage *p = arg;
    const struct ui_env *env;
    struct ui_out o;
    size_t qi;
    if (!l) {
        ui_layout_unavailable(p->x, err);
    } else if (qpage_begin(p, &o, &env, &qi) == 0) {
        fputs("<table id=\"schedules\">\n<thead><tr><th>Name</th><th>Expression</th>"
              "<th>Time zone</th><th>Type</th><th>Next tick</th></tr></thead>\n<tbody>\n",
              o.f);
        for (size_t i = 0; i < l->n; i++) {
            const dq_schedule_info *s = &l->items[i];
            fputs("<tr><td class=\"name\">", o.f);
            html_text(o.f, s->name);
            fputs("</td><td class=\"expr\">", o.f);
            html_text(o.f, s->readable ? s->expr : "(unreadable definition)");
            fputs("</td><td>", o.f);
            html_text(o.f, s->readable && *s->tz ? s->tz : "UTC");
            fputs("</td><td class=\"type\">", o.f);
            html_text(o.f, s->readable ? s->type : "");
            fputs("</td>", o.f);
            if (s->paused_since_ms >= 0) {
                fputs("<td class=\"at paused\">paused since ", o.f);
                html_duration(o.f, l->now_ms - s->paused_since_ms);
                fputs(" ago</td>", o.f);
            } else {
                time_cell(o.f, "at", s->next_ms, l->now_ms);
            }
            fputs("</tr>\n", o.f);
        }
        fputs("</tbody>\n</table>\n", o.f);
        if (l->n == 0)
            fputs("<p class=\"empty\">No schedules.</p>\n", o.f);
        ui_layout_end(o.f, p->queue);
        ui_layout_reply(&o, p->x, 200);
    }
    qpage_free(p);
}

void ui_page_queue(struct ui_ctx *x, const char *queue)
{
    const struct queue_conf *q;
    struct ui_data *d = ui_layout_data_for(x, queue, &q);
    const char *type = ui_ctx_query(x, "type");
    struct qpage *p;
    int rc;
    if (!d)
        return;
    p = calloc(1, sizeof *p);
    if (!p || !(p->queue = strdup(queue)) ||
        (type && *type && !(p->type = strdup(type)))) {
        if (p)
            qpage_free(p);
        ui_layout_oom(x);
        return;
    }
    p->x = x;
    p->tab = parse_tab(ui_ctx_query(x, "tab"));
    p->page = parse_page(ui_ctx_query(x, "page"));
    if ((p->page - 1) * UI_PAGE > UI_OFFSET_MAX)
        p->page = UI_OFFSET_MAX / UI_PAGE + 1;
    if (p->tab == TAB_SCHEDULES)
        rc = ui_data_schedules(d, q, on_schedules, p);
    else
        rc = ui_data_page(d, q, (enum ui_list)p->tab, (p->page - 1) * UI_PAGE,
                          UI_PAGE, p->type, on_page, p);
    if (rc != 0) {
        qpage_free(p);
        ui_layout_unavailable(x, ui_data_refusal(d));
    }
}

/* ---- search by id ---- */

struct qfind {
    struct ui_ctx *x;
    char *queue;
    char *id;
};

static void on_find(const dq_job_info *info, dq_status st, const char *err, void *arg)
{
    struct qfind *q = arg;
    if (info) {
        char *loc = ui_layout_path(q->queue, q->id, "");
        if (loc)
            ui_ctx_redirect(q->x, loc);
        else
            ui_layout_oom(q->x);
        free(loc);
    } else if (st == DQ_ERR_NOTFOUND) {
        ui_page_not_found(q->x, "job with that id in this queue");
    } else {
        ui_layout_unavailable(q->x, err);
    }
    free(q->queue);
    free(q->id);
    free(q);
}

void ui_page_find(struct ui_ctx *x, const char *queue)
{
    const struct queue_conf *qc;
    struct ui_data *d = ui_layout_data_for(x, queue, &qc);
    const char *id = ui_ctx_query(x, "id");
    struct qfind *q;
    if (!d)
        return;
    if (!id || !*id) {
        ui_page_not_found(x, "job without an id");
        return;
    }
    q = calloc(1, sizeof *q);
    if (!q || !(q->queue = strdup(queue)) || !(q->id = strdup(id))) {
        if (q) {
            free(q->queue);
            free(q);
        }
        ui_layout_oom(x);
        return;
    }
    q->x = x;
    if (ui_data_show(d, qc, id, on_find, q) != 0) {
        free(q->queue);
        free(q->id);
        free(q);
        ui_layout_unavailable(x, ui_data_refusal(d));
    }
}
