/* delayq fsck: find, and with --repair mend, orphans in a queue's keys. */
#include "cli/cli_cmd_fsck.h"

#include <string.h>

#include "cli/cli.h"
#include "cli/cli_opts.h"
#include "cli/cli_util.h"

#define FSCK_SHOWN 20   /* findings listed in the text report */

struct fsck_args {
    const char *queue;
    bool repair;
    bool json;
};

static int fsck_opt(struct cli *cli, int opt, const char *arg, void *ctx)
{
    (void)cli;
    (void)arg;
    struct fsck_args *a = ctx;
    switch (opt) {
    case 'q': a->queue = arg; return 0;
    case CLI_OPT_REPAIR: a->repair = true; return 0;
    case CLI_OPT_JSON: a->json = true; return 0;
    default: return -1;
    }
}

/* Problems found and left as they are (wrong-type keys always are). */
static int64_t fsck_left(const dq_fsck_result *r)
{
    return r->records + r->members + r->leases + r->wrong_types - r->repaired;
}

static void fsck_line(const char *what, int64_t n, const char *done, bool repair)
{
    printf("  %-32s %lld", what, (long long)n);
    if (n > 0 && done)
        printf("  (%s)", repair ? done : "run with --repair");
    putchar('\n');
}

static void fsck_text(const char *queue, const dq_fsck_result *r, bool repair)
{
    printf("queue %s: %lld records, members and lease fields examined in %zu calls\n",
           queue, (long long)r->scanned, r->calls);
    fsck_line("records in no set:", r->records, "moved to dead: \"orphan record\"", repair);
    fsck_line("set members without a record:", r->members, "removed", repair);
    fsck_line("lease fields without a record:", r->leases, "removed", repair);
    printf("  %-32s %lld%s\n", "keys of the wrong type:", (long long)r->wrong_types,
           r->wrong_types ? "  (left as they are: see delayq(1))" : "");
    for (size_t i = 0; i < r->n && i < FSCK_SHOWN; i++) {
        const dq_fsck_finding *f = &r->findings[i];
        if (f->kind == DQ_FSCK_WRONG_TYPE)
            printf("%-6s  %s has type %s, expected %s\n", dq_fsck_kind_str(f->kind),
                   f->key, f->id, f->expected);
        else
            printf("%-6s  %s  %s%s\n", dq_fsck_kind_str(f->kind), f->key, f->id,
                   f->repaired ? (f->kind == DQ_FSCK_RECORD ? "  -> dead" : "  -> removed")
                               : "");
    }
    int64_t all = r->records + r->members + r->leases + r->wrong_types;
    if ((int64_t)FSCK_SHOWN < all)
        printf("(%lld more not listed; --json lists up to %d)\n",
               (long long)(all - FSCK_SHOWN), DQ_FSCK_FINDINGS_MAX);
    if (r->claim_dropped > 0)
        printf("claims dropped %lld ids whose record was missing, in all\n",
               (long long)r->claim_dropped);
    int64_t left = fsck_left(r);
    if (all == 0)
        puts("clean");
    else if (left == 0)
        printf("%lld repaired\n", (long long)r->repaired);
    else
        printf("%lld problem%s left\n", (long long)left, left == 1 ? "" : "s");
}

static void fsck_json(const char *queue, const dq_fsck_result *r, bool repair)
{
    fputs("{\"queue\":", stdout);
    cli_json_str(stdout, queue, strlen(queue));
    printf(",\"repair\":%s,\"scanned\":%lld,\"calls\":%zu,\"records\":%lld,"
           "\"members\":%lld,\"leases\":%lld,\"wrong_types\":%lld,\"repaired\":%lld,"
           "\"left\":%lld,\"claim_dropped\":%lld,\"findings\":[",
           repair ? "true" : "false", (long long)r->scanned, r->calls,
           (long long)r->records, (long long)r->members, (long long)r->leases,
           (long long)r->wrong_types, (long long)r->repaired, (long long)fsck_left(r),
           (long long)r->claim_dropped);
    for (size_t i = 0; i < r->n; i++) {
        const dq_fsck_finding *f = &r->findings[i];
        printf("%s{\"kind\":\"%s\",\"key\":", i ? "," : "", dq_fsck_kind_str(f->kind));
        cli_json_str(stdout, f->key, strlen(f->key));
        if (f->kind == DQ_FSCK_WRONG_TYPE) {
            fputs(",\"type\":", stdout);
            cli_json_str(stdout, f->id, strlen(f->id));
            fputs(",\"expected\":", stdout);
            cli_json_str(stdout, f->expected, strlen(f->expected));
        } else {
            fputs(",\"id\":", stdout);
            cli_json_str(stdout, f->id, strlen(f->id));
            printf(",\"repaired\":%s", f->repaired ? "true" : "false");
        }
        putchar('}');
    }
    puts("]}");
}

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

static int fsck_run(struct cli *cli)
{
    static const struct option longopts[] = {
        { "queue", required_argument, NULL, 'q' },
        { "repair", no_argument, NULL, CLI_OPT_REPAIR },
        { "json", no_argument, NULL, CLI_OPT_JSON },
        { NULL, 0, NULL, 0 }
    };
    struct fsck_args a = { 0 };
    int code;
    if (cli_parse_opts(cli, "q:", longopts, fsck_opt, &a, false, &code) < 0)
        return code;
    if ((code = cli_check_queue(cli, a.queue)) != CLI_EXIT_OK)
        return code;
    if (cli_nargs(cli) > 0)
        return cli_fail(cli, CLI_EXIT_USAGE, "unexpected argument '%s'", cli_arg(cli, 0));
    struct cli_session s;
    code = cli_open_connected(cli, &s);
    if (code == CLI_EXIT_OK) {
        dq_fsck_result r;
        dq_status st = dq_fsck(s.client, a.queue, a.repair, 0, &r);
        if (st != DQ_OK)
            code = cli_fail_dq(cli, s.client, st);
        else if (a.json)
            fsck_json(a.queue, &r, a.repair);
        else
            fsck_text(a.queue, &r, a.repair);
        if (st == DQ_OK && fsck_left(&r) > 0)
            code = CLI_EXIT_NOT_DONE;
        dq_fsck_result_free(&r);
    }
    cli_session_close(&s);
    return code;
}

const struct cli_command cli_cmd_fsck = { "fsck", fsck_help, fsck_run };
