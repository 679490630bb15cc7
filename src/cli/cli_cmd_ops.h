/* The delayq commands stats, dlq (cli_cmd_ops.c). */
#ifndef DQ_CLI_CMD_OPS_H
#define DQ_CLI_CMD_OPS_H

#include "cli/cli.h"

extern const struct cli_command cli_cmd_stats;
extern const struct cli_command cli_cmd_dlq;

#endif
