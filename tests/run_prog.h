/*
 * Running a built program the way a user does, for the end-to-end tests:
 * arguments, standard input and extra environment in; standard output,
 * standard error and the exit status out.
 */
#ifndef DQ_TEST_RUN_PROG_H
#define DQ_TEST_RUN_PROG_H

#include <stddef.h>

#define RUN_ENV_MAX 6

struct run_opts {
    const void *in;               /* standard input; NULL: /dev/null */
    size_t in_len;
    const char *env[RUN_ENV_MAX]; /* for the child only: "NAME=VALUE" sets,
                                     "NAME" unsets; NULL ends the list */
};

struct run_result {
    char out[65536];              /* NUL-terminated; cut beyond the size */
    char err[8192];
    int status;                   /* exit code, or -signal */
};

/*
 * Run argv[0] with `argv` (NULL-terminated) and wait for it, feeding its
 * input and collecting its outputs concurrently (a big input cannot
 * deadlock against the outputs).  The test fails when the program cannot
 * be started or says nothing and does not end within 20 s.
 */
void run_prog(const struct run_opts *o, char *const argv[], struct run_result *r);

#endif
