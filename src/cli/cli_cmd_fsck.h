/* The delayq command fsck (cli_cmd_fsck.c). */
#ifndef DQ_CLI_CMD_FSCK_H
#define DQ_CLI_CMD_FSCK_H

#include "cli/cli.h"

extern const struct cli_command cli_cmd_fsck;

#endif
