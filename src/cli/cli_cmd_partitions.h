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

/*
 * Before `add` with -c FILE: when the file gives `queue` a partition count
 * and Redis stores none (1), store the file's, so that the job goes where
 * the daemon of that file will claim it (a daemon that finds jobs in the
 * unpartitioned keys refuses to start on more partitions).  A count Redis
 * already holds is followed, with a warning when it differs from the
 * file's.  Returns an exit code; a failure is printed as one line and
 * nothing is added.
 */
int cli_partitions_from_file(const struct cli *cli, dq_client *c, const char *queue);

#endif
