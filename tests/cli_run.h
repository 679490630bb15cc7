/*
 * Running the built delayq the way a user does, against the test's
 * redis-server, and checking the outcome: shared by the command line's
 * test programs.
 */
#ifndef DQ_TEST_CLI_RUN_H
#define DQ_TEST_CLI_RUN_H

#include <stdbool.h>
#include <stddef.h>

#include "run_prog.h"

#define CLI_RUN_ENV_MAX 4

struct cli_run {
    const void *in;     /* standard input (NULL: /dev/null) */
    size_t in_len;
    const char *env[CLI_RUN_ENV_MAX]; /* "NAME=VALUE" for the child only */
    bool no_socket;     /* do not add -s SOCKET */
};

/* The unix socket every run reaches ("-s SOCKET" first) unless
 * how->no_socket; set it before the first run. */
void cli_run_socket(const char *sock);

/* Run delayq with the arguments after `how` (NULL-terminated).
 * DELAYQ_PASSWORD and DELAYQ_PASSWORD_FILE are unset unless how->env sets
 * them.  The result is static: the next run overwrites it. */
struct run_result *run_cli_how(const struct cli_run *how, ...);

/* delayq -s SOCKET ARGS..., no input. */
#define CLI(...) run_cli_how(&(struct cli_run){ 0 }, __VA_ARGS__, (const char *)NULL)
/* The same with options for the run. */
#define CLI_HOW(how, ...) run_cli_how(how, __VA_ARGS__, (const char *)NULL)

/* The run succeeded; its stderr is empty. */
void assert_ok(const struct run_result *r);

/* The run failed with `status` and one line "delayq: ..." that contains
 * `phrase`. */
void assert_fails(const struct run_result *r, int status, const char *phrase);

/* The id printed by `delayq add`, checked to be one line. */
void add_id(const struct run_result *r, char *id, size_t len);

#endif
