/*
 * ui_pages: the dashboard's pages and actions (ui_pages.c, ui_actions.c)
 * and its JSON (ui_api.c), reached through ui.c's gates (ui.h).  Each
 * answers exactly once with ui_ctx_reply or ui_ctx_redirect, perhaps after
 * a Redis round trip (ui_data.h).  Every value from Redis or the request
 * is escaped where it is written (ui_html.h).
 *
 * Routes (under /ui):
 *   GET  /                                  overview
 *   GET  /queues/Q?tab=delayed|processing|dead|schedules&page=N&type=T
 *   GET  /queues/Q/find?id=ID               303 to the job's page
 *   GET  /queues/Q/jobs/ID                  job page
 *   POST /queues/Q/pause, /queues/Q/resume
 *   POST /queues/Q/dead/requeue-all, /queues/Q/dead/purge-all
 *        (without expect=N: a page asking to confirm, showing N)
 *   POST /queues/Q/jobs/ID/requeue|delete|cancel|run-now
 *   GET  /api/history?queue=Q               per-second series (JSON)
 */
#ifndef DQ_UI_PAGES_H
#define DQ_UI_PAGES_H

#include "daemon/admin/ui_env.h"

void ui_page_overview(struct ui_ctx *x);
/* `queue` is a queue of the configuration in force. */
void ui_page_queue(struct ui_ctx *x, const char *queue);
void ui_page_find(struct ui_ctx *x, const char *queue);
void ui_page_job(struct ui_ctx *x, const char *queue, const char *id);
/* `action`: "pause", "resume", "requeue-all", "purge-all". */
void ui_action_queue(struct ui_ctx *x, const char *queue, const char *action);
/* `action`: "requeue", "delete", "cancel", "run-now". */
void ui_action_job(struct ui_ctx *x, const char *queue, const char *id,
                   const char *action);
/* The login page (code 200, or 401 when authentication failed/missing);
 * `error` NULL or a fixed message. */
void ui_page_login(struct ui_ctx *x, int code, const char *error);
void ui_api_history(struct ui_ctx *x);

#endif
