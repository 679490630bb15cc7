/*
 * Running one program for the exec handler: fork, exec, feed it its input,
 * keep the last line of its standard error, and reap it, all within a
 * deadline.  Knows nothing of jobs.
 */
#ifndef DQ_EXEC_RUN_H
#define DQ_EXEC_RUN_H

#include <stddef.h>
#include <stdint.h>

#define EXEC_LINE_MAX 400 /* bytes of the last stderr line kept */

enum exec_kind {
    EXEC_EXITED,    /* code: the exit status */
    EXEC_SIGNALED,  /* code: the signal */
    EXEC_TIMEOUT,   /* killed (with its process group) at the deadline */
    EXEC_STOPPED,   /* killed (with its process group): the stop said so */
    EXEC_ERROR      /* could not start it: last_line says why */
};

struct exec_result {
    enum exec_kind kind;
    int code;
    char last_line[EXEC_LINE_MAX + 1]; /* "" if none */
};

/* Asked every EXEC_STOP_CHECK_MS (20 ms) while the program runs: a
 * nonzero answer kills it with its process group. */
struct exec_stop {
    int (*fn)(const void *arg);
    const void *arg;
};

/*
 * Run argv[0] (an absolute path) with `argv` and `env`, `input` (len bytes)
 * on its standard input, standard output to /dev/null, in a process group
 * of its own.  timeout_ms 0 waits for ever; `stop` (NULL: none) may end
 * it sooner.  Always fills `r`; the child is
 * reaped before this returns (a program that leaves background processes
 * holding its stderr is waited for only until it exits itself).
 *
 * SIGPIPE is blocked during the run and one raised by writing to a child
 * that stopped reading is discarded, so this is safe whether or not the
 * process ignores SIGPIPE.  No signal handler is installed.
 */
void exec_run(char *const argv[], char *const env[], const void *input, size_t len,
              int64_t timeout_ms, const struct exec_stop *stop, struct exec_result *r);

#endif
