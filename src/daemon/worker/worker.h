/*
 * A worker process: claims due jobs of one queue and runs them, one at a
 * time, through the handler for their type; reports each result (ack,
 * retry, dead) and sleeps until the next job is due, or until a producer
 * publishes that one is due sooner.
 */
#ifndef DQ_WORKER_H
#define DQ_WORKER_H

#include "daemon/cancel_board.h"
#include "daemon/dconfig.h"
#include "daemon/slots.h"

/*
 * Run in a freshly forked child until SIGTERM/SIGINT (finish the job in
 * hand, give back the rest of the batch, report, exit) or until the
 * supervisor dies.  Every job claimed is listed in `slot`'s tables as it
 * moves on, and every claim names `owner` (unique to this process among
 * all delayqd processes on the queue), so that the supervisor can settle
 * the batch of a worker that dies (settle.h).  `rank` (0 .. q->workers - 1)
 * picks its home partitions (partitions.h).  `cancel` is its row of the
 * cancel board, read to stop a job cancelled while it runs.  Returns the
 * process's exit code (exitcodes.h: DAEMON_EXIT_CONFIG when its handlers
 * cannot start).
 */
int worker_main(const struct daemon_conf *dc, const struct queue_conf *q, unsigned rank,
                struct worker_slot *slot, const struct cancel_request *cancel,
                const char *owner);

#endif
