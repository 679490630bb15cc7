/*
 * The delayq command line: what main.c, the subcommands (cmd_jobs.c,
 * cmd_ops.c) and the helpers (cli_util.c, cli_conn.c) share.
 *
 * Every subcommand returns an exit code.  A failure prints exactly one line
 * on stderr, "delayq: [COMMAND: ]what is wrong", through cli_fail.
 */
#ifndef DQ_CLI_H
#define DQ_CLI_H

#include <delayq/client.h>
#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/cli_conn.h"

/* Exit codes: an interface, listed in `delayq --help` (sysexits-style). */
#define CLI_EXIT_OK 0           /* done */
#define CLI_EXIT_NOT_DONE 1     /* not found, or not done (running, exists) */
#define CLI_EXIT_USAGE 2        /* bad option, value, name; payload too large */
#define CLI_EXIT_UNAVAILABLE 69 /* EX_UNAVAILABLE: Redis down, refused, timed out */
#define CLI_EXIT_SOFTWARE 70    /* EX_SOFTWARE: out of memory, internal error */
#define CLI_EXIT_IOERR 74       /* EX_IOERR: standard input or output failed */
#define CLI_EXIT_CONFIG 78      /* EX_CONFIG: the -c file is wrong */

/* Long options without a short form (values above any character). */
enum cli_longopt {
    OPT_USER = 256,
    OPT_PREFIX,
    OPT_TIMEOUT,
    OPT_VERSION,
    OPT_AT,
    OPT_ID,
    OPT_REPLACE,
    OPT_MAX_ATTEMPTS,
    OPT_JSON,
    OPT_LIMIT,
    OPT_OFFSET,
    OPT_ALL,
    OPT_WATCH,
    OPT_REPAIR
};

struct cli;

/* A subcommand: its name, its help text and its entry point. */
struct cli_command {
    const char *name;
    const char *help;           /* synopsis and options, for COMMAND --help */
    int (*run)(struct cli *cli);
};

/* One run of the program. */
struct cli {
    const struct cli_command *command; /* NULL while reading global options */
    struct cli_conn conn;       /* connection options, before or after COMMAND */
    int argc;                   /* the command's arguments; argv[0] is its name */
    char **argv;
    int optind;                 /* first operand after cli_parse_opts */
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

/* The name of the running command, for messages ("" before one is known). */
const char *cli_name(const struct cli *cli);

/* The exit code for a library status (main.c). */
int cli_exit_code(dq_status st);

/* Print "delayq: [COMMAND: ]MESSAGE" as one line and return `code`. */
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

/* ---- cli_conn.c: the session, with the one-line message on failure ---- */

/*
 * cli_open works out the connection settings (the -c file and the flags);
 * cli_connect connects with them; cli_open_connected does both.  Each
 * returns 0, or the exit code after printing why.  Close `s` with
 * cli_session_close after cli_open, whatever the outcome.
 */
int cli_open(const struct cli *cli, struct cli_session *s);
int cli_connect(const struct cli *cli, struct cli_session *s);
int cli_open_connected(const struct cli *cli, struct cli_session *s);

/* ---- cli_util.c --------------------------------------------------------- */

/* Parse a whole decimal number in [min, max]; -1 when it is not one. */
int cli_parse_int(const char *s, long long min, long long max, long long *out);

/* Write bytes as a JSON string, quotes included: escapes ", \ and control
 * characters, and replaces bytes that are not UTF-8 with U+FFFD. */
void cli_json_str(FILE *f, const void *p, size_t n);

/* Is the data valid UTF-8 (NUL and control characters allowed)? */
bool cli_is_utf8(const void *p, size_t n);

/* How to show bytes to a person. */
enum cli_text_kind {
    CLI_TEXT_PLAIN,     /* UTF-8 without control characters: as it is */
    CLI_TEXT_ESCAPED,   /* mostly text: print with cli_print_escaped */
    CLI_TEXT_BINARY     /* not text: print only its size */
};
enum cli_text_kind cli_text_kind(const void *p, size_t n);

/* Write bytes on one line: control characters and bytes that are not
 * UTF-8 as \n, \t, \r, \\ or \xNN; the rest as it is. */
void cli_print_escaped(FILE *f, const void *p, size_t n);

/* Write bytes in base64 (RFC 4648, with padding). */
void cli_print_base64(FILE *f, const void *p, size_t n);

/* This host's clock in Unix ms: only to refuse a time too far ahead before
 * connecting (the library and the scripts check it again). */
int64_t cli_now_ms(void);

/* "in 29m 58s", "12.0s ago" or "now": `when` relative to the server's `now`. */
void cli_relative(char *buf, size_t len, int64_t when, int64_t now);

/* ---- subcommands -------------------------------------------------------- */

int cmd_add(struct cli *cli);
int cmd_cancel(struct cli *cli);
int cmd_show(struct cli *cli);
int cmd_stats(struct cli *cli);
int cmd_dlq(struct cli *cli);
int cmd_fsck(struct cli *cli);

#endif
