/*
 * What the reaper is handed at its fork, shared by its parts: its own
 * slot (its Redis reconnect count, its fsck figures), and every child
 * row's slot and cancel board row (`n` of each), read and written to stop
 * the jobs cancelled while they run (reaper_cancel.h).
 */
#ifndef DQ_REAPER_ARGS_H
#define DQ_REAPER_ARGS_H

#include <stddef.h>

#include "daemon/cancel_board.h"
#include "daemon/dconfig.h"
#include "daemon/slots.h"

struct reaper_args {
    const struct daemon_conf *dc;
    struct worker_slot *slot;
    const struct worker_slot *slots;
    struct cancel_request *cancels;
    size_t n;
};

#endif
