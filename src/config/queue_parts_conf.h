/*
 * The partition count delayqd's file gives a queue (`queues = ( { name =
 * "Q"; partitions = N; } )`), read by the command line's -c so that a
 * producer that runs before the daemon's first start writes to the layout
 * the daemon will run (cli_cmd_add.c).  Only what that needs is read: the
 * daemon's own reader (daemon/dconfig.c) checks the rest.
 */
#ifndef DQ_QUEUE_PARTS_CONF_H
#define DQ_QUEUE_PARTS_CONF_H

#include <stddef.h>

/*
 * The count of queue `queue` in the file at `path`, into *n, and the line
 * of its `partitions` setting into *line.  Returns 1 when the file names
 * one, 0 when the queue is not in the file or its group names none, -1
 * with one line in err ("FILE:LINE: queues.[I].partitions: ...") when the
 * file cannot be read or the setting is not a count 1..256.
 */
int queue_parts_conf_read(const char *path, const char *queue, unsigned *n, int *line,
                          char *err, size_t errlen) __attribute__((warn_unused_result));

#endif
