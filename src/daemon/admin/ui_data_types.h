/*
 * ui_data_types: the values ui_data's calls hand back (ui_data.h says
 * what each call does), apart so that ui_data's inside (ui_data_op.h)
 * shares them without including ui_data.h back.
 */
#ifndef DQ_UI_DATA_TYPES_H
#define DQ_UI_DATA_TYPES_H

#include <delayq/client.h>
#include <stddef.h>
#include <stdint.h>

enum ui_list { UI_LIST_DELAYED, UI_LIST_PROCESSING, UI_LIST_DEAD };

struct ui_entry {
    char *id;
    char *type;
    int64_t at_ms;              /* due time, lease deadline or time of death */
    int attempts;               /* attempts made (processing: incl. this one) */
    int max_attempts;           /* 0: the consumer's default */
    int priority;               /* 0..9 */
    int64_t created_ms;
    size_t payload_len;
    char *last_error;           /* "" when none */
    int unreadable;             /* the record cannot be read: last_error says why */
};

struct ui_page {
    struct ui_entry *e;
    size_t n;
    int64_t total;              /* in the list (all types) */
    int64_t matched;            /* with a type filter: entries of that type
                                   found (-1: more than were examined) */
    int64_t now_ms;             /* the server's clock */
};

/* The callbacks of ui_data_page, ui_data_show, ui_data_schedules and
 * ui_data_action (see ui_data.h). */
typedef void (*ui_page_fn)(const struct ui_page *page, const char *err, void *arg);
typedef void (*ui_show_fn)(const dq_job_info *info, dq_status st, const char *err,
                           void *arg);
typedef void (*ui_schedules_fn)(const dq_schedule_list *list, const char *err, void *arg);
typedef void (*ui_action_fn)(dq_status st, int64_t count, const char *err, void *arg);

enum ui_action {
    UI_ACT_REQUEUE,             /* one dead job back to due now */
    UI_ACT_PURGE,               /* one dead job deleted */
    UI_ACT_CANCEL,              /* one delayed job deleted */
    UI_ACT_RUN_NOW,             /* one delayed job due now */
    UI_ACT_REQUEUE_ALL,         /* every dead job back to due now */
    UI_ACT_PURGE_ALL,           /* every dead job deleted */
    UI_ACT_PAUSE,
    UI_ACT_RESUME
};

#endif
