/*
 * The daemon's exit codes, sysexits style: what delayqd itself exits with
 * (delayqd(8) documents them) and what its children exit with, which the
 * supervisor reads (a child that exits DAEMON_EXIT_CONFIG is not
 * restarted).  The one home of these numbers.
 */
#ifndef DQ_EXITCODES_H
#define DQ_EXITCODES_H

#define DAEMON_EXIT_OK 0
#define DAEMON_EXIT_USAGE 64    /* EX_USAGE: bad command line */
#define DAEMON_EXIT_UNAVAILABLE 69 /* EX_UNAVAILABLE: Redis unreachable at start
                                      while a partitioned queue's count must
                                      be recorded */
#define DAEMON_EXIT_SOFTWARE 70 /* EX_SOFTWARE: a child could not set up */
#define DAEMON_EXIT_OSERR 71    /* EX_OSERR: memory, fork, the event loop, the
                                   metrics address */
#define DAEMON_EXIT_CONFIG 78   /* EX_CONFIG: the configuration (or a handler
                                   it names) cannot be used: do not respawn */

#endif
