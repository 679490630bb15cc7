/*
 * Reading redis.sentinel and --sentinel (see sentinel_conf.h).
 */
#include "config/sentinel_conf.h"

#include <stdlib.h>
#include <string.h>

#include "config/conf_reader.h"

#include "redis/redis_conn.h"
#include "redis/sentinel.h"

#define PREFIX "redis.sentinel."

void sentinel_conf_free(struct sentinel_conf *sc)
{
    free(sc->master);
    conf_nodes_free(&sc->nodes, &sc->nnodes);
    free(sc->user);
    redis_conn_free_secret(sc->password);
    free(sc->password_in);
    memset(sc, 0, sizeof *sc);
}

void sentinel_conf_to_options(const struct sentinel_conf *sc, dq_sentinel_options *o)
{
    o->master = sc->master;
    o->nodes = (const char *const *)sc->nodes;
    o->nnodes = sc->nnodes;
    o->user = sc->user;
    o->password = sc->password;
}

/* Append a copy of `node` to the list after checking it; why: the
 * problem, or NULL when memory ran out. */
static int add_node(char ***nodes, size_t *nnodes, const char *node, size_t len,
                    const char **why)
{
    char host[SENTINEL_HOST_MAX];
    int port;
    *why = NULL;
    char *copy = strndup(node, len);
    if (!copy)
        return -1;
    if (sentinel_parse_node(copy, host, sizeof host, &port, why) < 0) {
        free(copy);
        return -1;
    }
    char **grown = realloc(*nodes, (*nnodes + 1) * sizeof *grown);
    if (!grown) {
        free(copy);
        return -1;
    }
    *nodes = grown;
    grown[(*nnodes)++] = copy;
    return 0;
}

void conf_nodes_free(char ***nodes, size_t *nnodes)
{
    for (size_t i = 0; i < *nnodes; i++)
        free((*nodes)[i]);
    free(*nodes);
    *nodes = NULL;
    *nnodes = 0;
}

int sentinel_conf_set_nodes(struct sentinel_conf *sc, const char *list, char *err,
                            size_t errlen)
{
    conf_nodes_free(&sc->nodes, &sc->nnodes);
    const char *p = list;
    do {
        size_t len = strcspn(p, ",");
        const char *why;
        if (len == 0 || add_node(&sc->nodes, &sc->nnodes, p, len, &why) < 0) {
            snprintf(err, errlen, "bad sentinel '%.*s': %s", (int)len, p,
                     len == 0 ? "empty" : why ? why : "out of memory");
            conf_nodes_free(&sc->nodes, &sc->nnodes);
            return -1;
        }
        p += len;
    } while (*p++ == ',');
    return 0;
}

int sentinel_conf_set_master(struct sentinel_conf *sc, const char *master)
{
    char *copy = strdup(master);
    if (!copy)
        return -1;
    free(sc->master);
    sc->master = copy;
    return 0;
}

/* A non-empty string setting copied into *dst. */
static int read_string(struct conf_reader *r, const config_setting_t *s, char **dst)
{
    const char *v;
    if (conf_string(r, s, PREFIX, &v) < 0)
        return -1;
    if (!*v)
        return conf_fail(r, s, PREFIX "%s is empty", config_setting_name(s));
    char *copy = strdup(v);
    if (!copy)
        return conf_fail(r, s, "out of memory");
    free(*dst);
    *dst = copy;
    return 0;
}

int conf_nodes_read(struct conf_reader *r, const config_setting_t *s, const char *name,
                    const char *what, char ***nodes, size_t *nnodes)
{
    if (!config_setting_is_array(s) && !config_setting_is_list(s))
        return conf_fail(r, s, "%s: expected a list of \"HOST:PORT\" strings", name);
    int n = config_setting_length(s);
    if (n == 0)
        return conf_fail(r, s, "%s is empty: list at least one %s", name, what);
    for (int i = 0; i < n; i++) {
        const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
        const char *v, *why;
        if (conf_string(r, e, name, &v) < 0)
            return -1;
        if (add_node(nodes, nnodes, v, strlen(v), &why) < 0)
            return conf_fail(r, e, "%s[%d]: '%s': %s", name, i, v,
                             why ? why : "out of memory");
    }
    return 0;
}

int sentinel_conf_read(struct conf_reader *r, const config_setting_t *group,
                       struct sentinel_conf *sc, const config_setting_t **password_file)
{
    static const char *const known[] = { "master", "nodes", "user", "password",
                                         "password_file", NULL };
    *password_file = NULL;
    if (conf_check_keys(r, group, PREFIX, known) < 0)
        return -1;
    const config_setting_t *master = config_setting_get_member(group, "master");
    const config_setting_t *nodes = config_setting_get_member(group, "nodes");
    const config_setting_t *user = config_setting_get_member(group, "user");
    const config_setting_t *password = config_setting_get_member(group, "password");
    *password_file = config_setting_get_member(group, "password_file");
    if (!master)
        return conf_fail(r, group, PREFIX "master is missing: the name the sentinels "
                         "monitor");
    if (!nodes)
        return conf_fail(r, group, PREFIX "nodes is missing: list the sentinels");
    if (password && *password_file)
        return conf_fail(r, *password_file, PREFIX "password and " PREFIX
                         "password_file are both set (keep one)");
    if (read_string(r, master, &sc->master) < 0 || conf_nodes_read(r, nodes, PREFIX "nodes", "sentinel", &sc->nodes, &sc->nnodes) < 0
        || (user && read_string(r, user, &sc->user) < 0)
        || (password && read_string(r, password, &sc->password) < 0))
        return -1;
    if (password) {
        const char *file = config_setting_source_file(password);
        if (!(sc->password_in = strdup(file ? file : r->path ? r->path : "(config)")))
            return conf_fail(r, password, "out of memory");
    }
    return 0;
}
