/*
 * ui_joblog: what this dashboard did to which job since the admin process
 * started (requeued, deleted, cancelled, ran now), for the history on the
 * job page.  Redis keeps no history of a job, so this is the only record
 * of those clicks; it is small, in memory and lost on restart, which the
 * job page says.
 *
 * One belongs to each dashboard (struct ui, which the pages reach as
 * ui_env.joblog): a bounded ring of the last UI_JOBLOG_MAX actions, the
 * oldest overwritten first.
 */
#ifndef DQ_UI_JOBLOG_H
#define DQ_UI_JOBLOG_H

#include <stddef.h>
#include <stdint.h>

#define UI_JOBLOG_MAX 256

struct ui_joblog_entry {
    int64_t at_ms;              /* Unix ms (the host's clock) */
    const char *what;           /* a fixed word: "requeued", "deleted" ... */
};

struct ui_joblog;

/* An empty log; NULL when out of memory. */
struct ui_joblog *ui_joblog_new(void);
void ui_joblog_free(struct ui_joblog *l);

/* Note that `what` (a string literal) was done to job `id` of `queue`
 * now.  Ids and names too long for the ring's slots are not noted; a NULL
 * log (the dashboard is gone) notes nothing. */
void ui_joblog_add(struct ui_joblog *l, const char *queue, const char *id,
                   const char *what);

/* The actions on `id` of `queue`, oldest first, into out[0..max-1];
 * returns how many (0 for a NULL log). */
size_t ui_joblog_find(const struct ui_joblog *l, const char *queue, const char *id,
                      struct ui_joblog_entry *out, size_t max);

#endif
