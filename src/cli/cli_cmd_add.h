/* The delayq command add (cli_cmd_add.c), and what schedule add shares
 * with it. */
#ifndef DQ_CLI_CMD_ADD_H
#define DQ_CLI_CMD_ADD_H

#include <stddef.h>

#include "cli/cli.h"

extern const struct cli_command cli_cmd_add;

/* A --max-attempts value (1 or more) into *out; -1 after saying why not. */
int cli_opt_max_attempts(const struct cli *cli, const char *arg, int *out);

/*
 * The payload operand number `at` (0 for the first after the options):
 * its text, or with "-" all of standard input (binary-safe, into *owned,
 * which the caller frees); none: empty.  Refused (exit 2) over `limit`
 * bytes, before anything is sent.  Returns an exit code.
 */
int cli_read_payload(const struct cli *cli, int at, size_t limit, const void **payload,
                     size_t *len, char **owned);

#endif
