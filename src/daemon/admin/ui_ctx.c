#include "daemon/admin/ui_ctx.h"

#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

static const char csp[] =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

struct ui_ctx *ui_ctx_new(struct ui *u, struct evhttp_request *req)
{
    struct ui_ctx *x = calloc(1, sizeof *x);
    if (!x)
        return NULL;
    x->u = u;
    x->req = req;
    x->evcon = evhttp_request_get_connection(req);
    TAILQ_INIT(&x->query);
    TAILQ_INIT(&x->form);
    x->next = u->pending;
    u->pending = x;
    return x;
}

static void unlink_ctx(struct ui_ctx *x)
{
    if (!x->u)
        return;
    for (struct ui_ctx **p = &x->u->pending; *p; p = &(*p)->next)
        if (*p == x) {
            *p = x->next;
            break;
        }
}

void ui_ctx_free(struct ui_ctx *x)
{
    unlink_ctx(x);
    for (size_t i = 0; i < x->nsegs; i++)
        free(x->segs[i]);
    evhttp_clear_headers(&x->query);
    /* A login form's token or password: overwritten before it is freed. */
    struct evkeyval *kv;
    TAILQ_FOREACH(kv, &x->form, next)
        if (kv->value)
            explicit_bzero(kv->value, strlen(kv->value));
    evhttp_clear_headers(&x->form);
    free(x);
}

const struct ui_env *ui_ctx_env(struct ui_ctx *x)
{
    memset(&x->env, 0, sizeof x->env);
    if (x->u && x->u->host.fill)
        x->u->host.fill(x->u->host.arg, &x->env);
    if (x->u) {
        x->env.read_only = x->env.read_only || x->u->read_only;
        x->env.joblog = x->u->joblog;
    }
    return &x->env;
}

const char *ui_ctx_query(struct ui_ctx *x, const char *name)
{
    return evhttp_find_header(&x->query, name);
}

const char *ui_ctx_form(struct ui_ctx *x, const char *name)
{
    return evhttp_find_header(&x->form, name);
}

const char *ui_ctx_segment(struct ui_ctx *x, size_t i)
{
    return i < x->nsegs ? x->segs[i] : NULL;
}

void ui_ctx_security_headers(struct evkeyvalq *out, int cacheable)
{
    evhttp_add_header(out, "Content-Security-Policy", csp);
    evhttp_add_header(out, "X-Frame-Options", "DENY");
    evhttp_add_header(out, "X-Content-Type-Options", "nosniff");
    evhttp_add_header(out, "Referrer-Policy", "no-referrer");
    if (!cacheable)
        evhttp_add_header(out, "Cache-Control", "no-store");
}

/* Whether the context's request can still be answered; frees it when not. */
static int still_there(struct ui_ctx *x)
{
    if (x->req && !x->detached && x->u)
        return 1;
    /* Detached from its connection: ours to free.  After ui_free (the
     * server is gone, and its requests with it) nothing is touched. */
    if (x->req && x->u)
        evhttp_request_free(x->req);
    ui_ctx_free(x);
    return 0;
}

void ui_ctx_send(struct ui_ctx *x, int code, const char *reason, struct evbuffer *body)
{
    evhttp_send_reply(x->req, code, reason, body);
    ui_ctx_free(x);
}

void ui_ctx_reply(struct ui_ctx *x, int code, const char *type, const char *body,
                  size_t len)
{
    if (!still_there(x))
        return;
    struct evkeyvalq *out = evhttp_request_get_output_headers(x->req);
    evhttp_add_header(out, "Content-Type", type ? type : "text/html; charset=utf-8");
    ui_ctx_security_headers(out, 0);
    struct evbuffer *buf = evbuffer_new();
    if (buf && evbuffer_add(buf, body, len) < 0) {
        evbuffer_free(buf);
        buf = NULL;
    }
    ui_ctx_send(x, buf ? code : 500, NULL, buf);
    if (buf)
        evbuffer_free(buf);
}

void ui_ctx_redirect(struct ui_ctx *x, const char *location)
{
    if (!still_there(x))
        return;
    struct evkeyvalq *out = evhttp_request_get_output_headers(x->req);
    evhttp_add_header(out, "Location", location);
    evhttp_add_header(out, "Content-Type", "text/plain; charset=utf-8");
    ui_ctx_security_headers(out, 0);
    ui_ctx_send(x, 303, "See Other", NULL);
}

