/*
 * The `admin` group of delayqd.conf (`metrics` is its older name, still
 * accepted): where the supervisor serves /metrics, /healthz and the
 * dashboard (/ui/), and the dashboard's credentials, read from the files
 * the group names (never written in the configuration itself).
 */
#ifndef DQ_DCONFIG_ADMIN_H
#define DQ_DCONFIG_ADMIN_H

#include <libconfig.h>

#include "config/conf_reader.h"
#include "daemon/dconfig_types.h"

#define DCONFIG_TOKEN_MIN 16    /* bytes: a shorter token is refused */

/* Read the group from `root` into dc's metrics_* and admin_* fields;
 * problems are reported through r (file:line). */
void dconfig_read_admin(struct conf_reader *r, struct daemon_conf *dc,
                        const config_setting_t *root);

#endif
