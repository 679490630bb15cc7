/*
 * ui_layout: what every dashboard page shares: the document around the
 * page's own content (head with the built-in CSS and JS, the navigation
 * with the logout form, <main id="content">, the flash message of an
 * action's redirect, the charts section), the buffer a page is written
 * into, and the pages for "not there" and "cannot ask Redis".
 */
#ifndef DQ_UI_LAYOUT_H
#define DQ_UI_LAYOUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "daemon/admin/ui_env.h"

/* A page being written: f is an open_memstream over buf/len. */
struct ui_out {
    FILE *f;
    char *buf;
    size_t len;
};

/* Open o; -1 when out of memory (the caller answers 500 with
 * ui_layout_oom). */
int ui_layout_open(struct ui_out *o);

/* Close o and answer `code` with it; o is then empty.  Frees x. */
void ui_layout_reply(struct ui_out *o, struct ui_ctx *x, int code);

/* A plain 500 when not even the page's buffer could be had.  Frees x. */
void ui_layout_oom(struct ui_ctx *x);

enum ui_layout_flags {
    UI_LAYOUT_REFRESH = 1,      /* <main data-refresh="3">: live refresh */
    UI_LAYOUT_NO_NAV = 2        /* not logged in: no links, no logout */
};

/* Everything up to and including <main id="content">, and the flash of
 * the request's ?done= or ?failed= code.  `title`: plain text. */
void ui_layout_begin(FILE *f, struct ui_ctx *x, const char *title, int flags);

/* </main>, the charts (for `charts_queue`: "" all queues, NULL none), the
 * footer and the end of the document. */
void ui_layout_end(FILE *f, const char *charts_queue);

/* The queue of the configuration in force called `name`, and its index in
 * it (*index may be NULL); NULL when there is none. */
const struct queue_conf *ui_layout_queue(const struct ui_env *env, const char *name,
                                         size_t *index);

/* For a page of `queue` that asks Redis: the dashboard's ui_data, with the
 * queue's configuration in *q; NULL when there is no such queue (a 404
 * answered) or no connection yet (a 503 answered): x is then freed. */
struct ui_data *ui_layout_data_for(struct ui_ctx *x, const char *queue,
                                   const struct queue_conf **q);

/* 404 page, for a path or queue the router does not know. */
void ui_page_not_found(struct ui_ctx *x, const char *what);

/* A 503 page: Redis could not be asked (`why`: a line for the operator,
 * may be NULL).  Frees x. */
void ui_layout_unavailable(struct ui_ctx *x, const char *why);

/* "/ui/queues/QUEUE" (+ "/jobs/ID" when id is not NULL) + suffix (a
 * literal query such as "?tab=dead", or ""), names percent-encoded; a
 * string to free, NULL when out of memory. */
char *ui_layout_path(const char *queue, const char *id, const char *suffix);

/* A time in UTC and how far from now: "2026-... UTC (in 4 s)", "(3 s
 * ago)"; just "-" when at_ms < 0. */
void ui_layout_when(FILE *f, int64_t at_ms, int64_t now_ms);

/* A hidden form field back=BACK (a dashboard path, escaped here): where
 * the action's redirect goes (ui_actions.c checks it again). */
void ui_layout_back_field(FILE *f, const char *back);

#endif
