/*
 * The command line's options, read with getopt_long: the connection
 * options and -h/--help and --version wherever they come, and each
 * command's own through its callback.
 */
#include "config.h"

#include "cli/cli_opts.h"

#include <stdio.h>
#include <string.h>

#include "cli/cli_util.h"

#define CLI_MAX_OPTIONS 48

/* The options every command takes besides the connection options. */
static const struct option global_longopts[] = {
    { "help", no_argument, NULL, 'h' },
    { "version", no_argument, NULL, CLI_OPT_VERSION },
};

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

/* The global and connection options followed by the command's, in `all`,
 * and their names in `names`, for bad_option. */
static void merge_options(struct option *all, const char **names,
                          const struct option *extra)
{
    size_t n = 0;
    for (size_t i = 0; i < sizeof global_longopts / sizeof global_longopts[0]; i++)
        all[n++] = global_longopts[i];
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
    fputs(cli->command ? cli->command->help : cli->usage, stdout);
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
    snprintf(shorts, sizeof shorts, "%s:h%s%s", stop_at_operand ? "+" : "",
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
        else if (c == CLI_OPT_VERSION)
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
