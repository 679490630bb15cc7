/*
 * How the delayq command line reaches Redis: the connection options as
 * typed, the -c configuration file under them, and the client made from
 * both.  Precedence: command-line option, then the environment (for the
 * password only), then the file, then the library's defaults.
 *
 * The password, first found wins:
 *   1. -a PW or --password-file FILE (both: a usage error);
 *   2. DELAYQ_PASSWORD or DELAYQ_PASSWORD_FILE (both set: a usage error);
 *   3. the -c file's redis.password or redis.password_file.
 * A password file gives its first line, trailing newline stripped; one
 * that cannot be read or is empty is an error (exit 78).  -a puts the
 * password where every user of the host can read it (ps, /proc/PID/cmdline):
 * the caller warns about it.
 */
#ifndef DQ_CLI_CONN_H
#define DQ_CLI_CONN_H

#include <delayq/client.h>
#include <getopt.h>
#include <stddef.h>
#include <stdint.h>

#include "config/redis_conf.h"

/* Short connection options for getopt. */
#define CLI_CONN_SHORTOPTS "c:H:p:s:a:n:"

/* Long connection options without a short form (values above any
 * character); the command line's other options number on from
 * CLI_CONN_OPT_END. */
enum cli_conn_opt {
    CLI_CONN_OPT_USER = 256,
    CLI_CONN_OPT_PREFIX,
    CLI_CONN_OPT_TIMEOUT,
    CLI_CONN_OPT_PASSWORD_FILE,
    CLI_CONN_OPT_DURABILITY,
    CLI_CONN_OPT_REPLICATION_TIMEOUT,
    CLI_CONN_OPT_SENTINEL,
    CLI_CONN_OPT_MASTER,
    CLI_CONN_OPT_TLS,
    CLI_CONN_OPT_CACERT,
    CLI_CONN_OPT_CACERTDIR,
    CLI_CONN_OPT_CERT,
    CLI_CONN_OPT_KEY,
    CLI_CONN_OPT_SNI,
    CLI_CONN_OPT_INSECURE,
    CLI_CONN_OPT_CLUSTER,
    CLI_CONN_OPT_END
};

/* Connection options as given; strings point into argv. */
struct cli_conn {
    const char *config_path;    /* -c */
    const char *host;           /* -H */
    int port;                   /* -p; 0 when not given */
    const char *unix_path;      /* -s */
    const char *password;       /* -a */
    const char *password_file;  /* --password-file */
    const char *user;           /* --user */
    int db;                     /* -n; -1 when not given */
    const char *prefix;         /* --prefix */
    int64_t timeout_ms;         /* --timeout; -1 when not given */
    int durability;             /* --durability (a dq_durability); -1 when
                                   not given */
    int64_t replication_timeout_ms; /* --replication-timeout; -1 when not
                                       given */
    const char *sentinel;       /* --sentinel HOST:PORT[,HOST:PORT...] */
    const char *master;         /* --master NAME */
    int cluster;                /* --cluster */
    struct {                    /* TLS, as redis-cli spells it */
        int on;                 /* --tls */
        const char *cacert;     /* --cacert */
        const char *cacertdir;  /* --cacertdir */
        const char *cert;       /* --cert */
        const char *key;        /* --key */
        const char *sni;        /* --sni */
        int insecure;           /* --insecure */
    } tls;
};

/* A connection in use: the settings it was made from and the client. */
struct cli_session {
    struct redis_conf conf;     /* the -c file's settings (or defaults);
                                   the password of a password file given
                                   to the command line replaces its own */
    dq_options opt;             /* borrows from conf, argv and the
                                   environment */
    dq_client *client;          /* NULL until cli_session_connect */
};

void cli_conn_init(struct cli_conn *cc);

/* The long forms of the connection options, terminated by a zero entry. */
extern const struct option cli_conn_longopts[];

/*
 * Take option `opt` with value `arg` if it is a connection option.
 * Returns 1 when taken, 0 when `opt` is not one, -1 when the value is bad
 * (why in `err`).
 */
int cli_conn_option(struct cli_conn *cc, int opt, const char *arg, char *err,
                    size_t errlen);

/*
 * Work out the options in s->opt from the -c file, the environment and
 * the flags.  Returns 0, or an exit code (78 for the -c file or a password
 * file, 2 for conflicting flags or variables) with the message in `err`.
 * Free with cli_session_close also on failure.
 */
int cli_session_options(struct cli_session *s, const struct cli_conn *cc,
                        char *err, size_t errlen);

/* Connect with s->opt.  Returns 0, or the exit code with the message in
 * `err` (69 when Redis is unreachable, refuses or times out). */
int cli_session_connect(struct cli_session *s, char *err, size_t errlen);

/* Close the client and free the settings (passwords wiped). */
void cli_session_close(struct cli_session *s);

#endif
