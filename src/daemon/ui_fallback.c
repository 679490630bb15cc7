/*
 * Plain stand-ins for the dashboard's pages and assets, as weak symbols:
 * the real ones (ui_pages.c, ui_actions.c, ui_api.c, the embedded assets)
 * replace them at link time.  They answer with minimal, escaped HTML that
 * keeps the contract's ids (main#content, form#login ...), so the front
 * door (ui.c) can be used and tested on its own.
 */
#include <stdio.h>
#include <stdlib.h>

#include "daemon/ui_assets.h"
#include "daemon/ui_html.h"
#include "daemon/ui_pages.h"

#define WEAK __attribute__((weak))

/* Close the page's stream and send it (500 when it failed). */
static void finish(struct ui_ctx *x, int code, FILE *out, char **body, size_t *len)
{
    if (fclose(out) != 0)
        ui_ctx_reply(x, 500, "text/plain; charset=utf-8", "out of memory\n", 14);
    else
        ui_ctx_reply(x, code, NULL, *body, *len);
    free(*body);
}

/* A page: "<main id=content>" with `title` and `text` (both escaped). */
static void page(struct ui_ctx *x, int code, const char *title, const char *text)
{
    char *body = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&body, &len);
    if (!out) {
        ui_ctx_reply(x, 500, "text/plain; charset=utf-8", "out of memory\n", 14);
        return;
    }
    fputs("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>", out);
    html_text(out, title);
    fputs("</title></head><body><main id=\"content\"><h1>", out);
    html_text(out, title);
    fputs("</h1><p>", out);
    html_text(out, text ? text : "");
    fputs("</p></main></body></html>\n", out);
    finish(x, code, out, &body, &len);
}

WEAK void ui_page_overview(struct ui_ctx *x)
{
    page(x, 200, "delayq", "overview");
}

WEAK void ui_page_queue(struct ui_ctx *x, const char *queue)
{
    page(x, 200, queue, "queue");
}

WEAK void ui_page_find(struct ui_ctx *x, const char *queue)
{
    page(x, 404, queue, "not found");
}

WEAK void ui_page_job(struct ui_ctx *x, const char *queue, const char *id)
{
    (void)queue;
    page(x, 200, id, "job");
}

WEAK void ui_action_queue(struct ui_ctx *x, const char *queue, const char *action)
{
    (void)queue;
    page(x, 200, action, "done");
}

WEAK void ui_action_job(struct ui_ctx *x, const char *queue, const char *id,
                        const char *action)
{
    (void)queue;
    page(x, 200, action, id);
}

WEAK void ui_page_not_found(struct ui_ctx *x, const char *what)
{
    page(x, 404, "not found", what);
}

WEAK void ui_page_login(struct ui_ctx *x, int code, const char *error)
{
    char *body = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&body, &len);
    if (!out) {
        ui_ctx_reply(x, 500, "text/plain; charset=utf-8", "out of memory\n", 14);
        return;
    }
    fputs("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>delayq: log in"
          "</title></head><body><main id=\"content\">", out);
    if (error) {
        fputs("<p id=\"login-error\">", out);
        html_text(out, error);
        fputs("</p>", out);
    }
    fputs("<form id=\"login\" method=\"post\" action=\"/ui/login\">"
          "<input id=\"token\" name=\"token\" type=\"password\">"
          "<input id=\"user\" name=\"user\"><input id=\"password\" name=\"password\" "
          "type=\"password\"><button id=\"login-submit\">Log in</button></form>"
          "</main></body></html>\n", out);
    finish(x, code, out, &body, &len);
}

WEAK void ui_api_history(struct ui_ctx *x)
{
    ui_ctx_reply(x, 200, "application/json", "{}", 2);
}

WEAK const struct ui_asset *ui_asset_find(const char *name)
{
    (void)name;
    return NULL;
}
