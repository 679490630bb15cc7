/* delayq pause and resume: stop and restart a queue's claims. */
#include "cli/cli_cmd_pause.h"

#include <stdio.h>

#include "cli/cli.h"
#include "cli/cli_opts.h"
#include "cli/cli_util.h"
#include "util/timefmt.h"

static int pause_opt(struct cli *cli, int opt, const char *arg, void *ctx)
{
    (void)cli;
    if (opt != 'q')
        return -1;
    *(const char **)ctx = arg;
    return 0;
}

/* The -q option, checked, and no operand: 0, or -1 with the exit code in
 * *code (0 after --help). */
static int pause_parse(struct cli *cli, const char **queue, int *code)
{
    static const struct option longopts[] = {
        { "queue", required_argument, NULL, 'q' },
        { NULL, 0, NULL, 0 }
    };
    if (cli_parse_opts(cli, "q:", longopts, pause_opt, queue, false, code) < 0)
        return -1;
    if ((*code = cli_check_queue(cli, *queue)) != CLI_EXIT_OK)
        return -1;
    if (cli_nargs(cli) > 0) {
        *code = cli_fail(cli, CLI_EXIT_USAGE, "unexpected argument '%s'", cli_arg(cli, 0));
        return -1;
    }
    return 0;
}

/* Run dq_pause or dq_resume and print what became of the queue. */
static int pause_or_resume(struct cli *cli, bool pause)
{
    const char *queue = NULL;
    int code;
    if (pause_parse(cli, &queue, &code) < 0)
        return code;
    struct cli_session s;
    code = cli_open_connected(cli, &s);
    if (code == CLI_EXIT_OK) {
        int64_t since = -1;
        dq_status st = pause ? dq_pause(s.client, queue, &since)
                             : dq_resume(s.client, queue, &since);
        char when[40] = "";
        if (since >= 0)
            timefmt_iso(when, sizeof when, since);
        if (st != DQ_OK)
            code = cli_fail_dq(cli, s.client, st);
        else if (pause)
            printf("queue %s paused since %s\n", queue, when);
        else if (since >= 0)
            printf("queue %s resumed (paused since %s)\n", queue, when);
        else
            printf("queue %s was not paused\n", queue);
    }
    cli_session_close(&s);
    return code;
}

static const char pause_help[] =
    "Usage: delayq pause -q QUEUE\n"
    "Stop the queue's claims, on every delayqd that uses this Redis, until\n"
    "delayq resume: no job starts once the workers have heard of it (within\n"
    "about 100 ms); jobs running finish.  Jobs can still be added, cancelled\n"
    "and shown; the reaper still returns expired leases.  Pausing a paused\n"
    "queue keeps the time it was first paused; a queue that has never been\n"
    "used can be paused (its workers then start paused).  Prints the time the\n"
    "pause began.\n";

static int pause_run(struct cli *cli)
{
    return pause_or_resume(cli, true);
}

static const char resume_help[] =
    "Usage: delayq resume -q QUEUE\n"
    "Undo delayq pause: the workers claim at once, and jobs that came due\n"
    "during the pause run, their lateness measured from their due times.\n"
    "Resuming a queue that is not paused changes nothing (exit 0).\n";

static int resume_run(struct cli *cli)
{
    return pause_or_resume(cli, false);
}

const struct cli_command cli_cmd_pause = { "pause", pause_help, pause_run };
const struct cli_command cli_cmd_resume = { "resume", resume_help, resume_run };
