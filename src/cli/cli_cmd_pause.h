/* The delayq commands pause and resume (cli_cmd_pause.c). */
#ifndef DQ_CLI_CMD_PAUSE_H
#define DQ_CLI_CMD_PAUSE_H

#include "cli/cli.h"

extern const struct cli_command cli_cmd_pause;
extern const struct cli_command cli_cmd_resume;

#endif
