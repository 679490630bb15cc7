/* delayq cancel, run-now and show: one job at a time. */
#include "cli/cli_cmd_jobs.h"

#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_opts.h"
#include "cli/cli_util.h"
#include "util/timefmt.h"

/* ---- cancel and show ---------------------------------------------------- */

struct job_args {
    const char *queue;
    bool json;
};

static const struct option job_longopts[] = {
    { "queue", required_argument, NULL, 'q' },
    { "json", no_argument, NULL, CLI_OPT_JSON },
    { NULL, 0, NULL, 0 }
};

static int job_opt(struct cli *cli, int opt, const char *arg, void *ctx)
{
    (void)cli;
    struct job_args *a = ctx;
    if (opt == 'q')
        a->queue = arg;
    else if (opt == CLI_OPT_JSON)
        a->json = true;
    else
        return -1;
    return 0;
}

/* Options and the one ID operand of cancel and show.  `longopts` decides
 * whether --json is taken.  0, or -1 when the command ends with *code
 * (0 after --help: the help is all it does). */
static int job_parse(struct cli *cli, const struct option *longopts,
                     struct job_args *a, const char **id, int *code)
{
    if (cli_parse_opts(cli, "q:", longopts, job_opt, a, false, code) < 0)
        return -1;
    if ((*code = cli_check_queue(cli, a->queue)) != CLI_EXIT_OK)
        return -1;
    if (cli_nargs(cli) != 1) {
        *code = cli_fail(cli, CLI_EXIT_USAGE, cli_nargs(cli) ? "give one job ID"
                                                             : "missing the job ID");
        return -1;
    }
    *id = cli_arg(cli, 0);
    if (!**id) {
        *code = cli_fail(cli, CLI_EXIT_USAGE, "the job ID is empty");
        return -1;
    }
    return 0;
}

/* Connect and run `fn` (dq_cancel, dq_run_now) on job `id` of `queue`. */
static int call_on_job(struct cli *cli,
                       dq_status (*fn)(dq_client *, const char *, const char *),
                       const char *queue, const char *id)
{
    struct cli_session s;
    int code = cli_open_connected(cli, &s);
    if (code == CLI_EXIT_OK) {
        dq_status st = fn(s.client, queue, id);
        code = st == DQ_OK ? CLI_EXIT_OK : cli_fail_dq(cli, s.client, st);
    }
    cli_session_close(&s);
    return code;
}

static const char cancel_help[] =
    "Usage: delayq cancel -q QUEUE ID\n"
    "Cancel a job that has not finished.  A waiting job is deleted.  A\n"
    "running one ends at once, cancelled (not retried, not dead), and the\n"
    "daemon that runs it stops it within about a second (its handler's\n"
    "cancel_grace at most); its id stays taken until that run's lease ends.\n"
    "Exit 0 when it was cancelled; 1 when it is dead (see dlq purge) or not\n"
    "there: it finished first, or never was.\n";

static int cancel_run(struct cli *cli)
{
    static const struct option cancel_longopts[] = {
        { "queue", required_argument, NULL, 'q' },
        { NULL, 0, NULL, 0 }
    };
    struct job_args a = { 0 };
    const char *id = NULL;
    int code;
    if (job_parse(cli, cancel_longopts, &a, &id, &code) < 0)
        return code;
    return call_on_job(cli, dq_cancel, a.queue, id);
}

const struct cli_command cli_cmd_cancel = { "cancel", cancel_help, cancel_run };

static const char run_now_help[] =
    "Usage: delayq run-now -q QUEUE ID   (or: delayq run-now QUEUE ID)\n"
    "Make a job that is still waiting due now, keeping its priority: a worker\n"
    "takes it next.  Exit 1 when it is running, dead (see dlq requeue) or\n"
    "unknown.\n";

/* run-now takes the queue as -q, as cancel does, or as the first of two
 * operands. */
static int run_now_run(struct cli *cli)
{
    static const struct option run_now_longopts[] = {
        { "queue", required_argument, NULL, 'q' },
        { NULL, 0, NULL, 0 }
    };
    struct job_args a = { 0 };
    int code;
    if (cli_parse_opts(cli, "q:", run_now_longopts, job_opt, &a, false, &code) < 0)
        return code;
    int first = 0;
    if (!a.queue && cli_nargs(cli) == 2)
        a.queue = cli_arg(cli, first++);
    if ((code = cli_check_queue(cli, a.queue)) != CLI_EXIT_OK)
        return code;
    if (cli_nargs(cli) - first != 1)
        return cli_fail(cli, CLI_EXIT_USAGE, cli_nargs(cli) > first ? "give one job ID"
                                                                   : "missing the job ID");
    const char *id = cli_arg(cli, first);
    if (!*id)
        return cli_fail(cli, CLI_EXIT_USAGE, "the job ID is empty");
    return call_on_job(cli, dq_run_now, a.queue, id);
}

const struct cli_command cli_cmd_run_now = { "run-now", run_now_help, run_now_run };

/* "2026-01-01T00:00:00.000Z (in 29m 58s)" */
static void show_time(const char *label, int64_t ms, int64_t now)
{
    char iso[40], rel[48];
    timefmt_iso(iso, sizeof iso, ms);
    cli_relative(rel, sizeof rel, ms, now);
    printf("%s: %s (%s)\n", label, iso, rel);
}

static void show_payload_text(const dq_job *j)
{
    printf("payload size: %zu\n", j->payload_len);
    switch (cli_text_kind(j->payload, j->payload_len)) {
    case CLI_TEXT_PLAIN:
        printf("payload: %s\n", j->payload_len ? (const char *)j->payload : "(empty)");
        break;
    case CLI_TEXT_ESCAPED:
        fputs("payload: ", stdout);
        cli_print_escaped(stdout, j->payload, j->payload_len);
        putchar('\n');
        break;
    case CLI_TEXT_BINARY:
        printf("payload: (%zu bytes binary)\n", j->payload_len);
        break;
    }
}

/* "priority: 0 (high)": the level, and its name where it has one. */
static void show_priority(int level)
{
    const char *name = level == 0 ? " (high)" : level == DQ_PRIORITY_NORMAL_LEVEL
                       ? " (normal)" : level == 9 ? " (low)" : "";
    printf("priority: %d%s\n", level, name);
}

static void show_text(const char *queue, const char *id, const dq_job_info *info)
{
    const dq_job *j = &info->job;
    printf("id: %s\nqueue: %s\nstate: %s\n", id, queue, dq_state_str(info->state));
    if (info->state == DQ_STATE_DONE) {
        /* All that is left of it: when it finished, and its window. */
        show_time("done", info->state_ms, info->now_ms);
        show_time("id taken until", info->unique_until_ms, info->now_ms);
        return;
    }
    if (info->state == DQ_STATE_CANCELLED) {
        /* Cancelled while it ran: when, which run, and until when its
         * id stays taken. */
        show_time("cancelled", info->state_ms, info->now_ms);
        printf("fence: %lld (the run that was stopped)\n", (long long)j->fence);
        show_time("id taken until", info->unique_until_ms, info->now_ms);
        return;
    }
    fputs("type: ", stdout);
    cli_print_escaped(stdout, j->type, strlen(j->type));
    if (j->max_attempts > 0)
        printf("\nattempts: %d/%d\n", j->attempt, j->max_attempts);
    else
        printf("\nattempts: %d/default\n", j->attempt);
    /* An unreadable record's times are not known (0): not shown. */
    if (info->state != DQ_STATE_UNREADABLE) {
        show_priority(j->priority);
        show_time("created", j->created_ms, info->now_ms);
        show_time("due", j->due_ms, info->now_ms);
    }
    if (info->expire_at_ms > 0) {
        show_time("expires", info->expire_at_ms, info->now_ms);
        printf("on expiry: %s\n", info->on_expire == DQ_EXPIRE_DROP ? "drop" : "dead");
    }
    if (info->unique_ms > 0) {
        char w[40];
        timefmt_duration(w, sizeof w, info->unique_ms);
        printf("unique for: %s after it is done\n", w);
    }
    if (info->state == DQ_STATE_PROCESSING)
        show_time("lease deadline", info->state_ms, info->now_ms);
    else if (info->state == DQ_STATE_DEAD)
        show_time("died at", info->state_ms, info->now_ms);
    if (j->last_error[0]) {
        fputs("last error: ", stdout);
        cli_print_escaped(stdout, j->last_error, strlen(j->last_error));
        putchar('\n');
    }
    show_payload_text(j);
}

static void json_key_str(const char *key, const char *v, size_t n)
{
    printf(",\"%s\":", key);
    cli_json_str(stdout, v, n);
}

static void json_key_ms(const char *key, int64_t v, bool present)
{
    if (present)
        printf(",\"%s\":%lld", key, (long long)v);
    else
        printf(",\"%s\":null", key);
}

static void show_json(const char *queue, const char *id, const dq_job_info *info)
{
    const dq_job *j = &info->job;
    fputs("{\"id\":", stdout);
    cli_json_str(stdout, id, strlen(id));
    json_key_str("queue", queue, strlen(queue));
    json_key_str("state", dq_state_str(info->state), strlen(dq_state_str(info->state)));
    json_key_str("type", j->type, strlen(j->type));
    printf(",\"attempts\":%d", j->attempt);
    json_key_ms("max_attempts", j->max_attempts, j->max_attempts > 0);
    bool known = info->state != DQ_STATE_UNREADABLE && !dq_state_is_finished(info->state);
    printf(",\"unreadable\":%s", info->state == DQ_STATE_UNREADABLE ? "true" : "false");
    json_key_ms("created_ms", j->created_ms, known);
    json_key_ms("due_ms", j->due_ms, known);
    json_key_ms("lease_deadline_ms", info->state_ms, info->state == DQ_STATE_PROCESSING);
    json_key_ms("died_ms", info->state_ms, info->state == DQ_STATE_DEAD);
    json_key_ms("done_ms", info->state_ms, info->state == DQ_STATE_DONE);
    json_key_ms("cancelled_ms", info->state_ms, info->state == DQ_STATE_CANCELLED);
    json_key_ms("fence", j->fence, info->state == DQ_STATE_CANCELLED
                                   || info->state == DQ_STATE_PROCESSING);
    json_key_ms("unique_ms", info->unique_ms, info->unique_ms > 0);
    json_key_ms("unique_until_ms", info->unique_until_ms, dq_state_is_finished(info->state));
    json_key_ms("now_ms", info->now_ms, true);
    json_key_ms("priority", j->priority, known);
    json_key_ms("expire_at_ms", info->expire_at_ms, info->expire_at_ms > 0);
    if (info->expire_at_ms > 0)
        printf(",\"on_expire\":\"%s\"", info->on_expire == DQ_EXPIRE_DROP ? "drop" : "dead");
    else
        fputs(",\"on_expire\":null", stdout);
    json_key_str("last_error", j->last_error, strlen(j->last_error));
    printf(",\"payload_size\":%zu", j->payload_len);
    if (cli_is_utf8(j->payload, j->payload_len)) {
        json_key_str("payload", j->payload, j->payload_len);
    } else {
        fputs(",\"payload\":null,\"payload_base64\":\"", stdout);
        cli_print_base64(stdout, j->payload, j->payload_len);
        putchar('"');
    }
    fputs("}\n", stdout);
}

static const char show_help[] =
    "Usage: delayq show -q QUEUE ID [--json]\n"
    "Print a job: state, type, attempts, times (server clock), last error,\n"
    "payload.  --json prints one object; the payload is \"payload\" when it\n"
    "is UTF-8, else \"payload_base64\".  Exit 1 when there is no such job.\n";

static int show_run(struct cli *cli)
{
    struct job_args a = { 0 };
    const char *id = NULL;
    int code;
    if (job_parse(cli, job_longopts, &a, &id, &code) < 0)
        return code;
    struct cli_session s;
    code = cli_open_connected(cli, &s);
    if (code == CLI_EXIT_OK) {
        dq_job_info info;
        dq_status st = dq_show(s.client, a.queue, id, &info);
        if (st != DQ_OK)
            code = cli_fail_dq(cli, s.client, st);
        else if (a.json)
            show_json(a.queue, id, &info);
        else
            show_text(a.queue, id, &info);
        dq_job_info_free(&info);
    }
    cli_session_close(&s);
    return code;
}

const struct cli_command cli_cmd_show = { "show", show_help, show_run };
