/*
 * Signals in the daemon's processes.  Handlers only set flags; the event
 * loops act on them.
 */
#ifndef DQ_SIGNALS_H
#define DQ_SIGNALS_H

#include <sys/types.h>

/* In a freshly forked child: default dispositions and an empty mask, then
 * SIGTERM/SIGINT set the stop flag, SIGHUP is ignored (the supervisor
 * reloads), SIGPIPE and SIGUSR2 are ignored (the latter until a Sentinel
 * connection handles it), and the child gets SIGTERM when the
 * supervisor `parent` dies.  Returns 0; -1 if the parent is gone already;
 * -2 when a call failed (logged): the child cannot run safely and exits
 * DAEMON_EXIT_SOFTWARE. */
int signals_child_setup(pid_t parent) __attribute__((warn_unused_result));

/* SIGTERM or SIGINT has arrived in this child. */
int signals_stop_requested(void);

/* Ignore SIGPIPE (every process: a closed socket is an error, not death).
 * 0, or -1 after logging why. */
int signals_ignore_pipe(void) __attribute__((warn_unused_result));

#endif
