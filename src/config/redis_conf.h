/*
 * The `redis` group of the daemon's configuration file: where Redis is and
 * how to talk to it.  Shared by the delayq command line (`-c FILE`) and the
 * daemon, which reads the rest of the same file with its own module.
 *
 *   redis = {
 *     host = "127.0.0.1";      # or unix_socket = "/run/redis/redis.sock";
 *     port = 6379;
 *     user = "delayq";         # optional ACL user (needs a password)
 *     password = "secret";     # or password_file = "/etc/delayq/redis.pass"
 *     db = 0;
 *     prefix = "dq";
 *     connect_timeout = "5s";  # durations are strings with a unit
 *     command_timeout = "5s";  # "0s": wait for ever
 *     keepalive = true;
 *     max_payload = 1048576;   # bytes
 *     sentinel = { ... };      # instead of host/unix_socket: sentinel_conf.h
 *     cluster = true;          # Redis Cluster (db 0, no sentinel, TCP only)
 *     nodes = ["10.0.0.1:7000", "10.0.0.2:7000"]; # its seeds; none: host:port
 *     tls = {                  # TLS over TCP; the group turns it on
 *       enable = true;         # false keeps the settings but connects plain
 *       ca_file = "ca.crt";    # or ca_dir; neither: the system's CAs
 *       cert_file = "client.crt";  # a client certificate, when Redis asks
 *       key_file = "client.key";   # (tls-auth-clients yes)
 *       server_name = "redis.example"; # SNI and the name checked; default host
 *       verify = true;         # false: any certificate (tests only)
 *     };
 *   };
 *
 * Relative file names (password_file, the tls files) are relative to the
 * directory of the configuration file; the tls files must be readable
 * when the file is read.
 *
 * A missing group means every default.  Every problem is reported as one
 * line "FILE:LINE: message" in the caller's buffer.
 */
#ifndef DQ_REDIS_CONF_H
#define DQ_REDIS_CONF_H

#include <delayq/client.h>
#include <stddef.h>
#include <stdint.h>

#include "config/sentinel_conf.h"
#include "redis/tls.h"

struct config_t; /* libconfig's config_t */

struct redis_conf {
    char *host;                 /* NULL: the library's default, 127.0.0.1 */
    int port;                   /* 1..65535, default 6379 */
    char *unix_socket;          /* NULL for TCP */
    char *user;                 /* ACL user or NULL */
    char *password;             /* from password or password_file; or NULL */
    char *password_in;          /* the file that holds it (the config file,
                                   one it includes, or password_file) */
    int db;                     /* default 0 */
    char *prefix;               /* NULL only before redis_conf_read/load, which
                                   resolve it (DQ_DEFAULT_PREFIX when unset) */
    int64_t connect_timeout_ms; /* default 5000 */
    int64_t command_timeout_ms; /* default 5000; 0 waits for ever */
    int keepalive;              /* 1 (default) or 0 */
    size_t max_payload;         /* default DQ_DEFAULT_MAX_PAYLOAD */
    dq_durability durability;   /* "local" (default) or "replicated" */
    int64_t replication_timeout_ms; /* WAIT's timeout, default 1000 */
    struct sentinel_conf sentinel; /* master NULL: no Sentinel */
    int cluster;                /* 1: Redis Cluster */
    char **nodes;               /* the cluster's seeds "HOST:PORT", checked */
    size_t nnodes;              /* 0: host:port is the seed */
    struct tls_settings tls;    /* default off, verify on; paths resolved */
};

/* Fill `rc` with the defaults; it owns no memory yet. */
void redis_conf_init(struct redis_conf *rc);

/*
 * Read the file at `path` and take its `redis` group into `rc`, which must
 * have been initialised (redis_conf_init).  On success the old contents of
 * `rc` are freed and replaced; on failure (-1, one line in `err`) `rc` is
 * left as it was, so that a reload can keep the settings in force.
 */
int redis_conf_load(struct redis_conf *rc, const char *path, char *err,
                    size_t errlen) __attribute__((warn_unused_result));

/*
 * The same from a file the caller parsed already (the daemon reads the
 * whole file once).  `path` names the file in messages and is the base of
 * a relative password_file.
 */
int redis_conf_read(struct redis_conf *rc, const struct config_t *cfg,
                    const char *path, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/*
 * Take the password from `file`: its first line, trailing newline (and CR)
 * stripped, replaces rc->password (the old one wiped), and rc->password_in
 * names `file`.  Returns -1 with the reason in *why (a static string), `rc`
 * unchanged, when the file cannot be read or its first line is empty.
 * The one reader for password_file and the command line's --password-file
 * and DELAYQ_PASSWORD_FILE.
 */
int redis_conf_password_from_file(struct redis_conf *rc, const char *file,
                                  const char **why) __attribute__((warn_unused_result));

/* Fill `opt` (all of it) from `rc`, its TLS settings too.  The strings are borrowed: `rc` must
 * outlive every use of `opt`. */
void redis_conf_to_options(const struct redis_conf *rc, dq_options *opt);

/*
 * Whether the file that holds the password (see password_in), or the
 * sentinels' (sentinel.password_in), can be read by every user of the
 * machine.  Returns 1 with a one-line warning in buf,
 * else 0 (no password, or the file is kept private).
 */
int redis_conf_secret_exposed(const struct redis_conf *rc, char *buf, size_t len);

/* Free what `rc` owns (the password is wiped first) and reset it to the
 * defaults. */
void redis_conf_free(struct redis_conf *rc);

#endif
