/*
 * The `admin` group of delayqd.conf (`metrics` is its older name, still
 * accepted): where the supervisor serves /metrics, /healthz and the
 * dashboard (/ui/), and the dashboard's credentials, read from the files
 * the group names (never written in the configuration itself).
 */
#ifndef DQ_DCONFIG_ADMIN_H
#define DQ_DCONFIG_ADMIN_H

#include <libconfig.h>
#include <stddef.h>

#include "config/conf_reader.h"
#include "daemon/dconfig_types.h"

#define DCONFIG_TOKEN_MIN 16    /* bytes: a shorter token is refused */
#define DCONFIG_PASSWORD_MIN 12 /* bytes: basic_auth_file's shorter password is refused */
#define DCONFIG_CONNS_MAX 1024  /* admin.max_connections at most */
#define DCONFIG_HOSTS_MAX 32    /* admin.hosts entries at most */

/* The group's defaults (before reading): 10 s per request, 64
 * connections, 16 per address, sessions of 7 days at most. */
void dconfig_admin_defaults(struct daemon_conf *dc);

/* Read the group from `root` into dc's metrics_* and admin_* fields;
 * problems are reported through r (file:line). */
void dconfig_read_admin(struct conf_reader *r, struct daemon_conf *dc,
                        const config_setting_t *root);

/*
 * The secret in file `path` (a credentials file: the dashboard's, a
 * source's password_file): its content without trailing whitespace, in a
 * new string; NULL with the reason in why[] when the file cannot be read,
 * is readable or writable by others (a secret anyone on the host can read
 * protects nothing), is too large, or holds nothing.
 */
char *dconfig_read_secret(const char *path, char *why, size_t whylen);

#endif
