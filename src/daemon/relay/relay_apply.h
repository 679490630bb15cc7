/*
 * The Redis side of the relay: a batch's rows applied through the same
 * scripts as every producer's calls (dq_enqueue_many, dq_cancel), in
 * order, each row marked applied or dead (relay_row.h).
 *
 * Applying a row twice changes nothing, which is what makes the relay
 * exactly once (docs/outbox.md): a relay killed after Redis confirmed and
 * before PostgreSQL committed the delete applies the batch again.  So an
 * add carries a dedupe window (the source's replay_window): its second
 * apply finds the job waiting (exists), running, or finished within the
 * window, and adds nothing; a cancel of a job already gone is done; a
 * replace sets what it set.
 */
#ifndef DQ_RELAY_APPLY_H
#define DQ_RELAY_APPLY_H

#include <delayq/client.h>
#include <stddef.h>

#include "daemon/dconfig.h"
#include "daemon/dconfig_sources.h"
#include "daemon/relay/relay_defer.h"
#include "daemon/relay/relay_row.h"

/* Apply the batch's rows in order and set each one's outcome.  0 when
 * every row has one; -1 when Redis failed (down, timed out, not
 * replicated in time, or an error that is not about a row) with the
 * reason in `why`: rows may have been applied, none is to be deleted,
 * and the batch is taken again later.  With `defer` (a cluster), a row
 * whose partition's master is out of reach is held (ROW_HELD) rather
 * than failing the batch, and so is every later row of its partition
 * (relay_defer.h). */
int relay_apply(dq_client *c, const struct daemon_conf *dc, const struct source_conf *sc,
                struct relay_defer *defer, struct relay_batch *b, char *why,
                size_t whylen);

#endif
