/* delayq add: one job, with its options (delay or time, id, priority,
 * expiry, dedupe window, debounce) and its payload. */
#include "cli/cli_cmd_add.h"
#include "cli/cli_cmd_partitions.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_opts.h"
#include "cli/cli_util.h"
#include "lib/keys.h"
#include "util/timefmt.h"

struct add_args {
    const char *queue;
    const char *type;
    const char *id;
    const char *delay;
    const char *at;
    bool replace;
    int max_attempts;
    int priority;           /* as dq_enqueue_req.priority */
    const char *expire_at;
    const char *ttl;
    int on_expire;          /* as dq_enqueue_req.on_expire */
    bool on_expire_given;
    const char *unique_for;
    bool unique_ok;
    const char *debounce;
    const char *max_wait;
};

static const struct option add_longopts[] = {
    { "queue", required_argument, NULL, 'q' },
    { "type", required_argument, NULL, 't' },
    { "delay", required_argument, NULL, 'd' },
    { "at", required_argument, NULL, CLI_OPT_AT },
    { "id", required_argument, NULL, CLI_OPT_ID },
    { "replace", no_argument, NULL, CLI_OPT_REPLACE },
    { "max-attempts", required_argument, NULL, CLI_OPT_MAX_ATTEMPTS },
    { "priority", required_argument, NULL, CLI_OPT_PRIORITY },
    { "expire-at", required_argument, NULL, CLI_OPT_EXPIRE_AT },
    { "ttl", required_argument, NULL, CLI_OPT_TTL },
    { "on-expire", required_argument, NULL, CLI_OPT_ON_EXPIRE },
    { "unique-for", required_argument, NULL, CLI_OPT_UNIQUE_FOR },
    { "unique-ok", no_argument, NULL, CLI_OPT_UNIQUE_OK },
    { "debounce", required_argument, NULL, CLI_OPT_DEBOUNCE },
    { "max-wait", required_argument, NULL, CLI_OPT_MAX_WAIT },
    { NULL, 0, NULL, 0 }
};

int cli_opt_max_attempts(const struct cli *cli, const char *arg, int *out)
{
    long long n;
    if (cli_parse_int(arg, 1, INT_MAX, &n) < 0) {
        cli_fail(cli, CLI_EXIT_USAGE, "bad --max-attempts '%s': expected a whole "
                 "number of 1 or more", arg);
        return -1;
    }
    *out = (int)n;
    return 0;
}

static int add_opt(struct cli *cli, int opt, const char *arg, void *ctx)
{
    struct add_args *a = ctx;
    switch (opt) {
    case 'q': a->queue = arg; return 0;
    case 't': a->type = arg; return 0;
    case 'd': a->delay = arg; return 0;
    case CLI_OPT_AT: a->at = arg; return 0;
    case CLI_OPT_ID: a->id = arg; return 0;
    case CLI_OPT_REPLACE: a->replace = true; return 0;
    case CLI_OPT_MAX_ATTEMPTS:
        return cli_opt_max_attempts(cli, arg, &a->max_attempts);
    case CLI_OPT_PRIORITY: {
        int level = dq_priority_parse(arg);
        if (level < 0) {
            cli_fail(cli, CLI_EXIT_USAGE, "bad --priority '%s': expected high, normal, "
                     "low or a level 0..9 (0 the most urgent)", arg);
            return -1;
        }
        a->priority = DQ_PRIORITY(level);
        return 0;
    }
    case CLI_OPT_EXPIRE_AT: a->expire_at = arg; return 0;
    case CLI_OPT_TTL: a->ttl = arg; return 0;
    case CLI_OPT_ON_EXPIRE:
        if (strcmp(arg, "dead") != 0 && strcmp(arg, "drop") != 0) {
            cli_fail(cli, CLI_EXIT_USAGE, "bad --on-expire '%s': expected dead or drop", arg);
            return -1;
        }
        a->on_expire = strcmp(arg, "drop") == 0 ? DQ_EXPIRE_DROP : DQ_EXPIRE_DEAD;
        a->on_expire_given = true;
        return 0;
    case CLI_OPT_UNIQUE_FOR: a->unique_for = arg; return 0;
    case CLI_OPT_UNIQUE_OK: a->unique_ok = true; return 0;
    case CLI_OPT_DEBOUNCE: a->debounce = arg; return 0;
    case CLI_OPT_MAX_WAIT: a->max_wait = arg; return 0;
    default:
        return -1;
    }
}

/* `arg` of option --NAME as a duration of 1 ms or more, into *ms. */
static int positive_duration(const struct cli *cli, const char *name, const char *arg,
                             int64_t *ms)
{
    const char *why;
    if (timefmt_parse_duration(arg, ms, &why) < 0)
        return cli_fail(cli, CLI_EXIT_USAGE, "bad --%s '%s': %s", name, arg, why);
    if (*ms < 1)
        return cli_fail(cli, CLI_EXIT_USAGE, "bad --%s '%s': expected a duration of 1 ms "
                        "or more", name, arg);
    return CLI_EXIT_OK;
}

/* --expire-at TIME or --ttl DURATION (after the due time), --on-expire:
 * into the request.  The script checks the expiry against the due time on
 * the server's clock; an --at time is checked here too. */
static int add_expiry(const struct cli *cli, const struct add_args *a, dq_enqueue_req *req)
{
    const char *why;
    if (a->expire_at && a->ttl)
        return cli_fail(cli, CLI_EXIT_USAGE, "give --expire-at TIME or --ttl DURATION, "
                        "not both");
    if (a->on_expire_given && !a->expire_at && !a->ttl)
        return cli_fail(cli, CLI_EXIT_USAGE, "--on-expire needs --expire-at or --ttl");
    if (a->expire_at && timefmt_parse_time(a->expire_at, &req->expire_at, &why) < 0)
        return cli_fail(cli, CLI_EXIT_USAGE, "bad --expire-at '%s': %s", a->expire_at, why);
    if (a->ttl && positive_duration(cli, "ttl", a->ttl, &req->ttl_ms) != CLI_EXIT_OK)
        return CLI_EXIT_USAGE;
    if (a->expire_at && req->expire_at <= cli_now_ms())
        return cli_fail(cli, CLI_EXIT_USAGE, "bad --expire-at '%s': in the past", a->expire_at);
    if (a->expire_at && !a->at && req->expire_at <= cli_now_ms() + req->delay_ms)
        return cli_fail(cli, CLI_EXIT_USAGE, "bad --expire-at '%s': not after the due "
                        "time (now + -d)", a->expire_at);
    if (a->expire_at && req->at_ms > 0 && req->expire_at <= req->at_ms)
        return cli_fail(cli, CLI_EXIT_USAGE, "bad --expire-at '%s': not after the due "
                        "time (--at)", a->expire_at);
    req->on_expire = a->on_expire;
    return CLI_EXIT_OK;
}

/* --debounce DURATION [--max-wait DURATION] (with --id, alone): into the
 * request. */
static int add_debounce(const struct cli *cli, const struct add_args *a, dq_enqueue_req *req)
{
    if (a->max_wait && !a->debounce)
        return cli_fail(cli, CLI_EXIT_USAGE, "--max-wait needs --debounce");
    if (!a->debounce)
        return CLI_EXIT_OK;
    if (!a->id)
        return cli_fail(cli, CLI_EXIT_USAGE, "--debounce needs --id (the adds it merges "
                        "share the id)");
    if (a->delay || a->at || a->replace || a->expire_at || a->ttl || a->unique_for)
        return cli_fail(cli, CLI_EXIT_USAGE, "--debounce goes without -d, --at, --replace, "
                        "--expire-at, --ttl and --unique-for");
    if (positive_duration(cli, "debounce", a->debounce, &req->debounce_ms) != CLI_EXIT_OK
        || (a->max_wait
            && positive_duration(cli, "max-wait", a->max_wait, &req->max_wait_ms)
               != CLI_EXIT_OK))
        return CLI_EXIT_USAGE;
    return CLI_EXIT_OK;
}

/* --unique-for DURATION (with --id), --unique-ok: into the request. */
static int add_window(const struct cli *cli, const struct add_args *a, dq_enqueue_req *req)
{
    if (a->unique_ok && !a->unique_for)
        return cli_fail(cli, CLI_EXIT_USAGE, "--unique-ok needs --unique-for");
    if (!a->unique_for)
        return CLI_EXIT_OK;
    if (!a->id)
        return cli_fail(cli, CLI_EXIT_USAGE, "--unique-for needs --id (a window keeps "
                        "an id taken)");
    if (positive_duration(cli, "unique-for", a->unique_for, &req->unique_for_ms)
        != CLI_EXIT_OK)
        return CLI_EXIT_USAGE;
    req->unique_ok = a->unique_ok;
    return CLI_EXIT_OK;
}

/* Check the names and turn -d / --at into the request's times. */
static int add_request(const struct cli *cli, const struct add_args *a,
                       dq_enqueue_req *req)
{
    const char *why;
    int code = cli_check_queue(cli, a->queue);
    if (code != CLI_EXIT_OK)
        return code;
    if (!a->type)
        return cli_fail(cli, CLI_EXIT_USAGE, "missing -t TYPE");
    if ((why = keys_check_type(a->type)))
        return cli_fail(cli, CLI_EXIT_USAGE, "bad type '%s': %s", a->type, why);
    if (a->id && (why = keys_check_id(a->id)))
        return cli_fail(cli, CLI_EXIT_USAGE, "bad id '%s': %s", a->id, why);
    if (a->delay && a->at)
        return cli_fail(cli, CLI_EXIT_USAGE, "give -d DELAY or --at TIME, not both");
    if (a->delay && timefmt_parse_duration(a->delay, &req->delay_ms, &why) < 0)
        return cli_fail(cli, CLI_EXIT_USAGE, "bad delay '%s': %s", a->delay, why);
    if (a->at && timefmt_parse_time(a->at, &req->at_ms, &why) < 0)
        return cli_fail(cli, CLI_EXIT_USAGE, "bad time '%s': %s", a->at, why);
    if (a->at && req->at_ms > cli_now_ms() + DQ_MAX_AHEAD_MS)
        return cli_fail(cli, CLI_EXIT_USAGE, "bad time '%s': more than 100 years "
                        "from now", a->at);
    if ((code = add_expiry(cli, a, req)) != CLI_EXIT_OK
        || (code = add_window(cli, a, req)) != CLI_EXIT_OK
        || (code = add_debounce(cli, a, req)) != CLI_EXIT_OK)
        return code;
    if (cli_nargs(cli) > 1)
        return cli_fail(cli, CLI_EXIT_USAGE, "more than one payload given (quote it, "
                        "or use - to read it from standard input)");
    req->queue = a->queue;
    req->type = a->type;
    req->id = a->id;
    req->replace = a->replace;
    req->max_attempts = a->max_attempts;
    req->priority = a->priority;
    return CLI_EXIT_OK;
}

/*
 * Read all of standard input (binary-safe).  At most `limit` bytes are kept
 * in *buf (malloc'd, owned by the caller); *total counts all of them, so
 * that a payload over the limit can be reported with its size.
 */
static int read_stdin(const struct cli *cli, size_t limit, char **buf, size_t *total)
{
    size_t cap = 0, kept = 0;
    char chunk[65536];
    *buf = NULL;
    *total = 0;
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0) {
        *total += n;
        size_t take = kept + n <= limit ? n : limit - kept;
        if (kept + take > cap) {
            size_t want = cap ? cap * 2 : sizeof chunk;
            cap = want < kept + take ? kept + take : (want > limit ? limit : want);
            char *p = realloc(*buf, cap);
            if (!p)
                return cli_fail(cli, CLI_EXIT_SOFTWARE, "out of memory reading the payload");
            *buf = p;
        }
        memcpy(*buf + kept, chunk, take);
        kept += take;
    }
    if (ferror(stdin))
        return cli_fail(cli, CLI_EXIT_IOERR, "cannot read standard input: %s",
                        strerror(errno));
    return CLI_EXIT_OK;
}

int cli_read_payload(const struct cli *cli, int at, size_t limit, const void **payload,
                     size_t *len, char **owned)
{
    size_t total = 0;
    *owned = NULL;
    *payload = NULL;
    if (cli_nargs(cli) > at && strcmp(cli_arg(cli, at), "-") == 0) {
        int code = read_stdin(cli, limit, owned, &total);
        if (code != CLI_EXIT_OK)
            return code;
        *payload = *owned;
    } else if (cli_nargs(cli) > at) {
        *payload = cli_arg(cli, at);
        total = strlen(cli_arg(cli, at));
    }
    if (total > limit)
        return cli_fail(cli, CLI_EXIT_USAGE, "payload is %zu bytes, over the limit of %zu",
                        total, limit);
    *len = total;
    return CLI_EXIT_OK;
}

static const char add_help[] =
    "Usage: delayq add -q QUEUE -t TYPE [-d DELAY | --at TIME] [--id ID]\n"
    "                  [--replace] [--max-attempts N] [--priority P]\n"
    "                  [--expire-at TIME | --ttl DURATION] [--on-expire dead|drop]\n"
    "                  [--unique-for DURATION [--unique-ok]]\n"
    "                  [--debounce DURATION [--max-wait DURATION]]\n"
    "                  [PAYLOAD | -]\n"
    "Schedule a job and print its id.\n"
    "  -q, --queue QUEUE     the queue\n"
    "  -t, --type TYPE       the job type (selects the handler)\n"
    "  -d, --delay DELAY     run after DELAY, on the Redis server's clock\n"
    "                        (default 0: due now)\n"
    "      --at TIME         run at TIME (Unix seconds or ISO-8601)\n"
    "      --id ID           your own id (not all digits); taken ids are\n"
    "                        refused (exit 1) unless --replace\n"
    "      --replace         reschedule the job with this id\n"
    "      --max-attempts N  attempts before the job is dead (default: the\n"
    "                        consumer's setting)\n"
    "      --priority P      high, normal (default), low, or 0..9 (0 the most\n"
    "                        urgent): orders the jobs that are due\n"
    "      --expire-at TIME  not run unless started by TIME (after the due time)\n"
    "      --ttl DURATION    not run unless started DURATION after the due time\n"
    "      --on-expire dead|drop  an expired job goes to dead with the error\n"
    "                        \"expired\" (default), or is deleted\n"
    "      --unique-for DURATION  with --id: for DURATION after the job is done\n"
    "                        (acked, cancelled, dropped; dead: from its death,\n"
    "                        once purged) an add of the id is refused (exit 1)\n"
    "      --unique-ok       within the window, print the id and exit 0\n"
    "      --debounce DURATION  with --id: while the job waits, this add takes\n"
    "                        its place, due DURATION from now; while it runs,\n"
    "                        the add runs after it; none: a new job\n"
    "      --max-wait DURATION  never due later than DURATION after the first add\n"
    "  PAYLOAD               the payload; '-' reads it from standard input;\n"
    "                        none: empty\n";

/* "job X in queue Q: done 12s ago; unique for 1m (until TIME)", or for
 * a run cancelled while it ran "... cancelled while running 2s ago; id
 * kept until TIME": exit 1. */
static int window_refusal(const struct cli *cli, const dq_enqueue_req *req,
                          const dq_enqueued *out)
{
    char ago[40], window[40], until[40];
    cli_relative(ago, sizeof ago, out->finished_ms, cli_now_ms());
    timefmt_duration(window, sizeof window, out->unique_until_ms - out->finished_ms);
    timefmt_iso(until, sizeof until, out->unique_until_ms);
    if (out->cancelled)
        return cli_fail(cli, CLI_EXIT_NOT_DONE, "job %s in queue %s: cancelled while "
                        "running %s; id kept until %s, when that run's lease ends",
                        req->id, req->queue, ago, until);
    return cli_fail(cli, CLI_EXIT_NOT_DONE, "job %s in queue %s: done %s; unique for %s "
                    "(until %s)", req->id, req->queue, ago, window, until);
}

static int add_run(struct cli *cli)
{
    struct add_args a = { 0 };
    dq_enqueue_req req = { 0 };
    int code;
    if (cli_parse_opts(cli, "q:t:d:", add_longopts, add_opt, &a, false, &code) < 0)
        return code;
    if ((code = add_request(cli, &a, &req)) != CLI_EXIT_OK)
        return code;
    struct cli_session s;
    char *payload = NULL;
    code = cli_open(cli, &s);
    if (code == CLI_EXIT_OK)
        code = cli_read_payload(cli, 0, s.opt.max_payload, &req.payload,
                                &req.payload_len, &payload);
    if (code == CLI_EXIT_OK)
        code = cli_connect(cli, &s);
    if (code == CLI_EXIT_OK)
        code = cli_partitions_from_file(cli, s.client, req.queue);
    if (code == CLI_EXIT_OK) {
        dq_enqueued out;
        dq_status st = dq_enqueue(s.client, &req, &out);
        if (st == DQ_OK)
            printf("%s\n", out.id);
        else if (st == DQ_ERR_UNIQUE)
            code = window_refusal(cli, &req, &out);
        else
            code = cli_fail_dq(cli, s.client, st);
    }
    free(payload);
    cli_session_close(&s);
    return code;
}

const struct cli_command cli_cmd_add = { "add", add_help, add_run };
