/* The delayq command outbox (cli_cmd_outbox.c): the PostgreSQL outbox's
 * DDL (docs/outbox.md). */
#ifndef DQ_CLI_CMD_OUTBOX_H
#define DQ_CLI_CMD_OUTBOX_H

#include "cli/cli.h"

extern const struct cli_command cli_cmd_outbox;

#endif
