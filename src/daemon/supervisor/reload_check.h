/*
 * reload_check: what a reload must know before it swaps generations, found
 * out in a short-lived child so that the supervisor never waits: every
 * handler of the new configuration loads and initialises (handler code
 * may do anything, and a crash in it must not take supervision down), and
 * the partition counts agree (qparts_reload_check: a queue added with
 * partitions > 1 is recorded in Redis, which is a blocking connection).
 *
 * The supervisor parses the file itself (local reads only), forks the
 * checker, and acts on its exit status when SIGCHLD collects it:
 *   0   apply the new configuration;
 *   78  refused (a handler, a partition count): keep the one in force;
 *   69  Redis unreachable while a count had to be recorded: refused too,
 *       as the reload always did (producers of the new queue would use
 *       keys no worker reads);
 *   anything else, or no exit within RELOAD_CHECK_TIMEOUT_MS (killed):
 *       refused, the configuration in force stays.
 * The child writes its one-line reason to a pipe before it exits (less
 * than PIPE_BUF: the write never waits, the read after its exit neither).
 * It dies with the supervisor (SIGTERM by PR_SET_PDEATHSIG, not caught).
 */
#ifndef DQ_RELOAD_CHECK_H
#define DQ_RELOAD_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/dconfig.h"

#define RELOAD_CHECK_TIMEOUT_MS 20000

struct reload_check {
    pid_t pid;                  /* 0: no check running */
    int exited;                 /* collected: `status` holds how */
    int status;
    int fd;                     /* the reason's pipe (read end); -1 */
    struct daemon_conf *conf;   /* the configuration checked; owned */
    int64_t deadline_ms;        /* monotonic: killed after it */
    int killed;                 /* by the deadline */
};

/* A check that runs nothing. */
void reload_check_init(struct reload_check *rc);

/*
 * Fork the checker of `conf` (parsed; taken over, freed on failure)
 * against the configuration in force `old`.  In the child, `in_child(arg)`
 * first drops what belongs to the supervisor.  0, or -1 with one line in
 * err (pipe, fork).
 */
int reload_check_start(struct reload_check *rc, const struct daemon_conf *old,
                       struct daemon_conf *conf, void (*in_child)(void *arg), void *arg,
                       char *err, size_t errlen);

/* The checker was collected with `status` (from waitpid). */
void reload_check_exited(struct reload_check *rc, int status);

/*
 * Once the checker was collected: 0 with the checked configuration in
 * *conf (the caller's now), or -1 with the reason in err (the
 * configuration freed).  Either way no check runs afterwards.
 */
int reload_check_end(struct reload_check *rc, struct daemon_conf **conf, char *err,
                     size_t errlen);

/* Kill the checker once `now` is past its deadline (its exit is then
 * collected as usual and refused). */
void reload_check_enforce(struct reload_check *rc, int64_t now);

/* Kill it and forget it (at a stop); its exit is collected as any. */
void reload_check_cancel(struct reload_check *rc);

#endif
