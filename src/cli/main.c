/*
 * delayq: the command line for producers and operators.
 *
 * main() reads the connection options given before COMMAND, finds the
 * command in a table and runs it; the command reads its own options (and
 * more connection options) with cli_parse_opts.  Library statuses become
 * exit codes in cli_exit_code.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "lib/keys.h"

#define CLI_MAX_OPTIONS 32

static const char usage_text[] =
    "Usage: delayq [CONNECTION OPTIONS] COMMAND [OPTIONS] [ARGUMENTS]\n"
    "\n"
    "Commands:\n"
    "  add -q QUEUE -t TYPE [-d DELAY | --at TIME] [--id ID] [--replace]\n"
    "      [--max-attempts N] [PAYLOAD | -]     schedule a job; prints its id\n"
    "  cancel -q QUEUE ID                      delete a job that is still waiting\n"
    "  show -q QUEUE ID [--json]               one job and where it stands\n"
    "  stats [-q QUEUE] [--json] [--watch N]   job counts per queue (--watch:\n"
    "                                          redrawn every N until Ctrl-C)\n"
    "  dlq -q QUEUE list [--limit N] [--offset N] [--json]\n"
    "  dlq -q QUEUE requeue ID | requeue --all | purge [ID]\n"
    "                                          the dead-letter set\n"
    "  fsck -q QUEUE [--repair] [--json]       find (and mend) orphan records,\n"
    "                                          set members and wrong-type keys\n"
    "  delayq COMMAND --help                   more about one command\n"
    "\n"
    "Connection options (before or after COMMAND):\n"
    "  -c, --config FILE    read the redis group of the daemon's config file;\n"
    "                       the options below override it\n"
    "  -H, --host HOST      Redis host (default 127.0.0.1)\n"
    "  -p, --port PORT      Redis port (default 6379)\n"
    "  -s, --socket PATH    Redis unix socket, instead of -H and -p\n"
    "  -a, --password PW    Redis password (default: $DELAYQ_PASSWORD)\n"
    "      --user USER      Redis ACL user\n"
    "  -n, --db N           Redis database (default 0)\n"
    "      --prefix P       key prefix (default dq)\n"
    "      --timeout DUR    connect and command timeout (default 5s)\n"
    "  -h, --help           print this help\n"
    "      --version        print the version\n"
    "\n"
    "Durations: 500ms, 30s, 15m, 2h, 1d, 1h30m; a bare number is seconds.\n"
    "Times: Unix seconds (1767225600) or ISO-8601 (2026-01-01T09:30:00Z;\n"
    "no offset means local time).\n"
    "\n"
    "Exit codes:\n"
    "  0   done\n"
    "  1   not found or not done: unknown job, job running or dead, id taken;\n"
    "      fsck found problems it did not repair\n"
    "  2   usage error: bad option, value, name; payload too large\n"
    "  69  Redis unreachable, refused (password, command) or timed out\n"
    "  70  internal error (out of memory)\n"
    "  74  cannot read standard input or write standard output\n"
    "  78  the configuration file (-c) is wrong\n"
    "Every failure prints one line on standard error.\n";

static const char add_help[] =
    "Usage: delayq add -q QUEUE -t TYPE [-d DELAY | --at TIME] [--id ID]\n"
    "                  [--replace] [--max-attempts N] [PAYLOAD | -]\n"
    "Schedule a job and print its id.\n"
    "  -q, --queue QUEUE     the queue\n"
    "  -t, --type TYPE       the job type (selects the handler)\n"
    "  -d, --delay DELAY     run after DELAY, on the Redis server's clock\n"
    "                        (default 0: due now)\n"
    "      --at TIME         run at TIME (Unix seconds or ISO-8601)\n"
    "      --id ID           your own id (not all digits); taken ids are\n"
    "                        refused (exit 1) unless --replace\n"
    "      --replace         reschedule the job with this id\n"
    "      --max-attempts N  attempts before the job is dead (default: the\n"
    "                        consumer's setting)\n"
    "  PAYLOAD               the payload; '-' reads it from standard input;\n"
    "                        none: empty\n";

static const char cancel_help[] =
    "Usage: delayq cancel -q QUEUE ID\n"
    "Delete a job that is still waiting.  Exit 1 when it is running, dead\n"
    "(see dlq purge) or unknown.\n";

static const char show_help[] =
    "Usage: delayq show -q QUEUE ID [--json]\n"
    "Print a job: state, type, attempts, times (server clock), last error,\n"
    "payload.  --json prints one object; the payload is \"payload\" when it\n"
    "is UTF-8, else \"payload_base64\".  Exit 1 when there is no such job.\n";

static const char stats_help[] =
    "Usage: delayq stats [-q QUEUE] [--json] [--watch N]\n"
    "Per queue (every queue without -q): jobs delayed (not yet due), due,\n"
    "processing, dead, and the time until the next is due.  --json prints\n"
    "an array of objects (next_due_in_ms is null when nothing is delayed).\n"
    "  --watch N   print the figures again every N (a duration, or seconds:\n"
    "              2, 500ms) until interrupted (exit 0): on a terminal the\n"
    "              screen is redrawn; otherwise each table follows a blank\n"
    "              line and a timestamp (with --json: one array per line).\n"
    "              A round that fails is reported and the next one tried.\n";

static const char dlq_help[] =
    "Usage: delayq dlq -q QUEUE list [--limit N] [--offset N] [--json]\n"
    "       delayq dlq -q QUEUE requeue ID | requeue --all\n"
    "       delayq dlq -q QUEUE purge [ID]\n"
    "The dead-letter set: list dead jobs (oldest death first, 50 by\n"
    "default), requeue one or all (due now, attempts reset), purge one or\n"
    "all.  Exit 1 when ID is not dead.\n";

static const char fsck_help[] =
    "Usage: delayq fsck -q QUEUE [--repair] [--json]\n"
    "Check the queue's keys in short steps: records in no set (delayed,\n"
    "processing, dead), set members and lease fields without a record,\n"
    "keys of the wrong type.  Prints the counts and the first findings;\n"
    "--json prints one object with up to 1000 findings.\n"
    "  --repair   move records in no set to dead (last error \"orphan\n"
    "             record\"; see dlq list, dlq requeue) and remove members and\n"
    "             fields without a record; keys of the wrong type are only\n"
    "             reported, for you to look at\n"
    "Exit 0 when the queue is clean or everything found was repaired, 1 when\n"
    "problems are left.\n";

static const struct cli_command commands[] = {
    { "add", add_help, cmd_add },
    { "cancel", cancel_help, cmd_cancel },
    { "show", show_help, cmd_show },
    { "stats", stats_help, cmd_stats },
    { "dlq", dlq_help, cmd_dlq },
    { "fsck", fsck_help, cmd_fsck },
};

const char *cli_name(const struct cli *cli)
{
    return cli && cli->command ? cli->command->name : "";
}

int cli_exit_code(dq_status st)
{
    switch (st) {
    case DQ_OK:
        return CLI_EXIT_OK;
    case DQ_ERR_NOTFOUND: case DQ_ERR_EXISTS: case DQ_ERR_RUNNING:
    case DQ_ERR_DEAD: case DQ_ERR_STALE:
        return CLI_EXIT_NOT_DONE;
    case DQ_ERR_INVALID: case DQ_ERR_TOO_LARGE:
        return CLI_EXIT_USAGE;
    case DQ_ERR_CONNECT: case DQ_ERR_AUTH: case DQ_ERR_TIMEOUT: case DQ_ERR_REDIS:
        return CLI_EXIT_UNAVAILABLE;
    case DQ_ERR_NOMEM:
        return CLI_EXIT_SOFTWARE;
    }
    return CLI_EXIT_SOFTWARE;
}

int cli_fail(const struct cli *cli, int code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* One line, whatever Redis or a user put in the text. */
    for (char *p = msg; *p; p++)
        if ((unsigned char)*p < ' ')
            *p = ' ';
    const char *name = cli_name(cli);
    fprintf(stderr, "delayq: %s%s%s\n", name, *name ? ": " : "", msg);
    return code;
}

int cli_fail_dq(const struct cli *cli, dq_client *c, dq_status st)
{
    const char *msg = dq_errmsg(c);
    return cli_fail(cli, cli_exit_code(st), "%s", *msg ? msg : dq_status_str(st));
}

int cli_check_queue(const struct cli *cli, const char *queue)
{
    if (!queue)
        return cli_fail(cli, CLI_EXIT_USAGE, "missing -q QUEUE");
    const char *why = keys_check_queue(queue);
    if (why)
        return cli_fail(cli, CLI_EXIT_USAGE, "bad queue '%s': %s", queue, why);
    return CLI_EXIT_OK;
}

/* Report an option getopt refused: unknown ('?') or missing its value. */
static int bad_option(const struct cli *cli, int c, const char *const *longnames)
{
    const char *word = optind > 0 && optind <= cli->argc ? cli->argv[optind - 1] : "";
    const char *see = cli->command ? cli->command->name : "";
    if (strncmp(word, "--", 2) != 0) {
        if (c == ':')
            return cli_fail(cli, CLI_EXIT_USAGE, "option '-%c' needs a value", optopt);
        return cli_fail(cli, CLI_EXIT_USAGE, "unknown option '-%c' (see delayq %s%s--help)",
                        optopt, see, *see ? " " : "");
    }
    size_t len = strcspn(word, "=");
    if (c == ':')
        return cli_fail(cli, CLI_EXIT_USAGE, "option '%.*s' needs a value", (int)len, word);
    for (size_t i = 0; longnames[i]; i++)
        if (word[len] == '=' && strlen(longnames[i]) == len - 2
            && strncmp(word + 2, longnames[i], len - 2) == 0)
            return cli_fail(cli, CLI_EXIT_USAGE, "option '%.*s' takes no value",
                            (int)len, word);
    return cli_fail(cli, CLI_EXIT_USAGE, "unknown option '%.*s' (see delayq %s%s--help)",
                    (int)len, word, see, *see ? " " : "");
}

/* The connection options followed by the command's, in `all`. */
static void merge_options(struct option *all, const char **names,
                          const struct option *extra)
{
    size_t n = 0;
    for (size_t i = 0; cli_conn_longopts[i].name; i++)
        all[n++] = cli_conn_longopts[i];
    for (size_t i = 0; extra && extra[i].name && n + 1 < CLI_MAX_OPTIONS; i++)
        all[n++] = extra[i];
    memset(&all[n], 0, sizeof all[n]);
    for (size_t i = 0; i <= n; i++)
        names[i] = all[i].name;
}

static int print_help(const struct cli *cli)
{
    fputs(cli->command ? cli->command->help : usage_text, stdout);
    if (cli->command)
        fputs("Connection options and exit codes: see delayq --help.\n", stdout);
    return CLI_EXIT_OK;
}

int cli_parse_opts(struct cli *cli, const char *shortopts,
                   const struct option *longopts, cli_opt_fn on_opt, void *ctx,
                   bool stop_at_operand, int *code)
{
    struct option all[CLI_MAX_OPTIONS];
    const char *names[CLI_MAX_OPTIONS];
    char shorts[128];
    merge_options(all, names, longopts);
    snprintf(shorts, sizeof shorts, "%s:%s%s", stop_at_operand ? "+" : "",
             CLI_CONN_SHORTOPTS, shortopts ? shortopts : "");
    optind = 0; /* glibc: start afresh, re-reading the leading '+' */
    opterr = 0;
    int c;
    while ((c = getopt_long(cli->argc, cli->argv, shorts, all, NULL)) != -1) {
        char err[256];
        int taken = 0;
        if (c == '?' || c == ':')
            *code = bad_option(cli, c, names);
        else if (c == 'h')
            *code = print_help(cli);
        else if (c == OPT_VERSION)
            *code = (printf("delayq %s\n", PACKAGE_VERSION), CLI_EXIT_OK);
        else if ((taken = cli_conn_option(&cli->conn, c, optarg, err, sizeof err)) < 0)
            *code = cli_fail(cli, CLI_EXIT_USAGE, "%s", err);
        else if (taken == 0 && (!on_opt || on_opt(cli, c, optarg, ctx) < 0))
            *code = CLI_EXIT_USAGE;
        else
            continue;
        return -1;
    }
    cli->optind = optind;
    return 0;
}

/* Flush standard output; a failed write is a failure of the command. */
static int finish(int code)
{
    if ((fflush(stdout) != 0 || ferror(stdout)) && code == CLI_EXIT_OK)
        return cli_fail(NULL, CLI_EXIT_IOERR, "cannot write the output: %s",
                        strerror(errno));
    return code;
}

static const struct cli_command *find_command(const char *name)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN); /* a closed socket or pipe is an error, not death */
    struct cli cli = { .argc = argc, .argv = argv };
    cli_conn_init(&cli.conn);
    int code;
    if (cli_parse_opts(&cli, NULL, NULL, NULL, NULL, true, &code) < 0)
        return finish(code);
    if (cli.optind >= argc)
        return cli_fail(NULL, CLI_EXIT_USAGE, "no command given (see delayq --help)");
    const char *name = argv[cli.optind];
    cli.command = find_command(name);
    if (!cli.command)
        return cli_fail(NULL, CLI_EXIT_USAGE, "unknown command '%s' (see delayq --help)",
                        name);
    cli.argc = argc - cli.optind;
    cli.argv = argv + cli.optind;
    return finish(cli.command->run(&cli));
}
