/*
 * delayq: the command line for producers and operators.
 *
 * main() reads the connection options given before COMMAND, finds the
 * command in a table and runs it; the command reads its own options (and
 * more connection options) with cli_parse_opts.  Nothing else in the
 * program calls into this file.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_cmd_fsck.h"
#include "cli/cli_cmd_add.h"
#include "cli/cli_cmd_jobs.h"
#include "cli/cli_cmd_ops.h"
#include "cli/cli_cmd_outbox.h"
#include "cli/cli_cmd_partitions.h"
#include "cli/cli_cmd_pause.h"
#include "cli/cli_cmd_schedule.h"
#include "cli/cli_opts.h"
#include "cli/cli_util.h"

static const char usage_text[] =
    "Usage: delayq [CONNECTION OPTIONS] COMMAND [OPTIONS] [ARGUMENTS]\n"
    "\n"
    "Commands:\n"
    "  add -q QUEUE -t TYPE [-d DELAY | --at TIME] [--id ID] [--replace]\n"
    "      [--max-attempts N] [PAYLOAD | -]     schedule a job; prints its id\n"
    "  cancel -q QUEUE ID                      cancel a job, waiting or running\n"
    "  run-now -q QUEUE ID                     make a waiting job due now\n"
    "  show -q QUEUE ID [--json]               one job and where it stands\n"
    "  stats [-q QUEUE] [--json] [--watch N] [--partitions]\n"
    "                                          job counts per queue (--watch:\n"
    "                                          redrawn every N until Ctrl-C;\n"
    "                                          --partitions: per partition)\n"
    "  partitions QUEUE [N]                    the queue's partition count, or\n"
    "                                          set it (the queue must be empty)\n"
    "  dlq -q QUEUE list [--limit N] [--offset N] [--json]\n"
    "  dlq -q QUEUE requeue ID | requeue --all | purge [ID]\n"
    "                                          the dead-letter set\n"
    "  fsck -q QUEUE [--repair] [--json]       find (and mend) orphan records,\n"
    "                                          set members and wrong-type keys\n"
    "  pause -q QUEUE | resume -q QUEUE        stop and restart the queue's\n"
    "                                          claims on every daemon\n"
    "  schedule add -q QUEUE --name NAME -t TYPE --cron EXPR [--tz ZONE]\n"
    "      [--catch-up one|all|none] [PAYLOAD | -]\n"
    "  schedule list -q QUEUE [--json] | remove -q QUEUE NAME\n"
    "  schedule run-now -q QUEUE NAME          recurring jobs: one per tick\n"
    "  outbox sql [--schema NAME] [--table NAME]\n"
    "                                          the PostgreSQL outbox's SQL\n"
    "  delayq COMMAND --help                   more about one command\n"
    "\n"
    "Connection options (before or after COMMAND):\n"
    "  -c, --config FILE    read the redis group of the daemon's config file;\n"
    "                       the options below override it\n"
    "  -H, --host HOST      Redis host (default 127.0.0.1)\n"
    "  -p, --port PORT      Redis port (default 6379)\n"
    "  -s, --socket PATH    Redis unix socket, instead of -H and -p\n"
    "  -a, --password PW    Redis password (other users of the host can see\n"
    "                       it: a warning is printed; prefer --password-file)\n"
    "      --password-file FILE\n"
    "                       Redis password: the first line of FILE\n"
    "      --user USER      Redis ACL user\n"
    "  -n, --db N           Redis database (default 0)\n"
    "      --prefix P       key prefix (default dq)\n"
    "      --timeout DUR    connect and command timeout (default 5s)\n"
    "      --durability local|replicated\n"
    "                       replicated: a write succeeds only once a replica\n"
    "                       has it (WAIT), else exit 69 (default local)\n"
    "      --replication-timeout DUR\n"
    "                       how long a replicated write waits (default 1s)\n"
    "      --sentinel HOST:PORT[,HOST:PORT...]\n"
    "                       find the master through these sentinels, instead\n"
    "                       of -H, -p and -s (needs --master)\n"
    "      --master NAME    the master's name at the sentinels\n"
    "      --cluster        Redis Cluster: -H and -p name one of its nodes (the\n"
    "                       seed), commands go to the master of their slot\n"
    "      --tls            connect with TLS (the options below need it)\n"
    "      --cacert FILE    trusted CA certificates (default: the system's)\n"
    "      --cacertdir DIR  a directory of hashed CA certificates\n"
    "      --cert FILE      client certificate; --key FILE its key\n"
    "      --sni NAME       server name sent and checked (default: the host)\n"
    "      --insecure       do not check the server's certificate\n"
    "  -h, --help           print this help\n"
    "      --version        print the version\n"
    "\n"
    "The password: -a or --password-file, else $DELAYQ_PASSWORD or\n"
    "$DELAYQ_PASSWORD_FILE (a file, as --password-file), else the -c file's.\n"
    "\n"
    "Durations: 500ms, 30s, 15m, 2h, 1d, 1h30m; a bare number is seconds.\n"
    "Times: Unix seconds (1767225600) or ISO-8601 (2026-01-01T09:30:00Z;\n"
    "no offset means local time).\n"
    "\n"
    "Exit codes:\n"
    "  0   done\n"
    "  1   not found or not done: unknown job, job running or dead, id taken;\n"
    "      fsck found problems it did not repair; a partition count not\n"
    "      changed because the queue holds jobs\n"
    "  2   usage error: bad option, value, name; payload too large\n"
    "  69  Redis unreachable, refused (password, command) or timed out;\n"
    "      with --durability replicated, a write not replicated in time\n"
    "  70  internal error (out of memory)\n"
    "  74  cannot read standard input or write standard output\n"
    "  78  the configuration file (-c) is wrong, or a password file cannot be\n"
    "      read or is empty\n"
    "Every failure prints one line on standard error.\n";

/* The commands, in the order of the help above. */
static const struct cli_command *const commands[] = {
    &cli_cmd_add, &cli_cmd_cancel, &cli_cmd_run_now, &cli_cmd_show, &cli_cmd_stats, &cli_cmd_partitions,
    &cli_cmd_dlq, &cli_cmd_fsck, &cli_cmd_pause, &cli_cmd_resume, &cli_cmd_schedule,
    &cli_cmd_outbox,
};

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
        if (strcmp(commands[i]->name, name) == 0)
            return commands[i];
    return NULL;
}

int main(int argc, char **argv)
{
    /* a closed socket or pipe is an error, not death */
    if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
        return cli_fail(NULL, CLI_EXIT_SOFTWARE, "cannot ignore SIGPIPE: %s", strerror(errno));
    struct cli cli = { .usage = usage_text, .argc = argc, .argv = argv };
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
