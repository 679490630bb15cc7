/*
 * The settler process: one per configuration generation, forked, watched
 * and respawned by the supervisor like the reaper.  It is the daemon's
 * only process that acts on what the supervisor learns when a child dies:
 *
 *   - it settles every dead worker's jobs (settle.h) that the supervisor
 *     posts on the settle board (settle_board.h), on its own asynchronous
 *     connection to its generation's Redis, and marks each post done;
 *   - while its generation is in force and behind Sentinel, it watches the
 *     sentinels (sentinel_watch.h): on +switch-master it counts the
 *     failover on the board and sends SIGUSR2 to the supervisor, which
 *     relays it to every child.
 *
 * Why a process of its own rather than the supervisor: a connection to
 * Redis or to a sentinel can wait (a Sentinel lookup, CLUSTER SLOTS, a
 * black-holed address), and the supervisor must never wait.  Why not the
 * reaper: the reaper stops at a reload while the old workers' deaths still
 * need settling, it runs long scans (fsck) and schedules, and a crash loop
 * there would delay every settlement by its backoff; the settler does
 * nothing else, and it outlives its generation's last worker.
 *
 * It stops at SIGTERM (the supervisor sends it once nothing of its
 * generation is left to settle, or at the end of a stop) or when the
 * supervisor dies.  Posts it had not finished stay posted: its respawn
 * settles them.
 */
#ifndef DQ_SETTLER_H
#define DQ_SETTLER_H

#include <stdint.h>

#include "daemon/dconfig.h"
#include "daemon/settle_board.h"
#include "daemon/slots.h"

/* Run in a freshly forked child until SIGTERM/SIGINT; returns the exit
 * code.  `gen` names the posts it settles (those of dc's generation);
 * `wake_fd` (O_NONBLOCK) becomes readable when the supervisor posts;
 * `slot` receives its Redis reconnect count. */
int settler_main(const struct daemon_conf *dc, uint64_t gen, struct settle_board *board,
                 int wake_fd, struct worker_slot *slot);

#endif
