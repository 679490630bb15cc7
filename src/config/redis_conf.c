/*
 * Reading the `redis` group of the configuration file (see redis_conf.h).
 * Each key has a reader in a table; a reader checks the type and the range
 * and reports a problem as "FILE:LINE: redis.KEY: ...".
 */
#include "config/redis_conf.h"

#include <errno.h>
#include <libconfig.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "config/conf_reader.h"
#include "lib/keys.h"
#include "redis/redis_conn.h"

#define REDIS_CONF_PAYLOAD_MAX (512L * 1024 * 1024) /* Redis's string limit */

void redis_conf_init(struct redis_conf *rc)
{
    dq_options def;
    dq_options_init(&def);
    memset(rc, 0, sizeof *rc);
    rc->port = def.port;
    rc->connect_timeout_ms = def.connect_timeout_ms;
    rc->command_timeout_ms = def.command_timeout_ms;
    rc->keepalive = def.keepalive;
    rc->max_payload = def.max_payload;
    rc->durability = def.durability;
    rc->replication_timeout_ms = def.replication_timeout_ms;
    rc->tls.verify = def.tls.verify;
}

void redis_conf_free(struct redis_conf *rc)
{
    free(rc->host);
    free(rc->unix_socket);
    free(rc->user);
    redis_conn_free_secret(rc->password);
    free(rc->password_in);
    free(rc->prefix);
    sentinel_conf_free(&rc->sentinel);
    conf_nodes_free(&rc->nodes, &rc->nnodes);
    tls_settings_free(&rc->tls);
    redis_conf_init(rc);
}

void redis_conf_to_options(const struct redis_conf *rc, dq_options *opt)
{
    dq_options_init(opt);
    if (rc->host)
        opt->host = rc->host;
    opt->port = rc->port;
    opt->unix_path = rc->unix_socket;
    opt->user = rc->user;
    opt->password = rc->password;
    opt->db = rc->db;
    if (rc->prefix)
        opt->prefix = rc->prefix;
    opt->connect_timeout_ms = (int)rc->connect_timeout_ms;
    opt->command_timeout_ms = (int)rc->command_timeout_ms;
    opt->keepalive = rc->keepalive;
    opt->max_payload = rc->max_payload;
    opt->durability = rc->durability;
    opt->replication_timeout_ms = (int)rc->replication_timeout_ms;
    sentinel_conf_to_options(&rc->sentinel, &opt->sentinel);
    opt->cluster = rc->cluster;
    opt->nodes = (const char *const *)rc->nodes;
    opt->nnodes = rc->nnodes;
    opt->tls.enable = rc->tls.enable;
    opt->tls.ca_file = rc->tls.ca_file;
    opt->tls.ca_dir = rc->tls.ca_dir;
    opt->tls.cert_file = rc->tls.cert_file;
    opt->tls.key_file = rc->tls.key_file;
    opt->tls.server_name = rc->tls.server_name;
    opt->tls.verify = rc->tls.verify;
}

/* ---- typed values: the shared readers, and this group's own rules ------ */

#define PREFIX "redis."

/* A non-empty string. */
static int get_string(struct conf_reader *r, const config_setting_t *s, const char **out)
{
    if (conf_string(r, s, PREFIX, out) < 0)
        return -1;
    if (!**out)
        return conf_fail(r, s, "redis.%s is empty", config_setting_name(s));
    return 0;
}

/* A copy of `v` into *dst (freeing the old one); `s` is named when
 * memory runs out. */
static int dup_string_of(struct conf_reader *r, const config_setting_t *s, const char *v,
                         char **dst)
{
    char *copy = strdup(v);
    if (!copy)
        return conf_fail(r, s, "out of memory");
    free(*dst);
    *dst = copy;
    return 0;
}

/* A copy of a non-empty string setting into *dst (freeing the old one). */
static int dup_string(struct conf_reader *r, const config_setting_t *s, char **dst)
{
    const char *v;
    if (get_string(r, s, &v) < 0)
        return -1;
    return dup_string_of(r, s, v, dst);
}

/* An integer setting within [min, max] into an int. */
static int get_int(struct conf_reader *r, const config_setting_t *s, long long min,
                   long long max, int *out)
{
    long long v;
    if (conf_int(r, s, PREFIX, min, max, &v) < 0)
        return -1;
    *out = (int)v;
    return 0;
}

/* A duration written as a string with a unit ("5s", "500ms"); a bare
 * number is refused here, unlike on the command line, because a config
 * file read months later should not leave the unit to be guessed. */
static int get_duration(struct conf_reader *r, const config_setting_t *s,
                        int64_t min_ms, int64_t *out)
{
    const char *name = config_setting_name(s);
    const char *v = config_setting_type(s) == CONFIG_TYPE_STRING
                    ? config_setting_get_string(s) : NULL;
    if (v && *v && strspn(v, "0123456789") == strlen(v))
        return conf_fail(r, s, "redis.%s: \"%s\" has no unit (write \"%ss\" or \"%sms\")",
                         name, v, v, v);
    int64_t ms;
    if (conf_duration(r, s, PREFIX, min_ms, &ms) < 0)
        return -1;
    if (ms > INT_MAX)
        return conf_fail(r, s, "redis.%s: \"%s\" is too long", name, v);
    *out = ms;
    return 0;
}

/* ---- the password file -------------------------------------------------- */

/* `file` as written, or joined to the directory of the config file when it
 * is relative.  The result is malloc'd; NULL when out of memory. */
static char *resolve_path(const char *conf_path, const char *file)
{
    const char *slash = strrchr(conf_path, '/');
    if (file[0] == '/' || !slash)
        return strdup(file);
    size_t dirlen = (size_t)(slash - conf_path);
    size_t n = dirlen + 1 + strlen(file) + 1;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%.*s/%s", (int)dirlen, conf_path, file);
    return p;
}

/* Read the first line of `file` (trailing newline stripped) into *out. */
static int read_first_line(const char *file, char **out, const char **why)
{
    FILE *f = fopen(file, "r");
    if (!f) {
        *why = strerror(errno);
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, f);
    int saved = errno;
    int failed = n < 0 && ferror(f);
    fclose(f);
    if (failed) {
        free(line);
        *why = strerror(saved);
        return -1;
    }
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
    if (n <= 0) {
        if (line)
            memset(line, 0, cap);
        free(line);
        *why = "the file is empty";
        return -1;
    }
    *out = line;
    return 0;
}

static int read_password_file(struct conf_reader *r, const config_setting_t *s,
                              struct redis_conf *rc)
{
    const char *v;
    if (get_string(r, s, &v) < 0)
        return -1;
    char *file = resolve_path(r->path, v);
    if (!file)
        return conf_fail(r, s, "out of memory");
    const char *why;
    int rv = redis_conf_password_from_file(rc, file, &why);
    if (rv < 0)
        conf_fail(r, s, "redis.password_file: cannot read %s: %s", file, why);
    free(file);
    return rv;
}

int redis_conf_password_from_file(struct redis_conf *rc, const char *file,
                                  const char **why)
{
    char *pw = NULL;
    if (read_first_line(file, &pw, why) < 0)
        return -1;
    char *in = strdup(file);
    if (!in) {
        redis_conn_free_secret(pw);
        *why = "out of memory";
        return -1;
    }
    redis_conn_free_secret(rc->password);
    rc->password = pw;
    free(rc->password_in);
    rc->password_in = in;
    return 0;
}

/* ---- one reader per key ------------------------------------------------- */

static int read_host(struct conf_reader *r, const config_setting_t *s,
                     struct redis_conf *rc)
{
    return dup_string(r, s, &rc->host);
}

static int read_port(struct conf_reader *r, const config_setting_t *s,
                     struct redis_conf *rc)
{
    return get_int(r, s, 1, 65535, &rc->port);
}

static int read_unix_socket(struct conf_reader *r, const config_setting_t *s,
                            struct redis_conf *rc)
{
    const char *v;
    if (get_string(r, s, &v) < 0)
        return -1;
    if (strlen(v) >= sizeof(((struct sockaddr_un *)0)->sun_path))
        return conf_fail(r, s, "redis.unix_socket: the path is longer than %zu bytes",
                         sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
    return dup_string(r, s, &rc->unix_socket);
}

static int read_user(struct conf_reader *r, const config_setting_t *s,
                     struct redis_conf *rc)
{
    return dup_string(r, s, &rc->user);
}

static int read_password(struct conf_reader *r, const config_setting_t *s,
                         struct redis_conf *rc)
{
    const char *file = config_setting_source_file(s);
    if (dup_string(r, s, &rc->password) < 0 || dup_string_of(r, s, file ? file : r->path,
                                                             &rc->password_in) < 0)
        return -1;
    return 0;
}

static int read_db(struct conf_reader *r, const config_setting_t *s,
                   struct redis_conf *rc)
{
    return get_int(r, s, 0, INT_MAX, &rc->db);
}

static int read_prefix(struct conf_reader *r, const config_setting_t *s,
                       struct redis_conf *rc)
{
    if (config_setting_type(s) == CONFIG_TYPE_STRING) {
        const char *why = keys_check_prefix(config_setting_get_string(s));
        if (why)
            return conf_fail(r, s, "redis.prefix: %s", why);
    }
    return dup_string(r, s, &rc->prefix);
}

static int read_connect_timeout(struct conf_reader *r,
                                const config_setting_t *s, struct redis_conf *rc)
{
    return get_duration(r, s, 1, &rc->connect_timeout_ms);
}

static int read_command_timeout(struct conf_reader *r,
                                const config_setting_t *s, struct redis_conf *rc)
{
    return get_duration(r, s, 0, &rc->command_timeout_ms);
}

static int read_keepalive(struct conf_reader *r, const config_setting_t *s,
                          struct redis_conf *rc)
{
    return conf_bool(r, s, PREFIX, &rc->keepalive);
}

static int read_max_payload(struct conf_reader *r, const config_setting_t *s,
                            struct redis_conf *rc)
{
    long long v = 0;
    if (conf_int(r, s, PREFIX, 1, REDIS_CONF_PAYLOAD_MAX, &v) < 0)
        return -1;
    rc->max_payload = (size_t)v;
    return 0;
}

/* "local" or "replicated": what a write waits for (see dq_durability). */
static int read_durability(struct conf_reader *r, const config_setting_t *s,
                           struct redis_conf *rc)
{
    const char *v = NULL;
    if (conf_string(r, s, PREFIX, &v) < 0)
        return -1;
    if (strcmp(v, "local") == 0)
        rc->durability = DQ_DURABILITY_LOCAL;
    else if (strcmp(v, "replicated") == 0)
        rc->durability = DQ_DURABILITY_REPLICATED;
    else
        return conf_fail(r, s, "redis.durability: \"%s\" is not \"local\" or \"replicated\"",
                         v);
    return 0;
}

static int read_replication_timeout(struct conf_reader *r, const config_setting_t *s,
                                    struct redis_conf *rc)
{
    return get_duration(r, s, 1, &rc->replication_timeout_ms);
}

static int read_cluster(struct conf_reader *r, const config_setting_t *s,
                        struct redis_conf *rc)
{
    return conf_bool(r, s, PREFIX, &rc->cluster);
}

/* redis.nodes: a cluster's seed nodes, read as the sentinels' list is. */
static int read_nodes(struct conf_reader *r, const config_setting_t *s,
                      struct redis_conf *rc)
{
    return conf_nodes_read(r, s, PREFIX "nodes", "cluster node", &rc->nodes, &rc->nnodes);
}

/* redis.sentinel (sentinel_conf.c), its password_file read here by the
 * one password-file reader. */
static int read_sentinel(struct conf_reader *r, const config_setting_t *s,
                         struct redis_conf *rc)
{
    struct sentinel_conf *sc = &rc->sentinel;
    const config_setting_t *file_setting;
    if (sentinel_conf_read(r, s, sc, &file_setting) < 0)
        return -1;
    if (file_setting) {
        const char *v, *why;
        if (conf_string(r, file_setting, "redis.sentinel.", &v) < 0)
            return -1;
        char *file = resolve_path(r->path, v);
        if (!file)
            return conf_fail(r, file_setting, "out of memory");
        if (read_first_line(file, &sc->password, &why) < 0) {
            conf_fail(r, file_setting, "redis.sentinel.password_file: cannot read %s: %s",
                      file, why);
            free(file);
            return -1;
        }
        sc->password_in = file;
    }
    if (sc->user && !sc->password)
        return conf_fail(r, s, "redis.sentinel.user needs redis.sentinel.password or "
                         "redis.sentinel.password_file");
    return 0;
}

/* ---- the tls group ------------------------------------------------------ */

#define TLS_PREFIX "redis.tls."

/* A file (or directory) setting of the tls group: resolved against the
 * configuration file's directory and checked to be readable now, so that
 * a wrong path is named at FILE:LINE rather than at the first connect. */
static int read_tls_path(struct conf_reader *r, const config_setting_t *s, int dir,
                         char **dst)
{
    const char *v;
    if (conf_string(r, s, TLS_PREFIX, &v) < 0)
        return -1;
    if (!*v)
        return conf_fail(r, s, "redis.tls.%s is empty", config_setting_name(s));
    char *file = resolve_path(r->path, v);
    if (!file)
        return conf_fail(r, s, "out of memory");
    struct stat st;
    int bad = 0;
    if (stat(file, &st) < 0)
        bad = errno;
    else if (dir != !!S_ISDIR(st.st_mode))
        bad = dir ? ENOTDIR : EISDIR;
    else if (access(file, R_OK) < 0)
        bad = errno;
    if (bad) {
        conf_fail(r, s, "redis.tls.%s: cannot read %s: %s", config_setting_name(s), file,
                  strerror(bad));
        free(file);
        return -1;
    }
    free(*dst);
    *dst = file;
    return 0;
}

/* The `tls` group: present means TLS on unless `enable = false`. */
static int read_tls(struct conf_reader *r, const config_setting_t *s,
                    struct redis_conf *rc)
{
    static const char *const known[] = { "enable", "ca_file", "ca_dir", "cert_file",
                                         "key_file", "server_name", "verify", NULL };
    if (conf_check_keys(r, s, TLS_PREFIX, known) < 0)
        return -1;
    struct tls_settings *t = &rc->tls;
    const config_setting_t *v;
    t->enable = 1;
    if (conf_bool(r, config_setting_get_member(s, "enable"), TLS_PREFIX, &t->enable) < 0
        || conf_bool(r, config_setting_get_member(s, "verify"), TLS_PREFIX, &t->verify) < 0)
        return -1;
    const struct { const char *name; int dir; char **dst; } paths[] = {
        { "ca_file", 0, &t->ca_file }, { "ca_dir", 1, &t->ca_dir },
        { "cert_file", 0, &t->cert_file }, { "key_file", 0, &t->key_file },
    };
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        if ((v = config_setting_get_member(s, paths[i].name))
            && read_tls_path(r, v, paths[i].dir, paths[i].dst) < 0)
            return -1;
    if ((v = config_setting_get_member(s, "server_name"))) {
        const char *name;
        if (conf_string(r, v, TLS_PREFIX, &name) < 0)
            return -1;
        if (!*name)
            return conf_fail(r, v, "redis.tls.server_name is empty");
        if (dup_string_of(r, v, name, &t->server_name) < 0)
            return -1;
    }
    if (t->key_file && !t->cert_file)
        return conf_fail(r, config_setting_get_member(s, "key_file"),
                         "redis.tls.key_file needs redis.tls.cert_file");
    return 0;
}

typedef int (*key_reader)(struct conf_reader *, const config_setting_t *,
                          struct redis_conf *);

static const struct {
    const char *name;
    key_reader read;
} conf_keys[] = {
    { "host", read_host },
    { "port", read_port },
    { "unix_socket", read_unix_socket },
    { "user", read_user },
    { "password", read_password },
    { "password_file", read_password_file },
    { "db", read_db },
    { "prefix", read_prefix },
    { "connect_timeout", read_connect_timeout },
    { "command_timeout", read_command_timeout },
    { "keepalive", read_keepalive },
    { "max_payload", read_max_payload },
    { "durability", read_durability },
    { "replication_timeout", read_replication_timeout },
    { "sentinel", read_sentinel },
    { "cluster", read_cluster },
    { "nodes", read_nodes },
    { "tls", read_tls },
};

#define CONF_NKEYS (sizeof conf_keys / sizeof conf_keys[0])

static int key_index(const char *name)
{
    for (size_t i = 0; i < CONF_NKEYS; i++)
        if (strcmp(conf_keys[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* ---- the group ---------------------------------------------------------- */

/* Settings that exclude each other: report the later of the two. */
static int check_pair(struct conf_reader *r, const config_setting_t *a,
                      const config_setting_t *b)
{
    if (!a || !b)
        return 0;
    const config_setting_t *later =
        config_setting_source_line(b) >= config_setting_source_line(a) ? b : a;
    return conf_fail(r, later, "redis.%s and redis.%s are both set (keep one)",
                     config_setting_name(a), config_setting_name(b));
}

static const config_setting_t *seen_key(const config_setting_t *const *seen,
                                        const char *name)
{
    return seen[key_index(name)];
}

/* What a cluster cannot have: a Sentinel, a unix socket, a database but
 * 0; and seed nodes mean nothing without it. */
static int check_cluster(struct conf_reader *r, const config_setting_t *const *seen,
                         const struct redis_conf *rc)
{
    const config_setting_t *cluster = seen_key(seen, "cluster");
    const config_setting_t *nodes = seen_key(seen, "nodes");
    if (!rc->cluster) {
        if (nodes)
            return conf_fail(r, nodes, "redis.nodes lists cluster nodes: it needs "
                             "redis.cluster = true");
        return 0;
    }
    if (seen_key(seen, "sentinel"))
        return conf_fail(r, cluster, "redis.cluster and redis.sentinel are both set (a "
                         "cluster does its own failover: keep one)");
    if (seen_key(seen, "unix_socket"))
        return conf_fail(r, cluster, "redis.cluster needs TCP nodes, not redis.unix_socket");
    if (rc->db != 0)
        return conf_fail(r, seen_key(seen, "db"), "redis.db must be 0 with redis.cluster "
                         "(a cluster has only database 0)");
    return 0;
}

/* Read every setting of the group into `rc`; the checks that involve two
 * settings come first, so that their message names both. */
static int read_group(struct conf_reader *r, const config_setting_t *group,
                      struct redis_conf *rc)
{
    const config_setting_t *seen[CONF_NKEYS] = { 0 };
    int n = config_setting_length(group);
    for (int i = 0; i < n; i++) {
        const config_setting_t *s = config_setting_get_elem(group, (unsigned)i);
        int k = key_index(config_setting_name(s));
        if (k < 0)
            return conf_fail(r, s, "unknown setting redis.%s", config_setting_name(s));
        seen[k] = s;
    }
    if (check_pair(r, seen_key(seen, "password"), seen_key(seen, "password_file")) < 0
        || check_pair(r, seen_key(seen, "host"), seen_key(seen, "unix_socket")) < 0
        || check_pair(r, seen_key(seen, "host"), seen_key(seen, "sentinel")) < 0
        || check_pair(r, seen_key(seen, "unix_socket"), seen_key(seen, "sentinel")) < 0)
        return -1;
    for (size_t k = 0; k < CONF_NKEYS; k++)
        if (seen[k] && conf_keys[k].read(r, seen[k], rc) < 0)
            return -1;
    const config_setting_t *user = seen_key(seen, "user");
    if (user && !rc->password)
        return conf_fail(r, user, "redis.user needs redis.password or redis.password_file");
    return check_cluster(r, seen, rc);
}

int redis_conf_read(struct redis_conf *rc, const struct config_t *cfg,
                    const char *path, char *err, size_t errlen)
{
    struct conf_reader r;
    conf_reader_init(&r, path, err, errlen);
    const config_setting_t *group = config_lookup(cfg, "redis");
    struct redis_conf tmp;
    redis_conf_init(&tmp);
    if (group && !config_setting_is_group(group))
        return conf_fail(&r, group, "redis: expected a group (redis = { ... };)");
    if (group && read_group(&r, group, &tmp) < 0) {
        redis_conf_free(&tmp);
        return -1;
    }
    /* The prefix is resolved here, once: every reader takes rc->prefix. */
    if (!tmp.prefix && !(tmp.prefix = strdup(DQ_DEFAULT_PREFIX))) {
        redis_conf_free(&tmp);
        return conf_fail(&r, group, "out of memory");
    }
    redis_conf_free(rc);
    *rc = tmp;
    return 0;
}

/* redis_conf_secret_exposed for one secret (`what`) and its file. */
static int file_exposed(const char *secret, const char *file, const char *what, char *buf,
                        size_t len)
{
    struct stat st;
    if (!secret || !file || stat(file, &st) < 0 || !(st.st_mode & S_IROTH))
        return 0;
    snprintf(buf, len, "warning: %s holds the %s and every user can read it "
             "(chmod o-r %s)", file, what, file);
    return 1;
}

int redis_conf_secret_exposed(const struct redis_conf *rc, char *buf, size_t len)
{
    return file_exposed(rc->password, rc->password_in, "Redis password", buf, len)
           || file_exposed(rc->sentinel.password, rc->sentinel.password_in,
                           "sentinels' password", buf, len);
}

int redis_conf_load(struct redis_conf *rc, const char *path, char *err,
                    size_t errlen)
{
    config_t cfg;
    config_init(&cfg);
    int r = conf_read_file(&cfg, path, err, errlen);
    if (r == 0)
        r = redis_conf_read(rc, &cfg, path, err, errlen);
    config_destroy(&cfg);
    return r;
}
