/*
 * The PostgreSQL side of the relay (libpq, blocking: the relay is a child
 * of its own, and waiting here stops nothing else).  One connection per
 * relay: it LISTENs on the table's channel, holds the table's session
 * lock while it is the relay that applies rows, and takes each batch in a
 * transaction that deletes the rows (and moves the dead ones) only after
 * Redis confirmed them.
 */
#ifndef DQ_RELAY_PG_H
#define DQ_RELAY_PG_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/dconfig_sources.h"
#include "daemon/relay/relay_row.h"

struct relay_pg;

/* A relay's connection, not made yet; NULL when out of memory. */
struct relay_pg *relay_pg_new(const struct source_conf *sc);
void relay_pg_free(struct relay_pg *pg);

/* Connect (libpq's connect_timeout: 10 s unless conninfo says) and LISTEN;
 * 0, or -1 with the reason in `why`. */
int relay_pg_connect(struct relay_pg *pg, char *why, size_t len);
int relay_pg_connected(const struct relay_pg *pg);
void relay_pg_disconnect(struct relay_pg *pg);

/* Try to become the table's one applying relay (a session advisory lock,
 * let go when the connection ends): rows of one job are then applied in
 * commit order even with several daemons on the table.  1: this relay
 * leads; 0: another does; -1: the connection failed (why). */
int relay_pg_lead(struct relay_pg *pg, char *why, size_t len);

/* Begin a transaction and take up to `max` rows in row id order (FOR
 * UPDATE SKIP LOCKED) into *b, leaving out the rows whose ids the array
 * literal `held` names ("{}": none; relay_defer.h).  0 (b->n may be 0:
 * the transaction is then over), or -1 with the reason (the connection is
 * dropped). */
int relay_pg_take(struct relay_pg *pg, int max, const char *held, struct relay_batch *b,
                  char *why, size_t len);

/* Move the batch's dead rows to the dead table with their reasons, delete
 * every row of it but the held ones, and commit; frees the batch.  0, or
 * -1 (the rows stay, to be taken again; the connection is dropped). */
int relay_pg_finish(struct relay_pg *pg, struct relay_batch *b, char *why, size_t len);

/* Roll the batch's transaction back (its rows stay) and free it. */
void relay_pg_abort(struct relay_pg *pg, struct relay_batch *b);

/* Wait up to `ms` for a notification on the table's channel: 1 one came,
 * 0 none, -1 the connection failed (why). */
int relay_pg_wait(struct relay_pg *pg, int64_t ms, char *why, size_t len);

/* delayqd -t: 0 when the table and its dead table have the columns the
 * relay reads; 1 when the database cannot be reached (why: only noted);
 * -1 when they are missing or wrong (why). */
int relay_pg_check(const struct source_conf *sc, char *why, size_t len);

#endif
