/* The delayq commands cancel, run-now, show (cli_cmd_jobs.c). */
#ifndef DQ_CLI_CMD_JOBS_H
#define DQ_CLI_CMD_JOBS_H

#include "cli/cli.h"

extern const struct cli_command cli_cmd_cancel;
extern const struct cli_command cli_cmd_run_now;
extern const struct cli_command cli_cmd_show;

#endif
