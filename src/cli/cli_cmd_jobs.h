/* The delayq commands add, cancel, run-now, show (cli_cmd_jobs.c). */
#ifndef DQ_CLI_CMD_JOBS_H
#define DQ_CLI_CMD_JOBS_H

#include "cli/cli.h"

extern const struct cli_command cli_cmd_add;
extern const struct cli_command cli_cmd_cancel;
extern const struct cli_command cli_cmd_run_now;
extern const struct cli_command cli_cmd_show;

/*
 * The payload operand number `at` (0 for the first after the options):
 * its text, or with "-" all of standard input (binary-safe, into *owned,
 * which the caller frees); none: empty.  Refused (exit 2) over `limit`
 * bytes, before anything is sent.  Returns an exit code.
 */
/* A --max-attempts value (1 or more) into *out; -1 after saying why not. */
int cli_opt_max_attempts(const struct cli *cli, const char *arg, int *out);

int cli_read_payload(const struct cli *cli, int at, size_t limit, const void **payload,
                     size_t *len, char **owned);

#endif
