/*
 * The relay process: one per source of the configuration (dconfig_sources.h),
 * forked, watched and restarted by the supervisor like the reaper.  It
 * moves the rows a service commits to its PostgreSQL outbox table into
 * Redis, each once, in commit order (docs/outbox.md):
 *
 *   - it LISTENs on the table's channel, and also looks every
 *     poll_interval in case a notification was lost;
 *   - of several daemons on one table, the one that holds the table's
 *     session lock applies rows, and the others wait to take over;
 *   - it takes a batch of rows in a transaction (FOR UPDATE SKIP LOCKED),
 *     applies them through the producers' scripts (relay_apply.h), and
 *     deletes them, moving the rows Redis refused to the dead table with
 *     the reason, in the same transaction, only after Redis confirmed;
 *   - PostgreSQL or Redis failing: the rows wait in the table, the relay
 *     tries again with a backoff and says so once; /healthz says when it
 *     has failed longer than the source's failure_grace.
 *
 * Why a process of its own: libpq's calls wait (a connect, a query, a
 * database failing over), and nothing else may wait for them.
 */
#ifndef DQ_RELAY_H
#define DQ_RELAY_H

#include <stddef.h>

#include "daemon/dconfig.h"
#include "daemon/slots.h"

/* Run in a freshly forked child until SIGTERM/SIGINT; returns the exit
 * code.  `slot` receives its state for /metrics and /healthz: rows
 * applied and dead, whether it leads, and its failure (slot_claims_*). */
int relay_main(const struct daemon_conf *dc, size_t source, struct worker_slot *slot);

#endif
