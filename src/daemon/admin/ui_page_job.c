/*
 * The job page (/ui/queues/Q/jobs/ID): everything Redis holds of one job
 * (the show script, on the job's partition), its payload (text as text,
 * anything else as hex, cut at PAYLOAD_SHOWN bytes with its size said),
 * what can be told of its history, and the actions that apply to its
 * state.  A job that is gone answers 404 with the same layout, saying it
 * may have run and been deleted.
 */
#include "daemon/admin/ui_pages.h"

#include <stdlib.h>
#include <string.h>

#include "daemon/admin/ui_data.h"
#include "daemon/admin/ui_html.h"
#include "daemon/admin/ui_joblog.h"
#include "daemon/admin/ui_layout.h"

#define PAYLOAD_SHOWN 65536

struct jpage {
    struct ui_ctx *x;
    char *queue;
    char *id;
};

static void jpage_free(struct jpage *p)
{
    free(p->queue);
    free(p->id);
    free(p);
}

/* <div><dt>LABEL</dt><dd id="ID">text</dd></div> */
static void field(FILE *f, const char *label, const char *id, const char *text)
{
    fprintf(f, "<div><dt>%s</dt><dd id=\"%s\">", label, id);
    html_text(f, text);
    fputs("</dd></div>\n", f);
}

static void time_field(FILE *f, const char *label, const char *id, int64_t ms, int64_t now)
{
    fprintf(f, "<div><dt>%s</dt><dd id=\"%s\">", label, id);
    ui_layout_when(f, ms, now);
    fputs("</dd></div>\n", f);
}

static void job_fields(FILE *f, const struct ui_env *env, const struct queue_conf *q,
                       const struct jpage *p, const dq_job_info *info)
{
    const dq_job *j = &info->job;
    int max = j->max_attempts > 0 ? j->max_attempts
                                  : dconfig_max_attempts(env->conf, q, j->type);
    fputs("<dl id=\"job\">\n", f);
    field(f, "Id", "job-id", p->id);
    if (!dq_state_is_finished(info->state))
        field(f, "Type", "job-type", j->type ? j->type : "");
    field(f, "Queue", "job-queue", p->queue);
    fprintf(f, "<div><dt>State</dt><dd id=\"job-state\" class=\"state-%s\">%s</dd></div>\n",
            dq_state_str(info->state), dq_state_str(info->state));
    if (info->state == DQ_STATE_DONE) {
        /* All that is left of it: its dedupe window's tombstone. */
        time_field(f, "Done", "job-done", info->state_ms, info->now_ms);
        time_field(f, "Id kept until", "job-unique-until", info->unique_until_ms,
                   info->now_ms);
        fputs("</dl>\n", f);
        return;
    }
    if (info->state == DQ_STATE_CANCELLED) {
        /* Cancelled while it ran: its tombstone, and the run stopped. */
        time_field(f, "Cancelled", "job-cancelled", info->state_ms, info->now_ms);
        fprintf(f, "<div><dt>Fence of the run stopped</dt><dd id=\"job-fence\">%lld</dd>"
                "</div>\n", (long long)j->fence);
        time_field(f, "Id kept until", "job-unique-until", info->unique_until_ms,
                   info->now_ms);
        fputs("</dl>\n", f);
        return;
    }
    fprintf(f, "<div><dt>Attempts</dt><dd id=\"job-attempts\">%d of %d</dd></div>\n",
            j->attempt, max);
    fprintf(f, "<div><dt>Priority</dt><dd id=\"job-priority\">%d</dd></div>\n", j->priority);
    time_field(f, "Due", "job-due", j->due_ms, info->now_ms);
    time_field(f, "Created", "job-created", j->created_ms, info->now_ms);
    if (info->state == DQ_STATE_PROCESSING)
        time_field(f, "Lease deadline", "job-lease", info->state_ms, info->now_ms);
    if (info->state == DQ_STATE_DEAD)
        time_field(f, "Died", "job-died", info->state_ms, info->now_ms);
    if (info->expire_at_ms > 0) {
        time_field(f, "Expires", "job-expires", info->expire_at_ms, info->now_ms);
        field(f, "On expiry", "job-on-expire",
              info->on_expire == DQ_EXPIRE_DROP ? "dropped" : "to dead");
    }
    if (info->unique_ms > 0) {
        fputs("<div><dt>Id kept after it is done</dt><dd id=\"job-unique\">", f);
        html_duration(f, info->unique_ms);
        fputs("</dd></div>\n", f);
    }
    fputs("<div><dt>Last error</dt><dd id=\"job-error\">", f);
    html_text(f, j->last_error && *j->last_error ? j->last_error : "none");
    fputs("</dd></div>\n", f);
    if (info->state == DQ_STATE_PROCESSING) {
        pid_t pid = env->holder ? env->holder(env->holder_arg, p->queue, p->id) : 0;
        if (pid > 0)
            fprintf(f, "<div><dt>Worker</dt><dd id=\"job-worker\">pid %ld on this host"
                       "</dd></div>\n", (long)pid);
        else
            fputs("<div><dt>Worker</dt><dd id=\"job-worker\">on another host</dd></div>\n",
                  f);
    }
    fputs("</dl>\n", f);
}

static void payload(FILE *f, const dq_job *j)
{
    size_t shown = j->payload_len > PAYLOAD_SHOWN ? PAYLOAD_SHOWN : j->payload_len;
    int text = html_is_text(j->payload, j->payload_len);
    fprintf(f, "<h2>Payload <span class=\"size\">%zu bytes%s</span></h2>\n", j->payload_len,
            text ? "" : ", binary: hex");
    if (shown < j->payload_len)
        fprintf(f, "<p id=\"payload-cut\">showing %zu of %zu bytes</p>\n", shown,
                j->payload_len);
    fputs(text ? "<pre id=\"job-payload\">" : "<pre id=\"job-payload\" class=\"hex\">", f);
    if (text)
        html_textn(f, j->payload, shown);
    else
        html_hex(f, j->payload, shown);
    fputs("</pre>\n", f);
}

static void history_item(FILE *f, int64_t at_ms, const char *what)
{
    fputs("<li><time>", f);
    html_time(f, at_ms);
    fputs("</time> ", f);
    html_text(f, what);
    fputs("</li>\n", f);
}

/* What is known of the job's past: its record's times and counts, and
 * this dashboard's own actions on it (kept in memory since start). */
static void history(FILE *f, const struct jpage *p, const dq_job_info *info)
{
    struct ui_joblog_entry log[16];
    size_t n = ui_joblog_find(ui_ctx_env(p->x)->joblog, p->queue, p->id, log,
                              sizeof log / sizeof log[0]);
    fputs("<h2>History</h2>\n<ol id=\"job-history\">\n", f);
    if (info) {
        const dq_job *j = &info->job;
        char line[96];
        history_item(f, j->created_ms, "created");
        if (j->attempt > 0) {
            snprintf(line, sizeof line, "%d attempt%s made; the last error: ", j->attempt,
                     j->attempt == 1 ? "" : "s");
            fputs("<li>", f);
            html_text(f, line);
            html_text(f, j->last_error && *j->last_error ? j->last_error : "none");
            fputs("</li>\n", f);
        }
    }
    for (size_t i = 0; i < n; i++) {
        char what[64];
        snprintf(what, sizeof what, "%s from this dashboard", log[i].what);
        history_item(f, log[i].at_ms, what);
    }
    if (info) {
        switch (info->state) {
        case DQ_STATE_DELAYED:
            history_item(f, info->job.due_ms, info->job.due_ms <= info->now_ms
                                                  ? "due (waiting for a worker)" : "due");
            break;
        case DQ_STATE_PROCESSING:
            history_item(f, info->state_ms, "processing: its lease runs out");
            break;
        case DQ_STATE_DEAD:
            history_item(f, info->state_ms, "dead");
            break;
        default:
            break;
        }
    }
    fputs("</ol>\n<p class=\"note\">Redis keeps no history of a job; the actions listed are "
          "this dashboard's since the daemon started.</p>\n", f);
}

/* A POST form to the job's ACTION with one button, back to `back`. */
static void job_form(FILE *f, const struct jpage *p, const char *action, const char *label,
                     const char *back_suffix, int back_to_queue)
{
    char *path = ui_layout_path(p->queue, p->id, "/");
    char *back = ui_layout_path(p->queue, back_to_queue ? NULL : p->id, back_suffix);
    if (path && back) {
        fprintf(f, "<form id=\"%s\" class=\"action\" method=\"post\" action=\"", action);
        html_text(f, path);
        fprintf(f, "%s\">", action);
        ui_layout_back_field(f, back);
        fprintf(f, "<button id=\"%s-button\" type=\"submit\">%s</button></form>\n", action,
                label);
    }
    free(path);
    free(back);
}

static void job_actions(FILE *f, const struct ui_env *env, const struct jpage *p,
                        dq_state st)
{
    if (env->read_only)
        return;
    fputs("<div class=\"actions\">\n", f);
    if (st == DQ_STATE_DEAD) {
        job_form(f, p, "requeue", "Requeue", "", 0);
        job_form(f, p, "delete", "Delete", "?tab=dead", 1);
    } else if (st == DQ_STATE_DELAYED) {
        job_form(f, p, "run-now", "Run now", "", 0);
        job_form(f, p, "cancel", "Cancel", "?tab=delayed", 1);
    } else if (st == DQ_STATE_PROCESSING) {
        /* It ends at once; the page then shows it cancelled. */
        job_form(f, p, "cancel", "Cancel", "", 0);
    }
    fputs("</div>\n", f);
}

static void job_gone(struct jpage *p)
{
    struct ui_out o;
    if (ui_layout_open(&o) != 0) {
        ui_layout_oom(p->x);
        return;
    }
    ui_layout_begin(o.f, p->x, p->id, 0);
    fputs("<h1>Job</h1>\n<dl id=\"job\">\n", o.f);
    field(o.f, "Id", "job-id", p->id);
    field(o.f, "Queue", "job-queue", p->queue);
    fputs("<div><dt>State</dt><dd id=\"job-state\" class=\"state-notfound\">notfound</dd>"
          "</div>\n", o.f);
    fputs("</dl>\n<p id=\"job-gone\">No such job in this queue now: it may have run and been "
          "deleted, or been cancelled or purged.</p>\n", o.f);
    history(o.f, p, NULL);
    ui_layout_end(o.f, NULL);
    ui_layout_reply(&o, p->x, 404);
}

static void on_show(const dq_job_info *info, dq_status st, const char *err, void *arg)
{
    struct jpage *p = arg;
    const struct ui_env *env = ui_ctx_env(p->x);
    const struct queue_conf *q = ui_layout_queue(env, p->queue, NULL);
    struct ui_out o;
    if (!info && st == DQ_ERR_NOTFOUND) {
        job_gone(p);
    } else if (!info) {
        ui_layout_unavailable(p->x, err);
    } else if (!q) {
        ui_page_not_found(p->x, "such queue");
    } else if (ui_layout_open(&o) != 0) {
        ui_layout_oom(p->x);
    } else {
        ui_layout_begin(o.f, p->x, p->id, 0);
        fputs("<h1>Job <span class=\"mono\">", o.f);
        html_text(o.f, p->id);
        fputs("</span></h1>\n<p>In queue <a class=\"queue\" href=\"/ui/queues/", o.f);
        html_url(o.f, p->queue);
        fputs("\">", o.f);
        html_text(o.f, p->queue);
        fputs("</a></p>\n", o.f);
        job_fields(o.f, env, q, p, info);
        if (!dq_state_is_finished(info->state)) {
            job_actions(o.f, env, p, info->state);
            payload(o.f, &info->job);
            history(o.f, p, info);
        }
        ui_layout_end(o.f, NULL);
        ui_layout_reply(&o, p->x, 200);
    }
    jpage_free(p);
}

void ui_page_job(struct ui_ctx *x, const char *queue, const char *id)
{
    const struct queue_conf *q;
    struct ui_data *d = ui_layout_data_for(x, queue, &q);
    struct jpage *p;
    if (!d)
        return;
    p = calloc(1, sizeof *p);
    if (!p || !(p->queue = strdup(queue)) || !(p->id = strdup(id))) {
        if (p)
            jpage_free(p);
        ui_layout_oom(x);
        return;
    }
    p->x = x;
    if (ui_data_show(d, q, id, on_show, p) != 0) {
        jpage_free(p);
        ui_layout_unavailable(x, ui_data_refusal(d));
    }
}
