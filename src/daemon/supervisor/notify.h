/*
 * The systemd notification protocol (sd_notify), without libsystemd: one
 * datagram to the unix socket named by $NOTIFY_SOCKET.  Nothing happens
 * when the variable is not set (not started by systemd with Type=notify).
 */
#ifndef DQ_NOTIFY_H
#define DQ_NOTIFY_H

#include <stdint.h>

/* Send `state` ("READY=1", "STOPPING=1", "WATCHDOG=1", "STATUS=...");
 * never blocks (a message the socket has no room for is dropped and
 * logged). */
void notify_send(const char *state);

/* Half the watchdog interval systemd asked for ($WATCHDOG_USEC), in ms,
 * or 0 when there is no watchdog for this process. */
int64_t notify_watchdog_ms(void);

#endif
