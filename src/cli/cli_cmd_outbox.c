/* delayq outbox sql: print the outbox's DDL for a schema and a table.  It
 * needs no Redis and no PostgreSQL: the output goes to psql. */
#include "cli/cli_cmd_outbox.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_opts.h"
#include "cli/cli_util.h"
#include "outbox/outbox_sql.h"

struct outbox_opts {
    const char *schema;
    const char *table;
};

static int outbox_opt(struct cli *cli, int opt, const char *arg, void *ctx)
{
    struct outbox_opts *o = ctx;
    const char **dst = opt == 'S' ? &o->schema : opt == 'T' ? &o->table : NULL;
    if (!dst)
        return -1;
    const char *bad = outbox_check_name(arg);
    if (bad) {
        cli_fail(cli, CLI_EXIT_USAGE, "--%s \"%s\": the name %s", opt == 'S' ? "schema"
                 : "table", arg, bad);
        return -1;
    }
    *dst = arg;
    return 0;
}

static int outbox_run(struct cli *cli)
{
    static const struct option longopts[] = {
        { "schema", required_argument, NULL, 'S' },
        { "table", required_argument, NULL, 'T' },
        { NULL, 0, NULL, 0 }
    };
    struct outbox_opts o = { OUTBOX_DEFAULT_SCHEMA, OUTBOX_DEFAULT_TABLE };
    int code;
    if (cli_parse_opts(cli, "", longopts, outbox_opt, &o, false, &code) < 0)
        return code;
    if (cli_nargs(cli) == 0)
        return cli_fail(cli, CLI_EXIT_USAGE, "which? 'delayq outbox sql' is the only one");
    if (strcmp(cli_arg(cli, 0), "sql") != 0)
        return cli_fail(cli, CLI_EXIT_USAGE, "unknown subcommand '%s' (try 'sql')",
                        cli_arg(cli, 0));
    if (cli_nargs(cli) > 1)
        return cli_fail(cli, CLI_EXIT_USAGE, "unexpected argument '%s'", cli_arg(cli, 1));
    if (outbox_sql_write(stdout, o.schema, o.table) < 0)
        return cli_fail(cli, CLI_EXIT_IOERR, "cannot write the output: %s", strerror(errno));
    return CLI_EXIT_OK;
}

static const char outbox_help[] =
    "Usage: delayq outbox sql [--schema NAME] [--table NAME]\n"
    "Print the SQL that makes the PostgreSQL outbox (docs/outbox.md): the\n"
    "table (default public.delayq_outbox), its dead table (TABLE_dead), the\n"
    "trigger that wakes delayqd's relay, and the functions a service calls\n"
    "inside its own transactions: delayq_enqueue, delayq_replace and\n"
    "delayq_cancel.  Run it with psql; running it again changes nothing but\n"
    "the functions.  Names: a-z, 0-9 and _, at most 55 bytes.  The same SQL,\n"
    "for the default names, is installed as /usr/share/delayq/outbox.sql.\n"
    "  --schema NAME   the schema of the table and the functions (created\n"
    "                  when missing; default public)\n"
    "  --table NAME    the table (default delayq_outbox); also the channel\n"
    "                  its trigger notifies\n";

const struct cli_command cli_cmd_outbox = { "outbox", outbox_help, outbox_run };
