/* delayq partitions, and stats --partitions: a queue's partitions. */
#include "cli/cli_cmd_partitions.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_opts.h"
#include "config/queue_parts_conf.h"
#include "cli/cli_util.h"
#include "util/timefmt.h"

/* ---- add -c FILE: the file's count ------------------------------------------ */

int cli_partitions_from_file(const struct cli *cli, dq_client *c, const char *queue)
{
    const char *path = cli->conn.config_path;
    unsigned want, stored;
    int line;
    char err[600];
    int named = path ? queue_parts_conf_read(path, queue, &want, &line, err, sizeof err) : 0;
    if (named < 0)
        return cli_fail(NULL, CLI_EXIT_CONFIG, "%s", err);
    if (named == 0)
        return CLI_EXIT_OK;
    dq_status st = dq_queue_partitions(c, queue, &stored);
    if (st != DQ_OK)
        return cli_fail_dq(cli, c, st);
    if (stored == want)
        return CLI_EXIT_OK;
    if (stored > 1) {
        fprintf(stderr, "delayq: %s:%d: queue %s: partitions = %u, but Redis holds it with "
                "%u: the job goes to those\n", path, line, queue, want, stored);
        return CLI_EXIT_OK;
    }
    st = dq_queue_set_partitions(c, queue, want);
    if (st == DQ_OK || st == DQ_ERR_STALE)     /* stale: another stored it first */
        return CLI_EXIT_OK;
    return cli_fail(cli, cli_exit_code(st), "%s:%d: queue %s: partitions = %u could not be "
                    "stored, so the job was not added: %s", path, line, queue, want,
                    dq_errmsg(c));
}

/* ---- stats --partitions --------------------------------------------------- */

/* One row: PART is a partition number or "total". */
static void part_row(int w, const char *queue, const char *part, const dq_stats *st)
{
    char next[32] = "-";
    if (st->next_due_in_ms == 0)
        snprintf(next, sizeof next, "now");
    else if (st->next_due_in_ms > 0)
        timefmt_duration(next, sizeof next, st->next_due_in_ms);
    printf("%-*s %5s %10lld %10lld %10lld %10lld  %s\n", w, queue, part,
           (long long)st->delayed, (long long)st->due, (long long)st->processing,
           (long long)st->dead, next);
}

static void part_json(const dq_stats *st)
{
    printf("{\"delayed\":%lld,\"due\":%lld,\"processing\":%lld,\"expired\":%lld,"
           "\"dead\":%lld,\"next_due_in_ms\":", (long long)st->delayed,
           (long long)st->due, (long long)st->processing, (long long)st->expired,
           (long long)st->dead);
    if (st->next_due_in_ms >= 0)
        printf("%lld}", (long long)st->next_due_in_ms);
    else
        fputs("null}", stdout);
}

/* The figures of one queue: its count, each partition's and the total
 * (dq_stats_get), into `parts` (room for DQ_PARTITIONS_MAX). */
static dq_status queue_parts(dq_client *c, const char *queue, unsigned *n,
                             dq_stats *parts, dq_stats *total)
{
    dq_status st = dq_queue_partitions(c, queue, n);
    for (unsigned p = 0; st == DQ_OK && p < *n; p++)
        st = dq_stats_partition(c, queue, p, &parts[p]);
    return st == DQ_OK ? dq_stats_get(c, queue, total) : st;
}

int cli_partitions_stats(const struct cli *cli, dq_client *c, char **names, size_t n,
                         bool json)
{
    dq_stats *parts = calloc(DQ_PARTITIONS_MAX, sizeof *parts);
    if (!parts)
        return cli_fail(cli, CLI_EXIT_SOFTWARE, "out of memory");
    int w = 5;
    for (size_t i = 0; i < n; i++)
        if ((int)strlen(names[i]) > w)
            w = (int)strlen(names[i]);
    if (json)
        putchar('[');
    else
        printf("%-*s %5s %10s %10s %10s %10s  %s\n", w, "QUEUE", "PART", "DELAYED",
               "DUE", "PROCESSING", "DEAD", "NEXT DUE");
    int code = CLI_EXIT_OK;
    for (size_t i = 0; i < n && code == CLI_EXIT_OK; i++) {
        unsigned np;
        dq_stats total;
        dq_status st = queue_parts(c, names[i], &np, parts, &total);
        if (st != DQ_OK) {
            code = cli_fail_dq(cli, c, st);
            break;
        }
        if (json) {
            fputs(i ? ",{\"queue\":" : "{\"queue\":", stdout);
            cli_json_str(stdout, names[i], strlen(names[i]));
            printf(",\"partitions\":%u,\"total\":", np);
            part_json(&total);
            fputs(",\"by_partition\":[", stdout);
            for (unsigned p = 0; p < np; p++) {
                if (p)
                    putchar(',');
                part_json(&parts[p]);
            }
            fputs("]}", stdout);
            continue;
        }
        for (unsigned p = 0; p < np; p++) {
            char num[16];
            snprintf(num, sizeof num, "%u", p);
            part_row(w, names[i], num, &parts[p]);
        }
        part_row(w, names[i], "total", &total);
    }
    if (json && code == CLI_EXIT_OK)
        puts("]");
    free(parts);
    return code;
}

/* ---- partitions ----------------------------------------------------------- */

static int partitions_opt(struct cli *cli, int opt, const char *arg, void *ctx)
{
    (void)cli;
    if (opt != 'q')
        return -1;
    *(const char **)ctx = arg;
    return 0;
}

static const char partitions_help[] =
    "Usage: delayq partitions QUEUE [N]\n"
    "       delayq partitions -q QUEUE [N]\n"
    "Print the number of partitions QUEUE is split into (1: not split), or\n"
    "set it to N (1..256).  A queue of N partitions keeps N sets of keys, so\n"
    "that a Redis Cluster spreads it over its masters; delayqd sets the\n"
    "count from its configuration (partitions = N).  The count can change\n"
    "only while the queue holds no job, delayed, due, processing or dead\n"
    "(exit 1 otherwise: drain it first), and only while no producer or\n"
    "daemon uses the queue (they read the count when they connect).  The\n"
    "recurring schedules of the queue are not moved: a change between 1 and\n"
    "more partitions is refused (exit 1) while it has any; remove them\n"
    "first and add them again after.\n";

/* The queue and the count asked for: from -q and the operands. */
static int partitions_args(struct cli *cli, const char *opt_queue, const char **queue,
                           long long *n)
{
    int nargs = cli_nargs(cli), at = 0;
    *queue = opt_queue;
    if (!*queue) {
        if (nargs < 1)
            return cli_fail(cli, CLI_EXIT_USAGE, "missing QUEUE");
        *queue = cli_arg(cli, at++);
    }
    int code = cli_check_queue(cli, *queue);
    if (code != CLI_EXIT_OK)
        return code;
    *n = 0;
    if (at < nargs && cli_parse_int(cli_arg(cli, at++), 1, DQ_PARTITIONS_MAX, n) < 0)
        return cli_fail(cli, CLI_EXIT_USAGE, "bad partition count '%s': expected a "
                        "whole number from 1 to %d", cli_arg(cli, at - 1), DQ_PARTITIONS_MAX);
    if (at < nargs)
        return cli_fail(cli, CLI_EXIT_USAGE, "unexpected argument '%s'", cli_arg(cli, at));
    return CLI_EXIT_OK;
}

static int partitions_run(struct cli *cli)
{
    static const struct option longopts[] = {
        { "queue", required_argument, NULL, 'q' },
        { NULL, 0, NULL, 0 }
    };
    const char *opt_queue = NULL, *queue;
    long long want;
    int code;
    if (cli_parse_opts(cli, "q:", longopts, partitions_opt, &opt_queue, false, &code) < 0)
        return code;
    if ((code = partitions_args(cli, opt_queue, &queue, &want)) != CLI_EXIT_OK)
        return code;
    struct cli_session s;
    code = cli_open_connected(cli, &s);
    if (code == CLI_EXIT_OK) {
        unsigned had = 0;
        dq_status st = dq_queue_partitions(s.client, queue, &had);
        if (st == DQ_OK && want > 0)
            st = dq_queue_set_partitions(s.client, queue, (unsigned)want);
        if (st != DQ_OK)
            code = cli_fail_dq(cli, s.client, st);
        else if (want == 0)
            printf("%u\n", had);
        else if ((unsigned)want == had)
            printf("queue %s has %u partition%s already\n", queue, had, had == 1 ? "" : "s");
        else
            printf("queue %s: %lld partition%s (was %u)\n", queue, want,
                   want == 1 ? "" : "s", had);
    }
    cli_session_close(&s);
    return code;
}

const struct cli_command cli_cmd_partitions = { "partitions", partitions_help,
                                                partitions_run };
