/* delayq schedule add, list, remove, run-now, pause, resume: recurring
 * schedules. */
#include "cli/cli_cmd_schedule.h"

#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_cmd_add.h"
#include "cli/cli_opts.h"
#include "cli/cli_util.h"
#include "lib/keys.h"
#include "lib/sched.h"
#include "util/cron.h"
#include "util/timefmt.h"

struct sched_args {
    const char *queue;
    const char *name;
    const char *type;
    const char *cron;
    const char *tz;
    const char *catch_up;
    int max_attempts;
    bool replace;
    bool json;
};

static const struct option sched_longopts[] = {
    { "queue", required_argument, NULL, 'q' },
    { "name", required_argument, NULL, CLI_OPT_NAME },
    { "type", required_argument, NULL, 't' },
    { "cron", required_argument, NULL, CLI_OPT_CRON },
    { "tz", required_argument, NULL, CLI_OPT_TZ },
    { "catch-up", required_argument, NULL, CLI_OPT_CATCH_UP },
    { "max-attempts", required_argument, NULL, CLI_OPT_MAX_ATTEMPTS },
    { "replace", no_argument, NULL, CLI_OPT_REPLACE },
    { "json", no_argument, NULL, CLI_OPT_JSON },
    { NULL, 0, NULL, 0 }
};

static int sched_opt(struct cli *cli, int opt, const char *arg, void *ctx)
{
    struct sched_args *a = ctx;
    switch (opt) {
    case 'q': a->queue = arg; return 0;
    case 't': a->type = arg; return 0;
    case CLI_OPT_NAME: a->name = arg; return 0;
    case CLI_OPT_CRON: a->cron = arg; return 0;
    case CLI_OPT_TZ: a->tz = arg; return 0;
    case CLI_OPT_CATCH_UP: a->catch_up = arg; return 0;
    case CLI_OPT_REPLACE: a->replace = true; return 0;
    case CLI_OPT_JSON: a->json = true; return 0;
    case CLI_OPT_MAX_ATTEMPTS:
        return cli_opt_max_attempts(cli, arg, &a->max_attempts);
    default:
        return -1;
    }
}

/* ---- add ---------------------------------------------------------------- */

/* Check what add was given, before connecting: names, expression, zone. */
static int add_check(const struct cli *cli, const struct sched_args *a, dq_schedule_req *req)
{
    const char *why;
    char err[300];
    if (!a->name)
        return cli_fail(cli, CLI_EXIT_USAGE, "missing --name NAME");
    if ((why = sched_check_name(a->name)))
        return cli_fail(cli, CLI_EXIT_USAGE, "bad --name '%s': %s", a->name, why);
    if (!a->type)
        return cli_fail(cli, CLI_EXIT_USAGE, "missing -t TYPE");
    if ((why = keys_check_type(a->type)))
        return cli_fail(cli, CLI_EXIT_USAGE, "bad type '%s': %s", a->type, why);
    if (!a->cron)
        return cli_fail(cli, CLI_EXIT_USAGE, "missing --cron EXPR");
    struct cron_expr e;
    if (cron_parse(a->cron, &e, err, sizeof err) < 0)
        return cli_fail(cli, CLI_EXIT_USAGE, "bad --cron '%s': %s", a->cron, err);
    if (cron_check_zone(a->tz, err, sizeof err) < 0)
        return cli_fail(cli, CLI_EXIT_USAGE, "bad --tz: %s", err);
    req->catch_up = DQ_CATCH_UP_ONE;
    if (a->catch_up && dq_catch_up_parse(a->catch_up, &req->catch_up) < 0)
        return cli_fail(cli, CLI_EXIT_USAGE, "bad --catch-up '%s': expected one, all "
                        "or none", a->catch_up);
    if (cli_nargs(cli) > 2)
        return cli_fail(cli, CLI_EXIT_USAGE, "more than one payload given (quote it, "
                        "or use - to read it from standard input)");
    req->queue = a->queue;
    req->name = a->name;
    req->type = a->type;
    req->expr = a->cron;
    req->tz = a->tz;
    req->max_attempts = a->max_attempts;
    req->replace = a->replace;
    return CLI_EXIT_OK;
}

static int add_run(struct cli *cli, const struct sched_args *a)
{
    dq_schedule_req req = { 0 };
    int code = add_check(cli, a, &req);
    if (code != CLI_EXIT_OK)
        return code;
    struct cli_session s;
    char *payload = NULL;
    code = cli_open(cli, &s);
    if (code == CLI_EXIT_OK)
        code = cli_read_payload(cli, 1, s.opt.max_payload, &req.payload,
                                &req.payload_len, &payload);
    if (code == CLI_EXIT_OK)
        code = cli_connect(cli, &s);
    if (code == CLI_EXIT_OK) {
        int64_t next;
        dq_status st = dq_schedule_add(s.client, &req, &next);
        if (st == DQ_OK && next < 0) {
            printf("schedule %s: stored; it stays paused (delayq schedule resume)\n",
                   req.name);
        } else if (st == DQ_OK) {
            char iso[40];
            timefmt_iso(iso, sizeof iso, next);
            printf("schedule %s: next tick %s\n", req.name, iso);
        } else {
            code = cli_fail_dq(cli, s.client, st);
        }
    }
    free(payload);
    cli_session_close(&s);
    return code;
}

/* ---- list --------------------------------------------------------------- */

static void list_table(const dq_schedule_list *l)
{
    int w = 4, we = 8;
    for (size_t i = 0; i < l->n; i++) {
        if ((int)strlen(l->items[i].name) > w)
            w = (int)strlen(l->items[i].name);
        if ((int)strlen(l->items[i].expr) > we)
            we = (int)strlen(l->items[i].expr);
    }
    printf("%-*s  %-*s  %-16s %-8s %-24s  %s\n", w, "NAME", we, "SCHEDULE", "ZONE",
           "CATCH-UP", "NEXT TICK", "TYPE");
    for (size_t i = 0; i < l->n; i++) {
        const dq_schedule_info *s = &l->items[i];
        char iso[40], rel[40];
        timefmt_iso(iso, sizeof iso, s->next_ms);
        cli_relative(rel, sizeof rel, s->next_ms, l->now_ms);
        if (s->paused_since_ms >= 0) {
            snprintf(iso, sizeof iso, "paused");
            cli_relative(rel, sizeof rel, s->paused_since_ms, l->now_ms);
        }
        if (!s->readable) {
            printf("%-*s  (unreadable definition)  next %s\n", w, s->name, iso);
            continue;
        }
        printf("%-*s  %-*s  %-16s %-8s %-24s  %s (%s)\n", w, s->name, we, s->expr,
               *s->tz ? s->tz : "UTC", dq_catch_up_str(s->catch_up), iso, s->type, rel);
    }
}

static void json_field(const char *key, const char *v, bool comma)
{
    printf("%s\"%s\":", comma ? "," : "", key);
    cli_json_str(stdout, v, strlen(v));
}

static void list_json(const dq_schedule_list *l)
{
    putchar('[');
    for (size_t i = 0; i < l->n; i++) {
        const dq_schedule_info *s = &l->items[i];
        char iso[40];
        timefmt_iso(iso, sizeof iso, s->next_ms);
        putchar(i ? ',' : '{');
        if (i)
            putchar('{');
        json_field("name", s->name, false);
        json_field("expr", s->expr, true);
        json_field("tz", *s->tz ? s->tz : "UTC", true);
        json_field("type", s->type, true);
        fputs(",\"payload\":", stdout);
        cli_json_str(stdout, s->payload, s->payload_len);
        printf(",\"max_attempts\":%d", s->max_attempts);
        json_field("catch_up", dq_catch_up_str(s->catch_up), true);
        if (s->paused_since_ms >= 0) {
            printf(",\"next_ms\":null,\"next\":null,\"paused_since_ms\":%lld",
                   (long long)s->paused_since_ms);
        } else {
            printf(",\"next_ms\":%lld", (long long)s->next_ms);
            json_field("next", iso, true);
            fputs(",\"paused_since_ms\":null", stdout);
        }
        printf(",\"readable\":%s}", s->readable ? "true" : "false");
    }
    puts("]");
}

static int list_run(const struct cli *cli, dq_client *c, const struct sched_args *a)
{
    dq_schedule_list l;
    dq_status st = dq_schedule_list_get(c, a->queue, &l);
    int code = st == DQ_OK ? CLI_EXIT_OK : cli_fail_dq(cli, c, st);
    if (code == CLI_EXIT_OK && a->json)
        list_json(&l);
    else if (code == CLI_EXIT_OK)
        list_table(&l);
    dq_schedule_list_free(&l);
    return code;
}

/* ---- remove, run-now, pause and resume ----------------------------------- */

/* The actions on one schedule, by name. */
static const char *const by_name_actions[] = { "remove", "run-now", "pause", "resume", NULL };

static int name_run(const struct cli *cli, dq_client *c, const struct sched_args *a,
                    const char *action)
{
    const char *name = cli_arg(cli, 1);
    dq_enqueued out;
    int64_t ms = 0;
    char iso[40];
    dq_status st;
    if (strcmp(action, "run-now") == 0)
        st = dq_schedule_run_now(c, a->queue, name, &out);
    else if (strcmp(action, "pause") == 0)
        st = dq_schedule_pause(c, a->queue, name, &ms);
    else if (strcmp(action, "resume") == 0)
        st = dq_schedule_resume(c, a->queue, name, &ms);
    else
        st = dq_schedule_remove(c, a->queue, name);
    if (st != DQ_OK)
        return cli_fail_dq(cli, c, st);
    timefmt_iso(iso, sizeof iso, ms);
    if (strcmp(action, "run-now") == 0)
        printf("%s\n", out.id);
    else if (strcmp(action, "pause") == 0)
        printf("schedule %s: paused since %s\n", name, iso);
    else if (strcmp(action, "resume") == 0)
        printf("schedule %s: next tick %s\n", name, iso);
    else
        printf("removed schedule %s\n", name);
    return CLI_EXIT_OK;
}

/* ---- the command -------------------------------------------------------- */

static const char schedule_help[] =
    "Usage: delayq schedule add -q QUEUE --name NAME -t TYPE --cron EXPR\n"
    "                           [--tz ZONE] [--catch-up one|all|none]\n"
    "                           [--max-attempts N] [--replace] [PAYLOAD | -]\n"
    "       delayq schedule list -q QUEUE [--json]\n"
    "       delayq schedule remove -q QUEUE NAME\n"
    "       delayq schedule run-now -q QUEUE NAME\n"
    "       delayq schedule pause -q QUEUE NAME | resume -q QUEUE NAME\n"
    "Recurring jobs: each tick of a schedule makes one job, id NAME@TICK\n"
    "(nightly@2026-11-24T00:00:00Z), due at the tick, however many delayqd\n"
    "serve the queue.\n"
    "  --cron EXPR         minute hour day-of-month month day-of-week\n"
    "                      (\"*/5 * * * *\", \"0 9 * * mon-fri\"), or @every 90s,\n"
    "                      @hourly, @daily, @weekly, @monthly, @yearly\n"
    "  --tz ZONE           the zone of the cron fields (default UTC), as\n"
    "                      Europe/Berlin\n"
    "  --catch-up POLICY   ticks missed while no delayqd ran: one job for the\n"
    "                      whole period (one, default), each tick (all, at\n"
    "                      most 1000), or none\n"
    "  --max-attempts N    each job's attempts (default: the consumer's)\n"
    "  --replace           overwrite a schedule of the same name\n"
    "  PAYLOAD             each job's payload; '-' reads standard input\n"
    "remove: no tick fires after it (exit 1 when unknown); run-now: one job\n"
    "now, id NAME@now-TIME, printed; the ticks are not changed.  pause: no\n"
    "tick fires after it, the definition stays (add and the config file keep\n"
    "it paused); resume: from the next tick after now (missed ticks are not\n"
    "made up).\n";

/* Which action, and do its operands and options go with it? */
static int schedule_check(const struct cli *cli, const struct sched_args *a,
                          const char **action)
{
    int n = cli_nargs(cli);
    if (n == 0)
        return cli_fail(cli, CLI_EXIT_USAGE, "missing the action: add, list, remove, "
                        "run-now, pause or resume");
    *action = cli_arg(cli, 0);
    bool add = strcmp(*action, "add") == 0, list = strcmp(*action, "list") == 0;
    bool by_name = false;
    for (size_t i = 0; by_name_actions[i]; i++)
        by_name = by_name || strcmp(*action, by_name_actions[i]) == 0;
    if (!add && !list && !by_name)
        return cli_fail(cli, CLI_EXIT_USAGE, "unknown action '%s' (use add, list, "
                        "remove, run-now, pause or resume)", *action);
    int code = cli_check_queue(cli, a->queue);
    if (code != CLI_EXIT_OK)
        return code;
    if (!add && (a->name || a->type || a->cron || a->tz || a->catch_up
                 || a->max_attempts || a->replace))
        return cli_fail(cli, CLI_EXIT_USAGE, "--name, -t, --cron, --tz, --catch-up, "
                        "--max-attempts and --replace go with add");
    if (!list && a->json)
        return cli_fail(cli, CLI_EXIT_USAGE, "--json goes with list");
    if (list && n > 1)
        return cli_fail(cli, CLI_EXIT_USAGE, "unexpected argument '%s'", cli_arg(cli, 1));
    if (by_name && n != 2)
        return cli_fail(cli, CLI_EXIT_USAGE, n < 2 ? "missing the schedule NAME"
                                                   : "give one schedule NAME");
    const char *why;
    if (by_name && (why = sched_check_name(cli_arg(cli, 1))))
        return cli_fail(cli, CLI_EXIT_USAGE, "bad name '%s': %s", cli_arg(cli, 1), why);
    return CLI_EXIT_OK;
}

static int schedule_run(struct cli *cli)
{
    struct sched_args a = { 0 };
    int code;
    if (cli_parse_opts(cli, "q:t:", sched_longopts, sched_opt, &a, false, &code) < 0)
        return code;
    const char *action = NULL;
    if ((code = schedule_check(cli, &a, &action)) != CLI_EXIT_OK)
        return code;
    if (strcmp(action, "add") == 0)
        return add_run(cli, &a);
    struct cli_session s;
    code = cli_open_connected(cli, &s);
    if (code == CLI_EXIT_OK && strcmp(action, "list") == 0)
        code = list_run(cli, s.client, &a);
    else if (code == CLI_EXIT_OK)
        code = name_run(cli, s.client, &a, action);
    cli_session_close(&s);
    return code;
}

const struct cli_command cli_cmd_schedule = { "schedule", schedule_help, schedule_run };
