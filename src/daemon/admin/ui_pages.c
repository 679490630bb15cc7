/*
 * The dashboard's overview, login and "not found" pages (the queue page
 * is ui_page_queue.c, the job page ui_page_job.c, the actions
 * ui_actions.c).  The overview answers at once from what the admin process
 * already holds (the cached stats of qstats.h, the workers, the history):
 * opening it costs Redis nothing beyond qstats' own bounded refresh.
 */
#include "daemon/admin/ui_pages.h"

#include <inttypes.h>

#include "daemon/admin/ui_history.h"
#include "daemon/admin/ui_html.h"
#include "daemon/admin/ui_layout.h"

/* A count cell, right-aligned by the CSS class "num"; "-" when unknown. */
static void count_cell(FILE *f, const char *cls, const dq_stats *s, int64_t v)
{
    fprintf(f, "<td class=\"num %s%s\">", cls, s && v > 0 ? " nonzero" : "");
    if (s)
        fprintf(f, "%" PRId64, v);
    else
        fputs("-", f);
    fputs("</td>", f);
}

/* A lateness in microseconds: "0.4 ms", "12.3 s"; "-" when none. */
static void lateness(FILE *f, int64_t us)
{
    if (us < 0)
        fputs("-", f);
    else if (us < 10000)
        fprintf(f, "%.1f ms", (double)us / 1000.0);
    else
        html_duration(f, us / 1000);
}

/* The age of the queue's oldest due job: now - its due time, "-" when
 * there is none (or the stats do not say). */
static void oldest_due_cell(FILE *f, const struct ui_env *env, size_t i)
{
    fputs("<td class=\"num oldest-due\">", f);
    if (env->stats.stats && env->stats.oldest_due_ms && env->stats.oldest_due_ms[i] >= 0 &&
        env->stats.oldest_due_ms[i] <= env->stats.stats[i].now_ms)
        html_duration(f, env->stats.stats[i].now_ms - env->stats.oldest_due_ms[i]);
    else
        fputs("-", f);
    fputs("</td>", f);
}

static void overview_row(FILE *f, const struct ui_env *env, size_t i)
{
    const char *name = env->conf->queues[i].name;
    const dq_stats *s = env->stats.stats ? &env->stats.stats[i] : NULL;
    int paused = s && env->stats.paused_since && env->stats.paused_since[i] >= 0;
    double rate = 0;
    int64_t p50 = -1, p99 = -1;
    if (env->history)
        ui_history_minute(env->history, name, &rate, &p50, &p99);
    fputs("<tr data-queue=\"", f);
    html_text(f, name);
    fputs("\"><td class=\"name\"><a class=\"queue\" href=\"/ui/queues/", f);
    html_url(f, name);
    fputs("\">", f);
    html_text(f, name);
    fputs("</a></td>", f);
    count_cell(f, "delayed", s, s ? s->delayed : 0);
    count_cell(f, "due", s, s ? s->due : 0);
    count_cell(f, "processing", s, s ? s->processing : 0);
    count_cell(f, "dead", s, s ? s->dead : 0);
    oldest_due_cell(f, env, i);
    if (!s)
        fputs("<td class=\"state\">-</td>", f);
    else
        fputs(paused ? "<td class=\"state state-paused paused\">paused</td>"
                     : "<td class=\"state state-running running\">running</td>", f);
    if (env->live)
        fprintf(f, "<td class=\"num workers%s\">%d/%d</td>",
                env->live[i].workers_alive < env->live[i].workers_wanted ? " short" : "",
                env->live[i].workers_alive, env->live[i].workers_wanted);
    else
        fputs("<td class=\"num workers\">-</td>", f);
    fprintf(f, "<td class=\"num rate\">%.1f</td><td class=\"num p50\">", rate);
    lateness(f, p50);
    fputs("</td><td class=\"num p99\">", f);
    lateness(f, p99);
    fputs("</td></tr>\n", f);
}

/* Why the counts may be old, when they are. */
static void stats_notice(FILE *f, const struct ui_env *env)
{
    if (!env->stats.stats) {
        fputs("<p class=\"stale\">No counts from Redis yet", f);
    } else if (!env->stats.fresh) {
        fputs("<p class=\"stale\">Counts from ", f);
        html_duration(f, env->stats.age_ms);
        fputs(" ago", f);
    } else {
        return;
    }
    if (env->stats.why[0]) {
        fputs(": ", f);
        html_text(f, env->stats.why);
    }
    fputs("</p>\n", f);
}

void ui_page_overview(struct ui_ctx *x)
{
    const struct ui_env *env = ui_ctx_env(x);
    struct ui_out o;
    if (ui_layout_open(&o) != 0) {
        ui_layout_oom(x);
        return;
    }
    ui_layout_begin(o.f, x, "Overview", UI_LAYOUT_REFRESH);
    fputs("<h1>Queues</h1>\n", o.f);
    stats_notice(o.f, env);
    fputs("<table id=\"queues\">\n<thead><tr><th>Queue</th><th class=\"num\">Delayed</th>"
          "<th class=\"num\">Due</th><th class=\"num\">Processing</th>"
          "<th class=\"num\">Dead</th><th class=\"num\">Oldest due</th><th>State</th>"
          "<th class=\"num\">Workers</th><th class=\"num\">Jobs/s (1 min)</th>"
          "<th class=\"num\">Lateness p50</th><th class=\"num\">p99</th></tr></thead>\n"
          "<tbody>\n", o.f);
    for (size_t i = 0; env->conf && i < env->conf->nqueues; i++)
        overview_row(o.f, env, i);
    fputs("</tbody>\n</table>\n", o.f);
    if (env->stats.stats && env->stats.age_ms >= 0) {
        fputs("<p class=\"note\">Counts ", o.f);
        html_duration(o.f, env->stats.age_ms);
        fputs(" old; rates and lateness over the last minute, from this host's "
              "workers.</p>\n", o.f);
    }
    ui_layout_end(o.f, "");
    ui_layout_reply(&o, x, 200);
}

void ui_page_login(struct ui_ctx *x, int code, const char *error)
{
    const struct ui_env *env = ui_ctx_env(x);
    int basic = env->conf && env->conf->admin_basic;
    int token = !env->conf || env->conf->admin_token || !basic;
    struct ui_out o;
    if (ui_layout_open(&o) != 0) {
        ui_layout_oom(x);
        return;
    }
    ui_layout_begin(o.f, x, "Log in", UI_LAYOUT_NO_NAV);
    fputs("<h1>delayq dashboard</h1>\n", o.f);
    if (error) {
        fputs("<p id=\"login-error\">", o.f);
        html_text(o.f, error);
        fputs("</p>\n", o.f);
    }
    fputs("<form id=\"login\" method=\"post\" action=\"/ui/login\">\n", o.f);
    if (token)
        fputs("<label for=\"token\">Token</label>\n<input id=\"token\" name=\"token\" "
              "type=\"password\" autocomplete=\"current-password\">\n", o.f);
    if (basic)
        fputs("<label for=\"user\">User</label>\n<input id=\"user\" name=\"user\" "
              "autocomplete=\"username\">\n<label for=\"password\">Password</label>\n"
              "<input id=\"password\" name=\"password\" type=\"password\" "
              "autocomplete=\"current-password\">\n", o.f);
    fputs("<button id=\"login-submit\" type=\"submit\">Log in</button>\n</form>\n", o.f);
    ui_layout_end(o.f, NULL);
    ui_layout_reply(&o, x, code);
}
