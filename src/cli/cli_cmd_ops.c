/* delayq stats and dlq: the figures of queues and their dead-letter sets. */
#include "cli/cli_cmd_ops.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_cmd_partitions.h"
#include "cli/cli_opts.h"
#include "cli/cli_util.h"
#include "util/timefmt.h"

#define DLQ_DEFAULT_LIMIT 50
#define DLQ_MAX_LIMIT 10000
#define WATCH_MIN_MS 100
#define WATCH_MAX_MS (24LL * 3600 * 1000)

struct ops_args {
    const char *queue;
    bool json;
    bool all;
    long long limit;
    long long offset;
    int64_t watch_ms;   /* stats --watch: redraw this often; 0: once */
    bool partitions;    /* stats --partitions: a row per partition */
};

static int ops_opt(struct cli *cli, int opt, const char *arg, void *ctx)
{
    struct ops_args *a = ctx;
    switch (opt) {
    case 'q': a->queue = arg; return 0;
    case CLI_OPT_JSON: a->json = true; return 0;
    case CLI_OPT_ALL: a->all = true; return 0;
    case CLI_OPT_PARTITIONS: a->partitions = true; return 0;
    case CLI_OPT_WATCH: {
        const char *why = "must be from 100ms to 1d";
        if (timefmt_parse_duration(arg, &a->watch_ms, &why) == 0
            && a->watch_ms >= WATCH_MIN_MS && a->watch_ms <= WATCH_MAX_MS)
            return 0;
        cli_fail(cli, CLI_EXIT_USAGE, "bad --watch '%s': %s", arg, why);
        return -1;
    }
    case CLI_OPT_LIMIT:
        if (cli_parse_int(arg, 1, DLQ_MAX_LIMIT, &a->limit) == 0)
            return 0;
        cli_fail(cli, CLI_EXIT_USAGE, "bad --limit '%s': expected a whole number "
                 "from 1 to %d", arg, DLQ_MAX_LIMIT);
        return -1;
    case CLI_OPT_OFFSET:
        if (cli_parse_int(arg, 0, INT64_MAX, &a->offset) == 0)
            return 0;
        cli_fail(cli, CLI_EXIT_USAGE, "bad --offset '%s': expected a whole number "
                 "of 0 or more", arg);
        return -1;
    default:
        return -1;
    }
}

/* ---- stats -------------------------------------------------------------- */

/* What stats prints of one queue. */
struct queue_figures {
    dq_stats st;
    int64_t paused_since;       /* when it was paused (server ms); -1: it is not */
};

/* Figures of the queues in `names`, in one array (malloc'd). */
static int stats_collect(const struct cli *cli, dq_client *c, char **names,
                         size_t n, struct queue_figures **out)
{
    *out = calloc(n ? n : 1, sizeof **out);
    if (!*out)
        return cli_fail(cli, CLI_EXIT_SOFTWARE, "out of memory");
    for (size_t i = 0; i < n; i++) {
        dq_status st = dq_stats_get(c, names[i], &(*out)[i].st);
        if (st == DQ_OK)
            st = dq_paused(c, names[i], &(*out)[i].paused_since);
        if (st != DQ_OK)
            return cli_fail_dq(cli, c, st);
    }
    return CLI_EXIT_OK;
}

/* Below the table, for a queue with due jobs at a level other than
 * normal: "QUEUE due by priority: 0:3 5:120" (level:count). */
static void print_due_by_priority(const char *name, const dq_stats *st)
{
    if (st->due == st->due_by_priority[DQ_PRIORITY_NORMAL_LEVEL])
        return;
    printf("%s due by priority:", name);
    for (int p = 0; p < DQ_PRIORITY_LEVELS; p++)
        if (st->due_by_priority[p] > 0)
            printf(" %d:%lld", p, (long long)st->due_by_priority[p]);
    putchar('\n');
}

static void stats_table(char **names, size_t n, const struct queue_figures *f)
{
    int w = 5;
    for (size_t i = 0; i < n; i++)
        if ((int)strlen(names[i]) > w)
            w = (int)strlen(names[i]);
    printf("%-*s %10s %10s %10s %10s  %-10s  %s\n", w, "QUEUE", "DELAYED", "DUE",
           "PROCESSING", "DEAD", "NEXT DUE", "PAUSED");
    for (size_t i = 0; i < n; i++) {
        const dq_stats *st = &f[i].st;
        char next[32] = "-", paused[48] = "no";
        if (f[i].paused_since >= 0) {
            memcpy(paused, "since ", 6);
            timefmt_iso(paused + 6, sizeof paused - 6, f[i].paused_since);
        }
        if (st->next_due_in_ms == 0)
            snprintf(next, sizeof next, "now");
        else if (st->next_due_in_ms > 0)
            timefmt_duration(next, sizeof next, st->next_due_in_ms);
        printf("%-*s %10lld %10lld %10lld %10lld  %-10s  %s\n", w, names[i],
               (long long)st->delayed, (long long)st->due,
               (long long)st->processing, (long long)st->dead, next, paused);
    }
    for (size_t i = 0; i < n; i++)
        print_due_by_priority(names[i], &f[i].st);
}

static void stats_json(char **names, size_t n, const struct queue_figures *f)
{
    putchar('[');
    for (size_t i = 0; i < n; i++) {
        const dq_stats *st = &f[i].st;
        fputs(i ? ",{\"queue\":" : "{\"queue\":", stdout);
        cli_json_str(stdout, names[i], strlen(names[i]));
        printf(",\"delayed\":%lld,\"due\":%lld,\"processing\":%lld,\"expired\":%lld,"
               "\"dead\":%lld,\"next_due_in_ms\":", (long long)st->delayed,
               (long long)st->due, (long long)st->processing,
               (long long)st->expired, (long long)st->dead);
        if (st->next_due_in_ms >= 0)
            printf("%lld", (long long)st->next_due_in_ms);
        else
            fputs("null", stdout);
        if (f[i].paused_since >= 0)
            printf(",\"paused\":true,\"paused_since_ms\":%lld", (long long)f[i].paused_since);
        else
            fputs(",\"paused\":false,\"paused_since_ms\":null", stdout);
        fputs(",\"due_by_priority\":[", stdout);
        for (int p = 0; p < DQ_PRIORITY_LEVELS; p++)
            printf("%s%lld", p ? "," : "", (long long)st->due_by_priority[p]);
        fputs("]}", stdout);
    }
    puts("]");
}

/* The queue named by -q, or every registered queue. */
static int stats_queues(const struct cli *cli, dq_client *c, const char *queue,
                        char ***names, size_t *n)
{
    if (!queue) {
        dq_status st = dq_queues(c, names, n);
        return st == DQ_OK ? CLI_EXIT_OK : cli_fail_dq(cli, c, st);
    }
    *names = calloc(1, sizeof **names);
    if (*names && !((*names)[0] = strdup(queue))) {
        free(*names);
        *names = NULL;
    }
    if (!*names)
        return cli_fail(cli, CLI_EXIT_SOFTWARE, "out of memory");
    *n = 1;
    return CLI_EXIT_OK;
}

/* ---- stats --watch ------------------------------------------------------ */

static volatile sig_atomic_t watch_stop;

static void on_watch_signal(int sig)
{
    (void)sig;
    watch_stop = 1;
}

/* Sleep `ms`, in short steps so that an interrupt ends the wait soon. */
static void watch_sleep(int64_t ms)
{
    while (ms > 0 && !watch_stop) {
        int64_t step = ms < 100 ? ms : 100;
        struct timespec ts = { 0, (long)step * 1000000L };
        nanosleep(&ts, NULL);
        ms -= step;
    }
}

/* One round: the figures now, as a table (under a clear screen on a
 * terminal, else after a blank line and a timestamp) or a JSON line. */
static int watch_round(const struct cli *cli, dq_client *c, const struct ops_args *a,
                       bool tty, int round)
{
    char **names = NULL;
    size_t n = 0;
    struct queue_figures *st = NULL;
    int code = stats_queues(cli, c, a->queue, &names, &n);
    if (code == CLI_EXIT_OK && !a->partitions)
        code = stats_collect(cli, c, names, n, &st);
    if (code == CLI_EXIT_OK && !watch_stop) {
        struct timespec now;
        char when[40];
        clock_gettime(CLOCK_REALTIME, &now);
        timefmt_iso(when, sizeof when, (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000);
        if (a->json) {
            if (a->partitions)
                code = cli_partitions_stats(cli, c, names, n, true);
            else
                stats_json(names, n, st);
        } else {
            if (tty)
                fputs("\033[H\033[2J", stdout);
            else if (round > 0)
                putchar('\n');
            printf("%s\n", when);
            if (a->partitions)
                code = cli_partitions_stats(cli, c, names, n, false);
            else
                stats_table(names, n, st);
        }
    }
    free(st);
    dq_strv_free(names, n);
    return code;
}

/* Redraw every a->watch_ms until SIGINT or SIGTERM (exit 0).  A failed
 * round is reported on stderr and the next one tried. */
static int stats_watch(const struct cli *cli, dq_client *c, const struct ops_args *a)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_watch_signal;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, NULL) < 0 || sigaction(SIGTERM, &sa, NULL) < 0)
        return cli_fail(cli, CLI_EXIT_SOFTWARE, "cannot handle SIGINT and SIGTERM: %s",
                        strerror(errno));
    bool tty = isatty(STDOUT_FILENO);
    for (int round = 0; !watch_stop; round++) {
        if (watch_round(cli, c, a, tty, round) == CLI_EXIT_SOFTWARE)
            return CLI_EXIT_SOFTWARE;
        if (fflush(stdout) != 0 || ferror(stdout))
            return cli_fail(cli, CLI_EXIT_IOERR, "cannot write the output");
        watch_sleep(a->watch_ms);
    }
    return CLI_EXIT_OK;
}

static const char stats_help[] =
    "Usage: delayq stats [-q QUEUE] [--json] [--watch N] [--partitions]\n"
    "Per queue (every queue without -q): jobs delayed (not yet due), due,\n"
    "processing, dead, the time until the next is due, and whether the\n"
    "queue is paused (delayq pause) and since when; below, for a queue with\n"
    "due jobs not all normal, the due jobs per priority level (\"QUEUE due\n"
    "by priority: 0:3 5:120\", level:count).  --json prints an array of\n"
    "objects (next_due_in_ms is null when nothing is delayed; paused is true\n"
    "or false, paused_since_ms a Unix time in ms or null; due_by_priority\n"
    "has ten counts, levels 0..9).\n"
    "  --watch N   print the figures again every N (a duration, or seconds:\n"
    "              2, 500ms) until interrupted (exit 0): on a terminal the\n"
    "              screen is redrawn; otherwise each table follows a blank\n"
    "              line and a timestamp (with --json: one array per line).\n"
    "              A round that fails is reported and the next one tried.\n"
    "  --partitions  a row per partition of each queue (delayq partitions),\n"
    "              PART 0..N-1, then its total row (PART total); without\n"
    "              the pause column.  With --json each object has the\n"
    "              queue, partitions (N), total and by_partition (an array\n"
    "              of N objects of the counts and next_due_in_ms).\n";

static int stats_run(struct cli *cli)
{
    static const struct option longopts[] = {
        { "queue", required_argument, NULL, 'q' },
        { "json", no_argument, NULL, CLI_OPT_JSON },
        { "watch", required_argument, NULL, CLI_OPT_WATCH },
        { "partitions", no_argument, NULL, CLI_OPT_PARTITIONS },
        { NULL, 0, NULL, 0 }
    };
    struct ops_args a = { 0 };
    int code;
    if (cli_parse_opts(cli, "q:", longopts, ops_opt, &a, false, &code) < 0)
        return code;
    if (a.queue && (code = cli_check_queue(cli, a.queue)) != CLI_EXIT_OK)
        return code;
    if (cli_nargs(cli) > 0)
        return cli_fail(cli, CLI_EXIT_USAGE, "unexpected argument '%s'", cli_arg(cli, 0));
    struct cli_session s;
    char **names = NULL;
    size_t n = 0;
    struct queue_figures *st = NULL;
    code = cli_open_connected(cli, &s);
    if (code == CLI_EXIT_OK && a.watch_ms) {
        code = stats_watch(cli, s.client, &a);
        cli_session_close(&s);
        return code;
    }
    if (code == CLI_EXIT_OK)
        code = stats_queues(cli, s.client, a.queue, &names, &n);
    if (code == CLI_EXIT_OK && a.partitions) {
        code = cli_partitions_stats(cli, s.client, names, n, a.json);
        dq_strv_free(names, n);
        cli_session_close(&s);
        return code;
    }
    if (code == CLI_EXIT_OK)
        code = stats_collect(cli, s.client, names, n, &st);
    if (code == CLI_EXIT_OK && a.json)
        stats_json(names, n, st);
    else if (code == CLI_EXIT_OK)
        stats_table(names, n, st);
    free(st);
    dq_strv_free(names, n);
    cli_session_close(&s);
    return code;
}

const struct cli_command cli_cmd_stats = { "stats", stats_help, stats_run };

/* ---- dlq ---------------------------------------------------------------- */

static void dlq_table(const dq_dead_page *p, int64_t offset)
{
    int wid = 2, wtype = 4;
    for (size_t i = 0; i < p->n; i++) {
        if ((int)strlen(p->entries[i].id) > wid)
            wid = (int)strlen(p->entries[i].id);
        if ((int)strlen(p->entries[i].type) > wtype)
            wtype = (int)strlen(p->entries[i].type);
    }
    printf("%-*s  %-24s  %-*s  %8s  %s\n", wid, "ID", "DIED AT", wtype, "TYPE",
           "ATTEMPTS", "LAST ERROR");
    for (size_t i = 0; i < p->n; i++) {
        const dq_dead_entry *e = &p->entries[i];
        char iso[40];
        timefmt_iso(iso, sizeof iso, e->died_ms);
        /* An unreadable record's type may be unknown (""): "?" keeps the
         * columns; its last error says why it is unreadable. */
        printf("%-*s  %-24s  %-*s  %8d  ", wid, e->id, iso, wtype,
               e->type[0] ? e->type : "?", e->attempts);
        cli_print_escaped(stdout, e->last_error, strlen(e->last_error));
        putchar('\n');
    }
    int64_t after = p->total - offset - (int64_t)p->n;
    if (after > 0)
        printf("(%lld more: --offset %lld)\n", (long long)after,
               (long long)(offset + (int64_t)p->n));
}

static void dlq_json(const dq_dead_page *p, int64_t offset)
{
    printf("{\"total\":%lld,\"offset\":%lld,\"jobs\":[", (long long)p->total,
           (long long)offset);
    for (size_t i = 0; i < p->n; i++) {
        const dq_dead_entry *e = &p->entries[i];
        fputs(i ? ",{\"id\":" : "{\"id\":", stdout);
        cli_json_str(stdout, e->id, strlen(e->id));
        printf(",\"died_ms\":%lld,\"type\":", (long long)e->died_ms);
        cli_json_str(stdout, e->type, strlen(e->type));
        printf(",\"attempts\":%d,\"last_error\":", e->attempts);
        cli_json_str(stdout, e->last_error, strlen(e->last_error));
        printf(",\"payload_size\":%zu,\"unreadable\":%s}", e->payload_len,
               dq_dead_page_unreadable(p, i) ? "true" : "false");
    }
    puts("]}");
}

static int dlq_list(const struct cli *cli, dq_client *c, const struct ops_args *a)
{
    dq_dead_page page;
    int limit = a->limit ? (int)a->limit : DLQ_DEFAULT_LIMIT;
    dq_status st = dq_dead_list(c, a->queue, a->offset, limit, &page);
    int code = st == DQ_OK ? CLI_EXIT_OK : cli_fail_dq(cli, c, st);
    if (code == CLI_EXIT_OK && a->json)
        dlq_json(&page, a->offset);
    else if (code == CLI_EXIT_OK)
        dlq_table(&page, a->offset);
    dq_dead_page_free(&page);
    return code;
}

static const char *jobs_word(int64_t n)
{
    return n == 1 ? "job" : "jobs";
}

/* requeue ID | requeue --all | purge [ID] */
static int dlq_change(const struct cli *cli, dq_client *c, const struct ops_args *a,
                      bool requeue, const char *id)
{
    const char *verb = requeue ? "requeued" : "purged";
    int64_t count = 0;
    dq_status st;
    if (id)
        st = requeue ? dq_requeue(c, a->queue, id) : dq_purge(c, a->queue, id);
    else
        st = requeue ? dq_requeue_all(c, a->queue, &count)
                     : dq_purge_all(c, a->queue, &count);
    if (st != DQ_OK)
        return cli_fail_dq(cli, c, st);
    if (id)
        printf("%s job %s\n", verb, id);
    else
        printf("%s %lld %s\n", verb, (long long)count, jobs_word(count));
    return CLI_EXIT_OK;
}

/* Which action, and are the operands and options right for it? */
static int dlq_check(const struct cli *cli, const struct ops_args *a,
                     const char **action, const char **id)
{
    int n = cli_nargs(cli);
    if (n == 0)
        return cli_fail(cli, CLI_EXIT_USAGE, "missing the action: list, requeue or purge");
    *action = cli_arg(cli, 0);
    *id = n > 1 ? cli_arg(cli, 1) : NULL;
    bool list = strcmp(*action, "list") == 0, requeue = strcmp(*action, "requeue") == 0;
    if (!list && !requeue && strcmp(*action, "purge") != 0)
        return cli_fail(cli, CLI_EXIT_USAGE, "unknown action '%s' (use list, requeue "
                        "or purge)", *action);
    if (n > (list ? 1 : 2))
        return cli_fail(cli, CLI_EXIT_USAGE, "unexpected argument '%s'",
                        cli_arg(cli, list ? 1 : 2));
    if (!list && (a->json || a->limit || a->offset))
        return cli_fail(cli, CLI_EXIT_USAGE, "--json, --limit and --offset go with list");
    if (a->all && !requeue)
        return cli_fail(cli, CLI_EXIT_USAGE, "--all goes with requeue");
    if (requeue && !*id == !a->all)
        return cli_fail(cli, CLI_EXIT_USAGE, "requeue needs a job ID or --all (not both)");
    if (*id && !**id)
        return cli_fail(cli, CLI_EXIT_USAGE, "the job ID is empty");
    return CLI_EXIT_OK;
}

static const char dlq_help[] =
    "Usage: delayq dlq -q QUEUE list [--limit N] [--offset N] [--json]\n"
    "       delayq dlq -q QUEUE requeue ID | requeue --all\n"
    "       delayq dlq -q QUEUE purge [ID]\n"
    "The dead-letter set: list dead jobs (oldest death first, 50 by\n"
    "default), requeue one or all (due now, attempts reset), purge one or\n"
    "all.  Exit 1 when ID is not dead.\n";

static int dlq_run(struct cli *cli)
{
    static const struct option longopts[] = {
        { "queue", required_argument, NULL, 'q' },
        { "json", no_argument, NULL, CLI_OPT_JSON },
        { "all", no_argument, NULL, CLI_OPT_ALL },
        { "limit", required_argument, NULL, CLI_OPT_LIMIT },
        { "offset", required_argument, NULL, CLI_OPT_OFFSET },
        { NULL, 0, NULL, 0 }
    };
    struct ops_args a = { 0 };
    const char *action = NULL, *id = NULL;
    int code;
    if (cli_parse_opts(cli, "q:", longopts, ops_opt, &a, false, &code) < 0)
        return code;
    if ((code = cli_check_queue(cli, a.queue)) != CLI_EXIT_OK
        || (code = dlq_check(cli, &a, &action, &id)) != CLI_EXIT_OK)
        return code;
    struct cli_session s;
    code = cli_open_connected(cli, &s);
    if (code == CLI_EXIT_OK && strcmp(action, "list") == 0)
        code = dlq_list(cli, s.client, &a);
    else if (code == CLI_EXIT_OK)
        code = dlq_change(cli, s.client, &a, strcmp(action, "requeue") == 0, id);
    cli_session_close(&s);
    return code;
}

const struct cli_command cli_cmd_dlq = { "dlq", dlq_help, dlq_run };
