/*
 * The command line's connection: options, the -c file, the password from
 * the flags, the environment or a file, and dq_connect with a one-line
 * message when it fails.
 */
#include "cli/cli_conn.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_util.h"
#include "lib/keys.h"
#include "util/timefmt.h"

const struct option cli_conn_longopts[] = {
    { "config", required_argument, NULL, 'c' },
    { "host", required_argument, NULL, 'H' },
    { "port", required_argument, NULL, 'p' },
    { "socket", required_argument, NULL, 's' },
    { "password", required_argument, NULL, 'a' },
    { "password-file", required_argument, NULL, CLI_CONN_OPT_PASSWORD_FILE },
    { "user", required_argument, NULL, CLI_CONN_OPT_USER },
    { "db", required_argument, NULL, 'n' },
    { "prefix", required_argument, NULL, CLI_CONN_OPT_PREFIX },
    { "timeout", required_argument, NULL, CLI_CONN_OPT_TIMEOUT },
    { "durability", required_argument, NULL, CLI_CONN_OPT_DURABILITY },
    { "replication-timeout", required_argument, NULL, CLI_CONN_OPT_REPLICATION_TIMEOUT },
    { "sentinel", required_argument, NULL, CLI_CONN_OPT_SENTINEL },
    { "master", required_argument, NULL, CLI_CONN_OPT_MASTER },
    { "tls", no_argument, NULL, CLI_CONN_OPT_TLS },
    { "cacert", required_argument, NULL, CLI_CONN_OPT_CACERT },
    { "cacertdir", required_argument, NULL, CLI_CONN_OPT_CACERTDIR },
    { "cert", required_argument, NULL, CLI_CONN_OPT_CERT },
    { "key", required_argument, NULL, CLI_CONN_OPT_KEY },
    { "sni", required_argument, NULL, CLI_CONN_OPT_SNI },
    { "insecure", no_argument, NULL, CLI_CONN_OPT_INSECURE },
    { "cluster", no_argument, NULL, CLI_CONN_OPT_CLUSTER },
    { NULL, 0, NULL, 0 }
};

void cli_conn_init(struct cli_conn *cc)
{
    memset(cc, 0, sizeof *cc);
    cc->db = -1;
    cc->timeout_ms = -1;
    cc->durability = -1;
    cc->replication_timeout_ms = -1;
}

static int take_number(const char *what, const char *arg, long long min,
                       long long max, long long *v, char *err, size_t errlen)
{
    if (cli_parse_int(arg, min, max, v) == 0)
        return 1;
    snprintf(err, errlen, "bad %s '%s': expected a whole number from %lld to %lld",
             what, arg, min, max);
    return -1;
}

/* A duration ("500ms", "2s"; a bare number is seconds) of 1 ms to 24 days for
 * the option `what` into *out. */
static int take_duration(const char *what, const char *arg, int64_t *out, char *err,
                         size_t errlen)
{
    const char *why;
    int64_t ms;
    if (timefmt_parse_duration(arg, &ms, &why) < 0) {
        snprintf(err, errlen, "bad %s '%s': %s", what, arg, why);
        return -1;
    }
    if (ms < 1 || ms > INT_MAX) {
        snprintf(err, errlen, "bad %s '%s': must be from 1ms to 24 days", what, arg);
        return -1;
    }
    *out = ms;
    return 1;
}

static int take_durability(struct cli_conn *cc, const char *arg, char *err, size_t errlen)
{
    if (strcmp(arg, "local") == 0)
        cc->durability = DQ_DURABILITY_LOCAL;
    else if (strcmp(arg, "replicated") == 0)
        cc->durability = DQ_DURABILITY_REPLICATED;
    else {
        snprintf(err, errlen, "bad durability '%s': expected local or replicated", arg);
        return -1;
    }
    return 1;
}

static int take_prefix(struct cli_conn *cc, const char *arg, char *err, size_t errlen)
{
    const char *why = keys_check_prefix(arg);
    if (why) {
        snprintf(err, errlen, "bad prefix '%s': %s", arg, why);
        return -1;
    }
    cc->prefix = arg;
    return 1;
}

int cli_conn_option(struct cli_conn *cc, int opt, const char *arg, char *err,
                    size_t errlen)
{
    long long v;
    int r;
    switch (opt) {
    case 'c': cc->config_path = arg; return 1;
    case 'H': cc->host = arg; return 1;
    case 's': cc->unix_path = arg; return 1;
    case 'a': cc->password = arg; return 1;
    case CLI_CONN_OPT_PASSWORD_FILE: cc->password_file = arg; return 1;
    case CLI_CONN_OPT_USER: cc->user = arg; return 1;
    case CLI_CONN_OPT_SENTINEL: cc->sentinel = arg; return 1;
    case CLI_CONN_OPT_MASTER: cc->master = arg; return 1;
    case CLI_CONN_OPT_PREFIX: return take_prefix(cc, arg, err, errlen);
    case CLI_CONN_OPT_TIMEOUT: return take_duration("timeout", arg, &cc->timeout_ms, err, errlen);
    case CLI_CONN_OPT_DURABILITY: return take_durability(cc, arg, err, errlen);
    case CLI_CONN_OPT_REPLICATION_TIMEOUT:
        return take_duration("replication timeout", arg, &cc->replication_timeout_ms, err,
                             errlen);
    case CLI_CONN_OPT_TLS: cc->tls.on = 1; return 1;
    case CLI_CONN_OPT_CACERT: cc->tls.cacert = arg; return 1;
    case CLI_CONN_OPT_CACERTDIR: cc->tls.cacertdir = arg; return 1;
    case CLI_CONN_OPT_CERT: cc->tls.cert = arg; return 1;
    case CLI_CONN_OPT_KEY: cc->tls.key = arg; return 1;
    case CLI_CONN_OPT_SNI: cc->tls.sni = arg; return 1;
    case CLI_CONN_OPT_INSECURE: cc->tls.insecure = 1; return 1;
    case CLI_CONN_OPT_CLUSTER: cc->cluster = 1; return 1;
    case 'p':
        if ((r = take_number("port", arg, 1, 65535, &v, err, errlen)) > 0)
            cc->port = (int)v;
        return r;
    case 'n':
        if ((r = take_number("database number", arg, 0, INT_MAX, &v, err, errlen)) > 0)
            cc->db = (int)v;
        return r;
    default:
        return 0;
    }
}

/* Lay the flags over the file's settings in s->opt (all but the
 * password: choose_password). */
static void apply_flags(struct cli_session *s, const struct cli_conn *cc)
{
    dq_options *o = &s->opt;
    if (cc->host || cc->port) {
        o->unix_path = NULL;  /* -H/-p name a TCP server: the file's socket goes */
        if (cc->host)
            o->host = cc->host;
        if (cc->port)
            o->port = cc->port;
    }
    if (cc->unix_path)
        o->unix_path = cc->unix_path;
    if (cc->cluster)
        o->cluster = 1;
    if (o->cluster && (cc->host || cc->port)) {
        o->nodes = NULL;    /* -H/-p name the seed: the file's seeds go */
        o->nnodes = 0;
    }
    if (cc->user)
        o->user = cc->user;
    if (cc->db >= 0)
        o->db = cc->db;
    if (cc->prefix)
        o->prefix = cc->prefix;
    if (cc->timeout_ms > 0)
        o->connect_timeout_ms = o->command_timeout_ms = (int)cc->timeout_ms;
    if (cc->durability >= 0)
        o->durability = (dq_durability)cc->durability;
    if (cc->replication_timeout_ms > 0)
        o->replication_timeout_ms = (int)cc->replication_timeout_ms;
}

/*
 * Lay the TLS flags over the -c file's TLS settings: --tls turns TLS on,
 * the others replace the file's values.  They mean nothing without TLS,
 * so one given while TLS is off is a usage error rather than ignored.
 * Returns 0, or an exit code with the message in `err`.
 */
static int apply_tls_flags(struct cli_session *s, const struct cli_conn *cc, char *err,
                           size_t errlen)
{
    dq_tls_options *t = &s->opt.tls;
    const char *given = cc->tls.cacert ? "--cacert" : cc->tls.cacertdir ? "--cacertdir"
                        : cc->tls.cert ? "--cert" : cc->tls.key ? "--key"
                        : cc->tls.sni ? "--sni" : cc->tls.insecure ? "--insecure" : NULL;
    if (cc->tls.on)
        t->enable = 1;
    if (given && !t->enable) {
        snprintf(err, errlen, "%s needs --tls (or tls in the -c file's redis group)", given);
        return CLI_EXIT_USAGE;
    }
    if (cc->tls.key && !cc->tls.cert && !t->cert_file) {
        snprintf(err, errlen, "--key needs --cert");
        return CLI_EXIT_USAGE;
    }
    if (cc->tls.cacert || cc->tls.cacertdir) {
        t->ca_file = cc->tls.cacert;
        t->ca_dir = cc->tls.cacertdir;
    }
    if (cc->tls.cert) {
        t->cert_file = cc->tls.cert;
        t->key_file = cc->tls.key;
    }
    if (cc->tls.sni)
        t->server_name = cc->tls.sni;
    if (cc->tls.insecure)
        t->verify = 0;
    return CLI_EXIT_OK;
}

/* An environment variable's value; NULL when unset or empty. */
static const char *env_value(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/*
 * Lay the password over the -c file's in s->opt, by the precedence in
 * cli_conn.h.  A password read from a file replaces the -c file's in
 * s->conf, which wipes it on close.
 * Returns 0, or an exit code with the message in `err`.
 */
static int choose_password(struct cli_session *s, const struct cli_conn *cc,
                           char *err, size_t errlen)
{
    const char *pw = cc->password, *file = cc->password_file;
    const char *from = "--password-file";
    if (pw && file) {
        snprintf(err, errlen, "give -a or --password-file, not both");
        return CLI_EXIT_USAGE;
    }
    if (!pw && !file) {
        pw = env_value("DELAYQ_PASSWORD");
        file = env_value("DELAYQ_PASSWORD_FILE");
        from = "DELAYQ_PASSWORD_FILE";
        if (pw && file) {
            snprintf(err, errlen, "DELAYQ_PASSWORD and DELAYQ_PASSWORD_FILE are both "
                     "set: unset one");
            return CLI_EXIT_USAGE;
        }
    }
    if (file) {
        const char *why;
        if (redis_conf_password_from_file(&s->conf, file, &why) < 0) {
            snprintf(err, errlen, "password file %s (%s): %s", file, from, why);
            return CLI_EXIT_CONFIG;
        }
        pw = s->conf.password;
    }
    if (pw)
        s->opt.password = pw;
    return CLI_EXIT_OK;
}

/*
 * --sentinel and --master over the -c file's redis.sentinel.  -H, -p or -s
 * name one server: the file's sentinels are then not used.  Returns 0, or
 * an exit code with the message in `err`.
 */
static int choose_sentinel(struct cli_session *s, const struct cli_conn *cc, char *err,
                           size_t errlen)
{
    struct sentinel_conf *sc = &s->conf.sentinel;
    int server = cc->host || cc->port || cc->unix_path;
    if (server && (cc->sentinel || cc->master)) {
        snprintf(err, errlen, "--sentinel and --master find the server: they cannot be used "
                 "with -H, -p or -s");
        return CLI_EXIT_USAGE;
    }
    if (server)
        sentinel_conf_free(sc);
    if (cc->sentinel && sentinel_conf_set_nodes(sc, cc->sentinel, err, errlen) < 0)
        return CLI_EXIT_USAGE;
    if (cc->master && sentinel_conf_set_master(sc, cc->master) < 0) {
        snprintf(err, errlen, "out of memory");
        return CLI_EXIT_SOFTWARE;
    }
    if (sc->nnodes && !sc->master) {
        snprintf(err, errlen, "--sentinel needs --master NAME (the name the sentinels monitor)");
        return CLI_EXIT_USAGE;
    }
    if (sc->master && !sc->nnodes) {
        snprintf(err, errlen, "--master needs --sentinel HOST:PORT[,HOST:PORT...]");
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

int cli_session_options(struct cli_session *s, const struct cli_conn *cc,
                        char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    redis_conf_init(&s->conf);
    if (cc->unix_path && (cc->host || cc->port)) {
        snprintf(err, errlen, "-s names a unix socket; it cannot be used with -H or -p");
        return CLI_EXIT_USAGE;
    }
    if (cc->config_path && redis_conf_load(&s->conf, cc->config_path, err, errlen) < 0)
        return CLI_EXIT_CONFIG;
    if (cc->cluster && (cc->unix_path || cc->sentinel || cc->master)) {
        snprintf(err, errlen, "--cluster reaches its nodes over TCP: it cannot be used with "
                 "-s, --sentinel or --master");
        return CLI_EXIT_USAGE;
    }
    int code = choose_sentinel(s, cc, err, errlen);
    if (code != CLI_EXIT_OK)
        return code;
    if (cc->cluster)
        sentinel_conf_free(&s->conf.sentinel);
    redis_conf_to_options(&s->conf, &s->opt);
    apply_flags(s, cc);
    code = apply_tls_flags(s, cc, err, errlen);
    return code != CLI_EXIT_OK ? code : choose_password(s, cc, err, errlen);
}

int cli_session_connect(struct cli_session *s, char *err, size_t errlen)
{
    dq_status st;
    s->client = dq_connect(&s->opt, err, errlen, &st);
    return s->client ? CLI_EXIT_OK : cli_exit_code(st);
}

void cli_session_close(struct cli_session *s)
{
    dq_close(s->client);
    s->client = NULL;
    redis_conf_free(&s->conf);
}
