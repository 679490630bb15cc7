/*
 * Reading a delayq command line's options: the connection options (which
 * may come before or after COMMAND), -h/--help, --version, and the
 * command's own, with one-line messages for whatever getopt refuses.
 */
#ifndef DQ_CLI_OPTS_H
#define DQ_CLI_OPTS_H

#include <getopt.h>
#include <stdbool.h>

#include "cli/cli.h"

/* Long options without a short form, numbered after the connection
 * options' (values above any character). */
enum cli_opt {
    CLI_OPT_VERSION = CLI_CONN_OPT_END,
    CLI_OPT_AT,
    CLI_OPT_ID,
    CLI_OPT_REPLACE,
    CLI_OPT_MAX_ATTEMPTS,
    CLI_OPT_PRIORITY,
    CLI_OPT_JSON,
    CLI_OPT_LIMIT,
    CLI_OPT_OFFSET,
    CLI_OPT_ALL,
    CLI_OPT_WATCH,
    CLI_OPT_REPAIR,
    CLI_OPT_NAME,
    CLI_OPT_CRON,
    CLI_OPT_TZ,
    CLI_OPT_CATCH_UP,
    CLI_OPT_PARTITIONS,
    CLI_OPT_EXPIRE_AT,
    CLI_OPT_TTL,
    CLI_OPT_ON_EXPIRE,
    CLI_OPT_UNIQUE_FOR,
    CLI_OPT_UNIQUE_OK,
    CLI_OPT_DEBOUNCE,
    CLI_OPT_MAX_WAIT
};

/*
 * Called by cli_parse_opts for each option that is not a connection option.
 * Returns 0, or -1 after printing why the value is wrong (a usage error).
 */
typedef int (*cli_opt_fn)(struct cli *cli, int opt, const char *arg, void *ctx);

/*
 * Parse cli->argv with getopt_long: the connection options, -h/--help and
 * --version, plus `shortopts`/`longopts` handed to `on_opt`.  Operands may
 * be mixed with options, except when `stop_at_operand` (the global options
 * before COMMAND).  Returns 0 with cli->optind set, or -1 when the program
 * should end with *code (help printed: 0; usage error printed: 2).
 */
int cli_parse_opts(struct cli *cli, const char *shortopts,
                   const struct option *longopts, cli_opt_fn on_opt, void *ctx,
                   bool stop_at_operand, int *code);

#endif
