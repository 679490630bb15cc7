/*
 * One run of the delayq command line and what every command does with it:
 * the command's name in messages, the one-line failure, the queue check,
 * and opening the connection with a message when that fails.
 *
 * Every command returns an exit code (cli_util.h).  A failure prints
 * exactly one line on stderr, "delayq: [COMMAND: ]what is wrong", through
 * cli_fail.
 */
#ifndef DQ_CLI_H
#define DQ_CLI_H

#include <delayq/client.h>

#include "cli/cli_conn.h"

struct cli;

/* A command: its name, its help text and its entry point.  Each command
 * file defines its commands' descriptors (cli_cmd_*) beside their code. */
struct cli_command {
    const char *name;
    const char *help;           /* synopsis and options, for COMMAND --help */
    int (*run)(struct cli *cli);
};

/* One run of the program. */
struct cli {
    const char *usage;          /* the program's help, for --help before COMMAND */
    const struct cli_command *command; /* NULL while reading global options */
    struct cli_conn conn;       /* connection options, before or after COMMAND */
    int argc;                   /* the command's arguments; argv[0] is its name */
    char **argv;
    int optind;                 /* first operand after cli_parse_opts */
};

/* The name of the running command, for messages ("" before one is known,
 * and for a NULL `cli`). */
const char *cli_name(const struct cli *cli);

/* Print "delayq: [COMMAND: ]MESSAGE" as one line and return `code`.  A NULL
 * `cli` leaves the command's name out (messages about the -c file). */
int cli_fail(const struct cli *cli, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Report a failed library call: its message, and the mapped exit code. */
int cli_fail_dq(const struct cli *cli, dq_client *c, dq_status st);

/* The operands left after the options, and how many there are. */
static inline int cli_nargs(const struct cli *cli)
{
    return cli->argc - cli->optind;
}

static inline const char *cli_arg(const struct cli *cli, int i)
{
    return cli->argv[cli->optind + i];
}

/* Check a -q value (given, and a valid queue name); prints the error. */
int cli_check_queue(const struct cli *cli, const char *queue);

/*
 * cli_open works out the connection settings (the -c file and the flags);
 * cli_connect connects with them; cli_open_connected does both.  Each
 * returns 0, or the exit code after printing why.  Close `s` with
 * cli_session_close after cli_open, whatever the outcome.
 */
int cli_open(const struct cli *cli, struct cli_session *s);
int cli_connect(const struct cli *cli, struct cli_session *s);
int cli_open_connected(const struct cli *cli, struct cli_session *s);

#endif
