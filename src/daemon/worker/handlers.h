/*
 * The handler table of one process: every handler entry of the
 * configuration, loaded and initialised, found by job type.
 */
#ifndef DQ_HANDLERS_H
#define DQ_HANDLERS_H

#include "daemon/cancel_board.h"
#include "daemon/dconfig.h"
#include "daemon/worker/handler_loader.h"
#include "daemon/worker/settings.h"

struct handler_entry {
    const struct handler_conf *conf;
    struct loaded_handler lh;
    dq_settings *settings;
    dq_host host;               /* lives as long as the entry: init keeps it */
};

struct handler_table {
    struct handler_entry *entries;
    size_t n;
};

/*
 * Load and initialise every handler of `dc` (which must outlive the table).
 * Returns 0, or -1 with "CONFIG:LINE: handler PATH: reason" in err and the
 * table empty.
 */
int handlers_open(struct handler_table *t, const struct daemon_conf *dc,
                  char *err, size_t errlen) __attribute__((warn_unused_result));

/*
 * Load the configuration at `path` and open every handler into `t`: what
 * `delayqd -t`, the start and a reload all check, so all three refuse the
 * same problems with the same line.  Returns the configuration (malloc'd;
 * free with dconfig_free and free) with `t` open, or NULL with one line in
 * err.
 */
struct daemon_conf *handlers_load_config(const char *path, struct handler_table *t,
                                         char *err, size_t errlen);

/* Run every handler's fini and unload them. */
void handlers_close(struct handler_table *t);

/* The cancel board's row of this process (a worker), where the reaper
 * posts a request to stop the job running here: what the host's
 * `cancelled` service reads for every handler of the process.  The one
 * piece of process-wide state of this module, since that service is
 * handed only the job; until set (the supervisor's and `delayqd -t`'s
 * checks), no job is ever cancelled. */
void handlers_watch_cancels(const struct cancel_request *row);

/* Whether the cancel board asks this process to stop the run of `job`. */
int handlers_job_cancelled(const dq_handler_job *job);

/* The same for a job by fence and id, before it starts. */
int handlers_cancel_asked(int64_t fence, const char *id);

/* The entry for `type`: exact, else the "*" fallback, else NULL. */
struct handler_entry *handlers_find(struct handler_table *t, const char *type);

#endif
