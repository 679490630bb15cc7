/*
 * Redis connection options, in one place: their defaults, the private copy
 * a connection keeps (freed with the password wiped), how its address is
 * named in messages, the blocking connect and handshake, the reconnect
 * backoff, and the classes of error reply every connection reacts to.
 *
 * Users: the library's blocking client (client.c), the daemon's async
 * connection (rconn.c) and start-up check (redis_check.c), and the
 * configuration reader (redis_conf.c).  As in Redis's anet.c, a failing
 * call returns -1 (or a dq_status) with one line in the caller's buffer.
 */
#ifndef DQ_REDIS_CONN_H
#define DQ_REDIS_CONN_H

#include <delayq/client.h>
#include <hiredis/hiredis.h>
#include <stddef.h>

#include "redis/tls.h"

#define REDIS_CONN_DEFAULT_HOST "127.0.0.1"
#define REDIS_CONN_DEFAULT_PORT 6379
#define REDIS_CONN_DEFAULT_TIMEOUT_MS 5000  /* connect, and each command */

/* Reconnect backoff: from the minimum, doubled per failed attempt up to
 * the maximum, each delay jittered by +-25%. */
#define REDIS_CONN_BACKOFF_MIN_MS 100
#define REDIS_CONN_BACKOFF_MAX_MS 5000

/* The settings a connection keeps: every string is its own copy. */
struct redis_conn_opts {
    char *host;                 /* never NULL */
    int port;                   /* 1..65535 */
    char *unix_path;            /* NULL: TCP to host:port */
    char *user;                 /* ACL user, or NULL */
    char *password;             /* or NULL; wiped when freed */
    int db;
    int connect_timeout_ms;     /* > 0 */
    int command_timeout_ms;     /* 0: wait for ever */
    int keepalive;              /* TCP keepalive (not on a unix socket) */
    struct tls_settings tls;    /* TLS over TCP (a unix socket is plain) */
};

/*
 * Copy the connection part of `opt` into `o`, filling what `opt` leaves
 * unset (NULL host, port or connect timeout <= 0) with the defaults.
 * Returns 0, or -1 with one line in err (out of memory, an ACL user
 * without a password); `o` then owns nothing.
 */
int redis_conn_opts_copy(struct redis_conn_opts *o, const dq_options *opt,
                         char *err, size_t errlen) __attribute__((warn_unused_result));

/* Free what `o` owns, the password wiped first; `o` is left empty. */
void redis_conn_opts_free(struct redis_conn_opts *o);

/* Wipe a secret string, then free it.  NULL is ignored. */
void redis_conn_free_secret(char *secret);

/* A copy of `s`, or NULL when `s` is NULL (or memory ran out: compare). */
char *redis_conn_dup(const char *s);

/* Where `o` connects, for messages: "127.0.0.1:6379" or the socket path. */
void redis_conn_describe(const struct redis_conn_opts *o, char *buf, size_t len);

/* The same from the parts: the socket path when not NULL, else
 * "HOST:PORT" (a NULL host is the default one). */
void redis_conn_format_addr(const char *unix_path, const char *host, int port, char *buf,
                            size_t len);

/* The AUTH command for `o` into argv[0..2]: its argc, or 0 when `o` has
 * no password.  The strings are borrowed from `o`. */
int redis_conn_auth_argv(const struct redis_conn_opts *o, const char *argv[3]);

/*
 * Connect (blocking) and hand-shake: AUTH when there is a password, SELECT
 * when db is not 0, else PING (so that a server wanting a password fails
 * here, not at the first real command).  The command timeout and TCP
 * keepalive are set on the context; over TCP with TLS on, the TLS
 * handshake comes first (redis_io.c moves the bytes: use redis_io_* on the
 * context, and redis_io_free).  Returns the context, or NULL with
 * *st set (DQ_ERR_CONNECT, DQ_ERR_TIMEOUT, DQ_ERR_AUTH, DQ_ERR_NOMEM) and
 * one line in err.  The caller must have SIGPIPE dealt with.
 */
redisContext *redis_conn_open(const struct redis_conn_opts *o, dq_status *st,
                              char *err, size_t errlen);

/* Name the failure of a blocking context `rc` during `what` ("connect",
 * a command name) in err and return its status: DQ_ERR_TIMEOUT or
 * DQ_ERR_CONNECT.  `rc` is left for the caller to free. */
dq_status redis_conn_context_error(const struct redis_conn_opts *o,
                                   const redisContext *rc, const char *what,
                                   char *err, size_t errlen);

/* The next reconnect delay in ms from *backoff_ms, which it then doubles
 * (up to the maximum); `r` is a random number for the jitter. */
int redis_conn_backoff_next(int *backoff_ms, unsigned long r);

/* A NOSCRIPT error reply: the script is not loaded on this server. */
int redis_conn_is_noscript(const redisReply *r);

/*
 * A reply that says the server cannot take our commands now although the
 * connection works: READONLY and MASTERDOWN (it is a replica: a failover
 * by DNS or VIP left us on the old master) or LOADING (it is reading its
 * data set).  Nothing ran, so the command may be sent again; the
 * connection is to be dropped and made again with the backoff, which a
 * moved address then leads to the new master.
 */
int redis_conn_is_failover(const redisReply *r);

/*
 * Replicated durability (DQ_DURABILITY_REPLICATED): a script that may
 * write (any but the read-only ones, whose first line is the no-writes
 * shebang) is followed on its connection by "WAIT 1 <timeout_ms>", which
 * replies how many replicas have every write the connection made before
 * it; 0 means the write is on the master only.
 */
struct cmd;
int redis_conn_script_writes(int script);
void redis_conn_wait_cmd(struct cmd *w, int timeout_ms);

#endif
