#include "daemon/admin/ui_layout.h"

#include <stdlib.h>
#include <string.h>

#include "daemon/admin/ui_html.h"

int ui_layout_open(struct ui_out *o)
{
    o->buf = NULL;
    o->len = 0;
    o->f = open_memstream(&o->buf, &o->len);
    return o->f ? 0 : -1;
}

void ui_layout_reply(struct ui_out *o, struct ui_ctx *x, int code)
{
    int failed = ferror(o->f);
    if (fclose(o->f) != 0)
        failed = 1;
    o->f = NULL;
    if (failed) {
        free(o->buf);
        o->buf = NULL;
        ui_layout_oom(x);
        return;
    }
    ui_ctx_reply(x, code, NULL, o->buf, o->len);
    free(o->buf);
    o->buf = NULL;
    o->len = 0;
}

void ui_layout_oom(struct ui_ctx *x)
{
    static const char msg[] = "<!DOCTYPE html><title>delayq</title>"
                              "<main id=\"content\"><p>out of memory</p></main>\n";
    ui_ctx_reply(x, 500, NULL, msg, sizeof msg - 1);
}

/* The fixed line for an action's outcome code; NULL for a code we never
 * send (it is then not shown: the page never echoes it). */
static const char *flash_text(const char *done, const char *failed)
{
    static const char *const codes[][2] = {
        { "requeued", "The job was requeued: it is due now." },
        { "deleted", "The dead job was deleted." },
        { "cancelled", "The delayed job was cancelled." },
        { "ran-now", "The job is due now." },
        { "paused", "The queue is paused: workers claim nothing from it." },
        { "resumed", "The queue runs again." },
        { "requeued-all", "Every dead job was requeued." },
        { "purged-all", "Every dead job was deleted." },
    };
    static const char *const fails[][2] = {
        { "notfound", "Not done: the job is no longer in that state (it may have run, "
                      "been moved or deleted)." },
        { "running", "Not done: the job is being processed." },
        { "dead", "Not done: the job is dead (requeue or delete it instead)." },
        { "error", "Not done: Redis could not be asked; try again." },
    };
    for (size_t i = 0; done && i < sizeof codes / sizeof codes[0]; i++)
        if (strcmp(done, codes[i][0]) == 0)
            return codes[i][1];
    for (size_t i = 0; failed && i < sizeof fails / sizeof fails[0]; i++)
        if (strcmp(failed, fails[i][0]) == 0)
            return fails[i][1];
    return NULL;
}

static void layout_nav(FILE *f, const struct ui_env *env)
{
    fputs("<header><nav>\n<a id=\"nav-overview\" href=\"/ui/\">delayq</a>\n", f);
    for (size_t i = 0; env->conf && i < env->conf->nqueues; i++) {
        fputs("<a class=\"nav-queue\" href=\"/ui/queues/", f);
        html_url(f, env->conf->queues[i].name);
        fputs("\">", f);
        html_text(f, env->conf->queues[i].name);
        fputs("</a>\n", f);
    }
    if (env->read_only)
        fputs("<span class=\"badge\">read-only</span>\n", f);
    fputs("<form id=\"logout\" method=\"post\" action=\"/ui/logout\">"
          "<button type=\"submit\">Log out</button></form>\n</nav></header>\n", f);
}

void ui_layout_begin(FILE *f, struct ui_ctx *x, const char *title, int flags)
{
    const char *done = ui_ctx_query(x, "done");
    const char *failed = ui_ctx_query(x, "failed");
    const char *sent = ui_ctx_query(x, "sent");
    const char *flash = flash_text(done, failed);
    const char *cls = done && !failed ? "ok" : "failed";
    if (!flash && sent && strcmp(sent, "unknown") == 0) {
        flash = "Sent; the outcome is unknown, look at the queue.";
        cls = "unknown";
    }
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
          "<title>", f);
    html_text(f, title);
    fputs(" · delayq</title>\n"
          "<link rel=\"stylesheet\" href=\"/ui/assets/app.css\">\n"
          "<script src=\"/ui/assets/app.js\" defer></script>\n</head>\n<body>\n", f);
    if (!(flags & UI_LAYOUT_NO_NAV))
        layout_nav(f, ui_ctx_env(x));
    fputs((flags & UI_LAYOUT_REFRESH) ? "<main id=\"content\" data-refresh=\"3\">\n"
                                      : "<main id=\"content\">\n", f);
    if (flash) {
        fprintf(f, "<p id=\"flash\" class=\"%s\">", cls);
        html_text(f, flash);
        fputs("</p>\n", f);
    }
}

void ui_layout_end(FILE *f, const char *charts_queue)
{
    static const char *const series[][2] = {
        { "done", "Jobs done per second" },
        { "failed", "Failures per second" },
        { "lateness", "Fire lateness (p50, p99)" },
    };
    fputs("</main>\n", f);
    if (charts_queue) {
        fputs("<section id=\"charts\">\n<h2>Last hour</h2>\n", f);
        for (size_t i = 0; i < sizeof series / sizeof series[0]; i++) {
            fprintf(f, "<div class=\"chart\" data-series=\"%s\" data-queue=\"", series[i][0]);
            html_text(f, charts_queue);
            fputs("\"><h3>", f);
            html_text(f, series[i][1]);
            fputs("</h3></div>\n", f);
        }
        fputs("</section>\n", f);
    }
    fputs("<footer>delayq · times in UTC</footer>\n</body>\n</html>\n", f);
}

const struct queue_conf *ui_layout_queue(const struct ui_env *env, const char *name,
                                         size_t *index)
{
    for (size_t i = 0; env->conf && name && i < env->conf->nqueues; i++) {
        if (strcmp(env->conf->queues[i].name, name) == 0) {
            if (index)
                *index = i;
            return &env->conf->queues[i];
        }
    }
    return NULL;
}

/* ui_pages.h: here, beside the other pages every page may answer. */
void ui_page_not_found(struct ui_ctx *x, const char *what)
{
    struct ui_out o;
    if (ui_layout_open(&o) != 0) {
        ui_layout_oom(x);
        return;
    }
    ui_layout_begin(o.f, x, "Not found", 0);
    fputs("<h1>Not found</h1>\n<p id=\"not-found\">There is no ", o.f);
    html_text(o.f, what && *what ? what : "such page");
    fputs(" here. <a href=\"/ui/\">Back to the overview</a>.</p>\n", o.f);
    ui_layout_end(o.f, NULL);
    ui_layout_reply(&o, x, 404);
}

void ui_layout_unavailable(struct ui_ctx *x, const char *why)
{
    struct ui_out o;
    if (ui_layout_open(&o) != 0) {
        ui_layout_oom(x);
        return;
    }
    ui_layout_begin(o.f, x, "Redis unavailable", UI_LAYOUT_REFRESH);
    fputs("<h1>Redis cannot be asked right now</h1>\n<p id=\"unavailable\">The dashboard's "
          "connection to Redis is not up, or the question failed. The page retries by "
          "itself.</p>\n", o.f);
    if (why && *why) {
        fputs("<p class=\"why\">", o.f);
        html_text(o.f, why);
        fputs("</p>\n", o.f);
    }
    ui_layout_end(o.f, NULL);
    ui_layout_reply(&o, x, 503);
}

void ui_layout_back_field(FILE *f, const char *back)
{
    fputs("<input type=\"hidden\" name=\"back\" value=\"", f);
    html_text(f, back);
    fputs("\">", f);
}

char *ui_layout_path(const char *queue, const char *id, const char *suffix)
{
    char *s = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&s, &len);
    if (!f)
        return NULL;
    fputs("/ui/queues/", f);
    html_url(f, queue);
    if (id) {
        fputs("/jobs/", f);
        html_url(f, id);
    }
    fputs(suffix, f);
    if (fclose(f) != 0) {
        free(s);
        return NULL;
    }
    return s;
}

void ui_layout_when(FILE *f, int64_t at_ms, int64_t now_ms)
{
    html_time(f, at_ms);
    if (at_ms < 0 || now_ms <= 0)
        return;
    fputs(at_ms >= now_ms ? " <span class=\"rel\">(in " : " <span class=\"rel\">(", f);
    html_duration(f, at_ms >= now_ms ? at_ms - now_ms : now_ms - at_ms);
    fputs(at_ms >= now_ms ? ")</span>" : " ago)</span>", f);
}

struct ui_data *ui_layout_data_for(struct ui_ctx *x, const char *queue,
                                   const struct queue_conf **q)
{
    const struct ui_env *env = ui_ctx_env(x);
    *q = ui_layout_queue(env, queue, NULL);
    if (!*q) {
        ui_page_not_found(x, "such queue");
        return NULL;
    }
    if (!env->data) {
        ui_layout_unavailable(x, "not connected to Redis yet");
        return NULL;
    }
    return env->data;
}
