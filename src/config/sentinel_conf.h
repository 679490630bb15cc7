/*
 * The `sentinel` group inside the `redis` group: Redis behind Sentinel.
 *
 *   redis = {
 *     sentinel = {
 *       master = "jobs";                       # the name the sentinels monitor
 *       nodes = ["10.0.0.5:26379", "10.0.0.6:26379"];
 *       user = "sentinel-user";                # optional; needs a password
 *       password_file = "/etc/delayq/sentinel.pass";  # or password = "..."
 *     };
 *   };
 *
 * The command line's --sentinel and --master fill the same structure.
 * Problems are reported as "FILE:LINE: redis.sentinel.KEY: ...".
 */
#ifndef DQ_SENTINEL_CONF_H
#define DQ_SENTINEL_CONF_H

#include <delayq/client.h>
#include <stddef.h>

/* From conf_reader.h and libconfig.h, which the users of redis_conf.h
 * (that includes this) need not include. */
struct conf_reader;
struct config_setting_t;

struct sentinel_conf {
    char *master;               /* NULL: no Sentinel */
    char **nodes;               /* "HOST:PORT", checked */
    size_t nnodes;
    char *user;                 /* the sentinels' ACL user, or NULL */
    char *password;             /* or NULL; wiped when freed */
    char *password_in;          /* the file that holds it */
};

/*
 * Read `group` (redis.sentinel) into `sc`, which is empty (zeroed), all
 * but its password_file, whose setting is left in *password_file (NULL
 * when absent) for the caller to read with the one password-file reader
 * (redis_conf.c); a user without a password is the caller's to refuse
 * after that.  Returns 0, or -1 after conf_fail; `sc` may then hold part:
 * free it.
 */
int sentinel_conf_read(struct conf_reader *r, const struct config_setting_t *group,
                       struct sentinel_conf *sc,
                       const struct config_setting_t **password_file);

/*
 * Replace the nodes with the comma-separated `list` (the command line's
 * --sentinel HOST:PORT[,HOST:PORT...]).  Returns 0, or -1 with one line in
 * err naming the bad node.
 */
int sentinel_conf_set_nodes(struct sentinel_conf *sc, const char *list, char *err,
                            size_t errlen);

/* The master's name as given (--master); -1 when out of memory. */
int sentinel_conf_set_master(struct sentinel_conf *sc, const char *master);

/*
 * A list of "HOST:PORT" strings (redis.sentinel.nodes, and a cluster's
 * redis.nodes) appended to *nodes, each checked.  `name` names the
 * setting in messages ("redis.nodes"), `what` one element ("sentinel").
 * Returns 0, or -1 after conf_fail; the list may then hold part: free it
 * with conf_nodes_free.
 */
int conf_nodes_read(struct conf_reader *r, const struct config_setting_t *s,
                    const char *name, const char *what, char ***nodes, size_t *nnodes);

/* Free such a list and empty it. */
void conf_nodes_free(char ***nodes, size_t *nnodes);

/* Fill `o` from `sc`; the strings are borrowed. */
void sentinel_conf_to_options(const struct sentinel_conf *sc, dq_sentinel_options *o);

/* Free what `sc` owns (the password wiped) and zero it. */
void sentinel_conf_free(struct sentinel_conf *sc);

#endif
