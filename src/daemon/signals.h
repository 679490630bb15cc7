/*
 * Signals in the daemon's processes.  Handlers only set flags; the event
 * loops act on them.
 */
#ifndef DQ_SIGNALS_H
#define DQ_SIGNALS_H

#include <stdint.h>
#include <sys/types.h>

/* An orphan's bound before signals_set_orphan_exit_ms (the default
 * shutdown_timeout). */
#define SIGNALS_ORPHAN_EXIT_DEFAULT_MS 30000

/* In a freshly forked child: default dispositions and an empty mask, then
 * SIGTERM/SIGINT set the stop flag, SIGHUP is ignored (the supervisor
 * reloads), SIGPIPE and SIGUSR2 are ignored (the latter until a Sentinel
 * connection handles it), and the child gets SIGTERM when the
 * supervisor `parent` dies.  Returns 0; -1 if the parent is gone already;
 * -2 when a call failed (logged): the child cannot run safely and exits
 * DAEMON_EXIT_SOFTWARE. */
int signals_child_setup(pid_t parent) __attribute__((warn_unused_result));

/*
 * The supervisor's death.  It cannot SIGKILL a child that is late to stop
 * any more, so a child bounds its own life: from the moment it learns of
 * the death (the SIGTERM of PR_SET_PDEATHSIG, or signals_parent_gone on a
 * tick), SIGALRM ends it after `ms` (shutdown_timeout), even inside a
 * handler.  Within that time its loop finishes and reports what it can.
 */
void signals_set_orphan_exit_ms(int64_t ms);

/* For a child's ticks: whether the supervisor is gone (getppid() is no
 * longer its pid; covers a lost PR_SET_PDEATHSIG).  If so, the stop flag
 * is set and the orphan's bound armed. */
int signals_parent_gone(void);

/* Milliseconds left before the orphan's SIGALRM, or -1 when none is armed:
 * a loop leaves in time to exit cleanly. */
int64_t signals_orphan_ms_left(void);

/* SIGTERM or SIGINT has arrived in this child. */
int signals_stop_requested(void);

/* Ignore SIGPIPE (every process: a closed socket is an error, not death).
 * 0, or -1 after logging why. */
int signals_ignore_pipe(void) __attribute__((warn_unused_result));

#endif
