/*
 * The supervisor: forks the workers (per queue) and the reaper, restarts a
 * child that dies (with a growing delay, so a crash loop does not spin),
 * stops a handler that overruns its timeout by killing its worker, fails
 * the job a dead worker was running at once with the cause, reloads the
 * configuration on SIGHUP and drains on SIGTERM/SIGINT.
 */
#ifndef DQ_SUPERVISOR_H
#define DQ_SUPERVISOR_H

#include "daemon/dconfig.h"

/*
 * Run until stopped.  Takes ownership of `conf` (malloc'd, loaded and
 * checked by the caller).  Returns the daemon's exit code: 0 after a clean stop, 78 when
 * every worker refused to start because of the configuration, 71 when the
 * supervisor could not set up.
 */
int supervisor_run(struct daemon_conf *conf, const char *config_path);

#endif
