/*
 * strays: processes a handler started and its worker did not outlive.
 *
 * A handler may start programs (the exec handler runs each in a process
 * group of its own).  When its worker dies (a timeout kill, a crash,
 * kill -9), those programs must die too, or a job's first run could still
 * be running when its retry starts.  The supervisor makes itself the
 * "child subreaper" (prctl PR_SET_CHILD_SUBREAPER), so every process a
 * dead worker leaves behind becomes the supervisor's child; any child
 * that is not in its table is such a stray, and is killed with its
 * process group.  PR_SET_PDEATHSIG is not enough: it reaches only a
 * worker's direct children, not their own.
 */
#ifndef DQ_STRAYS_H
#define DQ_STRAYS_H

#include <sys/types.h>

/* Become the subreaper of our descendants; -1 with errno on failure. */
int strays_setup(void);

/* Kill (SIGKILL, with their process groups) every child of this process
 * for which is_known(pid, arg) is false.  Returns how many were killed. */
int strays_kill(int (*is_known)(pid_t pid, void *arg), void *arg);

#endif
