#include "daemon/dconfig_admin.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


#define CRED_FILE_MAX 4096

/* Parse "HOST:PORT", HOST an IPv4 address or an IPv6 one in brackets,
 * into `ss`.  Returns NULL, or why not; *loopback says whether only this
 * host can connect. */
static const char *parse_listen(const char *text, struct sockaddr_storage *ss,
                                socklen_t *len, int *loopback)
{
    char host[64];
    const char *colon = strrchr(text, ':');
    if (!colon || colon == text)
        return "expected \"HOST:PORT\", like \"127.0.0.1:9464\" or \"[::1]:9464\"";
    const char *h = text;
    size_t hlen = (size_t)(colon - text);
    if (*h == '[') {
        if (hlen < 2 || h[hlen - 1] != ']')
            return "an IPv6 address goes in brackets: \"[::1]:9464\"";
        h++;
        hlen -= 2;
    }
    if (hlen >= sizeof host)
        return "the host is too long";
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (!colon[1] || *end || port < 1 || port > 65535)
        return "the port is not a number from 1 to 65535";
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    if (text[0] != '[' && inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        *len = sizeof *v4;
        *loopback = (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
        return NULL;
    }
    if (text[0] == '[' && inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        *len = sizeof *v6;
        *loopback = IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr);
        return NULL;
    }
    return "the host is not an IPv4 address or a bracketed IPv6 address";
}

char *dconfig_read_secret(const char *path, char *why, size_t whylen)
{
    char *s = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        snprintf(why, whylen, "cannot read '%s': %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, whylen, "'%s' is not a regular file", path);
        goto done;
    }
    if (st.st_mode & 007) {
        snprintf(why, whylen, "'%s' is accessible by other users (mode %03o): "
                 "chmod o-rwx it", path, (unsigned)(st.st_mode & 0777));
        goto done;
    }
    if (st.st_size > CRED_FILE_MAX) {
        snprintf(why, whylen, "'%s' is larger than %d bytes", path, CRED_FILE_MAX);
        goto done;
    }
    s = malloc(CRED_FILE_MAX + 1);
    if (!s) {
        snprintf(why, whylen, "out of memory");
        goto done;
    }
    size_t len = 0;
    ssize_t n;
    while (len < CRED_FILE_MAX && (n = read(fd, s + len, CRED_FILE_MAX - len)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(why, whylen, "cannot read '%s': %s", path, strerror(errno));
            free(s);
            s = NULL;
            goto done;
        }
        len += (size_t)n;
    }
    while (len > 0 && strchr(" \t\r\n", s[len - 1]))
        len--;
    s[len] = '\0';
    if (len == 0 || memchr(s, '\0', len)) {
        snprintf(why, whylen, len ? "'%s' holds a NUL byte" : "'%s' is empty", path);
        free(s);
        s = NULL;
    }
done:
    if (fd >= 0)
        close(fd);
    return s;
}

/* A credentials file named by setting `name` of group `g` into *out;
 * reports its problems at the setting. */
static void read_cred(struct conf_reader *r, const config_setting_t *g, const char *where,
                      const char *name, char **out)
{
    const config_setting_t *s = config_setting_get_member(g, name);
    const char *path = NULL;
    if (conf_string(r, s, where, &path) < 0 || !path)
        return;
    char why[CRED_FILE_MAX];
    char *secret = dconfig_read_secret(path, why, sizeof why);
    if (!secret) {
        conf_fail(r, s, "%s%s: %s", where, name, why);
        return;
    }
    *out = secret;
}

/* The settings of the dashboard: ui, token_file, basic_auth_file, read_only. */
static void read_ui(struct conf_reader *r, struct daemon_conf *dc, const config_setting_t *g,
                    const char *where)
{
    conf_bool(r, config_setting_get_member(g, "ui"), where, &dc->admin_ui);
    conf_bool(r, config_setting_get_member(g, "read_only"), where, &dc->admin_read_only);
    read_cred(r, g, where, "token_file", &dc->admin_token);
    read_cred(r, g, where, "basic_auth_file", &dc->admin_basic);
    if (r->failed)
        return;
    const config_setting_t *tf = config_setting_get_member(g, "token_file");
    if (dc->admin_token && strlen(dc->admin_token) < DCONFIG_TOKEN_MIN)
        conf_fail(r, tf, "%stoken_file: the token in it is shorter than %d bytes",
                  where, DCONFIG_TOKEN_MIN);
    const config_setting_t *bf = config_setting_get_member(g, "basic_auth_file");
    const char *colon = dc->admin_basic ? strchr(dc->admin_basic, ':') : NULL;
    if (!r->failed && dc->admin_basic && !colon)
        conf_fail(r, bf, "%sbasic_auth_file: expected one line 'user:password'", where);
    else if (!r->failed && colon && colon == dc->admin_basic)
        conf_fail(r, bf, "%sbasic_auth_file: the user name before ':' is empty", where);
    else if (!r->failed && colon && strlen(colon + 1) < DCONFIG_PASSWORD_MIN)
        conf_fail(r, bf, "%sbasic_auth_file: the password after ':' is shorter than %d "
                  "bytes", where, DCONFIG_PASSWORD_MIN);
    else if (!r->failed && colon && strchr(dc->admin_basic, '\n'))
        conf_fail(r, bf, "%sbasic_auth_file: expected one line 'user:password'", where);
    if (!r->failed && dc->admin_ui && !dc->admin_token && !dc->admin_basic)
        conf_fail(r, config_setting_get_member(g, "ui"),
                  "%sui: needs token_file or basic_auth_file", where);
}

void dconfig_admin_defaults(struct daemon_conf *dc)
{
    dc->admin_request_timeout_ms = 10000;
    dc->admin_max_conns = 64;
    dc->admin_max_conns_per_address = 16;
    dc->admin_session_lifetime_ms = 7LL * 24 * 3600 * 1000;
}

/* Whether `name` may be listed in admin.hosts: a DNS name or an IPv4
 * address (letters, digits, '.', '-'), or an IPv6 address in brackets;
 * no port. */
static int host_name_ok(const char *name)
{
    size_t len = strlen(name);
    if (len == 0 || len > 253)
        return 0;
    if (name[0] == '[')
        return len > 2 && name[len - 1] == ']'
               && strspn(name + 1, "0123456789abcdefABCDEF:.") == len - 2;
    return strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-")
           == len;
}

/* admin.hosts = [ "NAME", ... ]: the names besides the listen address and
 * localhost that a request's Host (and a POST's Origin) may give. */
static void read_hosts(struct conf_reader *r, struct daemon_conf *dc,
                       const config_setting_t *s, const char *where)
{
    if (!s)
        return;
    if (!config_setting_is_array(s) && !config_setting_is_list(s)) {
        conf_fail(r, s, "%shosts: expected a list of names: [ \"dq.example.com\" ]", where);
        return;
    }
    int n = config_setting_length(s);
    if (n > DCONFIG_HOSTS_MAX) {
        conf_fail(r, s, "%shosts: more than %d names", where, DCONFIG_HOSTS_MAX);
        return;
    }
    dc->admin_hosts = calloc((size_t)n + 1, sizeof *dc->admin_hosts);
    if (!dc->admin_hosts) {
        conf_fail(r, s, "%shosts: out of memory", where);
        return;
    }
    for (int i = 0; i < n && !r->failed; i++) {
        const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
        const char *name = config_setting_get_string(e);
        if (!name || !host_name_ok(name)) {
            conf_fail(r, e, "%shosts: entry %d is not a host name (a DNS name, an IPv4 "
                      "address or a bracketed IPv6 address, without port)", where, i + 1);
            return;
        }
        size_t len = strlen(name);
        char *copy = name[0] == '[' ? strndup(name + 1, len - 2) : strdup(name);
        if (!copy) {
            conf_fail(r, e, "%shosts: out of memory", where);
            return;
        }
        for (char *c = copy; *c; c++)
            if (*c >= 'A' && *c <= 'Z')
                *c = (char)(*c - 'A' + 'a');
        dc->admin_hosts[dc->nadmin_hosts++] = copy;
    }
}

/* The listener's limits: request_timeout, max_connections and
 * max_connections_per_address (below it), and session_lifetime. */
static void read_limits(struct conf_reader *r, struct daemon_conf *dc,
                        const config_setting_t *g, const char *where)
{
    conf_duration(r, config_setting_get_member(g, "request_timeout"), where, 100,
                  &dc->admin_request_timeout_ms);
    conf_duration(r, config_setting_get_member(g, "session_lifetime"), where, 60000,
                  &dc->admin_session_lifetime_ms);
    long long max = dc->admin_max_conns, per = dc->admin_max_conns_per_address;
    const config_setting_t *ps = config_setting_get_member(g, "max_connections_per_address");
    if (conf_int(r, config_setting_get_member(g, "max_connections"), where, 3,
                 DCONFIG_CONNS_MAX, &max) < 0
        || conf_int(r, ps, where, 2, DCONFIG_CONNS_MAX, &per) < 0)
        return;
    if (per >= max) {
        conf_fail(r, ps ? ps : config_setting_get_member(g, "max_connections"),
                  "%smax_connections_per_address: %lld is not below max_connections (%lld)",
                  where, per, max);
        return;
    }
    dc->admin_max_conns = (int)max;
    dc->admin_max_conns_per_address = (int)per;
}

void dconfig_read_admin(struct conf_reader *r, struct daemon_conf *dc,
                        const config_setting_t *root)
{
    const config_setting_t *a = config_setting_get_member(root, "admin");
    const config_setting_t *m = config_setting_get_member(root, "metrics");
    if (a && m) {
        conf_fail(r, m, "metrics: the older name of the group 'admin', which is set too "
                  "(line %d): keep one", config_setting_source_line(a));
        return;
    }
    const config_setting_t *g = a ? a : m;
    const char *name = a ? "admin" : "metrics";
    if (!g)
        return;
    char where[16];
    snprintf(where, sizeof where, "%s.", name);
    if (!config_setting_is_group(g)) {
        conf_fail(r, g, "%s: expected a group { listen = \"127.0.0.1:9464\"; }", name);
        return;
    }
    static const char *const known[] = { "listen", "allow_remote", "claim_failure_grace",
                                         "ui", "token_file", "basic_auth_file",
                                         "read_only", "request_timeout", "max_connections",
                                         "max_connections_per_address", "hosts",
                                         "session_lifetime", NULL };
    conf_check_keys(r, g, where, known);
    read_limits(r, dc, g, where);
    read_hosts(r, dc, config_setting_get_member(g, "hosts"), where);
    conf_duration(r, config_setting_get_member(g, "claim_failure_grace"), where, 0,
                  &dc->claim_failure_grace_ms);
    const char *listen = NULL;
    conf_string(r, config_setting_get_member(g, "listen"), where, &listen);
    int remote = 0;
    conf_bool(r, config_setting_get_member(g, "allow_remote"), where, &remote);
    read_ui(r, dc, g, where);
    if (r->failed)
        return;
    if (!listen) {
        conf_fail(r, g, "%slisten: missing (remove the group to turn metrics off)", where);
        return;
    }
    const config_setting_t *at = config_setting_get_member(g, "listen");
    int loopback = 0;
    const char *why = parse_listen(listen, &dc->metrics_addr, &dc->metrics_addrlen,
                                           &loopback);
    if (why)
        conf_fail(r, at, "%slisten: bad address '%s': %s", where, listen, why);
    else if (!loopback && !remote)
        conf_fail(r, at, "%slisten: '%s' is not a loopback address; metrics and "
                  "health are not authenticated: set allow_remote = true to serve "
                  "them on it", where, listen);
    else
        dc->metrics_listen = strdup(listen);
}
