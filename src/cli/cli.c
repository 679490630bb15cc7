/*
 * What every delayq command does with its run: one-line failures named
 * after the command, the queue check, and the connection opened with a
 * message when that fails.
 */
#include "cli/cli.h"

#include <stdarg.h>
#include <stdio.h>

#include "cli/cli_util.h"
#include "lib/keys.h"

const char *cli_name(const struct cli *cli)
{
    return cli && cli->command ? cli->command->name : "";
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

int cli_open(const struct cli *cli, struct cli_session *s)
{
    char err[512];
    int code = cli_session_options(s, &cli->conn, err, sizeof err);
    if (code != CLI_EXIT_OK)
        return cli_fail(code == CLI_EXIT_CONFIG ? NULL : cli, code, "%s", err);
    /* Once per run (a command opens one session): the password is in our
     * argv, which any user of the host can read. */
    if (cli->conn.password)
        fputs("delayq: warning: a password given with -a or --password can be read "
              "by other users of this host; use --password-file or "
              "DELAYQ_PASSWORD_FILE\n", stderr);
    return CLI_EXIT_OK;
}

int cli_connect(const struct cli *cli, struct cli_session *s)
{
    char err[512];
    int code = s->client ? CLI_EXIT_OK : cli_session_connect(s, err, sizeof err);
    if (code != CLI_EXIT_OK)
        return cli_fail(code == CLI_EXIT_USAGE ? cli : NULL, code, "%s", err);
    return CLI_EXIT_OK;
}

int cli_open_connected(const struct cli *cli, struct cli_session *s)
{
    int code = cli_open(cli, s);
    return code != CLI_EXIT_OK ? code : cli_connect(cli, s);
}
