/* The delayq command schedule (cli_cmd_schedule.c). */
#ifndef DQ_CLI_CMD_SCHEDULE_H
#define DQ_CLI_CMD_SCHEDULE_H

#include "cli/cli.h"

extern const struct cli_command cli_cmd_schedule;

#endif
