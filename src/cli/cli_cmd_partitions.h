/* The delayq command partitions, and stats --partitions's figures
 * (cli_cmd_partitions.c). */
#ifndef DQ_CLI_CMD_PARTITIONS_H
#define DQ_CLI_CMD_PARTITIONS_H

#include <stdbool.h>
#include <stddef.h>

#include "cli/cli.h"

extern const struct cli_command cli_cmd_partitions;

/*
 * Print the figures of each queue of `names` partition by partition: a
 * row per partition and a total row per queue (with `json`, an array of
 * objects, each with its partitions' figures).  Returns an exit code; a
 * failure is printed as one line.
 */
int cli_partitions_stats(const struct cli *cli, dq_client *c, char **names, size_t n,
                         bool json);

#endif
